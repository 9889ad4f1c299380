"""One test's hunt: its reported run and the series after it, the verdict,
the diagnosis of a leak (within its budget) and the record.

A checked test runs its whole protocol once, as pytest would: that is the
reported run, and what it reports (a failure, an error, a skip, an xfail)
stands; only a test that passed is hunted.  Read top-down: protocol()
decides whether the test is hunted, hunt() runs it (_start, _run_series,
_judge, _finish), _diagnose() re-runs a leaking test to say what grew.
"""

import contextlib
import functools
import os
import time

import pluggy
import pytest

import leakcheck
import leakcheck.report as lcreport
from leakcheck import cpython

from . import neighbours
from . import perrun
from . import progress as progressmod
from . import pytest_private
from . import report as reportmod
from . import settings as settingsmod
from . import terminal
from .runner import ItemRunner, outcome_of
from .session import STATE, drop_record
from .settings import BadValue

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
MSG_ENGINE_ERROR = "leakcheck: could not measure the test: {error}"
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
JUNIT_RUNS = "leakcheck_runs"           # JUnit properties of a hunted test
JUNIT_SECONDS = "leakcheck_seconds"

DIAGNOSIS_RUNS = 2       # runs diagnose() compares

BAD_SETTINGS = pytest.StashKey[str]()     # on an item: why it cannot run
OPTED_OUT = pytest.StashKey[str]()        # on an item: why it is not hunted

# Folders of the harness around a test: what pytest, pluggy and this plugin
# allocate anew each run (log streams, stash entries) is not the test's leak.
_HARNESS = (pytest_private.PYTEST_DIR, os.path.dirname(pluggy.__file__),
            os.path.dirname(__file__))
HARNESS_PATHS = pytest.StashKey[tuple]()    # on the config: harness()'s


def harness(config):
    """What a diagnosis takes for the harness around a test (its `ignore`):
    _HARNESS and the module of every pytest plugin installed, which pytest
    loaded from its distribution's entry point (pytest-timeout's,
    pytest-asyncio's plugin.py).  Their hooks run in every phase of every
    run: what they allocate is not the test's, and the line tracer of a
    C heap's growth (leakcheck.diagnose) reads the heap at every line it
    traces, which in their hooks cost a diagnosis several times its own
    work.  The plugin's module alone, not its package: a library that
    ships a plugin (anyio, hypothesis) is code a test may leak in."""
    paths = config.stash.get(HARNESS_PATHS, None)
    if paths is None:
        paths = list(_HARNESS)
        try:
            installed = config.pluginmanager.list_plugin_distinfo()
        except Exception:
            installed = ()
        for module, _ in installed:
            path = getattr(module, "__file__", None)
            if isinstance(path, str) and path not in paths:
                paths.append(path)
        paths = config.stash[HARNESS_PATHS] = tuple(paths)
    return paths


# ---- whether the test is hunted -------------------------------------------

def protocol(item, nextitem):
    """pytest_runtest_protocol: True when the hunt ran the test and logged
    its reports; None to leave the test to pytest's own protocol."""
    state = item.config.stash.get(STATE, None)
    if state is None:
        return None
    outside = perrun.OUTSIDE
    if not state.wants(item) or state.setup_only:
        # Not hunted: the clock is read only when there is work (reading
        # it costs more than the looking above).
        if state.freezer.ours:
            began = outside.begin()
            state.freezer.end()
            outside.end(began)
        return None
    began = outside.begin()
    state.need_session_hooks()      # records to log from now on
    markers = settingsmod.closest_markers(item)
    opted_out = settingsmod.opt_out_reason(item, markers)
    if opted_out is not None:
        # pytest runs it; the record rides on its call report.
        state.freezer.end()
        _leave_to_pytest(item, state, OPTED_OUT, opted_out)
        outside.end(began)
        return None
    now = outside.end(began)
    outside.paused = True           # the hunt counts its own (hunt_costs)
    try:
        hunted = hunt(item, nextitem, state, now, markers)
    finally:
        outside.paused = False
    if hunted is None:
        began = outside.begin()
        state.freezer.end()
        outside.end(began)
        return None
    reports, call, ihook = hunted
    rec = call.leakcheck
    if rec["verdict"] == "leak":
        state.need_record_hooks()       # LEAKED, here and in the summary
    # Its record is the state's before its reports are logged (the journal
    # writes it with the test's finish), and off the report once they are
    # (session.drop_record()).
    state.logging = item.nodeid
    try:
        began = outside.begin()
        state.add(rec)
        outside.end(began)
        for rep in reports:
            ihook.pytest_runtest_logreport(report=rep)
    finally:
        state.logging = None
        if not call.failed:
            drop_record(call)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _leave_to_pytest(item, state, key, why):
    """pytest's own protocol runs `item`, which errors in its setup
    (BAD_SETTINGS) or runs unhunted (OPTED_OUT): on_report() puts its
    record on the report pytest logs (the hooks that make and log it
    registered first)."""
    state.need_phase_hooks()
    state.need_record_hooks()
    item.stash[key] = why


