"""A hunt shows: the verbose line says how many runs a test took, the time
they added is in JUnit and in leakcheck's summary section, and a leak's
short summary line leads with the probe a person reads first."""

import xml.etree.ElementTree as ET

import pytest

import leakcheck.report as lcreport
from pytest_leakcheck import hunt, terminal

MIXED = '''
import os

_KEPT = []
_ONCE = []

def test_clean():
    if not _ONCE:
        # Grows in its first run alone: that run is not taken for the
        # measured run, one more run is (a clean test that ran once shows
        # nothing more than pytest's own line).
        _ONCE.append([])

def test_lists():
    _KEPT.append([])

def test_fd_and_lists():
    _KEPT.append([])
    os.open(os.devnull, os.O_RDONLY)
'''
IDS = [f"test_mixed.py::{name}"
       for name in ("test_clean", "test_lists", "test_fd_and_lists")]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
@pytest.mark.parametrize("verbosity", ["-v", "-vv"])
def test_verbose_line_says_how_many_runs(pytester, read_report, verbosity,
                                         workers):
    pytester.makepyfile(test_mixed=MIXED)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           verbosity, *workers)
    result.assert_outcomes(passed=1, failed=2)
    recs = read_report()[1]
    assert recs[IDS[0]]["test_runs"] >= 2
    # What its first run grew (a list, and its place in _ONCE) is what
    # made the runs after it due, and the record says so.
    assert recs[IDS[0]]["warmup_growth"]["blocks"] >= 2, recs[IDS[0]]
    for test_id, word in zip(IDS, ("PASSED", "LEAKED", "LEAKED")):
        runs = recs[test_id]["test_runs"]
        growth = recs[test_id]["warmup_growth"]
        if verbosity == "-v":
            shown = terminal.MSG_VERBOSE_RUNS.format(word=word, runs=runs)
        elif growth:
            shown = terminal.MSG_VERBOSE_GROWTH.format(
                word=word, runs=runs, seconds=0,
                growth=lcreport.growth_text(growth)).replace("0.00", "*")
        else:
            shown = terminal.MSG_VERBOSE_RUNS_TIME.format(
                word=word, runs=runs, seconds=0).replace("0.00", "*")
        pattern = (f"*{shown} {test_id}*" if workers
                   else f"{test_id} {shown}*")
        result.stdout.fnmatch_lines([pattern])


def test_quiet_lines_stay_pytests_own(pytester):
    pytester.makepyfile(test_mixed=MIXED)
    result = pytester.runpytest_subprocess("--leaks")
    result.stdout.fnmatch_lines(["test_mixed.py .LL*"])
    assert " runs)" not in result.stdout.str()


def test_hunt_time_in_junit_and_summary(pytester, read_report):
    pytester.makepyfile(test_mixed=MIXED)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           "--junitxml=j.xml")
    recs = read_report()[1]
    cases = {f"test_mixed.py::{case.get('name')}": case
             for case in ET.parse(pytester.path / "j.xml").iter("testcase")}
    for test_id in IDS:
        props = {p.get("name"): p.get("value")
                 for p in cases[test_id].iter("property")}
        assert int(props[hunt.JUNIT_RUNS]) == recs[test_id]["test_runs"]
        assert float(props[hunt.JUNIT_SECONDS]) == \
            recs[test_id]["hunt_seconds"]
    slowest = sorted(IDS, key=lambda i: recs[i]["hunt_seconds"],
                     reverse=True)
    result.stdout.fnmatch_lines([
        terminal.MSG_HUNT_TIME.format(
            seconds=0, tests=3, s="s",
            runs=sum(recs[i]["test_runs"] - 1 for i in IDS)
        ).replace("0.00", "*"),
    ] + ["  " + terminal.MSG_HUNT_LINE.format(
        seconds=recs[i]["hunt_seconds"], runs=recs[i]["test_runs"], id=i)
        + terminal.MSG_HUNT_GROWTH.format(
            growth=lcreport.growth_text(recs[i]["warmup_growth"]))
        for i in slowest[:terminal.SLOWEST_HUNTS]])


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_summary_says_what_leakcheck_added_by_category(pytester,
                                                       read_report, workers):
    pytester.makepyfile(test_mixed=MIXED)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           *workers)
    report, recs = read_report()
    for test_id in IDS:
        costs = recs[test_id]["hunt_costs"]
        assert set(costs) == set(lcreport.COST_CATEGORIES)
        assert all(v >= 0 for v in costs.values())
        assert costs["snapshots"] > 0
    # The leaks were diagnosed, and every test ran more than once.
    assert recs[IDS[1]]["hunt_costs"]["diagnosis"] > 0
    assert recs[IDS[0]]["hunt_costs"]["diagnosis"] == 0
    assert all(recs[i]["hunt_costs"]["extra_runs"] +
               recs[i]["hunt_costs"]["confirmation"] > 0 for i in IDS)
    summed = report["summary"]["costs"]
    assert set(summed) == set(lcreport.COST_CATEGORIES) | set(
        lcreport.SESSION_COSTS)
    for key in lcreport.COST_CATEGORIES:
        assert summed[key] == pytest.approx(
            sum(recs[i]["hunt_costs"][key] for i in IDS), abs=1e-3)
    # What the plugin did around the tests counts too (the session's own:
    # under pytest-xdist, the controller's).
    assert summed["session"] > 0
    line = next(line for line in result.stdout.lines
                if line.startswith("leakcheck: added "))
    total = float(line.split()[2][:-1])
    assert total >= sum(summed.values()) - 0.01
    around = float(line.split("around the tests ")[1].split("s;")[0])
    assert around >= summed["session"] - 0.01
    assert " over 3 tests " in line and line.endswith("costliest:")
    costliest = sorted(IDS, key=lambda i: sum(
        recs[i]["hunt_costs"].values()), reverse=True)
    result.stdout.fnmatch_lines([line] + [
        "  " + terminal.MSG_COST_LINE.format(
            seconds=sum(recs[i]["hunt_costs"].values()), id=i).replace(
                ".", "?", 1)
        for i in costliest[:terminal.SLOWEST_HUNTS]])


