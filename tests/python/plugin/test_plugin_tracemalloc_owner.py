"""tracemalloc belongs to the test.  A test that starts it and leaves it
running (lz4's) gets no false alarm from its bookkeeping, nor does any
test after it; a diagnosis leaves it as it found it (running, its frame
limit, no memray modules among its traces); a test that starts and
stops it (python-rapidjson's) gets the rest of the diagnosis and one line
saying why there are no Python lines."""

import sys

import pytest

import leakcheck

from leakcheck._evidence.native import NOTE_TEST_TRACES, NOTE_TRACEMALLOC
from leakcheck._evidence.pyalloc import NOTE_CODE_STOPS

LEFT_RUNNING = '''
import tracemalloc

def test_a_starts_it():
    tracemalloc.start()

def test_b_allocates():
    text = [str(i) * 100 for i in range(300)]
    big = {i: bytearray(600) for i in range(50)}

def test_c_empty():
    pass
'''


def test_tracemalloc_left_running_is_no_leak_here_or_later(pytester,
                                                           read_report):
    pytester.makepyfile(test_running=LEFT_RUNNING)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result.assert_outcomes(passed=3)
    _, tests = read_report()
    for name in ("test_b_allocates", "test_c_empty"):
        record = tests[f"test_running.py::{name}"]
        assert record["verdict"] == "clean"
        # The allocator probes this Python judges by default (py_bytes is
        # not among them before 3.11) were read, through tracemalloc.
        allocator = {"py_bytes", "py_allocs"} & set(leakcheck.DEFAULT_PROBES)
        assert "py_allocs" in allocator
        assert allocator <= set(record["probes"])


DIAGNOSED_UNDER_ITS_TRACEMALLOC = '''
import tracemalloc

_KEPT = []

def test_a_starts_it():
    tracemalloc.start(3)

def test_b_leaks():
    _KEPT.append([])

def test_c_finds_it_as_it_was():
    assert tracemalloc.is_tracing()
    assert tracemalloc.get_traceback_limit() == 3
    files = {frame.filename
             for trace in tracemalloc.take_snapshot().traces
             for frame in trace.traceback}
    assert not [name for name in files if "memray" in name]
'''


def test_a_diagnosis_leaves_the_tests_tracemalloc_as_it_was(pytester,
                                                            read_report):
    pytest.importorskip("memray")
    pytester.makepyfile(test_owned=DIAGNOSED_UNDER_ITS_TRACEMALLOC)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result.assert_outcomes(passed=2, failed=1)
    _, tests = read_report()
    diagnosis = tests["test_owned.py::test_b_leaks"]["diagnosis"]
    assert [entry["type"] for entry in diagnosis["objects"]] == ["list"]
    assert any(entry["file"].endswith("test_owned.py")
               for entry in diagnosis["allocations"])
    assert NOTE_TEST_TRACES in diagnosis["notes"]


STARTS_AND_STOPS = '''
import tracemalloc

_KEPT = []

def test_counts_its_own():
    tracemalloc.start()
    _KEPT.append([])
    tracemalloc.take_snapshot()
    tracemalloc.stop()

def test_after():
    assert not tracemalloc.is_tracing()
'''


def test_a_test_that_stops_tracemalloc_gets_the_rest_and_why(pytester,
                                                             read_report):
    pytester.makepyfile(test_own=STARTS_AND_STOPS)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"note: {NOTE_CODE_STOPS}"])
    _, tests = read_report()
    diagnosis = tests["test_own.py::test_counts_its_own"]["diagnosis"]
    assert diagnosis["allocations"] == []
    assert "list" in [entry["type"] for entry in diagnosis["objects"]]
    assert NOTE_CODE_STOPS in diagnosis["notes"]


CYCLES_TRACEMALLOC = '''
import tracemalloc

def test_cycles():
    tracemalloc.start()
    data = [{"a%d" % i: i} for i in range(100)]
    tracemalloc.take_snapshot()
    tracemalloc.stop()
'''


@pytest.mark.skipif(sys.version_info >= (3, 13),
                    reason="from 3.13 tracemalloc.stop() frees what it "
                           "interned: no growth to name (it kept it on 3.10 "
                           "to 3.12, measured)")
def test_tracemallocs_own_growth_is_named_as_the_interpreters(pytester,
                                                              read_report):
    """CPython's tracemalloc keeps what it interned on stop(): the C heap
    of a test that only starts and stops it grows every run.  That growth
    is real and reported, and the diagnosis says whose it is."""
    pytest.importorskip("memray")
    pytester.makepyfile(test_cycle=CYCLES_TRACEMALLOC)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result.assert_outcomes(failed=1)
    _, tests = read_report()
    diagnosis = tests["test_cycle.py::test_cycles"]["diagnosis"]
    assert NOTE_TRACEMALLOC in diagnosis["notes"]
    assert NOTE_CODE_STOPS in diagnosis["notes"]
    assert diagnosis["native"] == []
