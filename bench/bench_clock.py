"""How often the plugin reads the CPU clock (time.process_time(), a
system call), per test: bench_plugin.py's fast clean tests run plain (the
plugin loaded, hunting nothing) and with --leaks, with a conftest.py that
counts the calls of time.process_time() made by the plugin's modules.

    python bench/bench_clock.py [--tests 1000] [--python PATH]

Printed: the calls per test in each configuration, the third with a
report written (--leaks --leaks-report=..., as bench_overhead.py runs
it: its journal's events are timed too).  A count, not a time: a loaded
machine does not move it.
"""

import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_overhead import pytest_output  # noqa: E402
from bench_plugin import generate  # noqa: E402

CONFTEST = '''\
import atexit
import sys
import time

_process_time = time.process_time
_calls = [0]


def _counted():
    caller = sys._getframe(1).f_globals.get("__name__", "")
    if caller.startswith(("pytest_leakcheck", "leakcheck")):
        _calls[0] += 1
    return _process_time()


time.process_time = _counted
atexit.register(lambda: print(f"\\nCLOCK READS {_calls[0]}"))
'''
READS = re.compile(r"CLOCK READS ([0-9]+)")


def reads(directory, python, args):
    found = READS.findall(pytest_output("bench_clock", directory, python,
                                        args))
    if not found:
        sys.exit("bench_clock: the run printed no count")
    return int(found[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=1000)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="leakcheck-clock-") as d:
        tests = generate(d, args.tests, conftest=CONFTEST)
        counts = {"plain": reads(d, args.python, []),
                  "--leaks": reads(d, args.python, ["--leaks"]),
                  "a report": reads(d, args.python, [
                      "--leaks", "--leaks-report="
                      + os.path.join(d, "report.json")])}
    print(f"{tests} tests, calls of time.process_time() by leakcheck")
    for name, count in counts.items():
        print(f"{name:>9} {count:>9,}  {count / tests:.1f} per test")


if __name__ == "__main__":
    main()
