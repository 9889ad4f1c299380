"""The leakcheck pytest plugin, registered through the pytest11 entry point
(no -p needed).

    @pytest.mark.noleak(repeat=4, warmup=1, probes=None, tolerance=None)
    @pytest.mark.leaky(reason=None)      # leaks on purpose: never hunted
    pytest --leaks [--leaks-repeat N] [--leaks-warmup N] [--leaks-probes P]
                   [--leaks-report PATH] [--leaks-baseline PATH]
                   [--leaks-dump DIR]

A checked test runs its whole protocol once, as pytest would: that is the
reported run, and what it reports (a failure, an error, a skip, an xfail)
stands; only a test that passed is hunted.  The series then runs it again
(function-scoped fixtures set up and torn down each time, wider ones kept)
until the verdict is in: after the warm-up runs, a probe leaks when it grew
in every measured run; a clean test stops after its first measured run.  A
leak fails the test with the series report and a diagnosis of what grew.

Uses only names in leakcheck.__all__.  All session state lives in
config.stash[STATE].
"""

import atexit
import gc
import os
import signal
import sys
import threading
import time
import tracemalloc

import _pytest
import pluggy
import pytest

import leakcheck

from . import hooks
from . import neighbours
from . import perrun
from . import progress as progressmod
from . import report as reportmod
from . import settings as settingsmod
from .runner import (ItemRunner, fresh_log_buffers, note_shared_fixture,
                     outcome_of)
from .settings import BadValue

# Messages (the tests format these instead of copying them).
MSG_HEADER = ("leakcheck: hunting in {scope}; warmup {warmup}, repeat "
              "{repeat}; probes {probes}")
MSG_UNAVAILABLE = "leakcheck: not available here: {probes}"
MSG_FAULTHANDLER = ("leakcheck: faulthandler_timeout ({timeout}s) watches "
                    "all the runs of a hunted test together, not each run "
                    "(pytest offers no way to re-arm it): a long hunt may "
                    "trip it")
# A leak in one line (the short test summary's): the most telling probe
# and its growth per measured run, then the other probes that grew.
MSG_LEAK = "{probe} {growth} per run{also}"
MSG_LEAK_ALSO = "; also {probes}"
MSG_RERUN_FAILED = ("leakcheck: the test passed, then {outcome} when run "
                    "again ({when}); a checked test must pass every run")
MSG_FLAKY_FIRST = "the test {outcome}, and pytest-rerunfailures reruns it"
MSG_FLAKY_LATER = ("the test passed, then {outcome} when run again "
                   "({when}), and pytest-rerunfailures reruns it")
MSG_RERUN_TIMEOUT = ("leakcheck: run {run} of the test took longer than "
                     "its time limit ({limit}s, pytest-timeout), which "
                     "applies to each run on its own")
MSG_LIMIT_SHARED = ("leakcheck: pytest-timeout's limit ran out by run "
                    "{run} of the test; it could not be applied to each "
                    "run here, so it covered all of them: the test is not "
                    "to blame (raise the limit, or mark the test leaky)")
MSG_VERBOSE_RUNS = "{word} ({runs} runs)"
MSG_VERBOSE_RUNS_TIME = "{word} ({runs} runs, +{seconds:.2f}s)"
MSG_HUNT_TIME = ("leakcheck: hunting added {seconds:.2f}s over {tests} "
                 "test{s} ({runs} runs beyond the reported ones); slowest:")
MSG_HUNT_LINE = "{seconds:.2f}s {runs:>3} runs  {id}"
JUNIT_RUNS = "leakcheck_runs"           # JUnit properties of a hunted test
JUNIT_SECONDS = "leakcheck_seconds"
SLOWEST_HUNTS = 3       # lines of the summary's slowest hunts (--durations
                        # sets another count)
MSG_ENGINE_ERROR = "leakcheck: could not measure the test: {error}"
MSG_SUMMARY = ("leakcheck: {tests} test{s} checked: {leak} leak, {clean} "
               "clean, {error} error, {skipped} skipped{known}")
MSG_REPORT_WRITTEN = "leakcheck: report written to {path}{partial}"
MSG_CRASHED = "leakcheck: the pytest-xdist worker running the test crashed"
MSG_GC_FROZEN = ("leakcheck: code in this session froze objects (gc.freeze), "
                 "so leakcheck did not freeze the heap: every snapshot "
                 "collected all of it (slower, same verdicts)")
MSG_REPEAT_ONE = ("leakcheck: repeat 1 ({where}) judges each test on a "
                  "single delta, where noise alone (another thread "
                  "allocating, a cache filling once) fails clean tests; "
                  "repeat 2 or more judges on growth in every run")
MSG_NOT_COMPARED = "leakcheck: {id}: {probe} not compared: {why}"
MSG_RIVAL = ("leakcheck: pytest-leaks is installed too and also defines "
             "--leaks; run pytest with -p no:leaks to hunt with leakcheck "
             "(-p no:leakcheck for pytest-leaks), or uninstall one of them")
RIVAL = "leaks"           # pytest-leaks' plugin name (its pytest11 entry)
MSG_DIAGNOSIS_OFF = ("diagnosis off (--leaks-diagnose=off): the test was "
                     "not re-run to find what it leaked")