def on_report(item, report):
    """pytest_runtest_makereport, for a test pytest ran itself: the record
    of a test whose settings are bad, or that is not hunted."""
    bad = item.stash.get(BAD_SETTINGS, None)
    if bad is not None and report.when == "setup":
        # It ran, and errors: the report says why, as for any test.
        state = item.config.stash[STATE]
        report.leakcheck = _record(item, state, state.settings.defaults,
                                   "error", outcome_of([report]), reason=bad,
                                   judged=False)
        return
    reason = item.stash.get(OPTED_OUT, None)
    if reason is not None and (report.when == "call" or (
            report.when == "setup" and not report.passed)):
        state = item.config.stash[STATE]
        settings = state.settings.defaults
        report.leakcheck = _record(
            item, state, settings, "skipped", outcome_of([report]),
            reason=f"not checked: {reason}")


# ---- the hunt -------------------------------------------------------------

class _Hunt:
    """What one test's hunt holds from its first run to its verdict."""

    __slots__ = ("item", "state", "settings", "series", "runs", "progress",
                 "runner", "costs")

    def __init__(self, item, state, settings, series, runs, progress,
                 runner, costs):
        self.item, self.state, self.settings = item, state, settings
        self.series, self.runs, self.progress = series, runs, progress
        self.runner, self.costs = runner, costs

    def record(self, verdict, outcome, **kw):
        return _record(self.item, self.state, self.settings, verdict,
                       outcome, **kw)


def hunt(item, nextitem, state, now=None, markers=None):
    """Runs the reported run and the series; returns the reports to log,
    the one of them that carries the verdict (holding it as `.leakcheck`)
    and the item's ihook to log them with (read once for the hunt), or None
    when pytest runs the test instead (bad settings: it errors in its
    setup; a failure pytest-rerunfailures reruns).  `now`: a reading of
    perrun.wall just taken, if any; `markers`: the item's
    settings.closest_markers(), when read already."""
    # First: what is made for this test must die unfrozen, where its death
    # is counted.  The series replaces dicts of its own while it runs (an
    # empty dict is tracked by the collector on CPython 3.14+): frozen,
    # their deaths would go uncounted while their successors count.  (So
    # would the root logger's list of handlers, which removeHandler()
    # replaces on 3.14 and 3.15: the freezer gives every logger a new one,
    # cpython.fresh_handler_lists().)
    costs = perrun.Costs(state.report, now)
    perrun.await_watchdog(item.config)
    froze = state.freezer.begin(item.config)
    costs.snapshots = costs.lap()
    h = _start(item, nextitem, state, costs, markers, froze)
    if h is None:
        return None
    reports, failure, error, run_time = _run_series(h)
    outcome = outcome_of(reports)
    if outcome in ("failed", "error") and neighbours.reruns(item):
        # Not logged: pytest-rerunfailures' protocol runs the test again,
        # as often as it would have, and logs every attempt; the
        # reported run tore down for the next item, as a failed run does.
        h.runs.close()
        h.progress.clear()
        _leave_to_pytest(item, state, OPTED_OUT,
                         MSG_FLAKY_FIRST.format(outcome=outcome))
        return None
    call = next((r for r in reports if r.when == "call"), reports[0])
    rec = _judge(h, call, outcome, failure, error, run_time)
    return _finish(h, reports, call, rec,
                   judged=failure is None and error is None
                   and outcome == "passed"), call, h.runner.ihook


