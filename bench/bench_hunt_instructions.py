"""Where the instructions of a clean test's hunt go, part by part:
bench_plugin.py's fast clean tests run with --leaks (and a report, as
bench_overhead.py runs them) under valgrind's callgrind, each part of the
plugin's work called through a C function of its own that nothing else in
the process calls (operator.call, and iterators of itertools and
functools), so that callgrind's inclusive count of that function is the
part's; and once plain, where pytest's own protocol of each test is
counted so too.  Unlike bench_parts.py's clocks, the counts barely move
from one run to the next, however loaded the machine.

    python bench/bench_hunt_instructions.py [--tests 200] [--python PATH]

Each count is taken twice, over `tests` and over twice as many tests: a
test's figure is the difference divided by `tests`, what one more test
costs, so that what a session pays once (its first test's snapshots of a
heap not settled before, the settling's plan of every module, the first
import of what the hunt uses) is left out.  Over 200 tests that once is
a tenth to a third of some parts (`--once` prints it: each part's count
over the first run, a test, less the difference's).

Printed, in instructions a test (each part holds the parts under it):

    the hunt                 plugin.py's pytest_runtest_protocol, whole:
                             the hunt and the logging of the reports
      the test's setup       its settings, Series, runner and progress,
                             pytest's logstart and item.location among it
        the runner           what pytest keeps of the reported run, made
                             before the first snapshot
          stand-in reports   three reports of a passing run
      the GC freezer         its check before each test, and a freeze
                             now and then
      snapshots              Series.next() and rebase(): settling, the
                             collection, the type cache's trim, the
                             readings, the verdict's results
      the reported run       the runner's run of pytest's phases
      its verdict            the record, the teardown for the next item
      the journal            the report's journal lines (in the setup
                             and the logging above)
        the engine's JSON    _core.json_text(), called anywhere in the
        writer               process: the journal's lines, and a little
                             for the report written at the end
        json's encoder       json's C encoder, likewise: what json_text()
                             leaves to it
    plain pytest's protocol  runtestprotocol (its logging included)

The hunt less plain pytest's protocol is what --leaks adds inside a
test's protocol; bench_instructions.py counts the whole process.  Needs
CPython 3.11+ (operator.call) and valgrind.  The probes are
bench_instructions.py's (native_bytes left out: under valgrind it fills
glibc's cache before each reading).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_instructions import PROBES  # noqa: E402
from bench_overhead import pytest_output  # noqa: E402
from bench_plugin import generate  # noqa: E402

# Each part goes through its own C function: the C function callgrind
# names (or another, after a "|", where a later CPython renamed it), and
# the part's name.
PARTS = [("filterfalse_next", "the hunt", 0),
         ("_operator_call", "the test's setup", 1),
         ("starmap_next", "the runner", 2),
         ("takewhile_next", "stand-in reports", 3),
         ("methodcaller_call|methodcaller_vectorcall", "the GC freezer", 1),
         ("accumulate_next", "snapshots", 1),
         ("groupby_next", "the reported run", 1),
         ("functools_reduce", "its verdict", 1),
         ("dropwhile_next", "the journal", 1),
         ("lc_py_json_text", "the engine's JSON writer", 2),
         ("encoder_call", "json's encoder", 2)]
PLAIN = "groupby_next"          # plain pytest's runtestprotocol
OPTIONAL = ("lc_py_json_text", "encoder_call")

CONFTEST = '''\
import functools
import itertools
import operator


class _Call:
    __slots__ = ("func",)

    def __init__(self, func):
        self.func = func

    def go(self):
        return self.func()


_GO = operator.methodcaller("go")


def _through(how, func):
    """func, called through the C function of `how`."""
    def call(*args, **kwargs):
        box = []

        def once(*_):
            box.append(func(*args, **kwargs))
            return True
        if how == "filterfalse":
            next(itertools.filterfalse(lambda _: not once(), [0]))
        elif how == "call":
            operator.call(once)
        elif how == "starmap":
            next(itertools.starmap(once, [()]))
        elif how == "takewhile":
            next(itertools.takewhile(once, [0]))
        elif how == "methodcaller":
            _GO(_Call(once))
        elif how == "accumulate":
            it = itertools.accumulate([0, 0], lambda a, b: once())
            next(it)
            next(it)
        elif how == "groupby":
            next(itertools.groupby([0], key=once))
        elif how == "reduce":
            functools.reduce(lambda a, b: once(), [0, 0])
        elif how == "dropwhile":
            next(itertools.dropwhile(lambda _: not once(), [0]))
        return box[0]
    return call


def _route(owner, name, how):
    setattr(owner, name, _through(how, getattr(owner, name)))


def pytest_configure(config):
    if not config.getoption("leaks", False):
        import _pytest.runner
        _route(_pytest.runner, "runtestprotocol", "groupby")
        return
    import leakcheck
    from leakcheck.report import journal
    from pytest_leakcheck import hunt, runner, session
    _route(hunt, "protocol", "filterfalse")
    _route(hunt, "_start", "call")
    _route(hunt, "ItemRunner", "starmap")
    _route(runner, "report_standins", "takewhile")
    _route(session._GcFreezer, "begin", "methodcaller")
    _route(leakcheck.Series, "next", "accumulate")
    _route(leakcheck.Series, "rebase", "accumulate")
    _route(runner.ItemRunner, "run_reported", "groupby")
    _route(hunt, "_judge", "reduce")
    _route(hunt, "_finish", "reduce")
    _route(journal.Journal, "write", "dropwhile")
'''

LINE = re.compile(r"^\s*([0-9,]+) .*?:([A-Za-z_0-9]+)(?: \[|$)")


def inclusive(out, functions):
    """{function: its inclusive instructions} from a callgrind output
    file (the largest of the lines that name it: a function inlined in a
    header shows there too, with a part of its count).  A function given
    as "a|b" is whichever of a and b this CPython has."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes",
                           "--threshold=100", "--auto=no", out],
                          capture_output=True, text=True).stdout
    names = {name: function for function in functions
             for name in function.split("|")}
    found = dict.fromkeys(functions, 0)
    for line in text.splitlines():
        m = LINE.match(line)
        if m and m.group(2) in names:
            function = names[m.group(2)]
            found[function] = max(found[function],
                                  int(m.group(1).replace(",", "")))
    return found


