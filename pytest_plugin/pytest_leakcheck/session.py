"""The session: its state (config.stash[STATE]), the GC freezer, the
report's wiring (opened at configure, written at the session's end, at
exit, or on SIGTERM) and the pytest-xdist hooks (a crashed worker, a node
gone, a report sent back from a worker)."""

import atexit
import gc
import heapq
import os
import signal
import threading

import pytest

import leakcheck
import leakcheck.report as lcreport
from leakcheck import cpython

from . import parking
from . import perrun
from . import report as reportmod
from . import settings as settingsmod
from . import terminal
from .ledger import Ledger
from .pytest_private import fresh_log_buffers
from .settings import BadValue

MSG_CRASHED = "leakcheck: the pytest-xdist worker running the test crashed"


class _GcFreezer:
    """Keeps what existed before a checked test out of the collections its
    snapshots make, so that settling costs what the test created, not what
    the process holds: gc.collect() then gc.freeze() before the first
    checked test, and again before a checked test once what is alive grew
    by YOUNG_BLOCKS memory blocks since the last freeze, or YOUNG_TESTS
    checked tests have begun since, whichever comes first.  That growth is
    read from leakcheck.allocated_blocks(walk=False), what
    sys.getallocatedblocks() says, from the allocator hook's count: the
    freezer walks no object and builds no list of the heap (with 6.7M
    objects unfrozen, len(gc.get_objects()) took 0.29 s), nor pymalloc's
    pools (sys.getallocatedblocks() walks them: about 50 ms a test on
    CPython 3.13 with 5M objects held).  Where the hook does not count
    them (no probe that needs it, or before the first snapshot), the
    growth is the collector's: its youngest generation filled
    YOUNG_COLLECTIONS times since the freeze (_young_collections(): each
    time as many containers made as its threshold: 700 up to CPython
    3.12, 2,000 from 3.13).
    When pymalloc is not in use (PYTHONMALLOC=malloc, as under valgrind),
    the hook counts no block, and the collector tells the growth there
    too.  Undone (gc.unfreeze()) before a test that is not checked and at
    the end of the session.

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
        self.blocks = None          # the fewest blocks since our freeze
        self.collections = 0        # _young_collections() at our freeze
        self.tests = 0              # checked tests begun since our freeze

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
        """Freezes what is alive, at the first checked test and when enough
        was made since; True when it froze."""
        if self.refused:
            return False
        if not self.ours:
            if gc.get_freeze_count() > self.baseline:
                self.refused = True
                return False
            self.ours = True
            gc.freeze = self._their_freeze
        elif self.theirs:
            self._release()
            return False
        elif not self._young():
            return False
        self._freeze(config)
        return True

    def _freeze(self, config):
        gc.collect()
        _gc_freeze()
        cpython.fresh_handler_lists()
        fresh_log_buffers(config)
        self.blocks = leakcheck.allocated_blocks(walk=False)
        self.collections = _young_collections()
        self.tests = 0

    def after_setup(self, config):
        """The test's wider fixtures were just set up, before the snapshot
        that precedes its reported run: when they grew what is alive by
        YOUNG_BLOCKS, it is frozen now, so that the test's snapshots do
        not collect it (a session fixture holding millions of objects), nor
        the next test's freeze.  The series and the runs made before are
        frozen with it: they replace no container of theirs that was made
        before (Series' _others is made anew before its first snapshot).
        True when it froze."""
        if not self.ours or self.theirs or not self._grown():
            return False
        self._freeze(config)
        return True

    def _young(self):
        """Whether to freeze again: YOUNG_TESTS checked tests began since
        our freeze, or enough was made since (_grown())."""
        self.tests += 1
        return self.tests >= YOUNG_TESTS or self._grown()

    def _grown(self):
        """Whether what is alive grew by YOUNG_BLOCKS blocks since our
        freeze, counted from the fewest blocks read since, as the first
        tests free what was there before (caches the settling clears,
        frozen objects that die); where the hook does not count the
        blocks (none without pymalloc), whether the collector's youngest
        generation filled YOUNG_COLLECTIONS times since (see the
        class)."""
        blocks = leakcheck.allocated_blocks(walk=False)
        if blocks is None:
            return (_young_collections() - self.collections
                    >= YOUNG_COLLECTIONS)
        if self.blocks is None or blocks < self.blocks:
            self.blocks = blocks
        return blocks - self.blocks >= YOUNG_BLOCKS

    def end(self):
        if self.ours and not self._release():
            gc.unfreeze()
            self.baseline = gc.get_freeze_count()


_gc_freeze = gc.freeze


def _young_collections():
    """The automatic collections of the collector's youngest generation so
    far (a full collection, as every snapshot's, counts in the oldest's):
    one more each time as many containers as its threshold were made."""
    return gc.get_stats()[0]["collections"]


# The freezer freezes again once what earlier tests left alive grew by
# YOUNG_BLOCKS blocks, or after YOUNG_TESTS checked tests, rather than
# before every test.  Each snapshot collects what is not frozen (a
# gc.collect() of 500 unfrozen objects took 16 us, of 2,000 56 us,
# CPython 3.11 on a 2-core machine): the fewer there are, the less a
# snapshot costs.  But a frozen object's death is not counted, and a
# frozen object that becomes garbage in a cycle is not collected until
# the freezer lets go (end()): what the next test's run replaces of what
# the earlier ones left (its log capture's buffers and the loggers' lists
# of handlers are given fresh ones at each freeze for that: fresh_log_buffers,
# cpython.fresh_handler_lists; a module's global classes a test makes
# anew, as pyyaml's constructor tests do) reads as growth in the reported
# run of a test after a freeze, which then runs again.  A session of 80
# clean tests leaves 27 objects and 74 blocks alive per test (CPython
# 3.11).  `python bench/bench_freezer.py` (2,000 of bench_plugin.py's
# fast tests) reads a freeze every 5.0 tests and 97 unfrozen objects a
# snapshot on average; with 700 blocks alone (--young-tests 1000000) a
# freeze every 15.5 tests and 177 objects.  With 250 blocks alone, 87
# objects, but pyyaml's tests that leave 272 blocks each froze before
# every one of them: `bench/bench_suite.py pyyaml` read 2,303 to 2,309
# of its 2,606 tests run once, against 2,483 to 2,488 with 700 blocks
# alone and 2,466 to 2,477 now (three runs each; the CHANGELOG says
# more).
YOUNG_BLOCKS = 700
YOUNG_TESTS = 5         # checked tests between freezes, at most
# Where the blocks are not counted: the collections of the collector's
# youngest generation since the freeze that make as much growth.
YOUNG_COLLECTIONS = 1


_begun = [0]


def _sessions_begun():
    """How many sessions of this process made a State, this one included."""
    _begun[0] += 1
    return _begun[0]


class State:
    """Everything the plugin keeps for one session."""

    def __init__(self, config, session_settings, baseline):
        self.config = config
        self.settings = session_settings
        self.baseline = baseline          # {test id: frozenset of probes}
        workerinput = getattr(config, "workerinput", None)
        self.worker_id = workerinput.get("workerid") if workerinput else None
        self.report = None                # reportmod.Report, in the writer
        # What the summary needs of each record, not the record: test id ->
        # (verdict, known, test_runs, hunt_seconds), in a Ledger (a dict
        # of every test's tuple would cost each test's first snapshot a
        # walk of it); the records of leaks and of tests not judged,
        # trimmed to their line's fields; what was not compared, {test id:
        # {probe: why}}, of the probes this process can read (the summary
        # says nothing of the others: on a release build every record
        # says refs is unread, which is no news worth a dict per test).
        self.tests = Ledger()
        self.problems = {}
        self.unread = {}
        self.readable = None    # frozenset of the probes available here
        # The verdicts' counts and the CPU seconds leakcheck added, by
        # category, over the records (the report's summary, when there is
        # one: it takes off a record that a later one of the same test
        # replaces); and the costliest tests, [(seconds, test id)] as a
        # heap.
        self.summary = lcreport.Summary()
        self.costliest = []
        # What the warm-up run grew, of the tests that ran more than once
        # (the record's warmup_growth): the summary's lines of the slowest
        # hunts say what made their runs due.
        self.growth = {}
        # What perrun.OUTSIDE had counted before this session's own work
        # (the plugin's import is this session's: a session run inside a
        # test begins with the outer one's).
        self.outside_began = 0.0 if _sessions_begun() == 1 else \
            perrun.OUTSIDE.seconds
        self.freezer = _GcFreezer(gc.get_freeze_count())
        self.sigterm_handler = None       # ours, while installed
        self.recovered = None             # what to say of an earlier run
        self.interrupted = False          # pytest_keyboard_interrupt said why
        # The test whose hunt logs its reports, every phase over.
        self.logging = None
        # The hooks of a test's phases (plugin.PhaseHooks), registered
        # when the first test needs them (need_phase_hooks()).
        self.phase_hooks = None
        # The names of the hook plugins registered for this session
        # (_register()); close() unregisters them.
        self.registered = set()
        # --setup-only, --setup-plan: pytest runs no test, leakcheck hunts
        # none (read once, at configure: getoption() is a few lookups a
        # call).
        self.setup_only = False

    def outside_cpu(self):
        """The CPU seconds the plugin took outside the tests' hunts in this
        session (perrun.Outside)."""
        return perrun.OUTSIDE.cpu(since=self.outside_began)

    def add(self, rec):
        test_id = rec["id"]
        verdict = rec["verdict"]
        runs = rec.get("test_runs") or 0
        self.tests[test_id] = (verdict, bool(rec.get("known")), runs,
                               rec.get("hunt_seconds") or 0)
        # problems, growth and unread are empty while every test is clean:
        # looked into only when they hold something.
        if self.problems:
            self.problems.pop(test_id, None)
        growth = rec.get("warmup_growth")
        if growth and isinstance(growth, dict) and runs > 1:
            self.growth[test_id] = growth
        elif self.growth:
            self.growth.pop(test_id, None)
        if verdict == "leak" or (rec.get("judged") is not True
                                 and not lcreport.judged(rec)):
            self.problems[test_id] = {key: rec.get(key)
                                      for key in PROBLEM_FIELDS}
        if self.unread:
            self.unread.pop(test_id, None)
        unread = rec.get("unread")
        if unread:
            readable = self.readable
            if readable is None:
                readable = self.readable = frozenset(
                    p.name for p in leakcheck.probes() if p.available)
            if not readable.isdisjoint(unread):
                self.unread[test_id] = {probe: why
                                        for probe, why in unread.items()
                                        if probe in readable}
        total = (self.summary.add(rec) if self.report is None else
                 self.report.add(rec, with_finish=test_id == self.logging))
        if total is not None:
            entry = (total, test_id)
            if len(self.costliest) < COSTLIEST_KEPT:
                heapq.heappush(self.costliest, entry)
            elif entry > self.costliest[0]:
                heapq.heapreplace(self.costliest, entry)

    def need_session_hooks(self):
        """A test is hunted, or has a record to make: the hooks that log
        records (SessionHooks) are registered, once (and stay).  A session
        that writes a report, or hands its tests to pytest-xdist's workers,
        has them from its configuration on; one that hunts only marked
        tests from its first such test, so that a session that marks none
        (every pytest session where leakcheck is installed) calls none of
        them."""
        if HOOKS_NAME not in self.registered:
            self._register(HOOKS_NAME, SessionHooks(self))

    def need_record_hooks(self):
        """Records ride on reports pytest logs itself, or a record needs
        its status word (RecordHooks): registered, once (and stay)."""
        if RECORD_HOOKS_NAME not in self.registered:
            self._register(RECORD_HOOKS_NAME, RecordHooks(self))

    def need_phase_hooks(self):
        """A test needs the hooks of its phases (plugin.PhaseHooks): they
        are registered, once, before it runs (and stay)."""
        if PHASE_HOOKS_NAME not in self.registered and \
                self.phase_hooks is not None:
            self._register(PHASE_HOOKS_NAME, self.phase_hooks)

    def _register(self, name, hooks):
        """Registers the plugin `hooks` as `name`, for the session."""
        self.config.pluginmanager.register(hooks, name)
        self.registered.add(name)

    def mark_partial(self, reason):
        if self.report is not None:
            self.report.mark_partial(reason)

    def wants(self, item):
        if self.settings.hunt_none:
            return False
        return (self.settings.hunt_all
                or item.get_closest_marker(settingsmod.MARKER) is not None)


# The fields of a record the summary's line of a leak or of a test not
# judged reads.
PROBLEM_FIELDS = ("id", "verdict", "known", "judged", "reason", "leaking",
                  "deltas")
# The costliest tests the state keeps for the summary (--durations asks for
# at most this many there).
COSTLIEST_KEPT = 20

STATE = pytest.StashKey[State]()
UNSUPPORTED = pytest.StashKey[str]()      # why nothing is judged at all


# ---- the report ---------------------------------------------------------

def open_report(state, config):
    """Opens the session's report (the controller's, or a lone session's)
    and makes sure it is written however the process ends; UsageError
    naming where the path came from when it cannot be."""
    s = state.settings
    state.report = reportmod.Report(
        s.report_path, settings=_settings_dict(s), probes=_probes_dict(),
        environment=reportmod.environment(config, _version()),
        outside=state.outside_cpu, summary=state.summary)
    try:
        state.recovered = state.report.open()
    except lcreport.InUse as e:
        # Refused before any test runs; the other session's report and
        # journal are left alone (no report is written at unconfigure).
        state.report = None
        raise pytest.UsageError(str(BadValue(
            s.wheres["report"], settingsmod.PROBLEM_REPORT_IN_USE.format(
                value=s.report_path, reason=e.strerror)))) from None
    except OSError as e:
        state.report = None
        raise pytest.UsageError(str(BadValue(
            s.wheres["report"], settingsmod.PROBLEM_REPORT.format(
                value=s.report_path, reason=e.strerror or e)))) from None
    atexit.register(_write_at_exit, state)
    _catch_sigterm(state)
    state._register(JOURNAL_HOOKS_NAME, JournalHooks(state.report))


def close(state):
    """pytest_unconfigure: the freezer let go; the report written, when
    the session did not finish."""
    state.freezer.end()
    parking.close(state.config)
    for name in state.registered:
        hooks = state.config.pluginmanager.get_plugin(name)
        if hooks is not None:
            state.config.pluginmanager.unregister(hooks)
    state.registered.clear()
    if state.report is not None:
        atexit.unregister(_write_at_exit)
        _release_sigterm(state)
        if not state.report.written:
            state.report.mark_partial("pytest ended before the session "
                                      "finished")
            _write(state)


def _version():
    """leakcheck's version, which the engine carries (its distribution's
    too: test_gate.py checks that they agree).  importlib.metadata's
    version() read and parsed the distribution's metadata with the email
    package at the start of every session, and of each pytest-xdist
    worker."""
    return leakcheck.__version__


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


def finish(session, exitstatus, state):
    """pytest_sessionfinish: the freezer let go; the report, marked partial
    when the session stopped early, written."""
    began = perrun.OUTSIDE.begin()
    state.freezer.end()
    perrun.OUTSIDE.end(began)
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


# ---- hooks with no config argument, and pytest-xdist's ---------------------

HOOKS_NAME = "leakcheck-session"     # the SessionHooks' plugin name
RECORD_HOOKS_NAME = "leakcheck-records"     # RecordHooks'
JOURNAL_HOOKS_NAME = "leakcheck-journal"     # JournalHooks'
PHASE_HOOKS_NAME = "leakcheck-phases"     # plugin.PhaseHooks' (State)


class JournalHooks:
    """The start and the finish of each test in the report's journal (so
    that a test the process dies in is named in the report); registered
    as JOURNAL_HOOKS_NAME by open_report(): a session that writes no
    report, and pytest-xdist's workers, call neither."""

    def __init__(self, report):
        self.report = report

    def pytest_runtest_logstart(self, nodeid, location):
        self.report.start(nodeid, location)

    def pytest_runtest_logfinish(self, nodeid, location):
        self.report.finish(nodeid)