def test_durations_sets_how_many_hunts_are_listed(pytester):
    pytester.makepyfile(test_mixed=MIXED)
    result = pytester.runpytest_subprocess("--leaks", "--durations=1")
    text = result.stdout.str()
    listed = [line for line in result.stdout.lines
              if line.startswith("  ") and " runs  " in line
              and any(f"  {i}" in line for i in IDS)]
    assert len(listed) == 1, text


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_slowest_hunts_say_what_their_warm_up_run_grew(pytester, read_report,
                                                        workers):
    """The summary's line of a test that ran more than once ends with what
    its reported (warm-up) run grew: what made its other runs due."""
    pytester.makepyfile(test_mixed=MIXED)
    result = pytester.runpytest_subprocess("--leaks", "--durations=0",
                                           "--leaks-report=r.json", *workers)
    recs = read_report()[1]
    hunt_lines = [line for line in result.stdout.lines
                  if line.startswith("  ") and " runs  " in line]
    for test_id in IDS:
        rec = recs[test_id]
        assert rec["test_runs"] > 1, rec
        line = next(line for line in hunt_lines if f"  {test_id}" in line)
        growth = rec["warmup_growth"]
        if growth:
            assert line.endswith(f"  {test_id}" + terminal.MSG_HUNT_GROWTH
                                 .format(growth=lcreport.growth_text(growth))
                                 ), (line, rec)
        else:
            assert line.endswith(f"  {test_id}"), (line, rec)
    # test_clean's first run grew what made its second one due.
    assert recs[IDS[0]]["warmup_growth"]["blocks"] >= 2
    assert any(f"  {IDS[0]} (the warm-up run grew " in line
               for line in hunt_lines), hunt_lines


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_short_summary_leads_with_the_most_telling_probe(
        pytester, monkeypatch, read_report, workers):
    monkeypatch.setenv("CI", "1")      # pytest then never cuts the line
    pytester.makepyfile(test_mixed=MIXED)
    result = pytester.runpytest_subprocess("--leaks", "-rf",
                                           "--leaks-report=r.json", *workers)
    rec = read_report()[1][IDS[2]]
    # fds leads whatever else the record names.  The list the test appends
    # grows `objects` too, which the record names unless a measured run
    # read it grown less than its threshold: under `-n 2` on a machine
    # loaded with four jobs, once in some twenty runs, one run read no
    # growth of objects (why was not found: the worker's other thread is
    # the likely one), and the line then named fds alone.
    assert "fds" in rec["leaking"]
    assert "objects" in rec["leaking"] or \
        min(rec["deltas"]["objects"]) < rec["thresholds"]["objects"], rec
    others = [p for p in terminal.TELLING if p in rec["leaking"]][1:]
    line = terminal.MSG_LEAK.format(
        probe="fds", growth="+1",
        also=terminal.MSG_LEAK_ALSO.format(probes=", ".join(others))
        if others else "")
    result.stdout.fnmatch_lines([
        f"*_ test_fd_and_lists _*",
        # The failure section keeps the whole report.
        "leakcheck: series 'test_mixed.py::test_fd_and_lists' leaked*",
        "*fds*grew in every run: +1 +1 +1 +1 fds*",
        "*short test summary info*",
    ])
    # One header (pytest's word), then the leak; the line stands alone.
    summary = result.stdout.lines[
        result.stdout.lines.index(next(
            l for l in result.stdout.lines if "short test summary" in l)):]
    assert f"LEAKED {IDS[2]} - {line}" in summary
    assert not any("leakcheck:" in l for l in summary if "LEAKED" in l)


def test_leak_line_growth_that_varies():
    assert terminal.leak_line(["blocks", "garbage"], {
        "blocks": [13, 13, 13, 1], "garbage": [2, 2, 2, 2]}) == \
        terminal.MSG_LEAK.format(
            probe="garbage", growth="+2 objects",
            also=terminal.MSG_LEAK_ALSO.format(probes="blocks"))
    assert terminal.leak_line(["blocks"], {"blocks": [13, 13, 13, 1]}) == \
        terminal.MSG_LEAK.format(probe="blocks", growth="+1 to +13", also="")
