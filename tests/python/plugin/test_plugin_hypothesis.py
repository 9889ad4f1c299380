"""A hypothesis @given test draws new examples on every run: its extra
runs draw the same ones each time, so that what its examples fill (its own
memo, hypothesis's caches) fills once; the reported run keeps the test's
own settings."""

import pytest

pytest.importorskip("hypothesis", reason="needs hypothesis "
                    "(scripts/setup installs it)")

MEMO = '''
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

_MEMO = {}


@pytest.fixture
def run_marker():
    with open("examples.log", "a") as f:
        f.write("run\\n")


def square(x):
    if x not in _MEMO:
        _MEMO[x] = x * x
    return _MEMO[x]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10**9))
def test_square(run_marker, x):
    with open("examples.log", "a") as f:
        f.write(f"{x}\\n")
    assert square(x) == x * x


_KEPT = []


@settings(max_examples=20)
@given(st.text())
def test_leaks_per_example(s):
    _KEPT.append([s])
'''


def test_given_tests_are_judged_on_the_same_examples(pytester, read_report):
    pytester.makepyfile(test_memo=MEMO)
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-report=r.json", "-k", "square",
        "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    _, tests = read_report()
    rec = tests["test_memo.py::test_square"]
    assert rec["verdict"] == "clean"
    # The reported run, then the extra runs: each of those draws the same
    # examples as the one before.
    runs = (pytester.path / "examples.log").read_text().split("run\n")[1:]
    assert len(runs) >= 3
    assert all(run == runs[1] for run in runs[1:])
    assert len(runs[1].split()) > 10

def test_a_real_leak_in_a_given_test_is_still_caught(pytester):
    pytester.makepyfile(test_memo=MEMO)
    result = pytester.runpytest_subprocess("--leaks", "-k", "per_example",
                                           "--leaks-diagnose=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["LEAKED test_memo.py::test_leaks_per_example*"])


STRATEGIES = '''
from hypothesis import given, strategies as st


@st.composite
def tagged(draw):
    # A strategy made inside a draw: tuples() is one of the strategy
    # functions hypothesis caches, keyed by its arguments, and a new
    # just() is a new key at every draw, same example or not.
    n = draw(st.integers(0, 10**6))
    return draw(st.tuples(st.integers(0, 9), st.just(n)))


@given(tagged())
def test_tagged(pair):
    assert 0 <= pair[0] <= 9


_KEPT = []


@given(tagged())
def test_tagged_leaks(pair):
    _KEPT.append([pair])
'''


def test_strategies_cached_by_a_draw_are_no_leak(pytester, read_report):
    """hypothesis caches the strategies its functions make in a cache of
    1,024 entries: a strategy made inside a draw adds an entry at every
    draw until it is full, run after run, for the same examples too.  The
    cache is emptied before each snapshot; a leak is still caught."""
    pytester.makepyfile(test_strategies=STRATEGIES)
    _one_clean_one_leak(pytester, read_report,
                        "test_strategies.py::test_tagged",
                        "test_strategies.py::test_tagged_leaks")


def _one_clean_one_leak(pytester, read_report, clean, leak):
    """Runs the folder under --leaks: `clean` passes with a clean verdict,
    `leak` fails with a leak verdict, and nothing else runs."""
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-report=r.json", "--leaks-diagnose=off",
        "-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    _, tests = read_report()
    assert tests[clean]["verdict"] == "clean", tests
    assert tests[leak]["verdict"] == "leak", tests


MACHINES = '''
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

_MEMO = {}
_KEPT = []


class Memo(RuleBasedStateMachine):
    """Fills a memo keyed by what it draws: new examples, new entries."""

    @rule(x=st.integers(0, 10**9))
    def square(self, x):
        with open("examples.log", "a") as f:
            f.write(f"{x}\\n")
        if x not in _MEMO:
            _MEMO[x] = [x * x]
        assert _MEMO[x] == [x * x]


class Keeps(RuleBasedStateMachine):
    @rule(s=st.text())
    def keep(self, s):
        _KEPT.append([s])


TestMemo = Memo.TestCase
TestMemo.settings = settings(max_examples=20, stateful_step_count=5)
MEMO_SETTINGS = TestMemo.settings
TestKeeps = Keeps.TestCase
TestKeeps.settings = settings(max_examples=5, stateful_step_count=5)
'''


def test_a_state_machine_is_judged_on_the_same_examples(pytester,
                                                         read_report):
    """A RuleBasedStateMachine's TestCase runs the machine with its
    class's settings: its extra runs draw the same steps each time, so a
    memo keyed by them fills once, and a leak per step is still caught."""
    pytester.makepyfile(test_machines=MACHINES)
    pytester.makeconftest('''
import sys


def pytest_sessionfinish(session):
    module = sys.modules["test_machines"]
    with open("after.log", "w") as f:
        f.write(str(module.TestMemo.settings is module.MEMO_SETTINGS))
''')
    _one_clean_one_leak(pytester, read_report,
                        "test_machines.py::TestMemo::runTest",
                        "test_machines.py::TestKeeps::runTest")
    # The class's own settings are back after the hunt (the very object:
    # with CI set, hypothesis's "ci" profile derandomizes every settings).
    assert (pytester.path / "after.log").read_text() == "True"