def _start(item, nextitem, state, costs, markers=None, froze=False):
    """The test's settings, series, runs and runner, made before the
    series' first snapshot; None (the reason in BAD_SETTINGS) when its
    settings are bad.  `froze`: the GC freezer froze for this test."""
    # pytest's own: where the test is, and the start of its log (less the
    # report's journal, a cost of its own), as pytest's protocol has them.
    journaled = costs.journaled()
    item.location
    costs.pytests_own(journaled)
    try:
        settings = settingsmod.for_item(item, state.settings.defaults,
                                        markers)
        series = leakcheck.Series(
            warmup=settings.warmup, repeat=settings.repeat,
            probes=list(settings.probes), tolerance=settings.tolerance,
            name=item.nodeid, location=_location(item),
            thorough=settings.thorough)
    except (BadValue, ValueError, OverflowError) as e:
        # The test errors in its setup, run by pytest's own protocol.
        _leave_to_pytest(item, state, BAD_SETTINGS, str(e))
        return None
    costs.lap()                         # the settings and the series
    journaled = costs.journaled()
    ihook = item.ihook          # a property that looks conftests up: once
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    costs.pytests_own(journaled)
    runs = perrun.Runs(item)
    if perrun.RUNS in item.stash:
        state.need_phase_hooks()        # each run's limit: arm, disarm
    if froze:
        runs.refresh()
    progress = progressmod.Progress(item.config, item.name, state.worker_id)
    # With one warm-up run, the engine reads the reported run too (a run
    # that grew nothing is the measured run: no other run is needed), and
    # the runner makes ready what pytest keeps of that run.
    runner = ItemRunner(item, nextitem, ihook,
                        read_reported=settings.warmup == 1,
                        timed=functools.partial(_pytests_setup, runs, costs,
                                                state.freezer, item.config))
    return _Hunt(item, state, settings, series, runs, progress, runner,
                 costs)


@contextlib.contextmanager
def _pytests_setup(runs, costs, freezer, config):
    """The runner's `timed`: where it sets up the test's wider fixtures
    before the reported run, under the test's time limit, as in its setup
    phase.  What the fixtures' setup takes (the runner's pytests_seconds)
    is counted as the reported run's: pytest's setup would have made them.
    The phase around them is leakcheck's: the test's own setup phase has
    one too.  What they made is frozen after, when it is much (the
    freezer's after_setup)."""
    try:
        with runs.unmeasured():
            yield
    finally:
        costs.lap()
        if freezer.after_setup(config):
            runs.refresh()
            costs.snapshots += costs.lap()


def _no_settle(item):
    pass


def _settle_hook(ihook):
    """The pytest_leakcheck_settle hook of an item's conftests and plugins
    (`ihook`: item.ihook), or a function that does nothing when none
    implements it (calling pluggy with nothing to call costs microseconds
    a snapshot)."""
    hook = ihook.pytest_leakcheck_settle
    return hook if hook.get_hookimpls() else _no_settle


