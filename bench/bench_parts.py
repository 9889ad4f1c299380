"""Where the time of a clean test's hunt goes, part by part: bench_plugin.py's
fast clean tests run with --leaks (and a report, as bench_overhead.py
runs them), with a conftest.py that times the plugin's and the engine's
parts around every test with time.perf_counter(), and once plain, where
it times pytest's own protocol of each test.

    python bench/bench_parts.py [--tests 1000] [--python PATH]

Printed, in microseconds a test (the session's first 20 tests left out:
they pay for first uses), for --leaks:

    the hunt                 plugin.py's pytest_runtest_protocol, whole
      snapshots              Series.next() and rebase(): the engine's
                             snapshots, of which
        settling             leakcheck's settle() (before the collection)
        collections          their collections (timed by a gc
                             callback)
        the rest             the type cache's trim, the readings, the
                             plugin's threads check
      the reported run       pytest's setup, call and teardown phases
                             and what the runner notes after them
        its phases           the phases alone
      the test's setup       the settings, the Series, the runner (what
                             pytest keeps of the run made before the
                             first snapshot, stand-in reports among it)
      its verdict            the record and the teardown for the next
      the rest of the hunt   progress lines, the clock, the freezer,
                             logging the reports
    the journal              the report's journal lines (a part of the
                             hunt above)

and pytest's protocol of a plain run, whose difference with the hunt is
what --leaks adds around a test; bench_overhead.py measures that same
difference in CPU time, without timers in the way.  Last, the same work
of pytest's timed in both: the reported run's phases against plain
pytest's (its protocol less the logging of its reports), and pytest's
logging of the test less the report's journal (under --leaks it comes
after the snapshots and the verdict) against plain pytest's: where
pytest's own work runs slower beside leakcheck's, which the summary
cannot count.

Wall-clock times, each with the cost of reading the clock around it
(about 0.1 us): a loaded machine moves them.  Figures on parts that are
much smaller than their sum's noise mean little; run it a few times.
"""

import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_overhead import pytest_output  # noqa: E402
from bench_plugin import generate  # noqa: E402

SKIPPED = 20        # the session's first tests: first uses

CONFTEST = '''\
import atexit
import gc
import time

_now = time.perf_counter
_spent = {}
_tests = [0]
SKIPPED = %d


def _add(part, seconds):
    if _tests[0] > SKIPPED:
        _spent[part] = _spent.get(part, 0.0) + seconds


def _timed(owner, name, part):
    func = getattr(owner, name)

    def timed(*args, **kwargs):
        began = _now()
        try:
            return func(*args, **kwargs)
        finally:
            _add(part, _now() - began)
    setattr(owner, name, timed)


_snapshotting = [False]
_settling = []


def _snapshot(owner, name):
    func = getattr(owner, name)

    def timed(*args, **kwargs):
        began = _now()
        _snapshotting[0] = True
        try:
            return func(*args, **kwargs)
        finally:
            _snapshotting[0] = False
            _add("snapshots", _now() - began)
    setattr(owner, name, timed)


def _collection_timer():
    began = [0.0]

    def timer(phase, info):
        if not _snapshotting[0]:
            return
        if phase == "start":
            began[0] = _now()
        else:
            _add("collections", _now() - began[0])
    return timer


_LOGGING = ("pytest_runtest_logstart", "pytest_runtest_logreport",
            "pytest_runtest_logfinish")


def _time_logging():
    """pytest's logging of a test: its logstart, logreport and logfinish
    hooks, every implementation."""
    import pluggy
    call = pluggy.HookCaller.__call__

    def timed(self, *args, **kwargs):
        if self.name not in _LOGGING:
            return call(self, *args, **kwargs)
        began = _now()
        try:
            return call(self, *args, **kwargs)
        finally:
            _add(self.name, _now() - began)
    pluggy.HookCaller.__call__ = timed


def pytest_configure(config):
    _time_logging()
    if not config.getoption("leaks", False):
        import _pytest.runner
        _timed(_pytest.runner, "runtestprotocol", "pytest's protocol")
        return
    import leakcheck
    from leakcheck import _core, _settle
    from leakcheck.report import journal
    from pytest_leakcheck import hunt, runner
    _timed(hunt, "protocol", "the hunt")
    _snapshot(leakcheck.Series, "next")
    _snapshot(leakcheck.Series, "rebase")
    _timed(runner.ItemRunner, "run_reported", "the reported run")
    _protocol = runner.ItemRunner._protocol

    def phases(self, interact, extra):
        began = _now()
        try:
            return _protocol(self, interact, extra)
        finally:
            if interact:
                _add("its phases", _now() - began)
    runner.ItemRunner._protocol = phases
    _timed(hunt, "_start", "the test's setup")
    _timed(hunt, "_judge", "its verdict")
    _timed(hunt, "_finish", "its verdict")
    _timed(journal.Journal, "write", "the journal")
    settle = _settle.settle

    def settling():
        began = _now()
        try:
            settle()
        finally:
            _add("settling", _now() - began)
    # The engine holds the settle callable weakly: this module keeps it.
    _settling[:] = [settling]
    _core.set_settle(settling)
    gc.callbacks.append(_collection_timer())


def pytest_runtest_logstart(nodeid, location):
    _tests[0] += 1


def _show():
    counted = max(_tests[0] - SKIPPED, 1)
    for part, seconds in _spent.items():
        print(f"PART {part}={seconds / counted * 1e6:.2f}")


atexit.register(_show)
''' % SKIPPED
PART = re.compile(r"^PART (.+)=([0-9.]+)$", re.M)
LOGGING = ("pytest_runtest_logstart", "pytest_runtest_logreport",
           "pytest_runtest_logfinish")