MSG_DIAGNOSIS_BUDGET = (
    "the diagnosis stopped at its budget of {budget:.1f} s ({factor} times "
    "the test's run time of {run_time:.2f} s); what it found so far is "
    "above. --leaks-diagnose=cheap traces less, =off not at all")
MSG_DUMP = ("leakcheck: what the runs left behind: {path} (python -m "
            "leakcheck show FILE)")
MSG_DUMP_FAILED = "leakcheck: cannot write the dump into {directory}: {error}"
SECTION_KNOWN = "leakcheck: known leak"

# The probes a person reads first: a descriptor, a thread, an
# uncollectable cycle or a counted object names what to look for; then
# memory, its size before its count of blocks.
TELLING = ("fds", "threads", "garbage", "valgrind", "objects",
           "native_bytes", "py_bytes", "py_allocs", "blocks", "refs")

DIAGNOSIS_RUNS = 2       # runs diagnose() compares
DIAGNOSIS_FRAMES = 10    # tracemalloc frames kept per allocation
STATUS_LEAKED = ("failed", "L", ("LEAKED", {"red": True, "bold": True}))


class _GcFreezer:
    """Keeps what existed before a checked test out of the collections its
    snapshots make, so that settling costs what the test created, not what
    the process holds: gc.collect() then gc.freeze() before a checked test
    once YOUNG_LIMIT objects made since the last freeze are alive (before
    the first checked test, and then every dozen tests or so).  Undone
    (gc.unfreeze()) before a test that is not checked and at the end of
    the session.

    gc.unfreeze() releases everything frozen, also what was frozen before
    the session began (CPython 3.12 starts with a few hundred immortal
    tuples there, which no collection can free).  What code running in the
    session froze itself is not ours to release.  Frozen before our first
    freeze, it shows in gc.get_freeze_count().  Frozen while ours holds (a
    session fixture set up by a checked test, a hook), the count cannot
    tell, since frozen objects still die when their last reference goes: so
    while ours holds, gc.freeze is wrapped to see such a call.  Either way
    the freezer stays out of the way for the rest of the session and leaves
    frozen what is frozen: that is what the other code asked for, its
    gc.freeze() froze everything alive, ours included."""

    def __init__(self, baseline):
        self.baseline = baseline
        self.ours = False
        self.theirs = False         # gc.freeze() called while ours held
        self.refused = False

    def _their_freeze(self):
        self.theirs = True
        _gc_freeze()

    def _release(self):
        """Stops watching; True when someone else froze meanwhile."""
        self.ours = False
        gc.freeze = _gc_freeze
        if self.theirs:
            self.refused = True
        return self.theirs

    def begin(self, config=None):
        if self.refused:
            return
        if not self.ours:
            if gc.get_freeze_count() > self.baseline:
                self.refused = True
                return
            self.ours = True
            gc.freeze = self._their_freeze
        elif self.theirs:
            self._release()
            return
        elif len(gc.get_objects()) < YOUNG_LIMIT:
            return
        gc.collect()
        _gc_freeze()
        fresh_log_buffers(config)

    def end(self):
        if self.ours and not self._release():
            gc.unfreeze()
            self.baseline = gc.get_freeze_count()


_gc_freeze = gc.freeze


# The freezer freezes again only once this many objects are not frozen
# (what earlier tests left), rather than before every test.  Each snapshot
# collects them (a gc.collect() of 500 unfrozen objects took 16 us, of
# 2,000 56 us, CPython 3.11 on a 2-core machine); freezing before every
# test would cost the reading of the reported run instead: a frozen
# object's death is not counted, so what pytest replaces in each run (its
# log capture's buffers) would read as new objects in every reported run,
# never as nothing.
YOUNG_LIMIT = 300


class State:
    """Everything the plugin keeps for one session."""

    def __init__(self, config, session_settings, baseline):
        self.config = config
        self.settings = session_settings
        self.baseline = baseline          # {test id: frozenset of probes}
        workerinput = getattr(config, "workerinput", None)
        self.worker_id = workerinput.get("workerid") if workerinput else None
        self.report = None                # reportmod.Report, in the writer
        self.records = {}                 # test id -> record, for the summary
        self.freezer = _GcFreezer(gc.get_freeze_count())
        self.sigterm_handler = None       # ours, while installed
        self.recovered = None             # what to say of an earlier run
        self.interrupted = False          # pytest_keyboard_interrupt said why

    def add(self, rec):
        self.records[rec["id"]] = rec
        if self.report is not None:
            self.report.add(rec)

    def mark_partial(self, reason):
        if self.report is not None:
            self.report.mark_partial(reason)

    def wants(self, item):
        if self.settings.hunt_none:
            return False
        return (self.settings.hunt_all
                or item.get_closest_marker(settingsmod.MARKER) is not None)


STATE = pytest.StashKey[State]()
UNSUPPORTED = pytest.StashKey[str]()      # why nothing is judged at all
BAD_SETTINGS = pytest.StashKey[str]()     # on an item: why it cannot run
OPTED_OUT = pytest.StashKey[str]()        # on an item: why it is not hunted


# ---- registration -------------------------------------------------------

def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser, pluginmanager):
    if _rival_loads(pluginmanager):
        raise pytest.UsageError(MSG_RIVAL)
    settingsmod.add_options(parser)


