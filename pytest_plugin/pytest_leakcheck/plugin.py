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

Uses only names in leakcheck.__all__ and leakcheck.report.  All session
state lives in config.stash[STATE].

This module registers the plugin (options, markers, configuration, the
report header) and holds the hooks pytest looks up by name, which hand
the work to the module of each job: hunt (one test's hunt), session
(state, freezer, report writing, pytest-xdist), terminal (what is
written), fixture (the `leakcheck` fixture), perrun (time limits).  The
hooks that only some tests need are registered once one does (the
phases' PhaseHooks here; session.SessionHooks, RecordHooks and
JournalHooks there): a session that hunts nothing calls none of them.
Every use of pytest's internals is in pytest_private.
"""

import os
import time

import pytest

# The plugin's import (leakcheck's engine with it) is a cost of the session
# it hunts in (perrun.OUTSIDE).
_IMPORT_BEGAN = time.perf_counter()        # perrun.wall

import leakcheck  # noqa: E402

from . import fixture
from . import hooks
from . import hunt
from . import perrun
from . import report as reportmod
from . import session as sessionmod
from . import settings as settingsmod
from . import terminal
from .runner import note_shared_fixture
from .session import STATE, UNSUPPORTED
from .settings import BadValue

perrun.OUTSIDE.end(_IMPORT_BEGAN)

# Messages (the tests format these instead of copying them).
MSG_HEADER = ("leakcheck: hunting in {scope}; warmup {warmup}, repeat "
              "{repeat}; probes {probes}")
MSG_UNAVAILABLE = "leakcheck: not available here: {probes}"
MSG_FAULTHANDLER = ("leakcheck: faulthandler_timeout ({timeout}s) watches "
                    "all the runs of a hunted test together, not each run "
                    "(pytest offers no way to re-arm it): a long hunt may "
                    "trip it")
MSG_REPEAT_ONE = ("leakcheck: repeat 1 ({where}) judges each test on a "
                  "single delta, where noise alone (another thread "
                  "allocating, a cache filling once) fails clean tests; "
                  "repeat 2 or more judges on growth in every run")
MSG_RIVAL = ("leakcheck: pytest-leaks is installed too and also defines "
             "--leaks; run pytest with -p no:leaks to hunt with leakcheck "
             "(-p no:leakcheck for pytest-leaks), or uninstall one of them")
RIVAL = "leaks"           # pytest-leaks' plugin name (its pytest11 entry)

# pytest finds the plugin's fixtures in its module.
leakcheck_fixture = fixture.leakcheck_fixture


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
    began = perrun.OUTSIDE.begin()
    try:
        _configure(config)
    finally:
        perrun.OUTSIDE.end(began)


def _configure(config):
    config.addinivalue_line("markers", settingsmod.MARKER_LINE)
    config.addinivalue_line("markers", settingsmod.OPT_OUT_LINE)
    config.addinivalue_line("markers", settingsmod.NOT_REPEATABLE_LINE)
    unsupported = leakcheck.unsupported()
    if unsupported is not None:
        # No state: every hook then leaves the tests to pytest alone.
        config.stash[UNSUPPORTED] = unsupported
        return
    session_settings, baseline = _configured(config)
    state = sessionmod.State(config, session_settings, baseline)
    state.setup_only = bool(config.getoption("setuponly", False) or
                            config.getoption("setupplan", False))
    config.stash[STATE] = state
    if session_settings.defaults.repeat == 1 and state.worker_id is None:
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            MSG_REPEAT_ONE.format(
                where=session_settings.sources.get("repeat"))), stacklevel=2)
    if session_settings.report_path and state.worker_id is None:
        sessionmod.open_report(state, config)
    state.phase_hooks = PhaseHooks()
    controller = _hands_out_tests(config)
    if session_settings.hunt_all or session_settings.report_path or \
            controller:
        state.need_session_hooks()
    if controller or (config.getoption("verbose", 0) or 0) >= 1:
        # The workers' records arrive on their reports; at -v every hunted
        # test's status word says how many runs it took.
        state.need_record_hooks()


def _hands_out_tests(config):
    """Whether this process is a pytest-xdist controller, whose workers
    run the tests and send their reports (and records) back."""
    return getattr(config, "workerinput", None) is None and \
        getattr(config.option, "dist", "no") not in ("no", None) and \
        bool(getattr(config.option, "numprocesses", None) or
             getattr(config.option, "tx", None))


def _configured(config):
    """The session's settings and baseline ({test id: probes}); UsageError
    naming where a bad value came from."""
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
    return session_settings, baseline


def pytest_unconfigure(config):
    state = config.stash.get(STATE, None)
    if state is not None:
        sessionmod.close(state)


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
    watchdog = perrun.faulthandler_timeout(config)
    if watchdog:
        lines.append(MSG_FAULTHANDLER.format(timeout=watchdog))
    return lines or None


# ---- the hooks of a test --------------------------------------------------

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    return hunt.protocol(item, nextitem)


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef, request):
    if getattr(fixturedef, "scope", "function") != "function" and \
            STATE in request.config.stash:
        began = perrun.OUTSIDE.begin()
        note_shared_fixture(request.session, fixturedef)
        perrun.OUTSIDE.end(began)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    """pytest-timeout arms the test's timer: its settings are kept, so that
    each run of a hunt gets the same limit (see perrun)."""
    perrun.remember_timeout(item, settings)


class PhaseHooks:
    """The hooks of a test's phases, which only a test that pytest runs
    itself with a record to make (hunt.BAD_SETTINGS, hunt.OPTED_OUT) or
    a hunted test with a time limit per run (perrun.RUNS) needs:
    registered as session.PHASE_HOOKS_NAME by State.need_phase_hooks() when
    the first such test comes, and not before, so that the other tests'
    phases do not call them (pluggy's call of a wrapper costs some
    microseconds, three phases a run, in every pytest session the plugin
    loads in)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        # The clock only when there is a record to make: reading it costs
        # more than looking (so in every hook below).
        if hunt.BAD_SETTINGS in item.stash or hunt.OPTED_OUT in item.stash:
            began = perrun.OUTSIDE.begin()
            hunt.on_report(item, report)
            perrun.OUTSIDE.end(began)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        if perrun.RUNS in item.stash:
            began = perrun.OUTSIDE.begin()
            perrun.arm(item)
            perrun.OUTSIDE.end(began)
        message = item.stash.get(hunt.BAD_SETTINGS, None)
        if message is not None:
            pytest.fail(message, pytrace=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        try:
            return (yield)
        finally:
            if perrun.RUNS in item.stash:
                began = perrun.OUTSIDE.begin()
                perrun.disarm(item)
                perrun.OUTSIDE.end(began)


# ---- results, summary and the report ---------------------------------------

@pytest.hookimpl(wrapper=True)
def pytest_report_from_serializable(config, data):
    report = yield
    sessionmod.from_serializable(report)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    state = session.config.stash.get(STATE, None)
    if state is not None:
        sessionmod.finish(session, exitstatus, state)   # counts its cost


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    terminal.summary(terminalreporter, config, config.stash.get(STATE, None))
