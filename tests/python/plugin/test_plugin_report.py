"""The JSON report (schema, merged under pytest-xdist, a crashed worker's
test) and the gate's three exit codes.  Kills, signals and the crash
journal: test_journal.py."""

import gc
import io
import json
import os
import sys
import types

import pytest

import leakcheck
import leakcheck.report as lcreport
from leakcheck import gate
from pytest_leakcheck import report as reportmod
from pytest_leakcheck import session, terminal
from pytest_leakcheck.ledger import Ledger

MIXED = '''
import pytest

_KEPT = []

def test_leaks():
    _KEPT.append([])

def test_clean():
    pass

def test_fails():
    assert False

def test_skips():
    pytest.skip("no")
'''

RECORD_KEYS = {"id", "verdict", "outcome", "known", "reason", "file",
               "line", "warmup",
               "repeat", "runs", "warmup_measured", "warmup_growth",
               "probes", "leaking",
               "deltas", "thresholds",
               "diagnosis", "worker", "unread", "threads", "test_runs",
               "hunt_seconds", "judged", "hunt_costs"}


def test_report_schema(pytester, read_report):
    pytester.makepyfile(test_mixed=MIXED)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           "--leaks-repeat=3")
    result.stdout.fnmatch_lines([terminal.MSG_REPORT_WRITTEN.format(
        path=pytester.path / "r.json", partial="")])
    report, recs = read_report()
    assert report["schema"] == reportmod.SCHEMA == gate.REPORT_SCHEMA
    assert report["partial"] is False and report["partial_reasons"] == []
    assert report["settings"]["hunt"] == "all"
    assert report["settings"]["repeat"] == 3
    assert report["settings"]["warmup"] == 1
    assert set(report["probes"]) >= set(report["settings"]["probes"])
    assert report["environment"]["python"] == ".".join(
        map(str, sys.version_info[:3]))
    # The distribution's version (test_gate.py::test_version): on 3.9,
    # importlib.metadata found no distribution here after some earlier
    # test of the suite, where leakcheck.__version__ still answers.
    assert report["environment"]["leakcheck"] == leakcheck.__version__
    costs = report["summary"].pop("costs")
    assert set(costs) == set(lcreport.COST_CATEGORIES) | {"report",
                                                          "session"}
    assert set(lcreport.SESSION_COSTS) == {"report", "session"}
    assert all(v >= 0 for v in costs.values())
    # The plugin's import and set-up, at least, are its cost around tests.
    assert costs["session"] > 0
    assert report["summary"] == {"tests": 4, "leak": 1, "clean": 1,
                                 "error": 1, "skipped": 1, "crashed": 0,
                                 "known": 0}
    for rec in recs.values():
        assert set(rec) == RECORD_KEYS
        assert rec["verdict"] in reportmod.VERDICTS
        for deltas in rec["deltas"].values():
            assert len(deltas) == rec["runs"]
    leak = recs["test_mixed.py::test_leaks"]
    # Three runs, or up to the window's twice that while another probe
    # that grew stays alive (3.9's native_bytes: +688 +688 0 ...).
    assert leak["verdict"] == "leak" and 3 <= leak["runs"] <= 6
    assert (leak["file"], leak["line"]) == ("test_mixed.py", 5)
    assert report["environment"]["rootdir"] == str(pytester.path)
    assert "objects" in leak["leaking"]
    assert leak["deltas"]["objects"] == [1] * leak["runs"]
    assert leak["thresholds"]["objects"] == 1
    assert leak["diagnosis"]["objects"][0]["type"] == "list"
    assert recs["test_mixed.py::test_clean"]["verdict"] == "clean"
    assert recs["test_mixed.py::test_fails"]["verdict"] == "error"
    assert recs["test_mixed.py::test_skips"]["verdict"] == "skipped"
    # A test's own failure is judged (it failed); leakcheck judged them all.
    assert all(rec["judged"] is True for rec in recs.values())
    json.dumps(report)      # plain data all the way down


def _gate(*args):
    out, err = io.StringIO(), io.StringIO()
    try:
        status = gate.main(list(args), out=out, err=err)
    except SystemExit as e:     # argparse: a usage error
        status = e.code
    return status, out.getvalue(), err.getvalue()