def _rival_loads(pluginmanager):
    """Whether pytest-leaks, which defines --leaks too, is or will be
    loaded in this session: whichever registers its option second would
    die with an argparse traceback."""
    if pluginmanager.get_plugin(RIVAL) is not None:
        return True
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") or \
            pluginmanager.is_blocked(RIVAL):
        return False
    try:
        from importlib.metadata import entry_points
        eps = entry_points()
        group = (eps.select(group="pytest11") if hasattr(eps, "select")
                 else eps.get("pytest11", ()))
        return any(ep.name == RIVAL and ep.value.startswith("pytest_leaks")
                   for ep in group)
    except Exception:
        return False


def pytest_configure(config):
    config.addinivalue_line("markers", settingsmod.MARKER_LINE)
    config.addinivalue_line("markers", settingsmod.OPT_OUT_LINE)
    config.addinivalue_line("markers", settingsmod.NOT_REPEATABLE_LINE)
    unsupported = leakcheck.unsupported()
    if unsupported is not None:
        # No state: every hook then leaves the tests to pytest alone.
        config.stash[UNSUPPORTED] = unsupported
        return
    try:
        session_settings = settingsmod.from_config(config)
    except BadValue as e:
        raise pytest.UsageError(str(e)) from None
    baseline = {}
    if session_settings.baseline_path:
        try:
            baseline = reportmod.load_baseline(session_settings.baseline_path)
        except ValueError as e:
            raise pytest.UsageError(str(BadValue(
                session_settings.wheres["baseline"],
                settingsmod.PROBLEM_BASELINE.format(
                    value=session_settings.baseline_path, reason=e)))) \
                from None
    if session_settings.dump_dir:
        try:
            settingsmod.check_dump_dir(session_settings.dump_dir,
                                       session_settings.wheres["dump"])
        except BadValue as e:
            raise pytest.UsageError(str(e)) from None
    state = State(config, session_settings, baseline)
    config.stash[STATE] = state
    if session_settings.defaults.repeat == 1 and state.worker_id is None:
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            MSG_REPEAT_ONE.format(
                where=session_settings.sources.get("repeat"))), stacklevel=2)
    if session_settings.report_path and state.worker_id is None:
        state.report = reportmod.Report(
            session_settings.report_path,
            settings=_settings_dict(session_settings),
            probes=_probes_dict(),
            environment=reportmod.environment(config, _version()))
        try:
            state.recovered = state.report.open()
        except reportmod.journal.InUse as e:
            # Refused before any test runs; the other session's report and
            # journal are left alone (no report is written at unconfigure).
            state.report = None
            raise pytest.UsageError(str(BadValue(
                session_settings.wheres["report"],
                settingsmod.PROBLEM_REPORT_IN_USE.format(
                    value=session_settings.report_path,
                    reason=e.strerror)))) from None
        except OSError as e:
            state.report = None
            raise pytest.UsageError(str(BadValue(
                session_settings.wheres["report"],
                settingsmod.PROBLEM_REPORT.format(
                    value=session_settings.report_path,
                    reason=e.strerror or e)))) from None
        atexit.register(_write_at_exit, state)
        _catch_sigterm(state)
    config.pluginmanager.register(_SessionHooks(state), "leakcheck-session")


def pytest_unconfigure(config):
    state = config.stash.get(STATE, None)
    if state is None:
        return
    state.freezer.end()
    hooks = config.pluginmanager.get_plugin("leakcheck-session")
    if hooks is not None:
        config.pluginmanager.unregister(hooks)
    if state.report is not None:
        atexit.unregister(_write_at_exit)
        _release_sigterm(state)
        if not state.report.written:
            state.report.mark_partial("pytest ended before the session "
                                      "finished")
            _write(state)


def _version():
    try:
        from importlib.metadata import version
        return version("leakcheck")
    except Exception:
        return None


def _settings_dict(s):
    d = s.defaults.to_dict()
    d.pop("tolerance")
    hunt = "none" if s.hunt_none else "all" if s.hunt_all else "marked"
    return {"hunt": hunt, **d, "baseline": s.baseline_path,
            "diagnose": s.diagnose}


def _probes_dict():
    return {p.name: {"unit": p.unit, "available": bool(p.available),
                     "reason": p.reason, "threshold": p.threshold}
            for p in leakcheck.probes()}


def pytest_report_header(config):
    """The settings, when the session hunts in every test or writes a
    report; quiet otherwise (the plugin loads in every pytest session),
    but for a time limit that cannot apply to each run."""
    unsupported = config.stash.get(UNSUPPORTED, None)
    if unsupported is not None:
        return [unsupported]
    state = config.stash.get(STATE, None)
    if state is None or state.settings.hunt_none:
        return None
    s = state.settings
    lines = [state.recovered] if state.recovered else []
    if s.hunt_all or s.report_path:
        lines.append(MSG_HEADER.format(
            scope="every test (--leaks)" if s.hunt_all
            else "tests marked noleak",
            warmup=s.defaults.warmup, repeat=s.defaults.repeat,
            probes=", ".join(s.defaults.probes)))
        missing = [f"{p.name} ({p.reason})" for p in leakcheck.probes()
                   if p.name in s.defaults.probes and not p.available]
        if missing:
            lines.append(MSG_UNAVAILABLE.format(probes="; ".join(missing)))
    watchdog = _faulthandler_timeout(config)
    if watchdog:
        lines.append(MSG_FAULTHANDLER.format(timeout=watchdog))
    return lines or None


