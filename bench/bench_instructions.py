"""What --leaks costs per clean test, in instructions: the generated suite
of bench_overhead.py (bench_plugin.py's fast clean tests) run plain and
with --leaks under valgrind's callgrind, which counts the instructions the
process executed.  Unlike CPU time on a shared machine, the count barely
moves from one run to the next, so a change to the plugin's hot path shows
in one run per configuration, however loaded the machine.

    python bench/bench_instructions.py [--tests 200] [--python PATH]
                                       [--against PATH]

--against PATH adds --leaks run by another interpreter of the same version
with another build of leakcheck installed (the version before a change).
Put the two installs in venvs whose paths are as long as each other
(/tmp/old311 and /tmp/new311, say): one build read +1.69M a test from
/work/main/.venv and +1.61M from a copy of that venv at /tmp/newv11, where
a build whose hot path was the same read +1.63M and +1.61M from
/tmp/base11 in the same two commands (presumably the paths the process
handles, sys.path and every module's file, cost by their length).

Printed: the instructions of each configuration, and per test
((--leaks - plain) / tests).  The probes are the defaults less
native_bytes: under valgrind leakcheck cannot find glibc's malloc cache,
and fills it before each reading instead (about 2,300 malloc and free
calls a snapshot), which a process outside valgrind does not do.  What a
count leaves out is what the instructions wait for (cache misses, system
calls): bench_overhead.py measures that time.
"""

import argparse
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_overhead import pytest_output  # noqa: E402
from bench_plugin import generate  # noqa: E402

PROBES = "blocks,py_bytes,py_allocs,objects,garbage,fds,threads"
TOTAL = re.compile(r"Collected : ([0-9]+)")


def instructions(directory, python, args):
    """The instructions callgrind counted in one pytest run."""
    found = TOTAL.findall(pytest_output(
        "bench_instructions", directory, python, args,
        prefix=("valgrind", "--tool=callgrind",
                "--callgrind-out-file=/dev/null")))
    if not found:
        sys.exit("bench_instructions: callgrind printed no count")
    return int(found[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=200)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    p.add_argument("--against", metavar="PATH",
                   help="another interpreter whose --leaks run is counted "
                        "too")
    args = p.parse_args(argv)
    if shutil.which("valgrind") is None:
        sys.exit("bench_instructions: valgrind is not installed "
                 "(scripts/setup installs it)")
    leaks = ["--leaks", f"--leaks-probes={PROBES}"]
    with tempfile.TemporaryDirectory(prefix="leakcheck-instr-") as d:
        tests = generate(d, args.tests)
        counts = {"plain": instructions(d, args.python, []),
                  "--leaks": instructions(d, args.python, leaks)}
        if args.against:
            counts["against"] = instructions(d, args.against, leaks)
    print(f"{tests} tests, instructions counted by callgrind "
          f"(probes {PROBES})")
    for name, count in counts.items():
        extra = ""
        if name != "plain":
            extra = (f"  +{(count - counts['plain']) / tests / 1e6:.2f}M "
                     f"per test")
        print(f"{name:>9} {count:>15,}{extra}")
    if args.against:
        print(f"against: {args.against}")


if __name__ == "__main__":
    main()
