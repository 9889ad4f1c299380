"""What --leaks costs per clean test, in CPU time: a generated suite of fast
clean tests (bench_plugin.py's "fast" kind, or its unittest TestCase
methods with --kind unittest) run by pytest plain and with --leaks, the
two alternating round after round; the figure of each is the
median over the rounds of the CPU time (user + system) of the pytest
process, read from os.wait4, so that other work on a shared machine moves
it little.

    python bench/bench_overhead.py [--tests 1000] [--heap OBJECTS]
                                   [--kind fast|unittest]
                                   [--rounds 5] [--python PATH]
                                   [--against PATH] [--all-plugins]
                                   [--leaks-args "ARGS"]

--heap OBJECTS adds a session-scoped autouse fixture holding that many
GC-tracked containers (empty lists, in one list): a process whose heap is
large, to see whether a snapshot's cost grows with it.  --python runs the
pytest of another interpreter (its environment needs leakcheck installed).
--against PATH adds a third configuration to each round: --leaks run by
another interpreter of the same version with another build of leakcheck
installed (the version before a change, say), so that both are measured
under the same load and compared with the same plain runs.  --leaks-args
adds pytest options to every --leaks run ("--leaks-probes=fds,threads":
what the other probes cost, the allocator hook's among them).

Printed: the CPU seconds of each configuration, the overhead per test in
ms ((cpu --leaks - cpu plain) / tests), and the one-time cost: the CPU
time of the first and of the last test (setup to teardown, the --leaks
hunt included) and of the session around them; "tests s" is the CPU time
of all the tests' protocols (pytest_runtest_protocol, whole), so that
what --leaks adds inside them and outside them can be told apart;
"before s" the process's CPU time until the session starts (interpreter,
imports, configuration), "after s" from the session's finish (the report
written) to the process's exit (terminal summary, unconfigure, the
interpreter's finalization and its last collections), which no clock of
leakcheck's can count; and the overhead per test of the tests between
the first and the last (their protocols only, paired by round), which
leaves out what a session pays once (a large heap's first
collection).  Then the same two from the fastest round of each
configuration: the machine's other work only adds CPU time to a round,
so the fastest is the one it moved least.  The paired figure comes with
its rounds' lowest and highest, and the plain rounds' spread (slowest
against fastest) says how much the machine moved the same work
meanwhile.  With --leaks every test must come out clean; the report's
count of tests that ran once is printed too, and what the report's
summary says leakcheck added, as a share of what its round's --leaks run
took more than that round's plain run (the median over the rounds, and
their range): how truthful the summary is, each round read against its
own load.  Then the median test's protocol in CPU time (the first and the
last test left out), with --leaks and plain, and its difference paired
by round: a burst of other work on a shared machine moves some tests'
figures, not the median test's, and a collection of the whole heap that
plain pytest makes now and then (the GC freezer spares --leaks most of
them) falls on a few tests too.  Last, what the records' hunt_costs say a
test: on average, and the median test's, which leaves out what one test
pays for the session (the first freeze, a large heap's first
collection).
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_plugin import NOT_MEASURED, generate  # noqa: E402

# Records the process's CPU time around the first and the last test and at
# session start and finish, for the one-time cost; the same in both
# configurations.
CONFTEST = '''\
import json
import os
import time

import pytest

_marks = {{}}
_count = [0]


def pytest_sessionstart(session):
    _marks["session_start"] = time.process_time()
    _marks["protocols"] = 0.0
    _marks["each"] = []


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    began = time.process_time()
    try:
        return (yield)
    finally:
        spent = time.process_time() - began
        _marks["protocols"] += spent
        _marks["each"].append(spent)


def pytest_runtest_logstart(nodeid, location):
    _count[0] += 1
    _marks["last_start"] = time.process_time()
    if _count[0] == 1:
        _marks["first_start"] = _marks["last_start"]


def pytest_runtest_logfinish(nodeid, location):
    _marks["last_end"] = time.process_time()
    if _count[0] == 1:
        _marks["first_end"] = _marks["last_end"]


def pytest_sessionfinish(session):
    _marks["session_end"] = time.process_time()
    with open(os.environ["BENCH_OVERHEAD_MARKS"], "w") as f:
        json.dump(_marks, f)

{heap}
'''

HEAP_FIXTURE = '''
@pytest.fixture(scope="session", autouse=True)
def _bench_heap():
    held = [[] for _ in range({objects})]
    yield held
'''


# Without --all-plugins, pytest loads leakcheck's plugin alone: the other
# plugins installed (pytest-trio imports hypothesis, ~1 s of CPU) cost both
# configurations the same and only add noise.
PLUGIN = "pytest_leakcheck.plugin"


def pytest_output(bench, directory, python, args, prefix=(), plugin=True):
    """The output of one pytest run of `directory` with leakcheck's plugin
    alone (none without `plugin`), under `prefix` (a command such as
    valgrind's); exits naming `bench` when the run fails."""
    cmd = [*prefix, python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "no:randomly", *(["-p", PLUGIN] if plugin else []),
           *NOT_MEASURED, *args, directory]
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run(cmd, cwd=directory, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        sys.exit(f"{bench}: {' '.join(cmd)} failed (exit "
                 f"{proc.returncode}):\n{proc.stdout[-3000:]}")
    return proc.stdout


def write_conftest(directory, heap):
    heap_code = HEAP_FIXTURE.format(objects=heap) if heap else ""
    with open(os.path.join(directory, "conftest.py"), "w") as f:
        f.write(CONFTEST.format(heap=heap_code))


def run(directory, python, args, marks_path, autoload):
    """(CPU seconds of the pytest process, its marks) of one run."""
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "no:randomly", *NOT_MEASURED, *args, directory]
    env = dict(os.environ, BENCH_OVERHEAD_MARKS=marks_path)
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        cmd[3:3] = ["-p", PLUGIN]
    with open(os.path.join(directory, "out.txt"), "w+") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                cwd=directory, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            out.seek(0)
            sys.exit(f"bench_overhead: {' '.join(cmd)} failed "
                     f"(exit {proc.returncode}):\n{out.read()[-3000:]}")
    with open(marks_path) as f:
        marks = json.load(f)
    return usage.ru_utime + usage.ru_stime, marks


def once_count(report_path):
    """(tests, tests that ran once, the CPU seconds the report's summary
    says leakcheck added, or None when it says none, the CPU seconds
    its records' hunt_costs sum to: what it counted inside the tests'
    protocols, but for the report's journal, and the median test's) of a
    --leaks report."""
    with open(report_path) as f:
        report = json.load(f)
    tests = report["tests"]
    verdicts = sorted({t["verdict"] for t in tests})
    if verdicts != ["clean"]:
        sys.exit(f"bench_overhead: --leaks verdicts {verdicts}, "
                 f"expected only clean")
    costs = report["summary"].get("costs")
    hunts = [sum((t.get("hunt_costs") or {}).values()) for t in tests]
    return (len(tests), sum(1 for t in tests if t["test_runs"] == 1),
            sum(costs.values()) if costs else None, sum(hunts),
            statistics.median(hunts) if hunts else 0.0)


def one_time(marks, cpu):
    """(first test's CPU ms, last test's CPU ms, session's CPU seconds,
    the CPU seconds of all the tests' protocols, of the process before the
    session began, and after it finished, the median test's protocol's
    CPU ms, the first and the last left out) from a run's marks and the
    process's CPU seconds `cpu`."""
    each = marks["each"][1:-1] or marks["each"]
    return ((marks["first_end"] - marks["first_start"]) * 1000,
            (marks["last_end"] - marks["last_start"]) * 1000,
            marks["session_end"] - marks["session_start"],
            marks["protocols"],
            marks["session_start"],
            cpu - marks["session_end"],
            statistics.median(each) * 1000)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=1000)
    p.add_argument("--heap", type=int, default=0, metavar="OBJECTS",
                   help="GC-tracked containers a session fixture holds")
    p.add_argument("--kind", choices=("fast", "unittest"), default="fast",
                   help="bench_plugin.py's kind of tests (default fast)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    p.add_argument("--against", metavar="PATH",
                   help="another interpreter whose --leaks runs join "
                        "each round")
    p.add_argument("--all-plugins", action="store_true",
                   help="load every installed pytest plugin, not only "
                        "leakcheck's")
    p.add_argument("--leaks-args", default="", metavar="ARGS",
                   help="pytest options added to every --leaks run "
                        "(split like a shell's words)")
    args = p.parse_args(argv)
    extra = shlex.split(args.leaks_args)
    with tempfile.TemporaryDirectory(prefix="leakcheck-overhead-") as d:
        tests = generate(d, args.tests, args.kind)
        write_conftest(d, args.heap)
        marks_path = os.path.join(d, "marks.json")
        report = os.path.join(d, "leaks-report.json")
        # Both --leaks configurations write a report: its journal is part
        # of what --leaks costs, and the verdicts are checked.
        against = os.path.join(d, "against-report.json")
        configs = {"plain": (args.python, []),
                   "--leaks": (args.python, ["--leaks",
                                             f"--leaks-report={report}",
                                             *extra])}
        if args.against:
            configs["against"] = (args.against, [
                "--leaks", f"--leaks-report={against}", *extra])
        cpu = {name: [] for name in configs}
        marks = {name: [] for name in configs}
        # What each round's report's summary says leakcheck added.
        said_by_round = {name: [] for name in configs if name != "plain"}
        reports = {"--leaks": report, "against": against}
        for _ in range(args.rounds):
            for name, (python, extra) in configs.items():
                seconds, m = run(d, python, extra, marks_path,
                                 args.all_plugins)
                cpu[name].append(seconds)
                marks[name].append(one_time(m, seconds))
                if name in said_by_round:
                    said_by_round[name].append(once_count(reports[name])[2])
        n, once, said, hunted, median_hunt = once_count(report)
        if args.against:
            (n_against, once_against, said_against, _,
             median_against) = once_count(against)
        version = subprocess.run(
            [args.python, "-c", "import sys; print(sys.version.split()[0])"],
            capture_output=True, text=True).stdout.strip()
        print(f"python {version} ({args.python}); {tests} {args.kind} "
              f"tests, heap "
              f"{args.heap} containers, {args.rounds} rounds interleaved, "
              f"median CPU time of the pytest process"
              + (f"; --leaks runs with {shlex.join(extra)}" if extra
                 else ""))
        print(f"{'':>9} {'cpu s':>8} {'first ms':>9} {'last ms':>8} "
              f"{'session s':>9} {'tests s':>8} {'before s':>8} "
              f"{'after s':>8}")
        for name in configs:
            first, last, session, protocols, before, after, _ = (
                statistics.median(col) for col in zip(*marks[name]))
            print(f"{name:>9} {statistics.median(cpu[name]):8.3f} "
                  f"{first:9.1f} {last:8.2f} {session:9.3f} "
                  f"{protocols:8.3f} {before:8.3f} {after:8.3f}")
        if args.against:
            print(f"against: {args.against}")
        print("rounds, cpu s: " + "; ".join(
            f"{name} {', '.join('%.3f' % x for x in cpu[name])}"
            for name in configs))
        for name, said_each in said_by_round.items():
            print(f"rounds, {name}'s summary says s: " + ", ".join(
                "-" if x is None else "%.3f" % x for x in said_each))
        # How much the same work moved from round to round: the noise every
        # figure below carries.
        print(f"plain rounds moved by "
              f"{(max(cpu['plain']) / min(cpu['plain']) - 1) * 100:.0f}% "
              f"(slowest against fastest)")
        for name in configs:
            if name == "plain":
                continue
            per_test = (statistics.median(cpu[name]) -
                        statistics.median(cpu["plain"])) / tests * 1000
            session = (statistics.median(m[2] for m in marks[name]) -
                       statistics.median(m[2] for m in marks["plain"]))
            # The same from each round's own plain run: load that moves a
            # round moves both of its runs.
            rounds = [leaks - plain
                      for leaks, plain in zip(cpu[name], cpu["plain"])]
            paired = statistics.median(rounds)
            # The tests' protocols less the first and the last test (what
            # a session pays once: its fixtures' set-up and teardown, the
            # first collection of the heap), paired by round.
            between = statistics.median(
                ((ml[3] - (ml[0] + ml[1]) / 1000) -
                 (mp[3] - (mp[0] + mp[1]) / 1000)) / (tests - 2) * 1000
                for ml, mp in zip(marks[name], marks["plain"]))
            # What the process spends after the session finished (the
            # terminal summary, pytest_unconfigure, the interpreter's
            # finalization), paired by round: past the report, where no
            # clock of leakcheck's reads it.
            after = statistics.median(
                (ml[5] - mp[5]) * 1000 / tests
                for ml, mp in zip(marks[name], marks["plain"]))
            print(f"overhead per test, {name}: {per_test:.3f} ms CPU "
                  f"(session CPU only: {session / tests * 1000:.3f} ms; "
                  f"paired by round: {paired / tests * 1000:.3f} ms, "
                  f"its rounds {min(rounds) / tests * 1000:.3f} to "
                  f"{max(rounds) / tests * 1000:.3f}; "
                  f"tests between the first and the last, paired: "
                  f"{between:.3f} ms; after the session, paired: "
                  f"{after:.3f} ms)")
            # Other work on a shared machine only ever adds CPU time to a
            # round (cache and memory contention, a slower clock): the
            # fastest round of each configuration is the one it moved
            # least, as timeit takes the best of its repeats.
            fastest = (min(cpu[name]) - min(cpu["plain"])) / tests * 1000
            fastest_between = (
                min(ml[3] - (ml[0] + ml[1]) / 1000 for ml in marks[name]) -
                min(mp[3] - (mp[0] + mp[1]) / 1000
                    for mp in marks["plain"])) / (tests - 2) * 1000
            print(f"  fastest round of each: {fastest:.3f} ms a test; "
                  f"tests between the first and the last: "
                  f"{fastest_between:.3f} ms")
            print(f"  its summaries against the round's own difference: "
                  f"{_accounted(said_by_round[name], rounds)}")
            # The median test, each round's against its own plain run's: a
            # burst of other work on the machine moves some tests, not the
            # median one.
            medians = [ml[6] - mp[6] for ml, mp in zip(marks[name],
                                                       marks["plain"])]
            print(f"  the median test's protocol: "
                  f"{statistics.median(m[6] for m in marks[name]):.3f} ms "
                  f"against plain's "
                  f"{statistics.median(m[6] for m in marks['plain']):.3f}: "
                  f"{statistics.median(medians):.3f} ms more, paired by "
                  f"round (its rounds {min(medians):.3f} to "
                  f"{max(medians):.3f})")
        print(f"--leaks report: {n} tests, all clean, {once} ran once"
              + _said(said, tests))
        # Inside the tests' protocols: what the hunts' own clocks counted,
        # against what the protocols took more than plain ones (the last
        # round's report beside the median over the rounds).
        inside = statistics.median(
            ml[3] - mp[3] for ml, mp in zip(marks["--leaks"],
                                            marks["plain"]))
        print(f"inside the tests' protocols, paired: "
              f"{inside / tests * 1000:.3f} ms a test more; the records' "
              f"hunt_costs say "
              f"{hunted / tests * 1000:.3f} ms (the median test's: "
              f"{median_hunt * 1000:.3f} ms)")
        if args.against:
            print(f"against's report: {n_against} tests, all clean, "
                  f"{once_against} ran once" + _said(said_against, tests)
                  + f"; the median test's hunt_costs: "
                  f"{median_against * 1000:.3f} ms")


def _accounted(said, differences):
    """What each round's report's summary says leakcheck added, as a share
    of what that round's --leaks run took more than its plain run (the
    same load moves both): the median over the rounds and their range."""
    shares = [s / d * 100 for s, d in zip(said, differences)
              if s is not None and d > 0]
    if not shares:
        return "no summary says what it added"
    return (f"{statistics.median(shares):.0f}% (its rounds "
            f"{min(shares):.0f}% to {max(shares):.0f}%)")


def _said(seconds, tests):
    """What the last report's summary says leakcheck added, to set beside
    the measured overhead."""
    if seconds is None:
        return ""
    return (f"; its summary says leakcheck added {seconds:.3f} s CPU "
            f"({seconds / tests * 1000:.3f} ms per test)")


if __name__ == "__main__":
    main()
