"""What the GC freezer leaves each snapshot to collect: bench_plugin.py's
fast clean tests run with --leaks (and a report), with a conftest.py that
counts the freezer's freezes and, before each of the engine's snapshots
(Series.next() and rebase()), the objects the collector tracks and has
not frozen (len(gc.get_objects()): what the snapshot's collection walks).

    python bench/bench_freezer.py [--tests 2000] [--python PATH]
                                  [--young-blocks N] [--young-tests N]

--young-blocks and --young-tests set the freezer's thresholds for the run
(pytest_leakcheck.session's YOUNG_BLOCKS and YOUNG_TESTS: it freezes again
once the tests left that many blocks more alive, or after that many
checked tests); a large --young-tests leaves the blocks alone to decide.

Printed: the freezes and the tests per freeze, the snapshots and the
unfrozen objects they found on average (the session's first 40 snapshots
left out: first uses), and how many tests ran once by the report (the
counting keeps no object, but it can make a test or two run again:
bench_overhead.py's report says how many run once without it).
Counting walks the collector's lists: this is no timing.
"""

import argparse
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_overhead import pytest_output  # noqa: E402
from bench_plugin import generate  # noqa: E402

SKIPPED = 40        # the session's first snapshots

CONFTEST = '''\
import atexit
import gc

YOUNG = %r
_counts = {"freezes": 0, "snapshots": 0, "objects": 0}


def _counted(owner, name, key):
    func = getattr(owner, name)

    def counting(*args, **kwargs):
        _counts[key] += 1
        if key == "snapshots" and _counts[key] > %d:
            _counts["objects"] += len(gc.get_objects())
        return func(*args, **kwargs)
    setattr(owner, name, counting)


def pytest_configure(config):
    import leakcheck
    from pytest_leakcheck import session
    for name, value in YOUNG.items():
        setattr(session, name, value)
    _counted(session._GcFreezer, "_freeze", "freezes")
    _counted(leakcheck.Series, "next", "snapshots")
    _counted(leakcheck.Series, "rebase", "snapshots")


def _show():
    print("FREEZER " + " ".join(f"{k}={v}" for k, v in _counts.items()))


atexit.register(_show)
'''
COUNTS = re.compile(r"^FREEZER freezes=(\d+) snapshots=(\d+) objects=(\d+)$",
                    re.M)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=2000)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    p.add_argument("--young-blocks", type=int, default=None, metavar="N")
    p.add_argument("--young-tests", type=int, default=None, metavar="N")
    args = p.parse_args(argv)
    young = {}
    if args.young_blocks is not None:
        young["YOUNG_BLOCKS"] = args.young_blocks
    if args.young_tests is not None:
        young["YOUNG_TESTS"] = args.young_tests
    with tempfile.TemporaryDirectory(prefix="leakcheck-freezer-") as d:
        tests = generate(d, args.tests,
                         conftest=CONFTEST % (young, SKIPPED))
        report = os.path.join(d, "leaks-report.json")
        out = pytest_output("bench_freezer", d, args.python,
                            ["--leaks", f"--leaks-report={report}"])
        with open(report, encoding="utf-8") as f:
            records = json.load(f)["tests"]
    found = COUNTS.search(out)
    if found is None:
        sys.exit("bench_freezer: the run printed no counts")
    freezes, snapshots, objects = map(int, found.groups())
    once = sum(1 for rec in records if rec.get("test_runs") == 1)
    counted = max(snapshots - SKIPPED, 1)
    print(f"{tests} tests; thresholds: "
          f"{', '.join(f'{k}={v}' for k, v in young.items()) or 'as set'}")
    print(f"  freezes {freezes} (a freeze every {tests / max(freezes, 1):.1f}"
          f" tests)")
    print(f"  snapshots {snapshots}, unfrozen objects found before each "
          f"(the first {SKIPPED} left out): {objects / counted:.1f} on "
          f"average")
    print(f"  ran once {once} of {len(records)}")


if __name__ == "__main__":
    main()
