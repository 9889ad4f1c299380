"""Fixtures wider than a function: the first test of their scope finds them
set up before its reported run (so that run can be its measured run), the
last one tears them down with the teardown phase alone; what they print,
log, raise or skip is where pytest puts it without --leaks."""

import collections
import json
import sys

import pytest

# The reported run is read as the measured run from 3.11 (release and debug
# builds; test_plugin_once.py says why not before).
READS_REPORTED = sys.version_info >= (3, 11)

# What the test files below define: log(event) adds a line to runs.log.
LOG = '''
import pytest


def log(event):
    with open("runs.log", "a") as f:
        f.write(event + "\\n")
'''

SCOPES = LOG + '''
import logging


@pytest.fixture(scope="session")
def server():
    log("session-setup")
    yield {"port": 1}
    log("session-teardown")


@pytest.fixture(scope="module")
def table(server):
    log("module-setup")
    print("table-setup-printed")
    logging.getLogger("scopes").warning("table-setup-logged")
    yield {i: str(i) for i in range(200)}
    print("table-teardown-printed")
    logging.getLogger("scopes").warning("table-teardown-logged")
    log("module-teardown")


def test_warms_up():
    assert sorted([2, 1]) == [1, 2]


def test_first(table):
    assert table[3] == "3"


def test_middle(table):
    assert len(table) == 200


@pytest.fixture(scope="class")
def group():
    log("class-setup")
    yield []
    log("class-teardown")


class TestGroup:
    def test_in_class(self, group, table):
        assert group == []


def test_last(table):
    assert table[199] == "199"
'''


