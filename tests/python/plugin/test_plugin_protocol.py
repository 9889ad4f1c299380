"""Each repetition runs the test's whole protocol: function fixtures every
time, wider ones once, nothing of pytest's own bookkeeping measured; real
outcomes stand; the series stops early."""

import collections
import importlib.util
import json
import os

import pytest

from pytest_leakcheck import hunt, terminal

FIXTURES = '''
import logging
import os
import sys
import unittest
import warnings

import pytest


def log(event):
    with open("runs.log", "a") as f:
        f.write(event + "\\n")


@pytest.fixture(scope="session")
def session_data():
    log("session-setup")
    yield {"big": list(range(5000))}
    log("session-teardown")


@pytest.fixture(scope="module")
def module_data(session_data):
    log("module-setup")
    yield [object() for _ in range(500)]
    log("module-teardown")


@pytest.fixture(autouse=True)
def everywhere(request):
    log("autouse-setup:" + request.node.name)
    yield
    log("autouse-teardown:" + request.node.name)


@pytest.fixture
def per_test(module_data, tmp_path):
    log("function-setup:" + str(tmp_path))
    yield tmp_path
    log("function-teardown")


@pytest.mark.parametrize("n", [1, 2])
def test_fixtures(n, per_test, tmp_path, monkeypatch, capsys, caplog,
                  record_property, recwarn):
    assert not any(tmp_path.iterdir())          # a fresh, empty directory
    monkeypatch.setenv("LEAKCHECK_TEST_VAR", str(n))
    monkeypatch.setattr("os.sep", os.sep)
    (tmp_path / "data").write_text("x" * 10000)
    print("captured-output-marker " * 50)
    print("captured-error-marker", file=sys.stderr)
    logging.getLogger("leaky.test").warning("logged %d", n)
    warnings.warn(UserWarning("warned-marker"))
    record_property("n", n)
    out, err = capsys.readouterr()
    assert "captured-output-marker" in out
    assert caplog.records and len(recwarn) == 1


def test_output_shown_once():
    print("shown-once-marker")
    logging.getLogger("leaky.test").error("logged-once-marker")


class TestGroup:
    @pytest.fixture(scope="class")
    def group_data(self):
        log("class-setup")
        return {}

    def test_method(self, group_data, per_test):
        assert group_data == {}


class Case(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        log("unittest-setupclass")
        cls.data = list(range(100))

    def setUp(self):
        self.items = [1, 2, 3]

    def test_unittest(self):
        self.assertEqual(sum(self.items), 6)


def doubled(x):
    """
    >>> doubled(21)
    42
    """
    return 2 * x
'''


def test_fixtures_rerun_per_repetition_and_count_as_no_leak(
        pytester, read_report, runs_log):
    pytester.makepyfile(test_fixtures=FIXTURES)
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-report=r.json", "--doctest-modules", "-rP",
        "-W", "always::UserWarning")
    result.assert_outcomes(passed=6)
    _, recs = read_report()
    assert {r["verdict"] for r in recs.values()} == {"clean"}, recs
    assert len(recs) == 6

    events = collections.Counter(
        e.split(":")[0] if e.startswith(("function-setup", "autouse"))
        else e for e in runs_log())
    # Wider fixtures: once, in the first (reported) run, never measured.
    assert events["session-setup"] == events["session-teardown"] == 1
    assert events["module-setup"] == events["module-teardown"] == 1
    assert events["class-setup"] == 1 and events["unittest-setupclass"] == 1
    # Function fixtures: set up and torn down in every run.
    assert events["autouse-setup"] == events["autouse-teardown"]
    assert events["function-setup"] == events["function-teardown"]
    per_test = collections.Counter(
        e.split(":", 1)[1] for e in runs_log() if e.startswith("autouse-set"))
    for test_id, rec in recs.items():
        name = test_id.split("::")[-1]
        if name in per_test:
            # Each run of the test set it up once; the module's teardown
            # after the last test is no run of it.
            assert per_test[name] == rec["test_runs"] >= 1, rec
    # A fresh tmp_path per run (the test checks it is empty); the reported
    # run's directory is kept, as pytest keeps it.
    tmp_paths = [e.split(":", 1)[1] for e in runs_log()
                 if e.startswith("function-setup")]
    assert os.path.isdir(tmp_paths[0])
    # Captured output and logs of the reported run only, shown once.
    out = result.stdout.str()
    assert out.count("shown-once-marker") == 1
    assert out.count("logged-once-marker") == 1


