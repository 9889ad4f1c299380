"""The GC freezer keeps what earlier tests left out of the snapshots'
collections: it freezes again once they left enough, and finds that out
without walking the objects of the heap."""

import sys

from pytest_leakcheck import session

# A session fixture a checked test sets up, holding many objects; the next
# checked tests find them frozen.  Every call of gc.get_objects() made from
# the plugin's own modules is noted: the freezer makes none.
BIG_FIXTURE = '''
import gc
import os
import sys

import pytest

import pytest_leakcheck

HELD = 20000
PLUGIN_DIR = os.path.dirname(pytest_leakcheck.__file__)
_get_objects = gc.get_objects


def _noting_get_objects(*args, **kwargs):
    caller = sys._getframe(1).f_code.co_filename
    if os.path.dirname(caller) == PLUGIN_DIR:
        with open("get_objects.log", "a") as f:
            f.write(caller + "\\n")
    return _get_objects(*args, **kwargs)


gc.get_objects = _noting_get_objects


FROZEN = {}


@pytest.fixture(scope="session")
def big():
    FROZEN["before"] = gc.get_freeze_count()
    return [[i] for i in range(HELD)]
'''

TESTS = '''
import gc

import pytest

from conftest import FROZEN, HELD


@pytest.mark.noleak
def test_first(big):
    pass


@pytest.mark.noleak
@pytest.mark.parametrize("i", range({later}))
def test_later(i):
    pass


@pytest.mark.noleak
def test_frozen(big):
    # Frozen objects die too (a few dozen per test): half is plenty.
    assert gc.get_freeze_count() >= FROZEN["before"] + HELD // 2
'''


def test_what_a_checked_test_left_is_frozen_without_a_heap_walk(pytester):
    pytester.makeconftest(BIG_FIXTURE)
    pytester.makepyfile(test_big=TESTS.format(later=1))
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=3)
    assert not (pytester.path / "get_objects.log").exists(), \
        (pytester.path / "get_objects.log").read_text()


FIRST_USE = '''
import gc

import pytest

from conftest import FROZEN, HELD

_KEPT = []


@pytest.fixture(scope="module")
def other_big():
    return [[i] for i in range(HELD)]


def test_before():
    # The session's first test fills what is filled once.
    pass


def test_first(big):
    # Set up before the reported run's snapshot, and frozen then.
    assert gc.get_freeze_count() >= FROZEN["before"] + HELD // 2


def test_leaky_first(other_big):
    _KEPT.append([])
'''


def test_a_wide_fixture_is_frozen_before_the_first_reported_run_using_it(
        pytester, read_report):
    """The first test of a fixture that holds many objects finds them
    frozen already in its reported run: neither its snapshots nor the next
    test's freeze collect them.  That test is clean, and runs once; a test
    that leaks right after such a freeze is still caught."""
    pytester.makeconftest(BIG_FIXTURE)
    pytester.makepyfile(test_first=FIRST_USE)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--leaks",
                                           "--leaks-report=r.json")
    result.assert_outcomes(passed=2, failed=1)
    _, recs = read_report()
    rec = recs["test_first.py::test_first"]
    assert rec["verdict"] == "clean", rec
    if sys.version_info >= (3, 11):
        assert rec["test_runs"] == 1, (rec["deltas"], rec["warmup_measured"])
    rec = recs["test_first.py::test_leaky_first"]
    assert rec["verdict"] == "leak", rec
    assert rec["deltas"]["objects"] == [1] * rec["runs"], rec


def test_without_pymalloc_a_wide_fixture_is_frozen_after_its_setup(
        pytester, monkeypatch, read_report):
    """PYTHONMALLOC=malloc (as under valgrind): sys.getallocatedblocks()
    counts nothing, and the collector tells the growth instead: its
    youngest generation filled while the fixture was set up, and what the
    fixture holds is frozen before the reported run of its first test, as
    with pymalloc."""
    monkeypatch.setenv("PYTHONMALLOC", "malloc")
    pytester.makeconftest(BIG_FIXTURE)
    pytester.makepyfile(test_first=FIRST_USE)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--leaks",
                                           "--leaks-report=r.json")
    result.assert_outcomes(passed=2, failed=1)
    _, recs = read_report()
    assert recs["test_first.py::test_first"]["verdict"] == "clean"
    assert recs["test_first.py::test_leaky_first"]["verdict"] == "leak"
    assert not (pytester.path / "get_objects.log").exists()