def _run_series(h):
    """The reported run, then the series' runs until its verdict is in, a
    run does not pass, or the engine raises; returns (the reported run's
    reports, the report of a failed extra run or None, the engine's
    exception or None, the slowest measured run in seconds).  Everything
    made between two snapshots here is that run's growth: nothing is.
    What each part costs goes to h.costs."""
    item, series, runs, runner, costs = (h.item, h.series, h.runs,
                                         h.runner, h.costs)
    clock = perrun.wall
    total = h.settings.warmup + h.settings.repeat
    reports = None
    failure = None      # the report of a failed extra run
    error = None        # the engine's exception
    settle = _settle_hook(runner.ihook)
    # Both floats exist before the first snapshot: made by the first
    # measured run, they would be its growth.
    run_time = float(0)
    began = float(0)
    # The loop's flags too, bound to what they hold at the snapshot after
    # the reported run: a name first bound in that run is one reference
    # more, which the refs probe (sys.gettotalrefcount, on a debug build)
    # reads as its growth.
    more = True
    confirming = False
    # This frame's object, made now: the runs return here, and a run whose
    # test frame lives on (an ExceptionInfo in a local holds it through its
    # traceback, in a cycle the snapshot collects) would make it
    # (cpython.LAZY_FRAMES), the reported run's growth and no later run's.
    cpython.make_frame_object()
    # One reading of the clock ends a part and starts the next: a
    # snapshot's part runs from the end of the last run to the start of
    # the next, the progress line included.  `now` and `mark` are bound
    # before the first snapshot, as the floats above.
    now = mark = clock()
    # Every snapshot is read from one call, series.next() and the rebase
    # alike: what the calling frame holds while the engine reads is then
    # the same in each (CPython 3.14 pushes a local borrowed at one call
    # and owned at another, one reference apart, which the refs probe
    # would read as the first extra run's change).
    snapshots = (series.next, series.rebase)
    rebase = False
    while True:
        parked = runs.count == 1 and not rebase
        try:
            if parked:
                runner.park_output(reports)
            if reports is not None or h.settings.warmup == 1:
                settle(item=item)       # a snapshot is next
            more = snapshots[rebase]() is not False
        except Exception as e:
            error = e
            break
        finally:
            if parked:
                runner.restore_output()
        if not more:
            break
        if rebase:
            rebase = False
        else:
            confirming = series.confirming
            h.progress.show(
                progressmod.WHAT_CONFIRMING
                if confirming or runs.count >= total else
                progressmod.WHAT_RUN, runs.count + 1, total)
            # What the runner makes for the extra runs is not their growth:
            # the snapshot the first is measured from is read again.
            rebase = reports is not None and runner.ready_again()
            if rebase:
                continue
        now = clock()
        costs.snapshots += now - mark
        mark = now
        with runs.run():
            if reports is None:
                # pytest's run: what the plugin's hooks do in it is not.
                perrun.OUTSIDE.paused = False
                try:
                    reports = runner.run_reported()
                finally:
                    perrun.OUTSIDE.paused = True
            else:
                began = time.perf_counter()
                failure = runner.run_again()
                run_time = max(run_time, time.perf_counter() - began)
        now = clock()
        if runs.count == 1:
            # pytest's phases alone: the run's limits (runs.run()) and
            # what the runner notes after the phases are leakcheck's
            # bookkeeping.
            costs.reported += runner.reported_seconds
        elif confirming:
            costs.confirmation += now - mark
        else:
            costs.extra_runs += now - mark
        mark = now
        if outcome_of(reports) != "passed" or failure is not None:
            break
    costs.snapshots += clock() - mark
    if reports is None:
        with runs.run():
            reports = runner.run_reported()
        costs.reported += runner.reported_seconds
    return reports, failure, error, run_time


def _judge(h, call, outcome, failure, error, run_time):
    """The record of the hunt's verdict; the call report of a test that
    did not pass every run, or leaked, fails with the reason."""
    if outcome in ("skipped", "xfailed", "xpassed"):
        return h.record("skipped", outcome,
                        reason=f"not checked: the test {outcome}")
    if outcome != "passed":
        return h.record("error", outcome,
                        reason=f"not checked: the test {outcome}")
    if failure is not None and neighbours.reruns(h.item):
        # What the test's reported run did stands, as pytest-rerunfailures
        # would rerun a failure.
        return h.record("skipped", outcome,
                        reason="not checked: " + MSG_FLAKY_LATER.format(
                            outcome=outcome_of([failure]),
                            when=failure.when))
    if failure is not None:
        return _failed_again(h, call, failure)
    if error is not None:
        msg = (MSG_LIMIT_SHARED.format(run=h.runs.count)
               if perrun.is_timeout(error) else
               MSG_ENGINE_ERROR.format(error=f"{type(error).__name__}: "
                                             f"{error}"))
        call.outcome = "failed"
        call.longrepr = msg
        return h.record("error", "failed", reason=msg, judged=False)
    if h.series.leaked:
        return _leaked(h, call, outcome, run_time)
    return h.record("clean", outcome, series=h.series)


def _failed_again(h, call, failure):
    """A run after the reported one did not pass: the test errors."""
    msg = _rerun_failed(failure, h.runs, h.runs.count)
    call.outcome = "failed"
    call.longrepr = f"{msg}\n\n{failure.longreprtext}"
    return h.record("error", "failed", reason=msg, judged=False)


def _leaked(h, call, outcome, run_time):
    """The series found a leak: diagnosed, dumped when asked, and the test
    fails with the report, unless the baseline knows the leak (then the
    report is a section of the passing test's)."""
    item, series, state = h.item, h.series, h.state
    dump_dir = state.settings.dump_dir
    began = perrun.wall()
    diagnosis, note = _diagnose(h, series.leaking, state.settings.diagnose,
                                run_time, keep_objects=bool(dump_dir),
                                capture_dir=dump_dir)
    h.costs.diagnosis += perrun.wall() - began
    text = series.report(diagnosis=diagnosis)
    if note is not None and diagnosis is None:
        text += f"\nnote: {note}"
    if dump_dir and diagnosis is not None:
        text += "\n" + _dump(dump_dir, item, series, diagnosis)
    known = reportmod.is_known(state.baseline, item.nodeid, series.leaking)
    rec = h.record("leak", outcome, series=series, diagnosis=diagnosis,
                   known=known)
    if diagnosis is None and note is not None:
        rec["diagnosis"] = {"text": f"note: {note}"}
    if known:
        call.sections.append((SECTION_KNOWN, text))
    else:
        rec["outcome"] = "failed"
        call.outcome = "failed"
        call.longrepr = terminal.leak_failure(
            text, series.leaking, series.deltas, item.location)
    return rec


