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
                                            [--once] [--logging]

Each count is taken twice, over `tests` and over twice as many tests: a
test's figure is the difference divided by `tests`, what one more test
costs, so that what a session pays once (its first test's snapshots of a
heap not settled before, the settling's plan of every module, the first
import of what the hunt uses) is left out.  Over 200 tests that once is
from a twentieth of the setup's count to two thirds of the freezer's
(`--once` prints it: each part's count over the first run, a test, less
the difference's).

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
                             and the logging above): their encoding,
                             their copy into the file and the report's
                             notes of them (until 2026-12-07 the
                             journal's write() alone, without those
                             notes)
        the engine's JSON    _core.json_text(), called anywhere in the
        writer               process: the journal's lines, and a little
                             for the report written at the end
        json's encoder       json's C encoder, likewise: what json_text()
                             leaves to it
    plain pytest's protocol  its runner plugin's pytest_runtest_protocol,
                             whole: item.location, logstart, the phases
                             and their logging, logfinish (until
                             2026-12-07 runtestprotocol alone, which
                             leaves out the first three and the last,
                             some 0.2 M instructions the hunt has)

and with --logging what the logging of the reports after the hunt takes,
against plain pytest's logging of the same reports (told from its phases
run with their logging, less the phases the runner runs without it).

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
PLAIN = "groupby_next"          # plain pytest's pytest_runtest_protocol
# The hunt less its logging (hunt.hunt()), and each phase's run and report
# (pytest's call_and_report: with --leaks the runner's, which does not log
# the report; plain, pytest's, which does): with --logging, what the
# logging of the reports takes is told from them (main()).
HUNT_ALONE = "zip_longest_next"
PHASES = "cycle_next"
LOGGING = "BENCH_HUNT_LOGGING"   # set by --logging for the pytest runs
OPTIONAL = ("lc_py_json_text", "encoder_call")

CONFTEST = '''\
import functools
import itertools
import operator
import os


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
        elif how == "zip_longest":
            next(itertools.zip_longest(iter(once, False)))
        elif how == "cycle":
            next(itertools.cycle(iter(once, False)))
        return box[0]
    return call


def _route(owner, name, how):
    setattr(owner, name, _through(how, getattr(owner, name)))


def pytest_configure(config):
    if not config.getoption("leaks", False):
        import _pytest.runner
        # pytest's runner plugin's pytest_runtest_protocol, whole (its
        # logstart and logfinish, item.location among them, as the hunt
        # has them): pluggy calls the function its implementation holds.
        for impl in config.pluginmanager.hook.pytest_runtest_protocol \
                .get_hookimpls():
            if getattr(impl.plugin, "__name__", None) == "_pytest.runner":
                impl.function = _through("groupby", impl.function)
        if os.environ.get("BENCH_HUNT_LOGGING"):
            _route(_pytest.runner, "call_and_report", "cycle")
        return
    import leakcheck
    from pytest_leakcheck import hunt, runner, session
    from pytest_leakcheck.report import Report
    _route(hunt, "protocol", "filterfalse")
    if os.environ.get("BENCH_HUNT_LOGGING"):
        _route(hunt, "hunt", "zip_longest")
        _route(runner, "call_and_report", "cycle")
    _route(hunt, "_start", "call")
    _route(hunt, "ItemRunner", "starmap")
    _route(runner, "report_standins", "takewhile")
    _route(session._GcFreezer, "begin", "methodcaller")
    _route(leakcheck.Series, "next", "accumulate")
    _route(leakcheck.Series, "rebase", "accumulate")
    _route(runner.ItemRunner, "run_reported", "groupby")
    _route(hunt, "_judge", "reduce")
    _route(hunt, "_finish", "reduce")
    _route(Report, "_event", "dropwhile")
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
    logging = [HUNT_ALONE, PHASES] if os.environ.get(LOGGING) else []
    return inclusive(out, [f for f, _, _ in PARTS] + logging
                     if leaks else [PLAIN] + logging[1:])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=200)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    p.add_argument("--logging", action="store_true",
                   help="also tell what the logging of the reports after "
                        "the hunt takes from plain pytest's (the hunt "
                        "proper and each phase routed through C functions "
                        "of their own, which adds the routing's own "
                        "instructions to the counts)")
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
    if args.logging:
        os.environ[LOGGING] = "1"
    runs = []                   # (tests, leaks, plain) of each size
    for size in (args.tests, 2 * args.tests):
        with tempfile.TemporaryDirectory(prefix="leakcheck-hunt-") as d:
            tests = generate(d, size, conftest=CONFTEST)
            out = os.path.join(d, "callgrind.out")
            leaks = counts(d, args.python, True, out)
            plain = counts(d, args.python, False, out)
        # json's encoder may have nothing left to write, and a leakcheck
        # older than the engine's writer has none.
        missing = [name for function, name, _ in PARTS
                   if not leaks[function] and function not in OPTIONAL]
        if args.logging:
            missing += [name for name, function in (
                ("the hunt alone", HUNT_ALONE), ("its phases", PHASES))
                if not leaks[function]]
        if missing or not all(plain.values()):
            sys.exit(f"bench_hunt_instructions: callgrind counted nothing "
                     f"for {', '.join(missing) or 'a part'}")
        runs.append((tests, dict(leaks, **{f + " plain": n
                                           for f, n in plain.items()})))
    (n1, small), (n2, large) = runs
    more = n2 - n1
    rows = [(function, name, depth) for function, name, depth in PARTS]
    rows.append((PLAIN + " plain", "plain pytest's protocol", 0))
    print(f"{n1} and {n2} tests, counted by callgrind (probes {PROBES}; a "
          f"report written); instructions a test: the difference over the "
          f"{more} tests more" + (", then what the session paid once, a "
                                  f"test of the first {n1}" if args.once
                                  else ""))
    def per_test(count):
        """count(the counts of a run), a test: the difference over the
        tests more."""
        return (count(large) - count(small)) / more
    for function, name, depth in rows:
        figure = per_test(lambda c: c[function])
        line = f"  {'  ' * depth}{name:<{28 - 2 * depth}} {figure:12,.0f}"
        if args.once:
            line += f" {small[function] / n1 - figure:+12,.0f}"
        print(line)
    hunt = PARTS[0][0]
    added = per_test(lambda c: c[hunt] - c[PLAIN + " plain"])
    print(f"the hunt less plain pytest's protocol: {added:+,.0f} a test")
    if not args.logging:
        return
    # The logging after the hunt: pytest_runtest_protocol less the hunt
    # proper.  pytest's own share: what plain pytest's phases with their
    # logging take more than the runner's phases without it.
    logging = per_test(lambda c: c[hunt] - c[HUNT_ALONE])
    pytests = per_test(lambda c: c[PHASES + " plain"] - c[PHASES])
    print(f"  of which the reports' logging after the hunt {logging:,.0f} "
          f"a test, against {pytests:,.0f} for plain pytest's logging of "
          f"its reports (its phases with their logging less the runner's "
          f"phases): the plugin's hooks and the glue around them "
          f"{logging - pytests:+,.0f}")


if __name__ == "__main__":
    main()