def _faulthandler_timeout(config):
    """pytest's faulthandler_timeout, when set: a watchdog armed once
    around a test's whole protocol, so around all the runs of a hunt."""
    try:
        return float(config.getini("faulthandler_timeout") or 0) or None
    except (ValueError, TypeError):
        return None


# ---- the fixture ----------------------------------------------------------

class LeakcheckFixture:
    """What the `leakcheck` fixture gives a test: leakcheck's API with the
    settings that apply to this test (its noleak marker over the command
    line and ini file)."""

    def __init__(self, settings, name):
        self.settings = settings
        self.name = name

    def series(self, **overrides):
        """A leakcheck.Series with this test's settings; keyword arguments
        replace single settings."""
        kw = dict(warmup=self.settings.warmup, repeat=self.settings.repeat,
                  probes=list(self.settings.probes),
                  tolerance=self.settings.tolerance, name=self.name)
        kw.update(overrides)
        return leakcheck.Series(**kw)

    def check(self, func, *args, **kwargs):
        """leakcheck.repeat(func, *args, **kwargs) with this test's
        settings: raises leakcheck.LeakError, with the report and a
        diagnosis, when func leaks; returns the finished Series."""
        __tracebackhide__ = True
        return leakcheck.repeat(
            func, *args, warmup=self.settings.warmup,
            repeat=self.settings.repeat, probes=list(self.settings.probes),
            tolerance=self.settings.tolerance, **kwargs)

    def snapshot(self):
        """A snapshot of this test's probes."""
        return leakcheck.snapshot(list(self.settings.probes))

    def scope(self, **kwargs):
        """leakcheck.scope() over this test's probes and tolerance."""
        kwargs.setdefault("probes", list(self.settings.probes))
        if self.settings.tolerance is not None:
            kwargs.setdefault("tolerance", self.settings.tolerance)
        return leakcheck.scope(**kwargs)


@pytest.fixture(name="leakcheck")
def leakcheck_fixture(request):
    """leakcheck's API with this test's settings: .check(func, *args)
    raises LeakError when func leaks, .series(), .scope(), .snapshot(),
    .settings."""
    unsupported = request.config.stash.get(UNSUPPORTED, None)
    if unsupported is not None:
        pytest.skip(unsupported)
    state = request.config.stash[STATE]
    try:
        settings = settingsmod.for_item(request.node,
                                        state.settings.defaults)
    except BadValue as e:
        pytest.fail(str(e), pytrace=False)
    return LeakcheckFixture(settings, request.node.nodeid)


