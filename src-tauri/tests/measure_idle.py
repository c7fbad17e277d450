#!/usr/bin/env python3
"""Idle CPU and memory of the tray app, from /proc: the app process and its
WebKit children (everything under ROOT whose command is the app or WebKit*),
sampled over SECONDS. Prints one line per process and the total, and exits 1
when the total is over the targets (CPU >= 1 %, RSS >= 150 MB).

    measure_idle.py ROOT_PID [SECONDS=30] [APP_NAME=pcmail-tray]
"""
import os, sys, time

root = int(sys.argv[1])
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
app = sys.argv[3] if len(sys.argv) > 3 else "pcmail-tray"
tick = os.sysconf("SC_CLK_TCK")
page = os.sysconf("SC_PAGE_SIZE")

def children():
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
                ppid = int(stat[stat.rindex(")") + 2:].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except OSError:
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out

def comm(p):
    try:
        return open(f"/proc/{p}/comm").read().strip()
    except OSError:
        return "?"

def cpu(p):
    s = open(f"/proc/{p}/stat").read()
    f = s[s.rindex(")") + 2:].split()
    return int(f[11]) + int(f[12])  # utime + stime

def rss(p):
    for line in open(f"/proc/{p}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0

def pss(p):
    """Proportional set size: shared library pages split among their users."""
    try:
        for line in open(f"/proc/{p}/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0

procs = [p for p in children() if comm(p).startswith(app[:15]) or comm(p).startswith("WebKit")]
if not procs:
    print(f"measure_idle: no {app} process under {root}")
    sys.exit(2)
t0 = time.time()
c0 = {p: cpu(p) for p in procs}
peak = {p: 0 for p in procs}
peak_pss = {p: 0 for p in procs}
while time.time() - t0 < seconds:
    for p in procs:
        try:
            peak[p] = max(peak[p], rss(p))
            peak_pss[p] = max(peak_pss[p], pss(p))
        except OSError:
            pass
    time.sleep(1)
dt = time.time() - t0
total_cpu = 0.0
total_rss = 0
total_pss = 0
for p in procs:
    try:
        used = (cpu(p) - c0[p]) / tick
    except OSError:
        used = 0.0
    pct = 100.0 * used / dt
    total_cpu += pct
    total_rss += peak[p]
    total_pss += peak_pss[p]
    print(f"  {comm(p):<18} pid {p:<7} cpu {pct:5.2f} %  rss {peak[p] / 2**20:6.1f} MB  pss {peak_pss[p] / 2**20:6.1f} MB")
print(f"idle over {dt:.0f} s: cpu {total_cpu:.2f} % (target < 1 %), rss {total_rss / 2**20:.1f} MB (target < 150 MB), pss {total_pss / 2**20:.1f} MB")
sys.exit(0 if total_cpu < 1.0 and total_rss < 150 * 2**20 else 1)