OUTCOMES = '''
import os
import pytest

_KEPT = []

def log(event):
    with open("runs.log", "a") as f:
        f.write(event + "\\n")

@pytest.fixture
def broken():
    raise RuntimeError("fixture-broke")

@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown-broke")

def test_fails():
    log("fails")
    _KEPT.append([])
    assert False, "real-failure"

def test_setup_error(broken):
    pass

def test_teardown_error(bad_teardown):
    pass

def test_skips():
    log("skips")
    _KEPT.append([])
    pytest.skip("skipped-on-purpose")

@pytest.mark.skipif(True, reason="marked-skip")
def test_skipif():
    pass

@pytest.mark.xfail(reason="expected")
def test_xfails():
    log("xfails")
    _KEPT.append([])
    assert False

@pytest.mark.xfail(reason="expected")
def test_xpasses():
    _KEPT.append([])

@pytest.mark.xfail(reason="expected", strict=True)
def test_xpass_strict():
    pass

def test_fails_when_repeated():
    if os.path.exists("once"):
        assert False, "second-run-failure"
    open("once", "w").close()
    _KEPT.append([])    # grows in its first run: another run is measured

def test_leaks():
    _KEPT.append([])

def test_clean():
    pass
'''


def test_real_outcomes_stand(pytester, read_report, runs_log):
    pytester.makepyfile(test_outcomes=OUTCOMES)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           "-rA")
    result.assert_outcomes(passed=2, failed=4, errors=2, skipped=2,
                           xfailed=1, xpassed=1)
    result.stdout.fnmatch_lines([
        "FAILED test_outcomes.py::test_fails - AssertionError: real-failure*",
    ])
    result.stdout.fnmatch_lines(["LEAKED test_outcomes.py::test_leaks*"])
    result.stdout.fnmatch_lines(
        ["FAILED test_outcomes.py::test_xpass_strict*"])
    result.stdout.fnmatch_lines(["*" + hunt.MSG_RERUN_FAILED.format(
        outcome="failed", when="call") + "*"])
    assert "LEAKED test_outcomes.py::test_fails" not in result.stdout.str()
    # Tests that did not pass ran once: they are not hunted.
    assert collections.Counter(runs_log()) == {"fails": 1, "skips": 1,
                                               "xfails": 1}

    _, recs = read_report()
    verdicts = {k.split("::")[1]: (r["verdict"], r["outcome"])
                for k, r in recs.items()}
    assert verdicts == {
        "test_fails": ("error", "failed"),
        "test_setup_error": ("error", "error"),
        "test_teardown_error": ("error", "error"),
        "test_skips": ("skipped", "skipped"),
        "test_skipif": ("skipped", "skipped"),
        "test_xfails": ("skipped", "xfailed"),
        "test_xpasses": ("skipped", "xpassed"),
        "test_xpass_strict": ("error", "failed"),
        "test_fails_when_repeated": ("error", "failed"),
        "test_leaks": ("leak", "failed"),
        "test_clean": ("clean", "passed"),
    }


EARLY = '''
_KEPT = []

def test_clean():
    with open("runs.log", "a") as f:
        f.write("clean\\n")

def test_leaks():
    _KEPT.append([])
    with open("runs.log", "a") as f:
        f.write("leaks\\n")

def test_last():
    pass
'''


def test_early_stop(pytester, read_report, runs_log):
    pytester.makepyfile(test_early=EARLY)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-repeat=5",
                                           "--leaks-report=r.json")
    result.assert_outcomes(passed=2, failed=1)
    _, recs = read_report()
    clean = recs["test_early.py::test_clean"]
    leaks = recs["test_early.py::test_leaks"]
    runs = collections.Counter(runs_log())
    # A clean test stops once nothing can leak any more: before `repeat`.
    assert clean["verdict"] == "clean" and clean["runs"] < 5
    assert runs["clean"] == (clean["warmup"] + clean["runs"]
                             - clean["warmup_measured"])
    # A leak needs every run; then the diagnosis runs it again: one run
    # to start tracing from, and the runs it compares; under memray, when
    # installed, as many as it compares (at least 2), and no run more
    # under a tracker of its own: the test's Python code kept the list, no
    # C line kept a block a run.
    assert leaks["verdict"] == "leak" and leaks["runs"] == 5
    under_memray = (max(2, hunt.DIAGNOSIS_RUNS)
                    if importlib.util.find_spec("memray") else 0)
    assert runs["leaks"] == (leaks["warmup"] + 5 + 1 + hunt.DIAGNOSIS_RUNS
                             + under_memray)
    assert all(len(v) == r["runs"] for r in (clean, leaks)
               for v in r["deltas"].values())