def counts(directory, python, leaks, out):
    args = (["--leaks", f"--leaks-probes={PROBES}",
             f"--leaks-report={os.path.join(directory, 'report.json')}"]
            if leaks else [])
    pytest_output("bench_hunt_instructions", directory, python, args,
                  prefix=("valgrind", "--tool=callgrind",
                          f"--callgrind-out-file={out}"))
    return inclusive(out, [f for f, _, _ in PARTS] if leaks else [PLAIN])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=200)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    p.add_argument("--once", action="store_true",
                   help="also print what the session paid once, spread "
                        "over the first run's tests")
    args = p.parse_args(argv)
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            sys.exit(f"bench_hunt_instructions: {tool} is not installed "
                     f"(scripts/setup installs valgrind)")
    check = subprocess.run([args.python, "-c", "import operator; "
                            "operator.call"], capture_output=True)
    if check.returncode != 0:
        sys.exit("bench_hunt_instructions: needs CPython 3.11 or later "
                 "(operator.call)")
    runs = []                   # (tests, leaks, plain) of each size
    for size in (args.tests, 2 * args.tests):
        with tempfile.TemporaryDirectory(prefix="leakcheck-hunt-") as d:
            tests = generate(d, size, conftest=CONFTEST)
            out = os.path.join(d, "callgrind.out")
            leaks = counts(d, args.python, True, out)
            plain = counts(d, args.python, False, out)[PLAIN]
        # json's encoder may have nothing left to write, and a leakcheck
        # older than the engine's writer has none.
        missing = [name for function, name, _ in PARTS
                   if not leaks[function] and function not in OPTIONAL]
        if missing or not plain:
            sys.exit(f"bench_hunt_instructions: callgrind counted nothing "
                     f"for {', '.join(missing) or 'plain pytest'}")
        runs.append((tests, dict(leaks, **{PLAIN + " plain": plain})))
    (n1, small), (n2, large) = runs
    more = n2 - n1
    rows = [(function, name, depth) for function, name, depth in PARTS]
    rows.append((PLAIN + " plain", "plain pytest's protocol", 0))
    print(f"{n1} and {n2} tests, counted by callgrind (probes {PROBES}; a "
          f"report written); instructions a test: the difference over the "
          f"{more} tests more" + (", then what the session paid once, a "
                                  f"test of the first {n1}" if args.once
                                  else ""))
    for function, name, depth in rows:
        per_test = (large[function] - small[function]) / more
        line = f"  {'  ' * depth}{name:<{28 - 2 * depth}} {per_test:12,.0f}"
        if args.once:
            line += f" {small[function] / n1 - per_test:+12,.0f}"
        print(line)
    hunt = PARTS[0][0]
    added = ((large[hunt] - large[PLAIN + " plain"])
             - (small[hunt] - small[PLAIN + " plain"])) / more
    print(f"the hunt less plain pytest's protocol: {added:+,.0f} a test")


if __name__ == "__main__":
    main()
