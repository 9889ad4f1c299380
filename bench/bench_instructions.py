"""What --leaks costs per clean test, in instructions: the generated suite
of bench_overhead.py (bench_plugin.py's fast clean tests) run plain and
with --leaks under valgrind's callgrind, which counts the instructions the
process executed.  Unlike CPU time on a shared machine, the count barely
moves from one run to the next, so a change to the plugin's hot path shows
in one run per configuration, however loaded the machine.

    python bench/bench_instructions.py [--tests 200] [--python PATH]
                                       [--against PATH] [--cache-sim]
                                       [--leaks-args "ARGS"]
    python bench/bench_instructions.py --unused [--tests 200]
                                       [--python PATH] [--against PATH]

--unused counts what the plugin costs a session that does not use it
(pytest without --leaks, no test marked: what every pytest session pays
where leakcheck is installed): plain pytest with the plugin and without
it, each over `tests` and over twice as many tests, so that a test's
figure (the difference over the tests more) is told from what the
session pays once (the plugin's import, its configuration); --against
counts the plugin's runs again with another interpreter.

--leaks-args adds pytest options to every --leaks run: what a part
costs, by leaving it out or adding it (--leaks-args=--leaks-probes=threads:
no allocator hook; --leaks-args=--leaks-report=PATH: the report's journal,
a path of its own for each command run at once).
--against PATH adds --leaks run by another interpreter of the same version
with another build of leakcheck installed (the version before a change).
Put the two installs in venvs whose paths are as long as each other
(/tmp/old311 and /tmp/new311, say): one build read +1.69M a test from
/work/main/.venv and +1.61M from a copy of that venv at /tmp/newv11, where
a build whose hot path was the same read +1.63M and +1.61M from
/tmp/base11 in the same two commands (presumably the paths the process
handles, sys.path and every module's file, cost by their length).

Printed: the instructions of each configuration, and per test
((--leaks - plain) / tests).  With --cache-sim, callgrind also simulates
the machine's caches, and their misses are printed the same way:
first-level instruction misses, first-level data misses (reads and
writes) and last-level misses.

Every run has PYTHONHASHSEED=0: which str hashes collide in a dict
moves the count (one build's 200-test --leaks run read 2,556 M to
2,560 M instructions under seeds 0, 1 and 2).

Instructions alone understate what --leaks costs.  On CPython 3.11 with
300 tests, one session read +1.52M instructions a test (plain pytest ran
6.9M a test: the difference between a 200- and a 300-test run), +41,900
first-level data misses and +19,400 instruction misses a test, while
bench_overhead.py read more than twice plain pytest's CPU time a test.

The probes are the defaults less native_bytes: under valgrind leakcheck
cannot find glibc's malloc cache, and fills it before each reading
instead (about 2,300 malloc and free calls a snapshot), which a process
outside valgrind does not do.  What a count leaves out is what the
instructions wait for (cache misses, system calls): bench_overhead.py
measures that time.
"""

import argparse
import os
import re
import shlex
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_overhead import pytest_output  # noqa: E402
from bench_plugin import generate  # noqa: E402

PROBES = "blocks,py_bytes,py_allocs,objects,garbage,fds,threads"
TOTAL = re.compile(r"Collected :((?: [0-9]+)+)")
# callgrind's events with --cache-sim=yes, in the order it prints them:
# Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw.
SIMULATED = (("instructions", (0,)), ("I1 misses", (3,)),
             ("D1 misses", (4, 5)), ("LL misses", (6, 7, 8)))