SLOW_SHARED_FIXTURE = '''
import time

import pytest

SPIN = 1.0      # CPU seconds

def spin():
    began = time.process_time()
    while time.process_time() - began < SPIN:
        pass

@pytest.fixture(scope="module")
def slow():
    spin()
    yield
    spin()

def test_first(slow):
    pass
'''


def test_a_shared_fixture_set_up_before_the_reported_run_is_not_its_cost(
        pytester, read_report):
    # The runner sets the module's fixture up before the reported run's
    # snapshot, and tears it down after its last snapshot: pytest's setup
    # and teardown would have, so their 1 s of CPU each is neither the
    # hunt's bookkeeping nor the seconds it added.  Its own work for
    # a test that passes, the session's first collection included, is a
    # small part of that, on a debug build too.
    pytester.makepyfile(test_slow=SLOW_SHARED_FIXTURE)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result.assert_outcomes(passed=1)
    report, recs = read_report()
    rec = recs["test_slow.py::test_first"]
    assert rec["verdict"] == "clean"
    assert sum(rec["hunt_costs"].values()) < 0.5, rec["hunt_costs"]
    assert rec["hunt_seconds"] < 0.5
    assert sum(report["summary"]["costs"][k]
               for k in lcreport.COST_CATEGORIES) < 0.5


def test_gate_exit_codes(pytester, read_report):
    pytester.makepyfile(test_mixed=MIXED)
    pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    report = str(pytester.path / "r.json")
    baseline = str(pytester.path / "baseline.json")

    status, out, _ = _gate(report)
    assert status == gate.EXIT_NEW_LEAKS == 1
    assert "LEAK test_mixed.py::test_leaks: " in out
    assert "test_clean" not in out

    status, out, _ = _gate(report, "--write-baseline", baseline)
    assert status == gate.EXIT_OK == 0
    status, out, _ = _gate(report, "--baseline", baseline)
    assert status == 0 and "no new leaks" in out
    status, _, _ = _gate(report, "--baseline", report)   # a report as baseline
    assert status == 0

    narrower = {"schema": gate.BASELINE_SCHEMA,
                "leaks": {"test_mixed.py::test_leaks": ["garbage"]}}
    (pytester.path / "narrow.json").write_text(json.dumps(narrower))
    status, out, _ = _gate(report, "--baseline", "narrow.json")
    assert status == 1 and "baseline knows only garbage" in out

    (pytester.path / "bad.json").write_text("{not json")
    (pytester.path / "other.json").write_text('{"schema": "other/2"}')
    for args, reason in [
            (["missing.json"], "cannot read report missing.json"),
            (["bad.json"], "report bad.json is not valid JSON"),
            (["other.json"], "report other.json has schema 'other/2'"),
            ([report, "--baseline", "other.json"], "baseline other.json"),
    ]:
        status, out, err = _gate(*args)
        assert status == gate.EXIT_UNUSABLE == 2, args
        assert err.startswith("leakcheck gate: error: " + reason), err
        assert err.count("\n") == 1 and out == ""


def test_gate_command(pytester):
    pytester.makepyfile(test_mixed=MIXED)
    pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result = pytester.run(sys.executable, "-m", "leakcheck", "gate", "r.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["leakcheck gate: 1 new leak *",
                                 "  LEAK test_mixed.py::test_leaks: *"])
    result = pytester.run(sys.executable, "-m", "leakcheck", "gate", "r.json",
                          "--write-baseline", "b.json")
    assert result.ret == 0
    result = pytester.run(sys.executable, "-m", "leakcheck", "gate", "r.json",
                          "--baseline", "b.json")
    assert result.ret == 0
    result = pytester.run(sys.executable, "-m", "leakcheck", "gate", "nope")
    assert result.ret == 2
    result.stderr.fnmatch_lines(["leakcheck gate: error: cannot read *"])


XDIST_A = '''
_KEPT = []

def test_a_leaks():
    _KEPT.append([])

def test_a_clean():
    pass
'''

XDIST_B = '''
import pytest

_KEPT = []

@pytest.mark.parametrize("n", range(4))
def test_b_clean(n):
    assert n >= 0

def test_b_leaks():
    _KEPT.append([])
'''


