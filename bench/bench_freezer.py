"""What the GC freezer leaves each snapshot to collect: bench_plugin.py's
fast clean tests run with --leaks (and a report), with a conftest.py that
counts the freezer's freezes and, before each of the engine's snapshots
(Series.next() and rebase()), the objects the collector tracks and has
not frozen (len(gc.get_objects()): what the snapshot's collection walks).

    python bench/bench_freezer.py [--tests 2000] [--python PATH]
                                  [--young-blocks N] [--young-tests N]
                                  [--times]

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

--times counts nothing of that and times instead every full collection
of the session (gc.callbacks, into an array made before the session: the
timing allocates nothing that lives), the freezer's and the snapshots'
alike: how many a test, the median one and what they take a test, in µs
of wall time, the session's first 40 left out (before the first freeze
they collect the whole heap), and apart those over a millisecond, which
walk the whole heap (pytest's own two in its unconfigure, plain pytest's
too).
"""

import argparse
import json
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_overhead import pytest_output  # noqa: E402
from bench_plugin import generate  # noqa: E402

SKIPPED = 40        # the session's first snapshots

CONFTEST = '''\
import array
import atexit
import gc
import time

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


TIMES = %r
_times = array.array("q", bytes(8 * 200000))
_timing = [0, 0]        # full collections timed, the start of the last


def _time_full(phase, info):
    if info["generation"] != 2:
        return
    if phase == "start":
        _timing[1] = time.perf_counter_ns()
    elif _timing[0] < len(_times):
        _times[_timing[0]] = time.perf_counter_ns() - _timing[1]
        _timing[0] += 1


def pytest_configure(config):
    import leakcheck
    from pytest_leakcheck import session
    for name, value in YOUNG.items():
        setattr(session, name, value)
    _counted(session._GcFreezer, "_freeze", "freezes")
    if TIMES:
        gc.callbacks.append(_time_full)
        return
    _counted(leakcheck.Series, "next", "snapshots")
    _counted(leakcheck.Series, "rebase", "snapshots")


def _show():
    print("FREEZER " + " ".join(f"{k}={v}" for k, v in _counts.items()))
    if TIMES:
        print("COLLECTIONS " + " ".join(
            str(t) for t in _times[%d:_timing[0]]))


atexit.register(_show)
'''
COUNTS = re.compile(r"^FREEZER freezes=(\d+) snapshots=(\d+) objects=(\d+)$",
                    re.M)
TIMES_LINE = re.compile(r"^COLLECTIONS ?([0-9 ]*)$", re.M)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=2000)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    p.add_argument("--young-blocks", type=int, default=None, metavar="N")
    p.add_argument("--young-tests", type=int, default=None, metavar="N")
    p.add_argument("--times", action="store_true",
                   help="time the full collections instead of counting "
                        "the objects before each snapshot")
    args = p.parse_args(argv)
    young = {}
    if args.young_blocks is not None:
        young["YOUNG_BLOCKS"] = args.young_blocks
    if args.young_tests is not None:
        young["YOUNG_TESTS"] = args.young_tests
    with tempfile.TemporaryDirectory(prefix="leakcheck-freezer-") as d:
        tests = generate(d, args.tests,
                         conftest=CONFTEST % (young, SKIPPED, args.times,
                                              SKIPPED))
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
    if args.times:
        found = TIMES_LINE.search(out)
        times = [int(t) / 1000 for t in (found.group(1).split()
                                         if found else ())]
        if not times:
            sys.exit("bench_freezer: the run timed no full collection")
        # Over a millisecond: one that walked the whole heap.  The last
        # two of a session are pytest's own, in its unconfigure, after
        # the freezer let go (its unraisable-exception plugin collects
        # there; plain pytest does the same).
        whole = [(i, t) for i, t in enumerate(times) if t > 1000]
        times = sorted(t for t in times if t <= 1000)
        print(f"  full collections after the first {SKIPPED}: "
              f"{len(times) + len(whole)}; {len(whole)} over a ms ("
              + ", ".join(f"{t / 1000:.1f} ms: no. {i + 1 + SKIPPED}"
                          for i, t in whole)
              + f" of {len(times) + len(whole) + SKIPPED})")
        print(f"  the others: {len(times) / tests:.2f} a test; the median "
              f"{statistics.median(times):.1f} µs, the 90th percentile "
              f"{times[len(times) * 9 // 10]:.1f}; "
              f"{sum(times) / tests:.1f} µs a test")
    else:
        print(f"  snapshots {snapshots}, unfrozen objects found before "
              f"each (the first {SKIPPED} left out): "
              f"{objects / counted:.1f} on average")
    print(f"  ran once {once} of {len(records)}")


if __name__ == "__main__":
    main()