def _finish(h, reports, call, rec, judged):
    """Tears down for the next item (a run more when that takes one), and
    puts the record on the call report; the reports to log.  `judged`:
    every run passed and the engine judged the test, so a failure of that
    last run makes it error."""
    final_failure = None
    if not h.runner.tear_down_quietly():
        # The teardown phase alone is not a run of the test; one more whole
        # run is.
        alone = h.runner.tears_down_alone()
        began = perrun.wall()
        with h.runs.unmeasured() if alone else h.runs.run():
            reports, final_failure = h.runner.finish(reports, alone)
        # The teardown phase alone is leakcheck's, but for the wider
        # fixtures' teardown, which pytest's teardown phase of the test
        # would have run.
        if not alone:
            h.costs.extra_runs += perrun.wall() - began
    h.costs.reported += h.runner.pytests_seconds
    if final_failure is not None and judged:
        # The extra run that tears down wider fixtures failed: the test
        # does not pass every run, as a failed measured run would show.
        rec = _failed_again(h, call, final_failure)
    h.runs.close()
    h.progress.clear()
    rec["test_runs"] = h.runs.count
    rec["hunt_seconds"] = round(h.runs.added_seconds(), 3)
    rec["hunt_costs"] = h.costs.as_dict()
    if h.runs.count > 1:
        # junitxml reads the properties of the teardown report.
        reports[-1].user_properties.extend([
            (JUNIT_RUNS, h.runs.count), (JUNIT_SECONDS, rec["hunt_seconds"])])
    call.leakcheck = rec
    return reports


def _rerun_failed(failure, runs, run):
    """The message of a run after the first that did not pass."""
    if perrun.is_timeout(failure.longreprtext):
        if runs.per_run:
            return MSG_RERUN_TIMEOUT.format(run=run, limit=runs.limit)
        return MSG_LIMIT_SHARED.format(run=run)
    return MSG_RERUN_FAILED.format(outcome=outcome_of([failure]),
                                   when=failure.when)


# On the config: the path of each test file so far, by item.location's
# path relative to the root (os.path.join() and normpath() are Python
# code, normpath() around a C part from 3.11, and give every test of a
# file the same path).
_PATHS = pytest.StashKey[dict]()


def _location(item):
    """Where the test is defined, for the series' report: from
    item.location, which pytest computes once per item (reportinfo() finds
    the source line anew on each call)."""
    try:
        relpath, lineno, _ = item.location
        paths = item.config.stash.get(_PATHS, None)
        if paths is None:
            paths = item.config.stash[_PATHS] = {}
        path = paths.get(relpath)
        if path is None:
            path = paths[relpath] = os.path.normpath(
                os.path.join(str(item.config.rootpath), relpath))
    except Exception:
        path, lineno, _ = item.reportinfo()
    return str(path), (lineno or 0) + 1


# ---- the diagnosis --------------------------------------------------------

class _OutOfBudget(Exception):
    """Raised by a diagnosis re-run that the budget has no time left for."""


class _BudgetedRun:
    """One more run of the test for the diagnosis, followed by the settle
    hook as in the series; raises _OutOfBudget instead when the run would
    start past `budget` seconds from the first call, counting on it taking
    as long as the slowest run so far (`run_time` to begin with)."""

    def __init__(self, h, budget, run_time):
        self.h = h
        self.budget = budget
        self.start = time.perf_counter()
        self.slowest = run_time

    def __call__(self):
        h = self.h
        began = time.perf_counter()
        if began - self.start + self.slowest > self.budget:
            raise _OutOfBudget()
        h.progress.show(progressmod.WHAT_DIAGNOSING, h.runs.count + 1)
        with h.runs.run(traced=True):
            h.runner.run_again()
        h.item.ihook.pytest_leakcheck_settle(item=h.item)
        self.slowest = max(self.slowest, time.perf_counter() - began)


