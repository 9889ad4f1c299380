"""The noleak marker: each argument, its bad values, and the leakcheck
fixture."""

import leakcheck

from pytest_leakcheck import settings

MARKED = '''
import os
import pytest

_KEPT = []

@pytest.mark.noleak(repeat=2)
def test_repeat():
    _KEPT.append([])

@pytest.mark.noleak(warmup=3)
def test_warmup():
    with open("runs.log", "a") as f:
        f.write("run\\n")

@pytest.mark.noleak(probes=["fds"])
def test_probes_list_sees_fds():
    os.open(os.devnull, os.O_RDONLY)

@pytest.mark.noleak(probes="blocks, objects")
def test_probes_string_blind_to_fds():
    os.open(os.devnull, os.O_RDONLY)

@pytest.mark.noleak(probes=["objects"], tolerance=1)
def test_tolerance_int():
    _KEPT.append([])

@pytest.mark.noleak(probes=["objects"], tolerance={"objects": 1})
def test_tolerance_dict():
    _KEPT.append([])

@pytest.mark.noleak(probes=["objects"], tolerance=2**63 - 1)
def test_tolerance_int64_max():
    _KEPT.append([])

@pytest.mark.noleak(probes=["objects"], tolerance=0)
def test_tolerance_zero():
    _KEPT.append([])

def test_unmarked():
    _KEPT.append([])

@pytest.mark.noleak
class TestClassMarked:
    def test_method(self):
        _KEPT.append([])
'''


def test_each_marker_argument(pytester, read_report, runs_log):
    pytester.makepyfile(test_marked=MARKED)
    result = pytester.runpytest_subprocess("--leaks-report=r.json")
    _, recs = read_report()
    rec = {k.split("::", 1)[1]: v for k, v in recs.items()}

    assert rec["test_repeat"]["verdict"] == "leak"
    assert rec["test_repeat"]["runs"] == 2
    assert rec["test_repeat"]["repeat"] == 2

    assert rec["test_warmup"]["verdict"] == "clean"
    assert rec["test_warmup"]["warmup"] == 3
    # Three warm-up runs, then the measured ones: the last warm-up run was
    # the measured run when it grew nothing.
    warm = rec["test_warmup"]
    assert len(runs_log()) == 3 + warm["runs"] - warm["warmup_measured"]

    assert rec["test_probes_list_sees_fds"]["leaking"] == ["fds"]
    assert rec["test_probes_string_blind_to_fds"]["verdict"] == "clean"
    assert rec["test_probes_string_blind_to_fds"]["probes"] == [
        "blocks", "objects"]

    assert rec["test_tolerance_int"]["verdict"] == "clean"
    assert rec["test_tolerance_int"]["thresholds"] == {"objects": 2}
    assert rec["test_tolerance_dict"]["verdict"] == "clean"
    # The engine's largest tolerance, as in leakcheck.repeat().
    assert rec["test_tolerance_int64_max"]["verdict"] == "clean"
    assert rec["test_tolerance_int64_max"]["thresholds"] == {
        "objects": 2**63 - 1}
    assert rec["test_tolerance_zero"]["verdict"] == "leak"
    assert rec["test_tolerance_zero"]["thresholds"] == {"objects": 1}

    assert "test_unmarked" not in rec           # not hunted without --leaks
    assert rec["TestClassMarked::test_method"]["verdict"] == "leak"
    result.assert_outcomes(passed=6, failed=4)


def _bad(test, problem):
    return settings.MSG_BAD_VALUE.format(
        where=settings.WHERE_MARKER.format(nodeid=f"test_bad.py::{test}"),
        problem=problem)


VALID = ", ".join(leakcheck.PROBE_NAMES)
ARGS = ", ".join(settings.MARKER_ARGS)
BAD = {
    "test_repeat_zero": ("repeat=0", settings.PROBLEM_INT.format(
        name="repeat", minimum=1, value=0)),
    "test_repeat_str": ("repeat='3'", settings.PROBLEM_INT.format(
        name="repeat", minimum=1, value="3")),
    "test_repeat_bool": ("repeat=True", settings.PROBLEM_INT.format(
        name="repeat", minimum=1, value=True)),
    "test_warmup_negative": ("warmup=-1", settings.PROBLEM_INT.format(
        name="warmup", minimum=0, value=-1)),
    "test_probes_unknown": ("probes=['blocks', 'nope']",
                            settings.PROBLEM_PROBE.format(value="nope",
                                                          valid=VALID)),
    "test_probes_type": ("probes=5",
                         settings.PROBLEM_PROBES_TYPE.format(value=5)),
    "test_probes_empty": ("probes=[]", settings.PROBLEM_NO_PROBES),
    "test_tolerance_negative": ("tolerance=-1",
                                settings.PROBLEM_TOLERANCE.format(value=-1)),
    "test_tolerance_float": ("tolerance=1.5",
                             settings.PROBLEM_TOLERANCE.format(value=1.5)),
    "test_tolerance_dict_value": (
        "tolerance={'objects': -1}",
        settings.PROBLEM_TOLERANCE.format(value={"objects": -1})),
    "test_tolerance_over_int64": (
        "tolerance=2**63", settings.PROBLEM_TOLERANCE_MAX.format(
            maximum=2**63 - 1, value=2**63)),
    "test_tolerance_dict_over_int64": (
        "tolerance={'objects': 2**64}", settings.PROBLEM_TOLERANCE_MAX.format(
            maximum=2**63 - 1, value=2**64)),
    "test_tolerance_dict_probe": (
        "tolerance={'nope': 1}",
        settings.PROBLEM_PROBE.format(value="nope", valid=VALID)),
    "test_positional": ("3", settings.PROBLEM_POSITIONAL.format(
        valid=ARGS, value=3)),
    "test_unknown_argument": ("repeats=3", settings.PROBLEM_KEYWORD.format(
        value="repeats", valid=ARGS)),
}


