#!/usr/bin/env python3
"""Where a process's memory goes: /proc/PID/smaps_rollup (RSS, PSS, anonymous,
file-backed) and the largest mappings by RSS summed per file (a library, the
binary, [heap], [anon] for anonymous mappings without a name).

    smaps_by_lib.py PID [TOP=12]
"""
import os, sys

pid = int(sys.argv[1])
top = int(sys.argv[2]) if len(sys.argv) > 2 else 12

roll = {}
for line in open(f"/proc/{pid}/smaps_rollup"):
    parts = line.split()
    if len(parts) >= 3 and parts[-1] == "kB":
        roll[parts[0].rstrip(":")] = int(parts[1])
mb = lambda kb: kb / 1024.0
print(f"smaps_rollup: rss {mb(roll.get('Rss', 0)):.1f} MB, pss {mb(roll.get('Pss', 0)):.1f} MB, "
      f"anonymous {mb(roll.get('Anonymous', 0)):.1f} MB (pss_anon {mb(roll.get('Pss_Anon', 0)):.1f}), "
      f"file {mb(roll.get('Pss_File', 0)):.1f} MB pss, shmem {mb(roll.get('Pss_Shmem', 0)):.1f} MB pss")

by = {}
name = None
for line in open(f"/proc/{pid}/smaps"):
    first = line.split(None, 1)[0]
    if "-" in first and not first.endswith(":"):
        f = line.split()
        name = os.path.basename(f[5]) if len(f) > 5 else "[anon]"
        continue
    if first in ("Rss:", "Pss:", "Anonymous:"):
        d = by.setdefault(name, {"Rss:": 0, "Pss:": 0, "Anonymous:": 0})
        d[first] += int(line.split()[1])
rows = sorted(by.items(), key=lambda kv: -kv[1]["Rss:"])[:top]
print(f"  {'mapping':<34} {'rss MB':>7} {'pss MB':>7} {'anon MB':>8}")
for n, d in rows:
    print(f"  {n[:34]:<34} {mb(d['Rss:']):7.1f} {mb(d['Pss:']):7.1f} {mb(d['Anonymous:']):8.1f}")
