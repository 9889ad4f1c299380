"""What a diagnosis costs: leakcheck.diagnose() on a large heap that is
not frozen (the Python API inside a big process; the pytest plugin freezes
the heap first, which makes it cheaper), for a leak of PyMem blocks and for
a leak of lists from the test extension that tests/python/api builds.  Best
and worst of --rounds calls each.

    python bench/bench_diagnose.py [--objects N] [--rounds N]

Run it with the interpreter that has leakcheck installed; on a debug build
the second case also asks for refs, whose census is the costly one.
"""

import argparse
import gc
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python", "api"))

import conftest                                       # noqa: E402
import leakcheck                                      # noqa: E402


def load_leakylib():
    spec = importlib.util.spec_from_file_location("leakylib",
                                                  conftest.build_leakylib())
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=200000,
                        help="extra objects on the heap (default 200000)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="diagnose() calls per case (default 3)")
    args = parser.parse_args(argv)
    leaky = load_leakylib()
    heap = [{"k": [i, str(i)]} for i in range(args.objects // 2)]
    debug = hasattr(sys, "gettotalrefcount")
    print(f"CPython {sys.version.split()[0]}"
          f"{' (debug build)' if debug else ''}, leakcheck "
          f"{leakcheck.__version__}, {len(gc.get_objects())} tracked objects")
    cases = [
        ("PyMem blocks: blocks, py_allocs, py_bytes",
         lambda: leaky.leak_pymem(2000), ["blocks", "py_allocs", "py_bytes"]),
        ("lists: " + ("refs, " if debug else "") + "blocks, py_allocs, objects",
         lambda: leaky.leak_new_list(3),
         (["refs"] if debug else []) + ["blocks", "py_allocs", "objects"]),
    ]
    for label, leak, probes in cases:
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            diagnosis = leakcheck.diagnose(leak, probes)
            times.append(time.perf_counter() - t0)
        top = diagnosis.allocations[0] if diagnosis.allocations else None
        where = (f"{os.path.basename(top['file'])}:{top['line']}"
                 if top else "no allocation found")
        print(f"  {label:<48} best {min(times):6.3f} s, worst "
              f"{max(times):6.3f} s  (top allocation: {where})")
    del heap


if __name__ == "__main__":
    main()
