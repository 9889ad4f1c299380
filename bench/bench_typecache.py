"""What the type cache's trim costs in time, warm and with the caches of
the CPU cold: the engine trims CPython's type attribute cache (4,096
entries) after the collection of every snapshot, two a clean test
(leakcheck/_core.c, trim_table).  Its instructions barely move
(bench_hunt_instructions.py counts them with the snapshots'), but it reads
the whole table and the reference count of every name in it, and between
two snapshots a test's run and pytest's logging push much of that out of
the CPU's caches: what it costs then is memory's latency.

    python bench/bench_typecache.py [--rounds 5] [--trims 200]
                                    [--evict KB,...] [--python PATH]
                                    [--against PATH]

Each round runs a fresh process of each interpreter (alternating, so that
the machine's load falls on both alike): it finds the table as settling
does, fills it by looking up the attributes of the classes of the modules
pytest imports, and times `trims` trims after writing over each of
`--evict` kilobytes of memory (0: warm, right after another trim).  The
interpreters need leakcheck installed (--against: another build of it, in
a venv of its own, the version before a change, say).  Printed: each
interpreter's median over the rounds of its rounds' median trim, in µs,
per eviction.  Needs CPython with the
trim (leakcheck.cpython.type_cache_trimmable(): Linux, the GIL, no JIT).
"""

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r'''
import json, statistics, sys, time, warnings
warnings.simplefilter("ignore")
from leakcheck import _core, cpython
cpython._find_type_cache()
cache = cpython._typecache
if cache is None or cache.address is None:
    print(json.dumps({"error": "no type cache to trim here"}))
    sys.exit(0)
cpython.clear_type_cache()
import pytest  # noqa: F401  (its modules' classes fill the cache)
for module in list(sys.modules.values()):
    for name in sorted(getattr(module, "__dict__", {})):
        cls = module.__dict__[name]
        if isinstance(cls, type):
            for attr in sorted(cls.__dict__)[:40]:
                try:
                    getattr(cls, attr, None)
                except Exception:
                    pass
filler = cache.FILLER
held = _core.type_cache_trim(cache.address, cache.ENTRIES, filler)
evictions, trims = json.loads(sys.argv[1]), int(sys.argv[2])
out = {"entries": cache.ENTRIES}
for kb in evictions:
    junk = bytearray(kb << 10)
    times = []
    for _ in range(trims):
        for i in range(0, len(junk), 64):
            junk[i] ^= 1
        began = time.perf_counter_ns()
        _core.type_cache_trim(cache.address, cache.ENTRIES, filler)
        times.append(time.perf_counter_ns() - began)
    out[str(kb)] = statistics.median(times) / 1000
out["trimmed"] = held
print(json.dumps(out))
'''


def one(python, evictions, trims):
    proc = subprocess.run(
        [python, "-c", CHILD,
         json.dumps(evictions), str(trims)],
        capture_output=True, text=True, cwd="/")
    if proc.returncode != 0:
        sys.exit(f"bench_typecache: {python} failed:\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if "error" in result:
        sys.exit(f"bench_typecache: {python}: {result['error']}")
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--trims", type=int, default=200)
    p.add_argument("--evict", default="0,1024,2048,8192", metavar="KB,...")
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    p.add_argument("--against", metavar="PATH")
    args = p.parse_args(argv)
    evictions = [int(x) for x in args.evict.split(",")]
    configs = {"this": args.python}
    if args.against:
        configs["against"] = args.against
    results = {name: [] for name in configs}
    for _ in range(args.rounds):
        for name, python in configs.items():
            results[name].append(one(python, evictions, args.trims))
    version = subprocess.run(
        [args.python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True, text=True).stdout.strip()
    print(f"python {version}; {args.rounds} rounds of {args.trims} trims a "
          f"memory written over, alternating; the median trim, in µs")
    print(f"{'written over':>14} " + " ".join(f"{name:>9}" for name in
                                              configs))
    for kb in evictions:
        print(f"{str(kb) + ' KB':>14} " + " ".join(
            f"{statistics.median(r[str(kb)] for r in results[name]):9.1f}"
            for name in configs))
    for name, python in configs.items():
        r = results[name][-1]
        print(f"{name}: {python} ({r['entries']} entries)")


if __name__ == "__main__":
    main()
