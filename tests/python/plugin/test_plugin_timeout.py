"""pytest-timeout's limit is per run of the test, also when leakcheck runs
it again and again; when it cannot be applied per run, leakcheck says so
and does not blame the test."""

import os
import sys

import pytest

from pytest_leakcheck import hunt, plugin

pytest_timeout = pytest.importorskip("pytest_timeout")

# Each run takes 0.4 s and a budget of 2 s; the six warm-up runs take
# 2.4 s (the last of them is the measured run when it grew nothing).
SLOW = '''
import time

def test_slow():
    with open("runs.log", "a") as f:
        f.write("run\\n")
    time.sleep(0.4)
'''
WARMUP = 6


@pytest.mark.parametrize("method, func_only", [
    ("signal", False), ("thread", False), ("signal", True), ("thread", True)])
def test_each_run_gets_the_tests_own_budget(pytester, read_report, runs_log,
                                            method, func_only):
    pytester.makepyfile(SLOW)
    pytester.makeini(f"[pytest]\ntimeout_func_only = {func_only}\n")
    result = pytester.runpytest_subprocess(
        "--timeout=2", f"--timeout-method={method}", "--leaks",
        f"--leaks-warmup={WARMUP}", "--leaks-report=r.json")
    result.assert_outcomes(passed=1)
    rec = read_report()[1]["test_each_run_gets_the_tests_own_budget.py::"
                           "test_slow"]
    # Clean, and no false alarm from the timer armed and joined per run.
    assert rec["verdict"] == "clean"
    assert len(runs_log()) == rec["test_runs"] >= WARMUP


# The third run takes longer than the limit of each run.
SLOW_THIRD = '''
import time

RUNS = []

def test_slower_later():
    RUNS.append(1)
    time.sleep(3 if len(RUNS) == 3 else 0)
'''


def test_a_run_over_its_budget_is_named(pytester, read_report):
    pytester.makepyfile(SLOW_THIRD)
    result = pytester.runpytest_subprocess(
        "--timeout=1", "--timeout-method=signal", "--leaks",
        "--leaks-warmup=4", "--leaks-report=r.json")
    result.assert_outcomes(failed=1)
    message = hunt.MSG_RERUN_TIMEOUT.format(run=3, limit=1.0)
    result.stdout.fnmatch_lines([message])
    rec = read_report()[1]["test_a_run_over_its_budget_is_named.py::"
                           "test_slower_later"]
    assert rec["verdict"] == "error" and rec["reason"] == message
    assert rec["judged"] is False


# A module fixture that hangs, and one that tears down slowly: set up before
# the first test's reported run and torn down by the last test's teardown
# phase alone, neither is a run, and the test's limit covers both.
HANGS = '''
import time

import sys

import pytest


@pytest.fixture(scope="module")
def hangs():
    time.sleep(30)


@pytest.fixture(scope="module")
def slow_teardown():
    yield
    time.sleep(30)


def test_warms_up():
    pass


def test_hangs(hangs):
    pass


def test_slow_teardown(slow_teardown):
    pass
'''


def test_the_limit_covers_shared_fixtures_outside_the_runs(pytester):
    pytester.makepyfile(HANGS)
    plain = pytester.runpytest_subprocess(
        "-p", "no:leakcheck", "--timeout=2", "--timeout-method=signal")
    plain.assert_outcomes(passed=2, errors=2)
    result = pytester.runpytest_subprocess(
        "--timeout=2", "--timeout-method=signal", "--leaks")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_hangs*",
                                 "*Timeout*",
                                 "*ERROR at teardown of test_slow_teardown*",
                                 "*Timeout*"])
    assert result.duration < 25


# A timer of the whole test that leakcheck cannot see: a plugin answers
# pytest-timeout's hook before pytest-timeout (and before leakcheck).
OWN_TIMER = '''
import signal

import sys

import pytest
import pytest_timeout


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    def fire(signum, frame):
        pytest.fail(pytest_timeout.PYTEST_FAILURE_MESSAGE % settings.timeout)
    signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_cancel_timer(item):
    signal.setitimer(signal.ITIMER_REAL, 0)
    return True
'''

# Runs of 0.9 s under a limit of 1.5 s: it runs out inside the second.
SLOWER = '''
import time

def test_slower():
    time.sleep(0.9)
'''