# ---- the protocol ---------------------------------------------------------

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    state = item.config.stash.get(STATE, None)
    if state is None or not state.wants(item) or \
            item.config.getoption("setuponly", False) or \
            item.config.getoption("setupplan", False):
        if state is not None:
            state.freezer.end()
        return None
    opted_out = settingsmod.opt_out_reason(item)
    if opted_out is not None:
        # pytest runs it; the record rides on its call report.
        state.freezer.end()
        item.stash[OPTED_OUT] = opted_out
        return None
    reports = _hunt(item, nextitem, state)
    if reports is None:
        state.freezer.end()
        return None
    ihook = item.ihook
    for rep in reports:
        ihook.pytest_runtest_logreport(report=rep)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    bad = item.stash.get(BAD_SETTINGS, None)
    if bad is not None and report.when == "setup":
        # It ran, and errors: the report says why, as for any test.
        state = item.config.stash[STATE]
        report.leakcheck = _record(item, state, state.settings.defaults,
                                   "error", outcome_of([report]), reason=bad)
        return
    reason = item.stash.get(OPTED_OUT, None)
    if reason is not None and (report.when == "call" or (
            report.when == "setup" and not report.passed)):
        state = item.config.stash[STATE]
        settings = state.settings.defaults
        report.leakcheck = _record(
            item, state, settings, "skipped", outcome_of([report]),
            reason=f"not checked: {reason}")


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef, request):
    if STATE in request.config.stash:
        note_shared_fixture(request.session, fixturedef)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    """pytest-timeout arms the test's timer: its settings are kept, so that
    each run of a hunt gets the same limit (see perrun)."""
    perrun.remember_timeout(item, settings)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    perrun.arm(item)
    message = item.stash.get(BAD_SETTINGS, None)
    if message is not None:
        pytest.fail(message, pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    perrun.disarm(item)


# Folders of the harness around a test: what pytest, pluggy and this plugin
# allocate anew each run (log streams, stash entries) is not the test's leak.
_HARNESS = tuple(os.path.dirname(module.__file__)
                 for module in (_pytest, pluggy, sys.modules[__name__]))


class _OutOfBudget(Exception):
    """Raised by a diagnosis re-run that the budget has no time left for."""


def _diagnose(item, runner, test_runs, leaking, mode, run_time,
              keep_objects=False, capture_dir=None, progress=None):
    """leakcheck.diagnose() over more runs of the test, each followed by
    the settle hook, as in the series.  Tracing starts one run earlier than
    the diagnosis compares (diagnose() does that itself, and stops tracing
    before its runs under memray): pytest replaces some of its own objects
    every run (a log stream per phase, a stash entry), and a replacement
    made before tracing began would read as memory the test kept.

    The re-runs get a budget of DIAGNOSE_BUDGET times the test's own run
    time (`run_time`, seconds, at least DIAGNOSE_FLOOR in all): a re-run
    that would start past it (tracing makes a run ~10 times slower) is not
    made, and the diagnosis says so.  `mode` "cheap" traces one frame deep
    and compares one run; "off" re-runs nothing.  `test_runs` (a
    perrun.Runs) counts the re-runs and gives each its time limit.  With
    `keep_objects`, the diagnosis holds what the runs left alive (for the
    dump) until the caller drops it; with `capture_dir`, memray's capture
    is kept there."""
    if mode == "off":
        return None, MSG_DIAGNOSIS_OFF
    budget = max(settingsmod.DIAGNOSE_FLOOR,
                 settingsmod.DIAGNOSE_BUDGET * run_time)
    start = time.perf_counter()
    slowest = [run_time]

    def run_once():
        began = time.perf_counter()
        if began - start + slowest[0] > budget:
            raise _OutOfBudget()
        if progress is not None:
            progress.show(progressmod.WHAT_DIAGNOSING.format(
                run=test_runs.count + 1))
        with test_runs.run(traced=True):
            runner.run_again()
        item.ihook.pytest_leakcheck_settle(item=item)
        slowest[0] = max(slowest[0], time.perf_counter() - began)

    frames, runs = ((1, 1) if mode == "cheap"
                    else (DIAGNOSIS_FRAMES, DIAGNOSIS_RUNS))
    started = False
    note = None
    diagnosis = None
    try:
        if mode == "cheap" and not tracemalloc.is_tracing():
            tracemalloc.start(frames)
            started = True
            run_once()
        diagnosis = leakcheck.diagnose(run_once, list(leaking), runs=runs,
                                       ignore=_HARNESS,
                                       keep_objects=keep_objects,
                                       capture_dir=capture_dir)
    except _OutOfBudget:
        pass
    except Exception:
        return None, None
    finally:
        if started:
            tracemalloc.stop()
    over = (f"re-running the code raised {_OutOfBudget.__name__}")
    if diagnosis is None or any(n.startswith(over)
                                for n in diagnosis.notes):
        note = MSG_DIAGNOSIS_BUDGET.format(
            budget=budget, factor=settingsmod.DIAGNOSE_BUDGET,
            run_time=run_time)
        if diagnosis is not None:
            diagnosis.notes[:] = [n for n in diagnosis.notes
                                  if not n.startswith(over)] + [note]
    return diagnosis, note


def _dump(directory, item, series, diagnosis):
    """Writes the test's dump (dropping the objects the diagnosis kept);
    the line that says where, or why not."""
    try:
        path = leakcheck.write_dump(directory, item.nodeid, diagnosis,
                                    deltas=series.deltas, ignore=_HARNESS)
    except Exception as e:
        diagnosis.survivors = None
        return MSG_DUMP_FAILED.format(directory=directory,
                                      error=f"{type(e).__name__}: {e}")
    return MSG_DUMP.format(path=path)


def _record(item, state, settings, verdict, outcome, series=None,
            reason=None, diagnosis=None, known=False):
    path, lineno, _ = item.location
    rec = {"id": item.nodeid, "verdict": verdict, "outcome": outcome,
           "known": known, "reason": reason,
           "file": path.replace(os.sep, "/"),
           "line": None if lineno is None else lineno + 1,
           "warmup": settings.warmup, "repeat": settings.repeat,
           "runs": 0, "warmup_measured": False,
           "probes": list(settings.probes), "leaking": [],
           "deltas": {}, "thresholds": {}, "diagnosis": None,
           "worker": state.worker_id, "unread": {}, "threads": [],
           "test_runs": 0, "hunt_seconds": 0.0}
    if series is not None:
        rec.update(runs=series.runs, warmup_measured=series.warmup_measured,
                   probes=list(series.probes),
                   leaking=list(series.leaking),
                   deltas={k: list(v) for k, v in series.deltas.items()},
                   thresholds=dict(series.thresholds),
                   unread=dict(series.unread),
                   threads=list(series.threads))
    if diagnosis is not None:
        try:
            rec["diagnosis"] = diagnosis.to_dict()
        except Exception:
            rec["diagnosis"] = {"text": str(diagnosis)}
    return rec


class _LeakRepr:
    """The longrepr of a leaking test: the series report and diagnosis,
    with a one-line crash message for pytest's short summary."""

    def __init__(self, text, message, location):
        self.text = text
        path, lineno, _ = location
        self.reprcrash = _Crash(path, (lineno or 0) + 1, message)

    def toterminal(self, tw):
        for line in self.text.rstrip("\n").splitlines():
            tw.line(line)

    def __str__(self):
        return self.text


class _Crash:
    def __init__(self, path, lineno, message):
        self.path, self.lineno, self.message = path, lineno, message

    def __str__(self):
        return f"{self.path}:{self.lineno}: {self.message}"


_UNITS = {}


def leak_line(leaking, deltas):
    """MSG_LEAK of a leak: `leaking` the probes that leaked, `deltas`
    {probe: [growth per measured run]}."""
    if not _UNITS:
        _UNITS.update((p.name, p.unit) for p in leakcheck.probes())
    rank = {name: i for i, name in enumerate(TELLING)}
    order = sorted(leaking, key=lambda p: rank.get(p, len(TELLING)))
    if not order:
        return ""
    lead = order[0]
    grew = list(deltas.get(lead) or ()) or [0]
    low, high = min(grew), max(grew)
    growth = f"{low:+d}" if low == high else f"{low:+d} to {high:+d}"
    unit = _UNITS.get(lead)
    if unit and unit != lead:
        growth += f" {unit}"
    also = (MSG_LEAK_ALSO.format(probes=", ".join(order[1:]))
            if len(order) > 1 else "")
    return MSG_LEAK.format(probe=lead, growth=growth, also=also)


def _rerun_failed(failure, runs, run):
    """The message of a run after the first that did not pass."""
    if perrun.is_timeout(failure.longreprtext):
        if runs.per_run:
            return MSG_RERUN_TIMEOUT.format(run=run, limit=runs.limit)
        return MSG_LIMIT_SHARED.format(run=run)
    return MSG_RERUN_FAILED.format(outcome=outcome_of([failure]),
                                   when=failure.when)


def _location(item):
    """Where the test is defined, for the series' report: from
    item.location, which pytest computes once per item (reportinfo() finds
    the source line anew on each call)."""
    try:
        relpath, lineno, _ = item.location
        path = os.path.normpath(os.path.join(str(item.config.rootpath),
                                             relpath))
    except Exception:
        path, lineno, _ = item.reportinfo()
    return str(path), (lineno or 0) + 1


def _hunt(item, nextitem, state):
    """Runs the reported run and the series; returns the reports to log,
    the one that carries the verdict holding it as `.leakcheck`."""
    # First: what is made for this test must die unfrozen, where its death
    # is counted.  The series replaces dicts of its own while it runs (an
    # empty dict is tracked by the collector on CPython 3.14+): frozen,
    # their deaths would go uncounted while their successors count.  (On
    # 3.14 and 3.15 a reported run right after a freeze still reads one
    # object more, from elsewhere: such a test runs three times.)
    state.freezer.begin(item.config)
    try:
        settings = settingsmod.for_item(item, state.settings.defaults)
        series = leakcheck.Series(
            warmup=settings.warmup, repeat=settings.repeat,
            probes=list(settings.probes), tolerance=settings.tolerance,
            name=item.nodeid, location=_location(item),
            thorough=settings.thorough)
    except (BadValue, ValueError, OverflowError) as e:
        # The test errors in its setup, run by pytest's own protocol.
        item.stash[BAD_SETTINGS] = str(e)
        return None

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid,
                                       location=item.location)
    runs = perrun.Runs(item)
    progress = progressmod.Progress(item.config, item.name, state.worker_id)
    total = settings.warmup + settings.repeat
    # With one warm-up run, the engine reads the reported run too (a run
    # that grew nothing is the measured run: no other run is needed), and
    # the runner makes ready what pytest keeps of that run.
    runner = ItemRunner(item, nextitem, read_reported=settings.warmup == 1,
                        timed=runs.unmeasured)
    reports = None
    failure = None      # the report of a failed extra run
    error = None        # the engine's exception
    settle = item.ihook.pytest_leakcheck_settle
    # The slowest measured run, seconds.  Both floats exist before the
    # first snapshot: made by the first measured run, they would be its
    # growth.
    run_time = float(0)
    began = float(0)
    while True:
        try:
            if reports is not None or settings.warmup == 1:
                settle(item=item)       # a snapshot is next
            more = series.next()
        except Exception as e:
            error = e
            break
        if not more:
            break
        progress.show(
            progressmod.WHAT_CONFIRMING.format(run=runs.count + 1)
            if series.confirming or runs.count >= total else
            progressmod.WHAT_RUN.format(run=runs.count + 1, runs=total))
        with runs.run():
            if reports is None:
                reports = runner.run_reported()
            else:
                began = time.perf_counter()
                failure = runner.run_again()
                run_time = max(run_time, time.perf_counter() - began)
        if outcome_of(reports) != "passed" or failure is not None:
            break
    if reports is None:
        with runs.run():
            reports = runner.run_reported()
    outcome = outcome_of(reports)
    if outcome in ("failed", "error") and neighbours.reruns(item):
        # Not logged: pytest-rerunfailures' protocol runs the test again,
        # as often as it would have, and logs every attempt; the
        # reported run tore down for the next item, as a failed run does.
        runs.close()
        progress.clear()
        item.stash[OPTED_OUT] = MSG_FLAKY_FIRST.format(outcome=outcome)
        return None

    call = next((r for r in reports if r.when == "call"), reports[0])
    if outcome in ("skipped", "xfailed", "xpassed"):
        rec = _record(item, state, settings, "skipped", outcome,
                      reason=f"not checked: the test {outcome}")
    elif outcome != "passed":
        rec = _record(item, state, settings, "error", outcome,
                      reason=f"not checked: the test {outcome}")
    elif failure is not None and neighbours.reruns(item):
        # What the test's reported run did stands, as pytest-rerunfailures
        # would rerun a failure.
        rec = _record(item, state, settings, "skipped", outcome,
                      reason="not checked: " + MSG_FLAKY_LATER.format(
                          outcome=outcome_of([failure]),
                          when=failure.when))
    elif failure is not None:
        msg = _rerun_failed(failure, runs, runs.count)
        rec = _record(item, state, settings, "error", "failed", reason=msg)
        call.outcome = "failed"
        call.longrepr = f"{msg}\n\n{failure.longreprtext}"
    elif error is not None:
        msg = (MSG_LIMIT_SHARED.format(run=runs.count)
               if perrun.is_timeout(error) else
               MSG_ENGINE_ERROR.format(error=f"{type(error).__name__}: "
                                             f"{error}"))
        rec = _record(item, state, settings, "error", "failed", reason=msg)
        call.outcome = "failed"
        call.longrepr = msg
    elif series.leaked:
        dump_dir = state.settings.dump_dir
        diagnosis, note = _diagnose(item, runner, runs, series.leaking,
                                    state.settings.diagnose, run_time,
                                    keep_objects=bool(dump_dir),
                                    capture_dir=dump_dir, progress=progress)
        text = series.report(diagnosis=diagnosis)
        if note is not None and diagnosis is None:
            text += f"\nnote: {note}"
        if dump_dir and diagnosis is not None:
            text += "\n" + _dump(dump_dir, item, series, diagnosis)
        known = reportmod.is_known(state.baseline, item.nodeid,
                                   series.leaking)
        rec = _record(item, state, settings, "leak", outcome, series=series,
                      diagnosis=diagnosis, known=known)
        if diagnosis is None and note is not None:
            rec["diagnosis"] = {"text": f"note: {note}"}
        if known:
            call.sections.append((SECTION_KNOWN, text))
        else:
            rec["outcome"] = "failed"
            call.outcome = "failed"
            call.longrepr = _LeakRepr(
                text, leak_line(series.leaking, series.deltas),
                item.location)
    else:
        rec = _record(item, state, settings, "clean", outcome, series=series)
    final_failure = None
    if not runner.tear_down_quietly():
        # The teardown phase alone is not a run of the test; one more whole
        # run is.
        alone = runner.tears_down_alone()
        with runs.unmeasured() if alone else runs.run():
            reports, final_failure = runner.finish(reports, alone)
    if (final_failure is not None and failure is None and error is None
            and outcome == "passed"):
        # The extra run that tears down wider fixtures failed: the test
        # does not pass every run, as a failed measured run would show.
        msg = _rerun_failed(final_failure, runs, runs.count)
        rec = _record(item, state, settings, "error", "failed", reason=msg)
        call.outcome = "failed"
        call.longrepr = f"{msg}\n\n{final_failure.longreprtext}"
    runs.close()
    progress.clear()
    rec["test_runs"] = runs.count
    rec["hunt_seconds"] = round(runs.added_seconds(), 3)
    if runs.count > 1:
        # junitxml reads the properties of the teardown report.
        reports[-1].user_properties.extend([
            (JUNIT_RUNS, runs.count), (JUNIT_SECONDS, rec["hunt_seconds"])])
    call.leakcheck = rec
    return reports


