"""tracemalloc started before leakcheck (PYTHONTRACEMALLOC=1, a conftest)
takes leakcheck's allocator hook out when a test stops it: the hook is
put back at the next snapshot, the test that stopped it is told, and the
tests after it are measured as before."""

import pytest

from pytest_leakcheck import terminal

THREE = '''
import tracemalloc

_KEPT = []

def test_clean():
    pass

def test_stop():
    tracemalloc.stop()

def test_leak():
    _KEPT.append(bytes(10000))      # above pymalloc's limit: py_bytes only
'''


@pytest.mark.parametrize("early", [False, True],
                         ids=["plain", "PYTHONTRACEMALLOC"])
def test_a_leak_after_tracemalloc_stop_is_caught(pytester, monkeypatch,
                                                  read_report, early):
    if early:
        monkeypatch.setenv("PYTHONTRACEMALLOC", "1")
    else:
        monkeypatch.delenv("PYTHONTRACEMALLOC", raising=False)
    pytester.makepyfile(test_three=THREE)
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-probes=py_bytes,py_allocs",
        "--leaks-report=r.json")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["LEAKED test_three.py::test_leak - py_bytes +*"])
    _, tests = read_report()
    assert "py_bytes" in tests["test_three.py::test_leak"]["leaking"]
    assert tests["test_three.py::test_clean"]["verdict"] == "clean"
    stopped = tests["test_three.py::test_stop"]
    if early:
        # The series of the test that took the hook out compares neither
        # probe, and says why; nothing reads as a flat zero.
        assert stopped["probes"] == []
        assert set(stopped["unread"]) == {"py_bytes", "py_allocs"}
        assert "tracemalloc" in stopped["unread"]["py_bytes"]
        result.stdout.fnmatch_lines([terminal.MSG_NOT_COMPARED.format(
            id="test_three.py::test_stop", probe="py_bytes", why="*")])
    else:
        assert stopped["probes"] == ["py_bytes", "py_allocs"]
        assert stopped["unread"] == {}


def test_tracemalloc_started_and_stopped_by_a_test_changes_nothing(
        pytester, read_report):
    """Started after leakcheck, tracemalloc forwards to its hook and puts
    it back on stop(): every test keeps both probes."""
    pytester.makepyfile(test_cycle='''
        import tracemalloc

        _KEPT = []

        def test_cycle():
            tracemalloc.start()
            tracemalloc.stop()

        def test_traced_leak():
            tracemalloc.start()
            _KEPT.append(bytes(10000))

        def test_after():
            tracemalloc.stop()
            _KEPT.append(bytes(10000))
    ''')
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-probes=py_bytes,py_allocs",
        "--leaks-report=r.json")
    result.assert_outcomes(passed=1, failed=2)
    _, tests = read_report()
    assert tests["test_cycle.py::test_cycle"]["verdict"] == "clean"
    for name in ("test_traced_leak", "test_after"):
        assert "py_bytes" in tests[f"test_cycle.py::{name}"]["leaking"]
