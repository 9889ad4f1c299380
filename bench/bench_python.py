"""What the Python package costs.

1. snapshot() against a bare gc.collect(): the median difference of many
   back-to-back pairs, in the same process (target: under 50 us).  A
   snapshot is settling (leakcheck/_settle.py), the engine's full
   collection, then the readings; the breakdown gives settling (with what
   it adds to the collection that follows) and the engine's readings,
   each against a bare collection.  Measured in a bare interpreter, again
   with a larger heap (--objects extra objects), and after gc.freeze() as
   the pytest plugin does.

   Then settling right after work that fills the CPU caches, as after a
   test, against settling back to back.

2. The allocator hook (py_bytes, py_allocs) on a pure-Python,
   allocation-heavy workload: the same workload in three fresh
   interpreters, bare, with leakcheck's hook installed, and under
   tracemalloc (1 frame); the median of --rounds timings each, as ratios to
   the bare run (target: the hook at most 1.15x, and below tracemalloc).

    python bench/bench_python.py [--runs N] [--rounds N] [--objects N]

Run it with the interpreter that has leakcheck installed.  Figures vary
with the machine; run it on an idle one.
"""

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

import leakcheck
from leakcheck import _core, _probes, _settle

WORKLOAD = r"""
import json, sys, time

def work():
    # Objects of all sizes made and dropped: dicts, lists, tuples, strings,
    # ints, and a few blocks over pymalloc's 512-byte limit.
    total = 0
    for i in range(20000):
        row = {"id": i, "name": "item-%d" % i, "tags": [i, i + 1, (i, "x")]}
        total += len(row["name"]) + len(str(row["tags"]))
        if i % 100 == 0:
            total += len(bytes(2048)) + len([0] * 200)
    return total

mode = sys.argv[1]
import leakcheck                            # in every mode: the same heap
if mode == "hook":
    leakcheck.snapshot(["py_allocs"])       # installs the allocator hook
elif mode == "tracemalloc":
    import tracemalloc
    tracemalloc.start(1)
work()                                      # warm
times = []
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    work()
    times.append(time.perf_counter() - t0)
print(json.dumps(times))
"""


def median_us(func, runs):
    func()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def paired_us(base, other, runs):
    """The median of (other - base) over back-to-back pairs, in alternating
    order: the machine's drift cancels out of each pair."""
    base()
    other()
    clock = time.perf_counter
    diffs = []
    for i in range(runs):
        if i & 1:
            t0 = clock(); base(); t1 = clock(); other(); t2 = clock()
            diffs.append((t2 - t1) - (t1 - t0))
        else:
            t0 = clock(); other(); t1 = clock(); base(); t2 = clock()
            diffs.append((t1 - t0) - (t2 - t1))
    return statistics.median(diffs) * 1e6


def snapshot_cost(runs, label):
    defaults = _probes.probe_mask(None)
    no_objects = _probes.probe_mask([p for p in leakcheck.DEFAULT_PROBES
                                     if p != "objects"])
    collect = median_us(gc.collect, runs)
    diff = paired_us(gc.collect, leakcheck.snapshot, runs)
    settle = paired_us(gc.collect, lambda: (_settle.settle(), gc.collect()),
                       runs)
    get_objects = median_us(gc.get_objects, runs)
    _core.set_settle(None)
    try:
        engine = paired_us(gc.collect, lambda: _core.Snapshot(defaults), runs)
        objects = paired_us(lambda: _core.Snapshot(no_objects),
                            lambda: _core.Snapshot(defaults), runs)
    finally:
        _core.set_settle(_settle.settle)
    print(f"{label}: {len(gc.get_objects())} tracked objects, "
          f"{len(sys.modules)} modules")
    print(f"  gc.collect()                  {collect:9.1f} us")
    print(f"  leakcheck.snapshot() costs    {diff:9.1f} us more  "
          f"(target < 50 us; probes: {', '.join(leakcheck.snapshot())})")
    print(f"    settling (leakcheck/_settle.py)   {settle:9.1f} us")
    print(f"    the engine's readings             {engine:9.1f} us"
          f", of which the objects probe {objects:.1f} us "
          f"(len(gc.get_objects()) would cost {get_objects:.1f} us)")
    return diff