def test_leak_report_section(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")     # no truncated summary lines
    pytester.makepyfile(test_section='''
_KEPT = []

def test_leaks():
    _KEPT.append([])
''')
    result = pytester.runpytest_subprocess("--leaks", "-rf")
    # One line names the leak, led by the probe a person reads first (the
    # objects before the blocks they take), with its growth per run.
    line = terminal.MSG_LEAK.format(probe="objects", growth="+1", also="*")
    result.stdout.fnmatch_lines([
        "*_ test_leaks _*",
        "leakcheck: series 'test_section.py::test_leaks' leaked*",
        "*objects*grew in every run: +1 +1 +1 +1 objects (threshold 1 per "
        "run)",
        "*objects that grew*",
        "*list*+*",
        "*= leakcheck =*",
        "LEAKED test_section.py::test_leaks - " + line,
        terminal.MSG_SUMMARY.format(tests=1, s="", leak=1, clean=0, error=0,
                                  skipped=0, known=""),
        "*short test summary info*",
        "LEAKED test_section.py::test_leaks - " + line,
    ])
    assert result.ret == 1


def test_heap_frozen_by_the_session_is_left_alone(pytester):
    pytester.makeconftest('''
import gc

def pytest_collection_finish(session):
    gc.freeze()             # e.g. before forking workers of its own
''')
    pytester.makepyfile(test_frozen='''
import gc

_KEPT = []

def test_leaks():
    _KEPT.append([])

def test_clean():
    pass

def test_still_frozen():
    assert gc.get_freeze_count() > 0
''')
    result = pytester.runpytest_subprocess("--leaks")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["LEAKED test_frozen.py::test_leaks*",
                                 terminal.MSG_GC_FROZEN])


def test_heap_frozen_by_a_session_fixture_stays_frozen(pytester):
    """A session fixture set up inside the first checked test freezes the
    heap after the plugin did: the plugin must not unfreeze it (that would
    undo the fixture's freeze) and must not take it as its own."""
    pytester.makeconftest('''
import gc
import pytest

@pytest.fixture(scope="session", autouse=True)
def frozen_heap():
    gc.freeze()             # e.g. before forking workers of its own
    yield
''')
    pytester.makepyfile(test_frozen='''
import gc

_KEPT = []

def test_clean():
    pass

def test_leaks():
    _KEPT.append([])

def test_still_frozen():
    assert gc.get_freeze_count() > 0
''')
    result = pytester.runpytest_subprocess("--leaks", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["LEAKED test_frozen.py::test_leaks*",
                                 terminal.MSG_GC_FROZEN])


def test_settle_hook_clears_what_the_users_code_keeps(pytester):
    """A cache that grows by one entry per run is a leak to the plugin,
    until the user's pytest_leakcheck_settle clears it between runs."""
    pytester.makepyfile(memo='''
_MEMO = {}

def compute(n):
    _MEMO[len(_MEMO)] = [n]         # a new entry every call
    return n
''', test_memo='''
import memo

def test_memo():
    assert memo.compute(3) == 3
''')
    result = pytester.runpytest_subprocess("--leaks")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["LEAKED test_memo.py::test_memo*"])

    pytester.makeconftest('''
import memo

calls = [0]
items = set()

def pytest_leakcheck_settle(item):
    # Counted without keeping a reference per call (the refs probe sees it).
    calls[0] += 1
    items.add(item.nodeid)
    memo._MEMO.clear()

def pytest_sessionfinish(session):
    print(f"settle calls: {calls[0]} for {', '.join(sorted(items))}")
''')
    result = pytester.runpytest_subprocess("--leaks", "-s",
                                           "--leaks-report=r.json")
    result.assert_outcomes(passed=1)
    # Settled before the snapshot that precedes the reported run (the
    # warm-up run, read too), after it, and after each measured run; the
    # reported run is the measured run when it grew nothing.  Before the
    # first extra run, once more: the runner makes what it puts back
    # after each, and the series reads its baseline again.
    with open(pytester.path / "r.json", encoding="utf-8") as f:
        rec, = json.load(f)["tests"]
    calls = (2 + rec["runs"] - rec["warmup_measured"]
             + (rec["test_runs"] > 1))
    result.stdout.fnmatch_lines(
        [f"*settle calls: {calls} for test_memo.py::test_memo"])


SUBTESTS = '''
import unittest

import pytest


class TestWithSubTests(unittest.TestCase):
    def test_sub(self):
        for n in range(3):
            with self.subTest(n=n):
                self.assertGreaterEqual(n, 0)


def test_subtests_fixture(request):
    if "subtests" not in request.fixturenames and \\
            not hasattr(pytest, "Subtests"):
        pytest.skip("pytest has no subtests fixture before 9")
    subtests = request.getfixturevalue("subtests")
    for n in range(3):
        with subtests.test(n=n):
            assert n >= 0
'''


