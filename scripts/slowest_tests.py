#!/usr/bin/env python3
"""Prints the N slowest tests of a libtest run, from its output.

scripts/test.sh runs each cargo test with libtest's `--report-time`, whose
result lines read `test NAME ... ok <1.234s>`; this reads such output (files
or stdin) and prints the N slowest (default 5), slowest first, with their
times and results. Usage: slowest_tests.py [-n N] [--title T] [LOG...]
"""

import argparse
import re
import sys

LINE = re.compile(r"^test (\S+) \.\.\. (ok|FAILED|ignored[^<]*?)\s*<(\d+(?:\.\d+)?)s>\s*$")


def times(lines):
    """(seconds, name, result) of every timed result line."""
    out = []
    for line in lines:
        m = LINE.match(line.rstrip("\n"))
        if m:
            out.append((float(m.group(3)), m.group(1), m.group(2).strip()))
    return out


def slowest(lines, n):
    """The n slowest, slowest first; ties by name."""
    return sorted(times(lines), key=lambda t: (-t[0], t[1]))[:n]


def report(rows, title):
    if not rows:
        return f"{title}: no timed test results (was --report-time passed?)"
    width = max(len(name) for _, name, _ in rows)
    body = "\n".join(
        f"  {secs:8.2f} s  {name:<{width}}  {result}" for secs, name, result in rows
    )
    return f"{title}:\n{body}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=5)
    p.add_argument("--title", default="slowest tests")
    p.add_argument("logs", nargs="*")
    a = p.parse_args(argv)
    lines = []
    if a.logs:
        for path in a.logs:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines.extend(f)
    else:
        lines = sys.stdin.readlines()
    print(report(slowest(lines, a.n), f"{a.title} ({a.n} slowest)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