def counts(directory, python, args, cache_sim=False, plugin=True):
    """What callgrind counted in one pytest run: {event: count}, the
    instructions alone unless `cache_sim`; without `plugin`, a run
    without leakcheck's plugin."""
    found = TOTAL.findall(pytest_output(
        "bench_instructions", directory, python, args,
        prefix=("valgrind", "--tool=callgrind",
                f"--cache-sim={'yes' if cache_sim else 'no'}",
                "--callgrind-out-file=/dev/null"), plugin=plugin))
    if not found:
        sys.exit("bench_instructions: callgrind printed no count")
    events = [int(n) for n in found[-1].split()]
    wanted = SIMULATED if cache_sim else SIMULATED[:1]
    if len(events) < max(max(at) for _, at in wanted) + 1:
        sys.exit(f"bench_instructions: callgrind printed {len(events)} "
                 f"counts, not the {'9' if cache_sim else '1'} expected")
    return {name: sum(events[i] for i in at) for name, at in wanted}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=200)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    p.add_argument("--against", metavar="PATH",
                   help="another interpreter whose --leaks run is counted "
                        "too")
    p.add_argument("--leaks-args", default="", metavar="ARGS",
                   help="pytest options added to every --leaks run")
    p.add_argument("--cache-sim", action="store_true",
                   help="also count the misses of callgrind's simulated "
                        "caches")
    p.add_argument("--unused", action="store_true",
                   help="what the plugin costs a session that does not "
                        "use it")
    args = p.parse_args(argv)
    os.environ["PYTHONHASHSEED"] = "0"       # see the module's text
    if shutil.which("valgrind") is None:
        sys.exit("bench_instructions: valgrind is not installed "
                 "(scripts/setup installs it)")
    if args.unused:
        unused(args)
        return
    leaks = ["--leaks", f"--leaks-probes={PROBES}",
             *shlex.split(args.leaks_args)]
    with tempfile.TemporaryDirectory(prefix="leakcheck-instr-") as d:
        tests = generate(d, args.tests)
        # Once uncounted: where pytest may write bytecode, its first run
        # writes the test modules' rewritten bytecode, which every later
        # run reads (counted, plain's run read 2.9M instructions a test
        # more than --leaks's).
        pytest_output("bench_instructions", d, args.python, [])
        runs = {"plain": counts(d, args.python, [], args.cache_sim),
                "--leaks": counts(d, args.python, leaks, args.cache_sim)}
        if args.against:
            runs["against"] = counts(d, args.against, leaks, args.cache_sim)
    print(f"{tests} tests, counted by callgrind (probes {PROBES}"
          f"{'; ' + args.leaks_args if args.leaks_args else ''})")
    for event in runs["plain"]:
        print(event)
        for name, run in runs.items():
            count, plain = run[event], runs["plain"][event]
            extra = ""
            if name != "plain":
                per_test = (count - plain) / tests
                extra = (f"  {per_test / 1e6:+.2f}M per test"
                         if event == "instructions" else
                         f"  {per_test:+,.0f} per test")
            print(f"{name:>9} {count:>15,}{extra}")
    if args.against:
        print(f"against: {args.against}")


def unused(args):
    """--unused: the plugin's cost in a session that does not use it, a
    test's and the session's once (see the module's text)."""
    configs = {"without the plugin": (args.python, False),
               "with the plugin": (args.python, True)}
    if args.against:
        configs["against"] = (args.against, True)
    found = {}
    for size in (args.tests, 2 * args.tests):
        with tempfile.TemporaryDirectory(prefix="leakcheck-instr-") as d:
            generate(d, size)
            # Once uncounted: pytest writes the test modules' rewritten
            # bytecode in the first run (where it may write), which every
            # later run reads.
            pytest_output("bench_instructions", d, args.python, [])
            for name, (python, plugin) in configs.items():
                found[name, size] = counts(d, python, [],
                                           plugin=plugin)["instructions"]
    print(f"plain pytest, {args.tests} and {2 * args.tests} tests, counted "
          f"by callgrind: instructions a test (the difference over the "
          f"{args.tests} tests more) and the session's once (the rest)")
    bare = found["without the plugin", args.tests]
    bare_test = (found["without the plugin", 2 * args.tests] - bare) \
        / args.tests
    for name in configs:
        small, large = found[name, args.tests], found[name, 2 * args.tests]
        per_test = (large - small) / args.tests
        once = small - per_test * args.tests
        extra = ("" if name == "without the plugin" else
                 f"  ({per_test - bare_test:+,.0f} a test, "
                 f"{(once - (bare - bare_test * args.tests)) / 1e6:+.1f}M "
                 f"once)")
        print(f"  {name:>20} {per_test:>12,.0f} a test {once / 1e6:>9.1f}M "
              f"once{extra}")
    if args.against:
        print(f"against: {args.against}")


if __name__ == "__main__":
    main()