ORDER = [("the hunt", 0), ("snapshots", 1), ("settling", 2),
         ("collections", 2), ("the rest", 2), ("the reported run", 1),
         ("its phases", 2),
         ("pytest's logging", 1), ("the test's setup", 1),
         ("its verdict", 1), ("the rest of the hunt", 1),
         ("the journal", 0)]


def parts(directory, python, args):
    found = dict((k, float(v)) for k, v in PART.findall(
        pytest_output("bench_parts", directory, python, args)))
    if not found:
        sys.exit("bench_parts: the run printed no timing")
    return found


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=1000)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="leakcheck-parts-") as d:
        tests = generate(d, args.tests, conftest=CONFTEST)
        report = os.path.join(d, "leaks-report.json")
        leaks = parts(d, args.python, ["--leaks",
                                       f"--leaks-report={report}"])
        plain = parts(d, args.python, [])
    # pytest's logstart is called from the hunt's setup.
    leaks["the test's setup"] = max(
        0.0, leaks.get("the test's setup", 0.0)
        - leaks.get("pytest_runtest_logstart", 0.0))
    # pytest's runtestprotocol logs each report right after its phase.
    plain_phases = (plain.get("pytest's protocol", 0.0)
                    - plain.get("pytest_runtest_logreport", 0.0))
    for found in (leaks, plain):
        found["pytest's logging"] = sum(found.pop(name, 0.0)
                                        for name in LOGGING)
    snapshots = leaks.get("snapshots", 0.0)
    leaks["the rest"] = max(0.0, snapshots - leaks.get("settling", 0.0)
                            - leaks.get("collections", 0.0))
    hunt = leaks.get("the hunt", 0.0)
    leaks["the rest of the hunt"] = max(0.0, hunt - sum(
        leaks.get(name, 0.0) for name, depth in ORDER if depth == 1
        and name != "the rest of the hunt"))
    print(f"{tests} tests (the first {SKIPPED} left out), wall-clock us a "
          f"test")
    print(f"--leaks")
    for name, depth in ORDER:
        print(f"  {'  ' * depth}{name:<{24 - 2 * depth}} "
              f"{leaks.get(name, 0.0):8.1f}")
    protocol = plain.get("pytest's protocol", 0.0)
    logging = plain["pytest's logging"]
    print(f"plain\n  pytest's protocol        {protocol:8.1f}\n"
          f"    pytest's logging       {logging:8.1f}")
    print(f"the hunt less pytest's protocol: {hunt - protocol:.1f} us a test")
    # The same work of pytest's in both: where it runs slower beside
    # leakcheck's, which no clock of the plugin can tell from pytest's own.
    own_logging = leaks["pytest's logging"] - leaks.get("the journal", 0.0)
    print(f"pytest's own work, --leaks against plain: the reported run's "
          f"phases {leaks.get('its phases', 0.0):.1f} us against "
          f"{plain_phases:.1f}; its logging, less the journal, "
          f"{own_logging:.1f} us against {logging:.1f}")


if __name__ == "__main__":
    main()