def _diagnose(h, leaking, mode, run_time, keep_objects=False,
              capture_dir=None):
    """leakcheck.diagnose() over more runs of the test (_BudgetedRun);
    (diagnosis or None, a note or None).  Tracing starts one run earlier
    than the diagnosis compares (diagnose() does that itself, and stops
    tracing before its runs under memray): pytest replaces some of its own
    objects every run (a log stream per phase, a stash entry), and a
    replacement made before tracing began would read as memory the test
    kept.

    The re-runs get a budget of DIAGNOSE_BUDGET times the test's own run
    time (`run_time`, seconds, at least DIAGNOSE_FLOOR in all): a re-run
    that would start past it (tracing makes a run ~10 times slower) is not
    made, and the diagnosis says so.  `mode` "cheap" compares one run,
    diagnosed cheaply (diagnose()'s `cheap`); "off" re-runs nothing.
    h.runs counts the re-runs and gives each its time limit.  With
    `keep_objects`, the diagnosis holds what the runs left alive (for the
    dump) until the caller drops it; with `capture_dir`, memray's capture
    is kept there."""
    if mode == "off":
        return None, MSG_DIAGNOSIS_OFF
    budget = max(settingsmod.DIAGNOSE_FLOOR,
                 settingsmod.DIAGNOSE_BUDGET * run_time)
    run_once = _BudgetedRun(h, budget, run_time)
    cheap = mode == "cheap"
    diagnosis = None
    try:
        diagnosis = leakcheck.diagnose(run_once, list(leaking),
                                       runs=1 if cheap else DIAGNOSIS_RUNS,
                                       ignore=harness(h.item.config),
                                       keep_objects=keep_objects,
                                       capture_dir=capture_dir, cheap=cheap)
    except _OutOfBudget:
        pass
    except Exception:
        return None, None
    return diagnosis, _budget_note(diagnosis, budget, run_time)


def _budget_note(diagnosis, budget, run_time):
    """MSG_DIAGNOSIS_BUDGET when the budget stopped the diagnosis (before
    it had a result, or in one of its re-runs, which its notes tell: the
    note then replaces those), else None."""
    over = (f"re-running the code raised {_OutOfBudget.__name__}")
    if diagnosis is not None and not any(n.startswith(over)
                                         for n in diagnosis.notes):
        return None
    note = MSG_DIAGNOSIS_BUDGET.format(
        budget=budget, factor=settingsmod.DIAGNOSE_BUDGET,
        run_time=run_time)
    if diagnosis is not None:
        diagnosis.notes[:] = [n for n in diagnosis.notes
                              if not n.startswith(over)] + [note]
    return note


def _dump(directory, item, series, diagnosis):
    """Writes the test's dump (dropping the objects the diagnosis kept);
    the line that says where, or why not."""
    try:
        path = leakcheck.write_dump(directory, item.nodeid, diagnosis,
                                    deltas=series.deltas,
                                    ignore=harness(item.config))
    except Exception as e:
        diagnosis.survivors = None
        return MSG_DUMP_FAILED.format(directory=directory,
                                      error=f"{type(e).__name__}: {e}")
    return MSG_DUMP.format(path=path)


# ---- the record -----------------------------------------------------------

def _record(item, state, settings, verdict, outcome, series=None,
            reason=None, diagnosis=None, known=False, judged=True):
    """The test's record (leakcheck.report.record): from the settings
    before a series ran, from the series after."""
    path, lineno, _ = item.location
    if diagnosis is not None:
        try:
            diagnosis = diagnosis.to_dict()
        except Exception:
            diagnosis = {"text": str(diagnosis)}
    # What the series found, once one ran; the settings' probes before.
    found = {"probes": settings.probes} if series is None else {
        "runs": series.runs, "probes": series.probes,
        "warmup_measured": series.warmup_measured,
        "warmup_growth": series.warmup_growth, "leaking": series.leaking,
        "deltas": series.deltas, "thresholds": series.thresholds,
        "unread": series.unread, "threads": series.threads}
    return lcreport.record(
        item.nodeid, verdict, outcome, known=known, judged=judged,
        reason=reason, file=path.replace(os.sep, "/"),
        line=None if lineno is None else lineno + 1, warmup=settings.warmup,
        repeat=settings.repeat, worker=state.worker_id, diagnosis=diagnosis,
        **found)