# The big fixture, with growth out of reach, in blocks and in the
# collector's collections (what tells it where the blocks are not counted:
# without pymalloc, and before the first snapshot): only the count of
# tests makes the freezer freeze again.
GROWTH_OUT_OF_REACH = BIG_FIXTURE + '''
from pytest_leakcheck import session

session.YOUNG_BLOCKS = 10 ** 9
session.YOUNG_COLLECTIONS = 10 ** 9
'''


def test_without_pymalloc_it_freezes_again_after_young_tests(pytester,
                                                             monkeypatch):
    """Without pymalloc, however little the tests made, the freezer
    freezes again at the YOUNG_TESTS-th checked test after its first
    freeze (test_first's)."""
    monkeypatch.setenv("PYTHONMALLOC", "malloc")
    pytester.makeconftest(GROWTH_OUT_OF_REACH)
    pytester.makepyfile(test_big=TESTS.format(later=session.YOUNG_TESTS - 1))
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=session.YOUNG_TESTS + 1)
    assert not (pytester.path / "get_objects.log").exists()


def test_without_pymalloc_not_frozen_before_young_tests(pytester,
                                                        monkeypatch):
    """The counterpart: one checked test fewer, and what test_first left
    is not frozen yet when test_frozen runs."""
    monkeypatch.setenv("PYTHONMALLOC", "malloc")
    pytester.makeconftest(GROWTH_OUT_OF_REACH)
    pytester.makepyfile(test_big=TESTS.format(later=session.YOUNG_TESTS - 2))
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=session.YOUNG_TESTS - 1, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_big.py::test_frozen*"])


def test_it_freezes_again_after_young_tests_whatever_they_left(pytester):
    """With pymalloc, however few blocks the tests left, the freezer
    freezes again at the YOUNG_TESTS-th checked test after its first
    freeze, so that the snapshots' collections stay small
    (bench/bench_freezer.py)."""
    pytester.makeconftest(GROWTH_OUT_OF_REACH)
    pytester.makepyfile(test_big=TESTS.format(later=session.YOUNG_TESTS - 1))
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=session.YOUNG_TESTS + 1)


def test_not_frozen_again_before_young_tests(pytester):
    """The counterpart: one checked test fewer, and what test_first left
    is not frozen yet when test_frozen runs."""
    pytester.makeconftest(GROWTH_OUT_OF_REACH)
    pytester.makepyfile(test_big=TESTS.format(later=session.YOUNG_TESTS - 2))
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=session.YOUNG_TESTS - 1, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_big.py::test_frozen*"])


# Freezes before every checked test, so that each reported run follows a
# freeze.
EVERY_TEST = '''
from pytest_leakcheck import session

session.YOUNG_BLOCKS = 0
'''

AFTER_A_FREEZE = '''
import logging

import pytest

_KEPT = []


@pytest.mark.parametrize("i", range(8))
def test_clean(i):
    logging.getLogger("after_a_freeze").info("quiet")
    assert i >= 0


def test_leaky():
    _KEPT.append([])
'''


def test_a_clean_test_right_after_a_freeze_runs_once(pytester, read_report):
    """pytest's log capture removes its handlers from the root logger in
    every phase, and from CPython 3.14 on (gh-79366) removeHandler()
    replaces the logger's list of handlers: had the freeze frozen that
    list, its death would go uncounted and its copy read as one object
    more in the reported run that follows.  The freezer gives every logger
    a fresh list; a leak right after a freeze is still caught."""
    pytester.makeconftest(EVERY_TEST)
    pytester.makepyfile(test_after=AFTER_A_FREEZE)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--leaks",
                                           "--leaks-report=r.json")
    result.assert_outcomes(passed=8, failed=1)
    _, recs = read_report()
    rec = recs["test_after.py::test_leaky"]
    assert rec["verdict"] == "leak" and rec["deltas"]["objects"][0] == 1, rec
    # The first tests fill what is filled once.
    for i in range(2, 8):
        rec = recs[f"test_after.py::test_clean[{i}]"]
        assert rec["verdict"] == "clean", rec
        if sys.version_info >= (3, 11):
            assert rec["test_runs"] == 1 and rec["warmup_measured"], rec