def _passes(result):
    """The -rP section of a run's output, up to leakcheck's summary."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "= PASSES =" in line)
    end = next(i for i in range(start + 1, len(lines))
               if lines[i].startswith(("leakcheck:", "=")))
    return lines[start:end]


# Logs the settle hook, which runs before every snapshot: before the one
# that precedes a test's reported run too.
SETTLE_LOGGED = '''
import pytest


@pytest.hookimpl(optionalhook=True)
def pytest_leakcheck_settle(item):
    with open("runs.log", "a") as f:
        f.write("settle:" + item.name + "\\n")
'''


def test_shared_fixtures_are_up_before_the_first_run_and_down_after_the_last(
        pytester, read_report, runs_log):
    pytester.makepyfile(test_scopes=SCOPES)
    plain = pytester.runpytest_subprocess("-p", "no:leakcheck", "-rP",
                                          "-p", "no:cacheprovider")
    plain.assert_outcomes(passed=5)
    (pytester.path / "runs.log").unlink()
    pytester.makeconftest(SETTLE_LOGGED)
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-report=r.json", "-rP", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
    _, recs = read_report()
    assert {r["verdict"] for r in recs.values()} == {"clean"}, recs
    events = runs_log()
    assert [e for e in events if not e.startswith("settle:")] == [
        "session-setup", "module-setup", "class-setup", "class-teardown",
        "module-teardown", "session-teardown"]
    # Set up before the snapshot that precedes the first test's reported
    # run (the settle hook comes right before each snapshot), and the
    # class's before its test's.
    assert events.index("module-setup") < events.index("settle:test_first")
    assert events.index("settle:test_first") < events.index("class-setup") \
        < events.index("settle:test_in_class")
    # Torn down after the last test's snapshots, by no run of it: each test
    # ran its warm-up run and its measured runs (the warm-up run itself when
    # it grew nothing), and no more.
    for rec in recs.values():
        assert rec["test_runs"] == rec["warmup"] + rec["runs"] - \
            rec["warmup_measured"], rec
    assert events.index("module-teardown") > max(
        i for i, e in enumerate(events) if e == "settle:test_last")
    if READS_REPORTED:
        # So the first test of the module and of the class, and the last,
        # ran once; but one may have grown by something else (the GC
        # freezer's turn: see test_plugin_once.py).
        missed = [name for name in ("test_first", "TestGroup::test_in_class",
                                    "test_last")
                  if recs[f"test_scopes.py::{name}"]["test_runs"] != 1]
        assert len(missed) <= 1, missed
    # What the module fixture printed and logged, in its setup and its
    # teardown, is shown where and as pytest shows it without --leaks.
    assert "table-teardown-logged" in str(_passes(plain))
    assert _passes(result) == _passes(plain)


BROKEN = '''
import pytest

pytestmark = pytest.mark.noleak


@pytest.fixture(scope="module")
def broken():
    print("broken-printed")
    raise RuntimeError("module-fixture-broke")


@pytest.fixture(scope="module")
def missing():
    pytest.skip("not on this machine")


@pytest.fixture(scope="module")
def bad_teardown():
    yield
    raise RuntimeError("module-teardown-broke")


def test_broken_1(broken):
    pass


def test_broken_2(broken):
    pass


def test_skipped(missing):
    pass


@pytest.mark.skip(reason="marked")
def test_marked(broken):
    pass


def test_bad_teardown(bad_teardown):
    pass
'''


def test_a_shared_fixture_that_fails_or_skips_reads_as_without_leaks(
        pytester):
    pytester.makepyfile(test_broken=BROKEN)
    plain = pytester.runpytest_subprocess("-p", "no:leakcheck", "-rs")
    plain.assert_outcomes(passed=1, errors=3, skipped=2)
    result = pytester.runpytest_subprocess("-rs")
    result.assert_outcomes(passed=1, errors=3, skipped=2)
    out = result.stdout.str()
    # The fixture's own traceback, captured output and the skip reason, as
    # pytest shows them; none of leakcheck's frames.
    result.stdout.fnmatch_lines([
        "*ERROR at setup of test_broken_1*",
        "*raise RuntimeError(\"module-fixture-broke\")*",
        "*Captured stdout setup*", "broken-printed",
        "*ERROR at setup of test_broken_2*",
        "*ERROR at teardown of test_bad_teardown*",
        "*module-teardown-broke*"])
    result.stdout.fnmatch_lines(["*SKIPPED*not on this machine*",
                                 "*SKIPPED*marked*"])
    assert "pytest_leakcheck" not in out, out
    # The fixture ran once per test, as without --leaks (pytest caches its
    # error for the module): once for the first, not for the skipped one.
    assert out.count("broken-printed") == plain.stdout.str().count(
        "broken-printed")


HOOKS = '''
import pytest

KEY = pytest.StashKey[list]()


def pytest_runtest_setup(item):
    item.stash[KEY] = ["set up"]


def pytest_runtest_teardown(item):
    # Fails unless the setup hook ran before, for this item.
    assert item.stash[KEY] == ["set up"]
    del item.stash[KEY]
'''

HOOKED = LOG + '''

@pytest.fixture(scope="module")
def table():
    log("module-setup")
    yield {}
    log("module-teardown")


def test_first(table):
    assert table == {}


def test_last(table):
    assert table == {}
'''


def test_a_conftest_hooked_into_setup_and_teardown_gets_whole_runs(
        pytester, read_report, runs_log):
    """A setup or teardown hook that is not pytest's own may expect its
    pair: the shared fixtures are set up in the reported run, and the
    module is torn down by one more whole run."""
    pytester.makeconftest(HOOKS)
    pytester.makepyfile(test_hooked=HOOKED)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result.assert_outcomes(passed=2)
    _, recs = read_report()
    assert {r["verdict"] for r in recs.values()} == {"clean"}, recs
    assert collections.Counter(runs_log()) == {"module-setup": 1,
                                               "module-teardown": 1}
    # The module fixture's setup is the first test's growth, and the last
    # test runs once more to tear the module down.
    assert recs["test_hooked.py::test_first"]["test_runs"] >= 2
    assert recs["test_hooked.py::test_last"]["test_runs"] >= 2


@pytest.mark.parametrize("scope", ["module", "session"])
def test_a_leak_in_a_shared_fixture_s_first_use_is_no_leak(
        pytester, read_report, scope):
    """Set up before the reported run, a wider fixture is what every run of
    the test finds: a test that leaks is still caught."""
    pytester.makepyfile(test_leaks=f'''
import pytest

_KEPT = []


def test_warms_up():
    assert sorted([2, 1]) == [1, 2]


@pytest.fixture(scope="{scope}")
def big():
    return [object() for _ in range(1000)]


def test_clean(big):
    assert len(big) == 1000


def test_leaks(big):
    _KEPT.append([])
''')
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result.assert_outcomes(passed=2, failed=1)
    _, recs = read_report()
    assert recs["test_leaks.py::test_clean"]["verdict"] == "clean"
    assert recs["test_leaks.py::test_leaks"]["verdict"] == "leak"
    if READS_REPORTED:
        assert recs["test_leaks.py::test_clean"]["test_runs"] == 1


FORGETS = '''
import json

import pytest

from pytest_leakcheck import runner


def pytest_sessionfinish(session):
    held = session.stash.get(runner._SHARED_FIXTURES, {})
    with open("held.json", "w") as f:
        json.dump(sorted(fd.argname for fd in held.values()), f)
'''


def test_the_runner_lets_go_of_the_shared_fixtures_that_are_finished(
        pytester, read_report):
    """Every class of a unittest suite has a class-scoped fixture of
    pytest's: the runner, which looks at the shared fixtures after each
    reported run, must not look at every class's of the session so far
    (a cost that grew with the suite: 1.13 ms a test at the end of 3,000
    unittest methods against 0.63 ms once forgotten)."""
    classes = "".join(f'''

class TestCase{n}(unittest.TestCase):
    def test_method(self):
        self.assertEqual(len(KEPT), 0)
''' for n in range(40))
    pytester.makepyfile(test_many=f'''
import unittest

KEPT = []
{classes}
''')
    pytester.makeconftest(FORGETS)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           "-p", "no:randomly")
    result.assert_outcomes(passed=40)
    _, recs = read_report()
    assert {r["verdict"] for r in recs.values()} == {"clean"}, recs
    held = json.loads((pytester.path / "held.json").read_text())
    # Of the 40 classes' fixtures, the last test's at most.
    assert len(held) <= 1, held