def hook_cost(rounds):
    results = {}
    for _ in range(2):                      # the best of two processes each
        for mode in ("bare", "hook", "tracemalloc"):
            # Run from bench/: `python -c` puts its folder first on
            # sys.path, and from the repository root that would import the
            # source tree's leakcheck (no built _core) over the installed.
            out = subprocess.run([sys.executable, "-c", WORKLOAD, mode,
                                  str(rounds)], capture_output=True,
                                 text=True, check=True,
                                 cwd=os.path.dirname(os.path.abspath(
                                     __file__))).stdout
            median = statistics.median(json.loads(out)) * 1e3
            results[mode] = min(results.get(mode, median), median)
    bare = results["bare"]
    print(f"allocation-heavy workload (median of {rounds} rounds, best of "
          f"2 fresh interpreters each):")
    for mode, label in (("bare", "bare"), ("hook", "leakcheck's hook"),
                        ("tracemalloc", "tracemalloc (1 frame)")):
        print(f"  {label:<22} {results[mode]:8.2f} ms   "
              f"{results[mode] / bare:5.2f}x")
    print("  (targets: the hook at most 1.15x, and less than tracemalloc)")
    return results["hook"] / bare, results["tracemalloc"] / bare


def settle_after_work(runs):
    """Settling right after about 5 ms of work that fills the CPU caches
    with its own data (sorting, JSON), as a snapshot follows a test, and
    back to back (warm): the steps that walk every ABC and every module
    namespace read cold memory after work.  With pytest imported, for the
    modules and ABCs of a pytest process."""
    import random
    from itertools import compress, repeat
    try:
        import pytest  # noqa: F401  (its modules and ABCs)
    except ImportError:
        pass
    rng = random.Random(0)
    data = [{"id": i, "score": rng.random()} for i in range(2000)]

    def work():
        sorted(rng.random() for _ in range(20000))
        json.loads(json.dumps(data))

    _settle.settle()
    plan = _settle._plan
    namespaces = plan.namespaces
    steps = (
        ("settle(), all of it", _settle.settle),
        (f"reset the caches of {len(plan.abcs)} ABCs",
         lambda: _settle._exhaust(map(
             _settle._reset_caches,
             filter(_settle._not_none, map(_settle._deref, plan.abcs))))),
        (f"look for __warningregistry__ in {len(namespaces)} namespaces",
         lambda: list(compress(namespaces, map(
             dict.__contains__, namespaces, repeat("__warningregistry__"))))),
    )
    clock = time.perf_counter
    print(f"settling after work (median of {runs}; {len(sys.modules)} "
          f"modules):")
    for label, step in steps:
        warm, cold = [], []
        for _ in range(runs):
            work()
            t0 = clock(); step(); t1 = clock(); step(); t2 = clock()
            cold.append(t1 - t0)
            warm.append(t2 - t1)
        print(f"  {label:<52} after work {statistics.median(cold) * 1e6:7.1f}"
              f" us, warm {statistics.median(warm) * 1e6:6.1f} us")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2000,
                        help="timings per snapshot figure (default 2000)")
    parser.add_argument("--rounds", type=int, default=15,
                        help="timings per workload (default 15)")
    parser.add_argument("--objects", type=int, default=100000,
                        help="extra objects for the larger heap")
    args = parser.parse_args(argv)
    print(f"CPython {sys.version.split()[0]}, leakcheck {leakcheck.__version__}")
    print()
    snapshot_cost(args.runs, "bare interpreter")
    print()
    heap = [[i] for i in range(args.objects)]     # lists stay tracked
    snapshot_cost(max(args.runs // 10, 50), f"with {args.objects} more objects")
    print()
    gc.collect()
    gc.freeze()
    snapshot_cost(args.runs, f"the same after gc.freeze()")
    gc.unfreeze()
    del heap
    print()
    settle_after_work(max(args.runs // 10, 50))
    print()
    hook_cost(args.rounds)


if __name__ == "__main__":
    main()
