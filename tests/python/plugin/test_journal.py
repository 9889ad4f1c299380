"""Nothing lost when the run dies: the crash journal beside the report,
real kills (SIGKILL, os._exit, a segfault) in the middle of a run and in
the middle of a write, SIGTERM and Ctrl-C, and the reports the gate, or
the next run, builds from the journal."""

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

import leakcheck.report as lcreport
from leakcheck import gate, journal
from pytest_leakcheck import report as reportmod
from pytest_leakcheck import settings


def gate_cli(pytester, *args):
    return pytester.run(sys.executable, "-m", "leakcheck", "gate", *args)


FIFTY = '''
import ctypes
import os
import signal

import pytest

_KEPT = []

@pytest.mark.parametrize("n", range(50))
def test_n(n):
    if n == 4:
        _KEPT.append([])
    if n == 30:
        {death}
'''

DEATHS = {
    "sigkill": ("os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL),
    "os_exit": ("os._exit(3)", 3),
    "segfault": ("ctypes.string_at(0)", -signal.SIGSEGV),
}


@pytest.mark.parametrize("death", DEATHS)
def test_a_run_that_dies_loses_nothing(pytester, death):
    """Killed at test 31 of 50: the 30 finished tests are in the report,
    the 31st is the crashed one, the gate fails naming it."""
    code, status = DEATHS[death]
    pytester.makepyfile(test_die=FIFTY.format(death=code))
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    assert result.ret == status
    assert not (pytester.path / "r.json").exists()
    assert (pytester.path / "r.json.journal").exists()

    report = gate.load_report(str(pytester.path / "r.json"))
    recs = {t["id"]: t for t in report["tests"]}
    assert len(recs) == 31
    crashed = recs["test_die.py::test_n[30]"]
    assert crashed["verdict"] == "crashed"
    assert crashed["reason"] == journal.MSG_CRASHED
    assert (crashed["file"], crashed["line"]) == ("test_die.py", 9)
    assert recs["test_die.py::test_n[4]"]["verdict"] == "leak"
    # Rebuilt from the journal: what the tests cost, not the report's own.
    costs = report["summary"].pop("costs")
    assert set(costs) == set(lcreport.COST_CATEGORIES)
    assert all(v >= 0 for v in costs.values())
    assert report["summary"] == {"tests": 31, "leak": 1, "clean": 29,
                                 "error": 0, "skipped": 0, "crashed": 1,
                                 "known": 0}
    assert report["partial"] is True
    assert report["partial_reasons"] == [journal.MSG_DIED.format(
        path=pytester.path / "r.json.journal")]

    result = gate_cli(pytester, "r.json", "--baseline", "r.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "leakcheck gate: no new leaks (31 tests checked: 1 leak, 29 clean, "
        "0 error, 0 skipped, 1 crashed; 1 known from the baseline)",
        "leakcheck gate: failing: not every test was judged *",
        "  report r.json is partial, its run did not finish (the process "
        "died before the session finished*",
        f"  CRASHED test_die.py::test_n[[]30]: {journal.MSG_CRASHED}",
    ])
    result = gate_cli(pytester, "r.json", "--format", "github")
    result.stdout.fnmatch_lines([
        # blocks, after refs on a debug build
        "::error file=test_die.py,line=9,title=leak%3A *::*blocks +1 *",
        "::error file=test_die.py,line=9,title=crashed%3A "
        "test_die.py%3A%3Atest_n[[]30]::" + journal.MSG_CRASHED])
    # The journal alone is a report too (a CI artifact of a dead run).
    result = gate_cli(pytester, "r.json.journal", "--allow-partial",
                      "--baseline", "r.json")
    assert result.ret == 0
    # The page of the report a crash leaves counts the crashed test.
    result = pytester.run(sys.executable, "-m", "leakcheck", "html",
                          "r.json", "-o", "page.html")
    assert result.ret == 0, result.stderr.str()
    page = (pytester.path / "page.html").read_text()
    assert "<b>1</b> crashed" in page and "<b>1</b> leak" in page


NEXT_RUN = '''
import json

def test_sees_the_rebuilt_report():
    with open("r.json", encoding="utf-8") as f:
        earlier = json.load(f)
    ids = {t["id"]: t["verdict"] for t in earlier["tests"]}
    assert ids["test_die.py::test_n[30]"] == "crashed"
    assert len(ids) == 31
'''


def test_the_next_run_rebuilds_the_report(pytester):
    pytester.makepyfile(test_die=FIFTY.format(death=DEATHS["sigkill"][0]))
    pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    pytester.makepyfile(test_next=NEXT_RUN)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           "test_next.py")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([reportmod.MSG_RECOVERED.format(
        path=pytester.path / "r.json",
        crashed="crashed: test_die.py::test_n[[]30]")])
    assert not (pytester.path / "r.json.journal").exists()
    report = gate.load_report(str(pytester.path / "r.json"))
    assert [t["id"] for t in report["tests"]] == [
        "test_next.py::test_sees_the_rebuilt_report"]
    assert report["partial"] is False


