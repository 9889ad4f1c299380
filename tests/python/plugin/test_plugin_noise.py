"""What makes a verdict noisy is said: the other threads that ran while a
test was measured, and a single delta (repeat 1)."""

import pytest

from pytest_leakcheck import plugin

TICKER = '''
import threading
import time

import pytest

_KEPT = []
_STOP = threading.Event()


def tick():
    while not _STOP.wait(0.002):
        pass


def blocked(thread):
    from leakcheck._verdicts import _cpu_ns
    last = None
    while last is None or _cpu_ns(thread) != last:
        last = _cpu_ns(thread)
        time.sleep(0.02)


@pytest.fixture(scope="session", autouse=True)
def ticker():
    thread = threading.Thread(target=tick, name="ticker")
    idle = threading.Thread(target=_STOP.wait, name="idle")
    thread.start()
    idle.start()
    blocked(idle)
    yield
    _STOP.set()
    thread.join()
    idle.join()


def test_clean():
    pass


def test_leaky():
    # Each run lasts long enough for the ticker (every 2 ms) to run in it,
    # however loaded the machine: an instant run could be over before the
    # ticker is next scheduled.
    time.sleep(0.02)
    _KEPT.append([])
'''


def test_reports_name_the_threads_that_ran_meanwhile(pytester, read_report):
    pytester.makepyfile(test_ticker=TICKER)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*other threads ran while it measured (what they allocate counts "
        "too): ticker (tick)"])
    _, tests = read_report()
    for name in ("test_clean", "test_leaky"):
        assert tests[f"test_ticker.py::{name}"]["threads"] == \
            ["ticker (tick)"]


@pytest.mark.parametrize("how, where", [
    (["--leaks-repeat=1"], "command line"),
    (["-o", "leaks_repeat=1"], "ini"),
])
def test_repeat_one_is_warned_about(pytester, how, where):
    pytester.makepyfile("def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("--leaks", *how)
    # The verdict itself is what the warning is about: a single delta of
    # a session's first test can read a table that grows once (3.11: a
    # dict resized, py_bytes +1088).  The test runs and is judged.
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1, \
        outcomes
    result.stdout.fnmatch_lines(
        ["*" + plugin.MSG_REPEAT_ONE.format(where=where)[:60] + "*"])


def test_repeat_two_is_not(pytester):
    pytester.makepyfile("def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("--leaks", "--leaks-repeat=2")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*single delta*")