def test_xdist_controller_writes_one_merged_report(pytester, read_report,
                                                   monkeypatch):
    pytest.importorskip("xdist")
    monkeypatch.setenv("COLUMNS", "200")
    pytester.makepyfile(test_a=XDIST_A, test_b=XDIST_B)
    result = pytester.runpytest_subprocess("-n", "2", "--leaks",
                                           "--leaks-report=r.json")
    result.assert_outcomes(passed=5, failed=2)
    # A worker's execnet thread makes objects of its own at any moment: a
    # run may read more than the one list kept.
    result.stdout.fnmatch_lines_random([
        "LEAKED test_a.py::test_a_leaks - *objects +*",
        "LEAKED test_b.py::test_b_leaks - *objects +*",
        terminal.MSG_SUMMARY.format(tests=7, s="s", leak=2, clean=5, error=0,
                                  skipped=0, known=""),
    ])
    report, recs = read_report()
    assert report["partial"] is False
    assert len(recs) == 7 and report["summary"]["leak"] == 2
    assert {r["worker"] for r in recs.values()} <= {"gw0", "gw1"}
    assert recs["test_b.py::test_b_leaks"]["diagnosis"]["objects"]
    assert sorted(p.name for p in pytester.path.glob("*.json")) == ["r.json"]


HELD = '''
import pytest


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        return
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    held = sorted(f"{r.nodeid} {r.when}" for reports in tr.stats.values()
                  for r in reports if "leakcheck" in vars(r))
    with open("held.txt", "w") as f:
        f.write("\\n".join(held))
'''


@pytest.mark.parametrize("workers", [[], ["-n", "2"]],
                         ids=["alone", "xdist"])
def test_only_a_failed_report_keeps_its_record_once_logged(pytester,
                                                           workers):
    """pytest's terminal keeps every report to the session's end: a
    passing test's record (some 2.8 KB) leaves its report once logged, so
    that a session does not hold one per test; a failed test's stays, for
    the short test summary that reads it again (LEAKED)."""
    if workers:
        pytest.importorskip("xdist")
    pytester.makeconftest(HELD)
    pytester.makepyfile(test_mixed=MIXED)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           *workers)
    result.assert_outcomes(passed=1, failed=2, skipped=1)
    result.stdout.fnmatch_lines(["LEAKED test_mixed.py::test_leaks - *"])
    assert (pytester.path / "held.txt").read_text().split("\n") == [
        "test_mixed.py::test_fails call", "test_mixed.py::test_leaks call"]


CRASH = '''
import os

def test_before():
    pass

def test_crashes():
    os._exit(3)                                # the worker dies

def test_after():
    pass
'''


def test_crashed_worker_leaves_a_partial_report(pytester, read_report):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_crash=CRASH)
    result = pytester.runpytest_subprocess("-n", "2", "--leaks",
                                           "--leaks-report=r.json")
    report, recs = read_report()
    assert report["partial"] is True
    assert "a pytest-xdist worker crashed" in report["partial_reasons"]
    result.stdout.fnmatch_lines([
        f"CRASHED test_crash.py::test_crashes - {session.MSG_CRASHED}"])
    crashed = recs["test_crash.py::test_crashes"]
    assert crashed["verdict"] == "crashed" and crashed["outcome"] == "crashed"
    assert crashed["reason"] == session.MSG_CRASHED
    assert (crashed["file"], crashed["line"]) == ("test_crash.py", 6)
    assert recs["test_crash.py::test_before"]["verdict"] == "clean"
    # Nothing leaked, but the gate fails: a test crashed.
    status, out, _ = _gate(str(pytester.path / "r.json"))
    assert status == 1
    assert (f"  CRASHED test_crash.py::test_crashes: {session.MSG_CRASHED}"
            in out.splitlines())
    status, out, _ = _gate(str(pytester.path / "r.json"), "--allow-partial")
    assert status == 0 and "accepted (--allow-partial)" in out