MID_JOURNAL = '''
import os
import signal

import leakcheck.report.journal

_KEPT = []

def test_1_leaks():
    _KEPT.append([])

def test_2_clean():
    pass

def test_3_torn():
    journal = leakcheck.report.journal.Journal
    copy = journal._copy

    def half_then_die(self, data):
        copy(self, data[:len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    journal._copy = half_then_die

def test_4_never_runs():
    pass
'''

MID_REPORT = '''
import os
import signal

import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    def die(src, dst):
        os.kill(os.getpid(), signal.SIGKILL)
    os.replace = die        # the report is written, not yet in place
'''


def test_a_kill_mid_write_leaves_every_earlier_line(pytester):
    pytester.makepyfile(test_torn=MID_JOURNAL)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    assert result.ret == -signal.SIGKILL
    text = (pytester.path / "r.json.journal").read_text()
    # The last line is torn; the reserve after it reads as NUL bytes.
    assert text.endswith("\0") and not text.rstrip("\0").endswith("\n")
    report = gate.load_report(str(pytester.path / "r.json"))
    assert {t["id"]: t["verdict"] for t in report["tests"]} == {
        "test_torn.py::test_1_leaks": "leak",
        "test_torn.py::test_2_clean": "clean",
        "test_torn.py::test_3_torn": "crashed"}

    (pytester.path / "r.json.journal").unlink()
    pytester.makeconftest(MID_REPORT)
    pytester.makepyfile(test_torn=MID_JOURNAL.replace(
        "journal._copy = half_then_die", "pass"))
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    assert result.ret == -signal.SIGKILL
    assert not (pytester.path / "r.json").exists()
    report = gate.load_report(str(pytester.path / "r.json"))
    assert report["partial"] is False       # the session had ended
    assert report["summary"]["tests"] == 4
    assert report["summary"]["leak"] == 1
    result = gate_cli(pytester, "r.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["  LEAK test_torn.py::test_1_leaks: *"])


SIGNALLED = '''
import os
import signal

_KEPT = []

def test_1_done():
    _KEPT.append([])

def test_2_signalled():
    {send}

def test_3_never_runs():
    pass
'''

SIGNALS = {
    "SIGTERM": ("os.kill(os.getpid(), signal.SIGTERM)", -signal.SIGTERM,
                "terminated (SIGTERM)"),
    # Python leaves SIGINT alone when it starts with SIGINT ignored (as a
    # background job of a script does): make Ctrl-C raise here regardless.
    "SIGINT": ("signal.signal(signal.SIGINT, signal.default_int_handler); "
               "os.kill(os.getpid(), signal.SIGINT)",
               pytest.ExitCode.INTERRUPTED, "interrupted (KeyboardInterrupt)"),
}


@pytest.mark.parametrize("sig", SIGNALS)
def test_signals_write_the_report(pytester, sig):
    """SIGTERM (a CI job's timeout) and Ctrl-C end the run as they always
    did, and the report says which test was running."""
    send, status, reason = SIGNALS[sig]
    pytester.makepyfile(test_sig=SIGNALLED.format(send=send))
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    assert result.ret == status
    assert not (pytester.path / "r.json.journal").exists()
    with open(pytester.path / "r.json", encoding="utf-8") as f:
        report = json.load(f)
    assert report["partial"] is True
    assert reason in report["partial_reasons"]
    recs = {t["id"]: t for t in report["tests"]}
    assert list(recs) == ["test_sig.py::test_1_done",
                          "test_sig.py::test_2_signalled"]
    assert recs["test_sig.py::test_1_done"]["verdict"] == "leak"
    running = recs["test_sig.py::test_2_signalled"]
    assert running["verdict"] == "crashed"
    assert running["reason"] == journal.MSG_UNFINISHED.format(reason=reason)
    result = gate_cli(pytester, "r.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"*is partial*{reason}*"])


XDIST_CONTROLLER_KILLED = '''
import os
import signal
import time

def test_before():
    pass

def test_kills_the_controller():
    # Once the controller has journaled this test's start (it hears of it
    # from the worker a moment later).
    while "test_kills_the_controller" not in open("r.json.journal").read():
        time.sleep(0.01)
    os.kill(os.getppid(), signal.SIGKILL)
    signal.pause()
'''


def test_xdist_controller_killed(pytester):
    """The controller keeps the journal: killed, it leaves the tests its
    workers were running as crashed."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_ctl=XDIST_CONTROLLER_KILLED)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "1",
         "--leaks", "--leaks-report=r.json"], cwd=pytester.path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        assert proc.wait(timeout=120) == -signal.SIGKILL
    finally:
        # The worker outlives its controller until its channel closes.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    report = gate.load_report(str(pytester.path / "r.json"))
    verdicts = {t["id"]: t["verdict"] for t in report["tests"]}
    assert verdicts == {"test_ctl.py::test_before": "clean",
                        "test_ctl.py::test_kills_the_controller": "crashed"}


def test_collection_errors_leave_a_partial_report_saying_so(pytester):
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n",
                        test_broken="import no_such_module_here\n")
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    report = gate.load_report(str(pytester.path / "r.json"))
    assert report["partial_reasons"] == [
        "interrupted: 1 error during collection"]
    result = gate_cli(pytester, "r.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["  report r.json is partial, its run did "
                                 "not finish (interrupted: 1 error during "
                                 "collection)"])


WAITS = '''
import os
import time

def test_first():
    pass

def test_waits():
    open("a.started", "w").close()
    for _ in range(12000):          # killed long before (at most 2 min)
        time.sleep(0.01)
'''


def _in_use_problem(path, pid):
    """The problem a session refused for `path` names, `pid` writing it."""
    return settings.PROBLEM_REPORT_IN_USE.format(
        value=path, reason=journal.MSG_IN_USE.format(
            pid=pid, host=socket.gethostname()))


def _wait_for(path, proc):
    """Until `path` exists; fails when `proc` ends first."""
    while not path.exists():
        assert proc.poll() is None, "session A ended before its test began"
        try:
            proc.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass


def test_two_sessions_on_one_report_path(pytester):
    """Session A runs; session B given the same report path is refused at
    start with one line naming A, and leaves A's journal alone: SIGKILL A,
    and the gate still sees A's tests and the one it was running.  A
    third session then rebuilds A's report and writes its own."""
    pytester.makepyfile(test_waits=WAITS)
    a = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "--leaks", "--leaks-report=r.json", "test_waits.py"],
        cwd=pytester.path, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        _wait_for(pytester.path / "a.started", a)
        b = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                          "test_waits.py")
        assert b.ret == pytest.ExitCode.USAGE_ERROR
        errors = [line for line in b.stderr.lines if line.strip()]
        assert errors == ["ERROR: leakcheck: command line option "
                          "--leaks-report: " + _in_use_problem(
                              pytester.path / "r.json", a.pid)]
        assert "test_waits" not in b.stdout.str()     # no test ran in B
    finally:
        a.kill()
        a.wait()
    assert a.returncode == -signal.SIGKILL
    assert not (pytester.path / "r.json").exists()   # B wrote none either
    result = gate_cli(pytester, "r.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        f"  CRASHED test_waits.py::test_waits: {journal.MSG_CRASHED}"])
    report = gate.load_report(str(pytester.path / "r.json"))
    assert {t["id"]: t["verdict"] for t in report["tests"]} == {
        "test_waits.py::test_first": "clean",
        "test_waits.py::test_waits": "crashed"}

    # A is dead: its journal is no one's, the next session takes it.
    pytester.makepyfile(test_waits="def test_quick():\n    pass\n")
    c = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    assert c.ret == pytest.ExitCode.OK
    c.stdout.fnmatch_lines(["*crashed: test_waits.py::test_waits*"])
    assert not (pytester.path / "r.json.journal").exists()
    report = gate.load_report(str(pytester.path / "r.json"))
    assert [t["id"] for t in report["tests"]] == ["test_waits.py::test_quick"]