class SessionHooks:
    """Hooks that need the session's State but whose hookspecs carry no
    config: what ends a session early; one instance per config,
    registered as HOOKS_NAME by State.need_session_hooks()."""

    def __init__(self, state):
        self.state = state

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
        self.state.add(lcreport.crashed_record(
            crashitem, MSG_CRASHED, start.get("file"), start.get("line"),
            getattr(gateway, "id", None)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        """pytest-xdist: a worker is gone; with `error`, it died."""
        if error:
            self.state.mark_partial("a pytest-xdist worker crashed")


class RecordHooks:
    """The hooks of records that ride on reports pytest logs itself (a
    pytest-xdist controller's, from its workers; a test pytest runs, whose
    record on_report() made) and the terminal's status word of a record
    (LEAKED, and at -v how many runs a hunted test took); registered as
    RECORD_HOOKS_NAME by State.need_record_hooks() when the session has
    such a record or word, so that a session of clean tests at the
    default verbosity calls neither for each of a test's three reports
    (pluggy's call of a wrapper and of a status hook costs some
    microseconds each: a hunted test's record is added and dropped by its
    hunt, hunt.protocol())."""

    def __init__(self, state):
        self.state = state

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report, config):
        """LEAKED for a leak; at -v the verbose word says how many runs a
        hunted test took, at -vv also the time they added."""
        if not isinstance(getattr(report, "leakcheck", None), dict):
            return None
        # Not timed (perrun.OUTSIDE): a few lookups in the record, which
        # cost less than the two readings of the clock around them would.
        return terminal.teststatus(report, config)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report):
        rec = getattr(report, "leakcheck", None)
        if rec is None or self.state.logging is not None:
            # No record, or a hunted test's, which its hunt added to the
            # state and drops from the report after logging it.
            return (yield)
        if isinstance(rec, dict) and isinstance(rec.get("id"), str):
            began = perrun.OUTSIDE.begin()
            self.state.add(rec)
            perrun.OUTSIDE.end(began)
        try:
            return (yield)
        finally:
            if not report.failed:
                drop_record(report)


def drop_record(report):
    """Takes its record off `report`, logged now (sent to the controller,
    written by pytest's terminal and junitxml): the record lives on in
    the state and the report; on the report, which pytest's terminal
    keeps to the session's end, it would hold some 2.8 KB a test.  The
    callers leave a failed report its record, for the short test summary
    (pytest_report_teststatus reads it there again)."""
    report.__dict__.pop("leakcheck", None)


def from_serializable(report):
    """pytest-xdist: a leak's report arrives from a worker as text; it gets
    back its one-line message for the short test summary."""
    rec = getattr(report, "leakcheck", None)
    if (isinstance(rec, dict) and rec.get("verdict") == "leak"
            and getattr(report, "when", None) == "call" and report.failed
            and isinstance(report.longrepr, str)):
        report.longrepr = terminal.leak_failure(
            report.longrepr, rec.get("leaking") or (),
            rec.get("deltas") or {}, report.location)

