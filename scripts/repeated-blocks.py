#!/usr/bin/env python3
"""Counts the blocks of six or more lines that the workspace's Rust code
repeats, so that a clean-up can say how many there were before and after it
with a count anyone can make again.

How it counts:
- The files are the Rust files git tracks under crates/ and src-tauri/
  (`git ls-files`), as they are in the working tree; with --rev REV, as
  they are in that commit (so a count before a change can be made again
  after it).
- Each line is folded: white space at its ends is cut and inner runs of white
  space become one space. Blank lines and lines that hold only punctuation
  (`}`, `});`, `)`, ...) are passed over, since they repeat everywhere and
  carry no logic; every other line counts, comments and `use` lines included.
- Every window of N consecutive kept lines (N = 6 unless given) is hashed.
  A window whose folded text stands in two or more places (in one file or in
  several) is repeated.
- In each file, repeated windows that overlap or touch are merged into one
  block. The count is the number of such blocks over all files: a piece of
  code written in three places counts three times, and a repeated run of 20
  lines counts once per place, not as 15 windows.

Usage: python3 scripts/repeated-blocks.py [--rev REV] [--min-lines N] [--list]
(from anywhere inside the repository; --list prints each block's place).
"""

import argparse
import collections
import hashlib
import os
import re
import subprocess
import sys

PUNCT_ONLY = re.compile(r"^[\s{}()\[\];,.]*$")


def git(root, *args):
    return subprocess.run(["git", "-C", root, *args], check=True, capture_output=True).stdout


def tracked_rust_files(root, rev):
    listing = ["ls-tree", "-r", "-z", "--name-only", rev] if rev else ["ls-files", "-z"]
    out = git(root, *listing, "--", "crates", "src-tauri").decode()
    return sorted(p for p in out.split("\0") if p.endswith(".rs"))


def read_text(root, rel, rev):
    """The file's text, or None where the working tree has no such file."""
    if rev:
        return git(root, "show", f"{rev}:{rel}").decode("utf-8", errors="replace")
    path = os.path.join(root, rel)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def kept_lines(text):
    """The lines that count: (line number, folded text)."""
    kept = []
    for number, line in enumerate(text.split("\n"), 1):
        folded = " ".join(line.split())
        if folded and not PUNCT_ONLY.match(folded):
            kept.append((number, folded))
    return kept


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", help="count the files of this commit, not the working tree")
    parser.add_argument("--min-lines", type=int, default=6)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    n = args.min_lines

    root = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()

    files = {}
    where = collections.defaultdict(list)  # window hash -> [(file, index)]
    for rel in tracked_rust_files(root, args.rev):
        text = read_text(root, rel, args.rev)
        if text is None:
            continue
        lines = kept_lines(text)
        files[rel] = lines
        for i in range(len(lines) - n + 1):
            text = "\n".join(t for _, t in lines[i : i + n])
            where[hashlib.sha1(text.encode()).digest()].append((rel, i))

    repeated = collections.defaultdict(set)  # file -> window start indices
    for places in where.values():
        if len(places) >= 2:
            for rel, i in places:
                repeated[rel].add(i)

    blocks = []
    for rel, starts in repeated.items():
        lines = files[rel]
        start = end = None
        for i in sorted(starts):
            if end is not None and i <= end + 1:
                end = i + n - 1
                continue
            if start is not None:
                blocks.append((rel, lines[start][0], lines[end][0]))
            start, end = i, i + n - 1
        if start is not None:
            blocks.append((rel, lines[start][0], lines[end][0]))

    if args.list:
        for rel, first, last in sorted(blocks):
            print(f"{rel}:{first}-{last}")
    print(
        f"{len(blocks)} repeated blocks of {n}+ lines "
        f"in {len(repeated)} of {len(files)} Rust files"
    )


if __name__ == "__main__":
    sys.exit(main())
