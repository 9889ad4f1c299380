"""The diagnosis never shows leakcheck: a diagnosis that its budget stops
in the middle of the runs it compares lists what the test kept, not the
exception that stopped it, its traceback and frames, nor the plugin's
re-runs."""

from pytest_leakcheck import settings

# The first traced run is the one before the compared ones; the second,
# slow, uses up the budget, so that the third is stopped by it while the
# type census is open.
STOPPED_IN_THE_MIDDLE = '''
import time
import tracemalloc

_KEPT = []
_TRACED = []

def test_leaky():
    _KEPT.append([])
    if tracemalloc.is_tracing():
        _TRACED.append(None)
        if len(_TRACED) == 2:
            time.sleep(2 * {floor})
'''.format(floor=settings.DIAGNOSE_FLOOR)


def test_a_diagnosis_stopped_by_its_budget_lists_only_the_leak(
        pytester, read_report):
    pytester.makepyfile(test_leaky=STOPPED_IN_THE_MIDDLE)
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-report=r.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the diagnosis stopped at its budget of *"])
    _, tests = read_report()
    diagnosis = tests["test_leaky.py::test_leaky"]["diagnosis"]
    assert [entry["type"] for entry in diagnosis["objects"]] == ["list"]
    result.stdout.no_fnmatch_line("*_OutOfBudget +*")
    result.stdout.no_fnmatch_line("*  frame  *")
