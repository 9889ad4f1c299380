"""How the C heap moves around clean code, one scope at a time: each clean
workload of tests/python/api/test_clean.py (re, argparse, strptime, json,
...) run once, then `--scopes` times between two native_bytes snapshots;
prints the deltas seen and how often.  On CPython 3.9 and 3.10 a few read
+16 to +128 bytes (leakcheck.cpython.SCOPE_NATIVE_TOLERANCE); on 3.11 and
later, 0.

    python bench/scope_noise.py [--scopes 60]
"""

import argparse
import collections
import os
import sys

import leakcheck

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "python", "api"))
from test_clean import SCOPE_WORKLOADS  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scopes", type=int, default=60)
    scopes = p.parse_args().scopes
    print(f"python {sys.version.split()[0]}; {scopes} scopes per workload; "
          f"native_bytes delta: how many scopes")
    moved = total = 0
    for work in SCOPE_WORKLOADS:
        work()
        seen = collections.Counter()
        for _ in range(scopes):
            before = leakcheck.snapshot(["native_bytes"])
            work()
            seen[(leakcheck.snapshot(["native_bytes"]) - before)
                 ["native_bytes"]] += 1
        moved += scopes - seen[0]
        total += scopes
        print(f"  {work.__name__:<26} {dict(sorted(seen.items()))}")
    print(f"{moved} of {total} scopes moved")


if __name__ == "__main__":
    main()
