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
                                            [--ll SIZE,ASSOC,LINE]

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

With --ll callgrind also simulates the caches, the last level with
that geometry (this machine's second-level cache, each core's own:
1310720,20,64, from /sys/devices/system/cpu/cpu0/cache/index2), and
each part's first-level data misses and last-level misses are printed
beside its instructions (reads and writes, a test).  A miss of that
level goes to the third-level cache, which the machine's other tenants
share: how many there are says how much a part's time moves with their
load, which a count of instructions does not.

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

# callgrind_annotate's line of a function: its counts (a "." for none,
# each followed by its share in parentheses), then file:function.
LINE = re.compile(r"^\s*((?:(?:[0-9,]+|\.)(?: \([ 0-9.]+%\))?\s+)+)"
                  r"\S*?:([A-Za-z_0-9]+)(?: \[|$)")
SHARE = re.compile(r"\([ 0-9.]+%\)")
# The events printed: the instructions; with --ll the first-level data
# misses and the last-level data misses too, each the sum of its reads'
# and its writes' (callgrind_annotate --show, in this order).
EVENTS = ("Ir",)
SIMULATED = (("instructions", ("Ir",)), ("D1 misses", ("D1mr", "D1mw")),
             ("LL misses", ("DLmr", "DLmw")))


def inclusive(out, functions, events=EVENTS):
    """{function: (its inclusive count of each of `events`)} from a
    callgrind output file (the largest of the lines that name it: a
    function inlined in a header shows there too, with a part of its
    count).  A function given as "a|b" is whichever of a and b this
    CPython has."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes",
                           "--threshold=100", "--auto=no",
                           "--show=" + ",".join(events), out],
                          capture_output=True, text=True).stdout
    names = {name: function for function in functions
             for name in function.split("|")}
    found = dict.fromkeys(functions, (0,) * len(events))
    for line in text.splitlines():
        m = LINE.match(line)
        if m and m.group(2) in names:
            function = names[m.group(2)]
            figures = tuple(0 if n == "." else int(n.replace(",", ""))
                            for n in SHARE.sub("", m.group(1)).split())
            if len(figures) == len(events):
                found[function] = max(found[function], figures)
    return found


def counts(directory, python, leaks, out, ll=None):
    """{function: (its counts)} of one pytest run under callgrind; `ll`:
    the simulated last level's geometry (--ll), or None not to simulate
    the caches."""
    args = (["--leaks", f"--leaks-probes={PROBES}",
             f"--leaks-report={os.path.join(directory, 'report.json')}"]
            if leaks else [])
    cache = ["--cache-sim=yes", f"--LL={ll}"] if ll else []
    pytest_output("bench_hunt_instructions", directory, python, args,
                  prefix=("valgrind", "--tool=callgrind", *cache,
                          f"--callgrind-out-file={out}"))
    logging = [HUNT_ALONE, PHASES] if os.environ.get(LOGGING) else []
    events = [e for _, of in SIMULATED for e in of] if ll else EVENTS
    found = inclusive(out, [f for f, _, _ in PARTS] + logging
                      if leaks else [PLAIN] + logging[1:], events)
    # Each printed figure: the sum of its events.
    wanted = SIMULATED if ll else SIMULATED[:1]
    return {function: tuple(sum(figures[events.index(e)] for e in of)
                            for _, of in wanted)
            for function, figures in found.items()}


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
    p.add_argument("--ll", metavar="SIZE,ASSOC,LINE",
                   help="simulate the caches, with this last level, and "
                        "print each part's misses too")
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
            leaks = counts(d, args.python, True, out, args.ll)
            plain = counts(d, args.python, False, out, args.ll)
        # json's encoder may have nothing left to write, and a leakcheck
        # older than the engine's writer has none.
        missing = [name for function, name, _ in PARTS
                   if not leaks[function][0] and function not in OPTIONAL]
        if args.logging:
            missing += [name for name, function in (
                ("the hunt alone", HUNT_ALONE), ("its phases", PHASES))
                if not leaks[function][0]]
        if missing or not all(n for n, *_ in plain.values()):
            sys.exit(f"bench_hunt_instructions: callgrind counted nothing "
                     f"for {', '.join(missing) or 'a part'}")
        runs.append((tests, dict(leaks, **{f + " plain": n
                                           for f, n in plain.items()})))
    (n1, small), (n2, large) = runs
    more = n2 - n1
    rows = [(function, name, depth) for function, name, depth in PARTS]
    rows.append((PLAIN + " plain", "plain pytest's protocol", 0))
    shown = [name for name, _ in (SIMULATED if args.ll else SIMULATED[:1])]
    print(f"{n1} and {n2} tests, counted by callgrind (probes {PROBES}; a "
          f"report written" + (f"; caches simulated, the last level "
                               f"{args.ll}" if args.ll else "") +
          f"); {', '.join(shown)} a test: the difference over the "
          f"{more} tests more" + (", then what the session paid once, a "
                                  f"test of the first {n1}" if args.once
                                  else ""))

    def per_test(count):
        """count(the counts of a run, one figure), a test, for each figure
        printed: the difference over the tests more."""
        return [(count(large, k) - count(small, k)) / more
                for k in range(len(shown))]

    def columns(figures, sign=""):
        return " ".join(f"{x:{sign}12,.0f}" for x in figures)

    for function, name, depth in rows:
        figures = per_test(lambda c, k: c[function][k])
        line = f"  {'  ' * depth}{name:<{28 - 2 * depth}} {columns(figures)}"
        if args.once:
            line += " " + columns([small[function][k] / n1 - x
                                   for k, x in enumerate(figures)], "+")
        print(line)
    hunt = PARTS[0][0]
    added = per_test(lambda c, k: c[hunt][k] - c[PLAIN + " plain"][k])
    print(f"the hunt less plain pytest's protocol: "
          f"{', '.join(f'{x:+,.0f} {n}' for x, n in zip(added, shown))} "
          f"a test")
    if not args.logging:
        return
    # The logging after the hunt: pytest_runtest_protocol less the hunt
    # proper.  pytest's own share: what plain pytest's phases with their
    # logging take more than the runner's phases without it.
    logging = per_test(lambda c, k: c[hunt][k] - c[HUNT_ALONE][k])
    pytests = per_test(lambda c, k: c[PHASES + " plain"][k] - c[PHASES][k])
    for k, name in enumerate(shown):
        print(f"  {name}: the reports' logging after the hunt "
              f"{logging[k]:,.0f} a test, against {pytests[k]:,.0f} for "
              f"plain pytest's logging of its reports (its phases with "
              f"their logging less the runner's phases): the plugin's "
              f"hooks and the glue around them "
              f"{logging[k] - pytests[k]:+,.0f}")


if __name__ == "__main__":
    main()
