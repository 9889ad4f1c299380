"""A diagnosis re-runs a leaking test under tracemalloc: it has a budget
measured in runs of the test, stops there and says so; --leaks-diagnose
(ini leaks_diagnose) makes it cheaper or turns it off."""

import pytest

from pytest_leakcheck import hunt, settings

LEAKY = '''
_KEPT = []

def test_leaky():
    _KEPT.append(bytearray(1000))
'''

# Fast when measured; slower than its whole budget once traced.
SLOW_WHEN_TRACED = '''
import time
import tracemalloc

_KEPT = []

def test_leaky():
    _KEPT.append(bytearray(1000))
    if tracemalloc.is_tracing():
        time.sleep(3 * {floor})
'''.format(floor=settings.DIAGNOSE_FLOOR)


def test_default_diagnosis_names_the_line(pytester):
    pytester.makepyfile(test_leaky=LEAKY)
    result = pytester.runpytest_subprocess("--leaks")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_leaky.py:4: +* bytes in * blocks"])


def test_cheap_diagnosis_still_names_the_line(pytester):
    pytester.makepyfile(test_leaky=LEAKY)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-diagnose=cheap")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*re-running the code 1 time*",
        "*test_leaky.py:4: +* bytes in * block*"])


@pytest.mark.parametrize("how", [["--leaks-diagnose=off"],
                                 ["-o", "leaks_diagnose=off"]],
                         ids=["option", "ini"])
def test_diagnosis_off(pytester, read_report, how):
    pytester.makepyfile(test_leaky=LEAKY)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           *how)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"note: {hunt.MSG_DIAGNOSIS_OFF}"])
    result.stdout.no_fnmatch_line("*where the surviving new memory*")
    report, tests = read_report()
    assert report["settings"]["diagnose"] == "off"
    assert hunt.MSG_DIAGNOSIS_OFF in \
        tests["test_leaky.py::test_leaky"]["diagnosis"]["text"]


def test_a_diagnosis_stops_at_its_budget_and_says_so(pytester, read_report):
    pytester.makepyfile(test_leaky=SLOW_WHEN_TRACED)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the diagnosis stopped at its budget of *"])
    _, tests = read_report()
    assert "stopped at its budget" in \
        str(tests["test_leaky.py::test_leaky"]["diagnosis"])


def test_a_bad_mode_is_a_usage_error(pytester):
    pytester.makepyfile(test_leaky=LEAKY)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-diagnose=some")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*leakcheck: command line option --leaks-diagnose: diagnose must be "
        "one of full, cheap, off, not 'some'"])