def test_recording_a_test_makes_nothing_young_that_grows_with_the_session(
        tmp_path):
    """Every snapshot collects what is not frozen.  What the session keeps
    of its earlier tests (the report writer's places of records, the
    summary's results) must not come back among it when one more test is
    recorded: a dict of them, tracked again by the collector for the new
    value, would have every test's first snapshot walk all of them."""
    rep = reportmod.Report(str(tmp_path / "r.json"), settings={},
                           probes={}, environment={})
    rep.open()
    results = Ledger()          # as State.tests keeps them

    def record(n):
        test_id = f"t.py::test_{n}"
        rep.start(test_id, ("t.py", n))
        rec = lcreport.record(test_id, "clean", "passed",
                              deltas={"blocks": [0]})
        rep.add(rec, with_finish=True)
        rep.finish(test_id)
        results[test_id] = (rec["verdict"], False, 1, 0.25)

    for n in range(300):
        record(n)
    gc.collect()
    gc.freeze()
    try:
        record(300)
        young = gc.get_objects()
        widest = max((len(gc.get_referents(o)) for o in young
                      if o is not young), default=0)
    finally:
        gc.unfreeze()
    assert widest < 100
    assert len(results) == 301 and results["t.py::test_7"][0] == "clean"
    assert [*rep.where][:2] == ["t.py::test_0", "t.py::test_1"]
    rep.write()


def test_the_summary_keeps_no_unread_probe_it_would_not_print():
    """Every record of a release build says refs was not read; the
    summary names a probe not compared only when this process reads it,
    so it keeps only those, not a dict per test."""
    state = session.State(types.SimpleNamespace(), None, {})
    info = {p.name: p for p in leakcheck.probes()}
    unreadable = next(name for name, p in info.items() if not p.available)
    state.add(lcreport.record("t.py::test_a", "clean", "passed",
                              unread={unreadable: "not here"}))
    state.add(lcreport.record("t.py::test_b", "clean", "passed",
                              unread={unreadable: "not here",
                                      "blocks": "the hook was taken out"}))
    assert state.unread == {"t.py::test_b": {
        "blocks": "the hook was taken out"}}
    assert len(state.tests) == 2


def test_the_report_keeps_where_records_are_not_the_records(tmp_path,
                                                            monkeypatch):
    """The writer keeps where each record is in the journal, and writes
    the report from there, a record at a time: the same report as from
    the records.  A record the journal could not take is kept, and in the
    report all the same; the last record of a test wins."""
    path = str(tmp_path / "r.json")
    rep = reportmod.Report(path, settings={"hunt": "all"}, probes={},
                           environment={"python": "3"})
    rep.open()
    recs = {}
    for n in (2, 0, 1):
        test_id = f"t.py::test_{n}"
        rep.start(test_id, ("t.py", n))
        recs[test_id] = lcreport.record(test_id, "clean", "passed",
                                        deltas={"blocks": [0]},
                                        hunt_costs=dict.fromkeys(
                                            lcreport.COST_CATEGORIES, 0.5))
        rep.add(recs[test_id], with_finish=n != 1)
        rep.finish(test_id)
    recs["t.py::test_0"] = lcreport.record("t.py::test_0", "leak", "failed",
                                           leaking=["blocks"])
    rep.add(recs["t.py::test_0"])
    assert not rep.kept
    assert all(type(at) is tuple for at in rep.where.values())

    def refused(*events):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rep.journal, "append", refused)
    recs["t.py::test_3"] = lcreport.record("t.py::test_3", "skipped",
                                           "skipped")
    rep.start("t.py::test_4", ("t.py", 4))      # never finishes
    rep.add(recs["t.py::test_3"])
    assert rep.kept["t.py::test_3"] is recs["t.py::test_3"]
    assert rep.write_error == "No space left on device"
    monkeypatch.undo()
    rep.write()
    with open(path) as f:
        written = json.load(f)
    expected = lcreport.document(
        rep.meta, recs, {"t.py::test_4": {"file": "t.py", "line": 5}},
        created=written["created"], unfinished=lcreport.MSG_CRASHED,
        session_costs={"report": written["summary"]["costs"]["report"]})
    assert written == json.loads(json.dumps(expected))
    assert [t["verdict"] for t in written["tests"]] == [
        "leak", "clean", "clean", "skipped", "crashed"]
    assert not os.path.exists(path + ".journal")