def test_subtests_logged_by_extra_runs_are_not_kept(pytester):
    """pytest logs a subtest's report as soon as it ends, from inside the
    call: the extra runs' reports must not reach the terminal (or xdist,
    or junitxml), which would keep one more per run."""
    pytester.makepyfile(test_subtests=SUBTESTS)
    result = pytester.runpytest_subprocess("--leaks", "-q")
    result.stdout.no_fnmatch_line("*LEAKED*")
    if int(pytest.__version__.split(".")[0]) >= 9:
        # The reported runs' subtests only: 3 + 3.
        result.stdout.fnmatch_lines(["2 passed, 6 subtests passed in *"])
    else:
        result.assert_outcomes(passed=1, skipped=1)    # no subtests fixture


def test_tmp_path_names_ending_in_digits_are_reused(pytester):
    """test_1's tmp_path is test_10, test_11, ...: names whose prefix ends
    in a digit.  Each extra run must get its name back, or every run makes
    a new one, which 3.12 interns for good (a block per run)."""
    pytester.makepyfile(test_digits="".join(
        f"def test_{i}(tmp_path):\n    (tmp_path / 'x').write_text('{i}')\n\n"
        for i in range(12)))
    result = pytester.runpytest_subprocess("--leaks")
    result.assert_outcomes(passed=12)
    result.stdout.fnmatch_lines(["*12 tests checked: 0 leak, 12 clean*"])


# A conftest that writes, at the session's end, which of the plugin's
# hooks that only some tests need were registered.
HOOKS_SEEN = '''
import json


def pytest_sessionfinish(session):
    manager = session.config.pluginmanager
    with open("hooks.json", "w") as f:
        json.dump({name: manager.get_plugin(name) is not None
                   for name in ("leakcheck-session", "leakcheck-records",
                                "leakcheck-phases", "leakcheck-journal")},
                  f)
'''

MARKED = '''
import pytest


def test_plain():
    pass


@pytest.mark.noleak
def test_marked():
    pass
'''

OPTED_OUT = '''
import pytest


@pytest.mark.noleak
@pytest.mark.leaky(reason="on purpose")
def test_opted_out():
    pass
'''


LEAKING = '''
import pytest

_kept = []


def test_clean():
    pass


@pytest.mark.noleak
def test_leaking():
    _kept.append(object())
'''


@pytest.mark.parametrize("source, args, session, records, phases, "
                         "journal, ret", [
    pytest.param(None, (), False, False, False, False, 0,
                 id="nothing-hunted"),
    pytest.param(MARKED, (), True, False, False, False, 0,
                 id="a-marked-test"),
    pytest.param(OPTED_OUT, (), True, True, True, False, 0,
                 id="an-opted-out-test"),
    pytest.param(None, ("--leaks",), True, False, False, False, 0,
                 id="every-test"),
    pytest.param(None, ("--leaks", "-v"), True, True, False, False, 0,
                 id="every-test-verbose"),
    pytest.param(LEAKING, (), True, True, False, False, 1, id="a-leak"),
    pytest.param(None, ("--no-leaks", "--leaks-report=r.json"), True,
                 False, False, True, 0, id="a-report"),
])
def test_hooks_only_some_tests_need_are_registered_when_one_does(
        pytester, clean_source, source, args, session, records, phases,
        journal, ret):
    """A session that hunts nothing calls none of the hooks that log
    records (SessionHooks), that log records pytest logs itself or word a
    record's status (RecordHooks), or that a test's phases need
    (PhaseHooks): every pytest session where leakcheck is installed would
    pay them, and a session of clean tests all but the first.  They are
    there once a test needs them, and from the start where the session
    hunts every test or writes a report (SessionHooks), or asks for
    status words (-v: RecordHooks).  The journal's (JournalHooks) are
    there only where a report is written."""
    pytester.makeconftest(HOOKS_SEEN)
    pytester.makepyfile(source or clean_source)
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == ret, result.stdout.str()
    if source is LEAKING:
        result.stdout.fnmatch_lines(["LEAKED *::test_leaking*"])
    with open(pytester.path / "hooks.json") as f:
        assert json.load(f) == {"leakcheck-session": session,
                                "leakcheck-records": records,
                                "leakcheck-phases": phases,
                                "leakcheck-journal": journal}


@pytest.mark.parametrize("option", ["--setup-only", "--setup-plan"])
def test_setup_only_and_setup_plan_hunt_nothing(pytester, option):
    """--setup-only and --setup-plan run no test: pytest shows the
    fixtures' setup and teardown, and leakcheck hunts nothing (a hunt
    would run the test), whatever --leaks says."""
    pytester.makepyfile(test_plan='''
import pytest


@pytest.fixture
def value():
    return 1


def test_body_never_runs(value):
    raise AssertionError("ran")
''')
    result = pytester.runpytest_subprocess("--leaks", option,
                                           "--leaks-report=r.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*SETUP    F value*",
                                 "*test_plan.py::test_body_never_runs*"])
    assert "ran" not in result.stdout.str().replace("no tests ran", "")
    with open(pytester.path / "r.json") as f:
        assert json.load(f)["tests"] == []