def test_a_limit_not_applied_per_run_does_not_blame_the_test(
        pytester, read_report):
    pytester.makeconftest(OWN_TIMER)
    pytester.makepyfile(SLOWER)
    result = pytester.runpytest_subprocess(
        "--timeout=1.5", "--leaks", "--leaks-warmup=3",
        "--leaks-report=r.json")
    result.assert_outcomes(failed=1)
    message = hunt.MSG_LIMIT_SHARED.format(run=2)
    result.stdout.fnmatch_lines([message])
    assert "then failed when run again" not in result.stdout.str()
    rec = read_report()[1]["test_a_limit_not_applied_per_run_does_not_"
                           "blame_the_test.py::test_slower"]
    assert rec["reason"] == message


def test_a_watchdog_of_the_whole_protocol_is_named(pytester, clean_source):
    """pytest's faulthandler_timeout is armed once per test, with no way
    for another plugin to re-arm it: said at the start, not blamed on a
    test later."""
    pytester.makepyfile(clean_source)
    pytester.makeini("[pytest]\nfaulthandler_timeout = 5\n")
    result = pytester.runpytest_subprocess("--leaks")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([plugin.MSG_FAULTHANDLER.format(timeout=5.0)])
    quiet = pytester.runpytest_subprocess("-p", "no:faulthandler", "--leaks")
    assert plugin.MSG_FAULTHANDLER.split("{")[0] not in quiet.stdout.str()


# The GC freezer freezes before every checked test (as it does now and then
# in a long session), and a wide fixture set up before the first reported
# run makes it freeze again there.
FREEZE_EVERY_TEST = '''
import sys

import pytest

from pytest_leakcheck import session

session.YOUNG_BLOCKS = 0


@pytest.fixture(scope="module")
def shared():
    return [object() for _ in range(2000)]
'''
AFTER_FREEZES = '''
import sys

import pytest

_KEPT = []


@pytest.mark.parametrize("i", range(6))
def test_clean(i):
    assert i >= 0


@pytest.mark.parametrize("i", range(3))
def test_clean_shared(shared, i):
    assert shared


def test_leaky():
    _KEPT.append([])
'''


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_a_clean_test_after_a_freeze_grows_no_object_under_a_limit(
        pytester, read_report, method):
    """pytest-timeout keeps a function of each arming on the item
    (cancel_timeout); one the freezer froze would die uncounted in the
    reported run, which arms the timer again, and its successor read as
    objects more (one with the signal method, the Timer's 25 or so with
    the thread method): the test ran twice more.  Each freeze is followed
    by an arming of its own, before the snapshot; a leak is still caught.
    (A clean test may still run more for what glibc's heap does around a
    timer's thread: bytes, not objects.)"""
    pytester.makeconftest(FREEZE_EVERY_TEST)
    pytester.makepyfile(test_after=AFTER_FREEZES)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--timeout=30", f"--timeout-method={method}",
        "--leaks", "--leaks-report=r.json")
    result.assert_outcomes(passed=9, failed=1)
    _, recs = read_report()
    rec = recs["test_after.py::test_leaky"]
    assert rec["verdict"] == "leak" and rec["deltas"]["objects"][0] == 1, rec
    # The first tests fill what is filled once.
    for test_id in [f"test_after.py::test_clean[{i}]" for i in range(2, 6)] + [
            f"test_after.py::test_clean_shared[{i}]" for i in range(3)]:
        rec = recs[test_id]
        assert rec["verdict"] == "clean", rec
        if sys.version_info >= (3, 11):
            assert "objects" not in (rec["warmup_growth"] or {}), rec



# One CPU for the session: a thread started is left to run when the main
# thread lets it, as on a loaded machine.
ONE_CPU = '''
import os

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
'''
WATCHED = '''
import pytest


@pytest.mark.parametrize("i", range(40))
def test_clean(i):
    assert i >= 0
'''


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                    reason="needs os.sched_setaffinity")
def test_faulthandlers_watchdog_start_is_no_tests_growth(pytester,
                                                         read_report):
    """faulthandler_timeout: pytest starts faulthandler's watchdog thread
    right before each test's protocol, and the thread, once it runs,
    frees the block of Python's raw domain its start was handed in and
    gives itself glibc's per-thread cache.  The hunt lets it fall asleep
    before its first snapshot: done in the reported run, that read as the
    run's growth (py_allocs -1, py_bytes -24, native_bytes +656 on 3.11),
    and the test ran twice more (16 to 30 of these 40, on one CPU)."""
    pytester.makeini("[pytest]\nfaulthandler_timeout = 30\n")
    pytester.makeconftest(ONE_CPU)
    pytester.makepyfile(test_watched=WATCHED)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--leaks",
                                           "--leaks-report=r.json")
    result.assert_outcomes(passed=40)
    _, recs = read_report()
    freed = {test_id: rec["warmup_growth"] for test_id, rec in recs.items()
             if (rec["warmup_growth"] or {}).get("py_allocs", 0) < 0}
    assert not freed, freed