def test_bad_marker_values_error_the_test_naming_the_marker(pytester,
                                                            runs_log):
    source = ["import pytest\n"]
    for name, (args, _) in BAD.items():
        source.append(f'''
@pytest.mark.noleak({args})
def {name}():
    open("runs.log", "a").close()
''')
    pytester.makepyfile(test_bad="".join(source))
    result = pytester.runpytest_subprocess("-rE")
    result.assert_outcomes(errors=len(BAD))
    for name, (_, problem) in BAD.items():
        result.stdout.fnmatch_lines([f"*{_bad(name, problem)}*"])
    assert runs_log() == []          # no test body ran
    assert not (pytester.path / "runs.log").exists()


FIXTURE = '''
import leakcheck as lc
import pytest

_KEPT = []

@pytest.mark.noleak(repeat=3, probes=["objects", "blocks"])
def test_fixture_settings(leakcheck):
    assert leakcheck.settings.repeat == 3
    assert leakcheck.settings.probes == ("objects", "blocks")

def test_fixture_check(leakcheck):
    assert leakcheck.settings.probes == ("objects",)   # --leaks-probes
    series = leakcheck.check(lambda: None)
    assert series.leaked is False and series.probes == ["objects"]
    with pytest.raises(lc.LeakError) as info:
        leakcheck.check(lambda: _KEPT.append([]))
    assert "objects" in info.value.report

def test_fixture_scope(leakcheck):
    with leakcheck.scope():
        pass
    assert list(leakcheck.snapshot()) == ["objects"]
'''


def test_leakcheck_fixture(pytester):
    pytester.makepyfile(FIXTURE)
    result = pytester.runpytest_subprocess("--leaks-probes=objects")
    result.assert_outcomes(passed=3)


OPT_OUT = '''
import pytest

_KEPT = []

@pytest.mark.leaky(reason="keeps what it makes, by design")
def test_on_purpose():
    _KEPT.append([])
    with open("runs.log", "a") as f:
        f.write("on-purpose\\n")

@pytest.mark.leaky
@pytest.mark.noleak
def test_opt_out_wins():
    _KEPT.append([])

def test_hunted():
    _KEPT.append([])
'''


def test_leaky_marker_opts_out(pytester, read_report, runs_log):
    pytester.makepyfile(test_opt=OPT_OUT)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result.assert_outcomes(passed=2, failed=1)
    assert runs_log() == ["on-purpose"]           # ran once, as pytest would
    _, recs = read_report()
    assert recs["test_opt.py::test_on_purpose"]["verdict"] == "skipped"
    assert recs["test_opt.py::test_on_purpose"]["reason"] == (
        "not checked: marked leaky: keeps what it makes, by design")
    assert recs["test_opt.py::test_opt_out_wins"]["verdict"] == "skipped"
    assert recs["test_opt.py::test_hunted"]["verdict"] == "leak"
    markers = pytester.runpytest_subprocess("--markers")
    markers.stdout.fnmatch_lines([f"@pytest.mark.{settings.OPT_OUT_LINE}"])


NOT_REPEATABLE = '''
import json

import pytest

_PATCHED = []

@pytest.mark.not_repeatable(reason="wraps json.dumps for good")
def test_wraps_for_good():
    assert not _PATCHED, "ran twice"
    _PATCHED.append(json.dumps)
    with open("runs.log", "a") as f:
        f.write("once\\n")
'''


def test_not_repeatable_marker_runs_once_and_is_not_judged(
        pytester, read_report, runs_log):
    pytester.makepyfile(test_once=NOT_REPEATABLE)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result.assert_outcomes(passed=1)
    assert runs_log() == ["once"]
    _, recs = read_report()
    rec = recs["test_once.py::test_wraps_for_good"]
    assert rec["verdict"] == "skipped"
    assert rec["reason"] == (
        "not checked: marked not repeatable: wraps json.dumps for good")
    markers = pytester.runpytest_subprocess("--markers")
    markers.stdout.fnmatch_lines(
        [f"@pytest.mark.{settings.NOT_REPEATABLE_LINE}"])