# ---- results, summary and the report ---------------------------------------

@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report, config):
    """LEAKED for a leak; at -v the verbose word says how many runs a
    hunted test took, at -vv also the time they added."""
    rec = getattr(report, "leakcheck", None)
    if not isinstance(rec, dict) or report.when != "call":
        return None
    leaked = report.failed and rec.get("verdict") == "leak"
    runs = rec.get("test_runs") or 0
    verbosity = config.getoption("verbose", 0) or 0
    if leaked:
        category, letter, (word, markup) = STATUS_LEAKED
    elif verbosity < 1 or runs < 2:
        return None
    elif report.passed:
        category, letter, word, markup = "passed", ".", "PASSED", {
            "green": True}
    elif report.failed:
        category, letter, word, markup = "failed", "F", "FAILED", {
            "red": True}
    else:
        return None
    if verbosity >= 2 and runs > 1:
        word = MSG_VERBOSE_RUNS_TIME.format(
            word=word, runs=runs, seconds=rec.get("hunt_seconds") or 0)
    elif verbosity >= 1 and runs > 1:
        word = MSG_VERBOSE_RUNS.format(word=word, runs=runs)
    if _PLAIN_WORDS:
        return category, letter, word
    return category, letter, (word, markup)


# pytest before 8 prints a (word, markup) pair as it is in the short test
# summary: the word goes alone there (and uncoloured on the verbose line).
_PLAIN_WORDS = settingsmod.installed_pytest() < (8, 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_report_from_serializable(config, data):
    """pytest-xdist: a leak's report arrives from a worker as text; it gets
    back its one-line message for the short test summary."""
    outcome = yield
    report = outcome.get_result()
    rec = getattr(report, "leakcheck", None)
    if (isinstance(rec, dict) and rec.get("verdict") == "leak"
            and getattr(report, "when", None) == "call" and report.failed
            and isinstance(report.longrepr, str)):
        report.longrepr = _LeakRepr(
            report.longrepr, leak_line(rec.get("leaking") or (),
                                       rec.get("deltas") or {}),
            report.location)


class _SessionHooks:
    """Hooks that need the session's State but whose hookspecs carry no
    config; one instance per config, registered by pytest_configure."""

    def __init__(self, state):
        self.state = state

    def pytest_runtest_logstart(self, nodeid, location):
        if self.state.report is not None:
            self.state.report.start(nodeid, location)

    def pytest_runtest_logreport(self, report):
        rec = getattr(report, "leakcheck", None)
        if isinstance(rec, dict) and isinstance(rec.get("id"), str):
            self.state.add(rec)

    def pytest_runtest_logfinish(self, nodeid, location):
        if self.state.report is not None:
            self.state.report.finish(nodeid)

    def pytest_keyboard_interrupt(self, excinfo):
        # pytest stops on collection errors through an Interrupted too.
        self.state.mark_partial(
            "interrupted (KeyboardInterrupt)"
            if excinfo.type is KeyboardInterrupt
            else f"interrupted: {excinfo.value}")
        self.state.interrupted = True

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched):
        """pytest-xdist: a worker died while running `crashitem`."""
        self.state.mark_partial("a pytest-xdist worker crashed")
        start = (self.state.report.running.get(crashitem, {})
                 if self.state.report is not None else {})
        gateway = getattr(getattr(report, "node", None), "gateway", None)
        self.state.add(reportmod.journal.crashed_record(
            crashitem, MSG_CRASHED, start.get("file"), start.get("line"),
            getattr(gateway, "id", None)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        """pytest-xdist: a worker is gone; with `error`, it died."""
        if error:
            self.state.mark_partial("a pytest-xdist worker crashed")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    state = session.config.stash.get(STATE, None)
    if state is None:
        return
    state.freezer.end()
    if state.report is None:
        return
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        if not state.interrupted:
            state.mark_partial("interrupted")
    elif exitstatus == pytest.ExitCode.INTERNAL_ERROR:
        state.mark_partial("pytest stopped on an internal error")
    elif session.shouldstop or session.shouldfail:
        state.mark_partial(
            f"stopped early: {session.shouldstop or session.shouldfail}")
    _write(state)


def _write(state):
    try:
        state.report.write()
    except OSError as e:
        state.report.write_error = f"{e.strerror or e}"
    else:
        state.report.write_error = None


def _catch_sigterm(state):
    """SIGTERM (a CI job's timeout, `kill`) ends the process without atexit:
    write the report, marked partial, then die of the signal as before.
    Only when nobody else handles SIGTERM, and from the main thread (where
    Python runs signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum, frame):
        signal.signal(signum, signal.SIG_DFL)
        if state.report is not None and not state.report.written:
            state.report.mark_partial("terminated (SIGTERM)")
            _write(state)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    state.sigterm_handler = on_sigterm


def _release_sigterm(state):
    handler = state.sigterm_handler
    if handler is not None and signal.getsignal(signal.SIGTERM) is handler:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    state.sigterm_handler = None


def _write_at_exit(state):
    if state.report is not None and not state.report.written:
        state.report.mark_partial("the process exited before the session "
                                  "finished")
        _write(state)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = config.stash.get(STATE, None)
    if state is None or not state.records:
        return
    tr = terminalreporter
    recs = [state.records[k] for k in sorted(state.records)]
    leaks = [r for r in recs if r["verdict"] == "leak"]
    ours = [r for r in recs if r["verdict"] == "crashed"
            or (r["verdict"] == "error"
                and (r.get("reason") or "").startswith("leakcheck:"))]
    if leaks or ours:
        tr.write_sep("=", "leakcheck", red=bool(leaks or ours), bold=True)
        for r in leaks:
            word = "KNOWN LEAK" if r["known"] else "LEAKED"
            tr.write_line(f"{word} {r['id']} - "
                          f"{leak_line(r['leaking'], r['deltas'])}")
        for r in ours:
            word = "CRASHED" if r["verdict"] == "crashed" else "ERROR"
            tr.write_line(f"{word} {r['id']} - {r['reason']}")
    counts = {v: 0 for v in reportmod.VERDICTS}
    for r in recs:
        counts[r["verdict"]] += 1
    known = sum(1 for r in leaks if r["known"])
    tr.write_line(MSG_SUMMARY.format(
        tests=len(recs), s="s" if len(recs) != 1 else "",
        known=f" ({known} known from the baseline)" if known else "",
        **counts))
    available = {p.name for p in leakcheck.probes() if p.available}
    for r in recs:
        for probe, why in (r.get("unread") or {}).items():
            if probe in available:
                tr.write_line(MSG_NOT_COMPARED.format(
                    id=r["id"], probe=probe, why=why))
    _hunt_times(tr, config, recs)
    if state.freezer.refused:
        tr.write_line(MSG_GC_FROZEN)
    if state.report is not None and state.report.written:
        partial = state.report.partial_reasons
        tr.write_line(MSG_REPORT_WRITTEN.format(
            path=state.report.path,
            partial=f" (partial: {'; '.join(partial)})" if partial else ""))
    elif state.report is not None and state.report.write_error:
        tr.write_line(f"leakcheck: cannot write the report "
                      f"{state.report.path}: {state.report.write_error}",
                      red=True)


def _hunt_times(tr, config, recs):
    """What hunting added to the session's time, and the slowest hunts, as
    --durations lists the slowest phases (its count, when given)."""
    hunted = [r for r in recs if (r.get("test_runs") or 0) > 1]
    if not hunted:
        return
    count = config.getoption("durations", None)
    count = SLOWEST_HUNTS if count is None else count
    hunted.sort(key=lambda r: r.get("hunt_seconds") or 0, reverse=True)
    tr.write_line(MSG_HUNT_TIME.format(
        seconds=sum(r.get("hunt_seconds") or 0 for r in hunted),
        tests=len(hunted), s="s" if len(hunted) != 1 else "",
        runs=sum(r["test_runs"] - 1 for r in hunted)))
    for r in hunted[:count] if count > 0 else hunted:
        tr.write_line("  " + MSG_HUNT_LINE.format(
            seconds=r.get("hunt_seconds") or 0, runs=r["test_runs"],
            id=r["id"]))
