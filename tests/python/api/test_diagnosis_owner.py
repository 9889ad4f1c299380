"""diagnose() shows the code, never itself, and leaves tracemalloc as it
found it: what stops the re-runs is not counted as grown; tracemalloc
running keeps running with its frame limit; code that stops tracemalloc
itself gets the rest of the diagnosis and a note why."""

import tracemalloc

import pytest

import leakcheck
from leakcheck._evidence.pyalloc import NOTE_CODE_STOPS


class Stop(Exception):
    pass


@pytest.fixture
def no_tracemalloc():
    was = tracemalloc.is_tracing()
    tracemalloc.stop()
    yield
    tracemalloc.stop()
    if was:
        tracemalloc.start()


def test_what_stops_the_runs_is_not_counted(no_tracemalloc):
    kept = []
    calls = []

    def run_once():
        calls.append(None)
        if len(calls) == 3:     # the second of the runs compared
            raise Stop("enough")
        kept.append([])

    diagnosis = leakcheck.diagnose(run_once, ["objects"], runs=2)
    assert [entry["type"] for entry in diagnosis.objects] == ["list"]
    assert diagnosis.objects[0]["delta"] == 1
    assert diagnosis.runs == 1
    assert "re-running the code raised Stop: enough" in diagnosis.notes


def test_tracemalloc_running_keeps_running_with_its_limit(no_tracemalloc):
    kept = []
    tracemalloc.start(4)
    diagnosis = leakcheck.diagnose(lambda: kept.append([]), ["objects"])
    assert tracemalloc.is_tracing()
    assert tracemalloc.get_traceback_limit() == 4
    assert [entry["type"] for entry in diagnosis.objects] == ["list"]
    assert diagnosis.allocations


def test_code_that_stops_tracemalloc_gets_the_rest(no_tracemalloc):
    kept = []

    def counts_its_own():
        tracemalloc.start()
        kept.append([])
        tracemalloc.stop()

    diagnosis = leakcheck.diagnose(counts_its_own, ["objects"])
    assert not tracemalloc.is_tracing()
    assert diagnosis.allocations == []
    assert [entry["type"] for entry in diagnosis.objects] == ["list"]
    assert NOTE_CODE_STOPS in diagnosis.notes


def test_code_that_keeps_tracemalloc_stopped_finds_it_stopped(
        no_tracemalloc):
    seen = []
    kept = []

    def looks():
        seen.append(tracemalloc.is_tracing())
        tracemalloc.stop()
        kept.append([])

    leakcheck.diagnose(looks, ["objects"], runs=2)
    assert not tracemalloc.is_tracing()
    assert seen[1:] == [False] * (len(seen) - 1)


def test_why_there_are_no_python_lines_survives_a_stop(no_tracemalloc):
    calls = []

    def counts_its_own():
        calls.append(None)
        if len(calls) == 2:     # the first of the runs compared
            raise Stop("no time left")
        tracemalloc.start()
        tracemalloc.stop()

    diagnosis = leakcheck.diagnose(counts_its_own, ["objects"])
    assert diagnosis.runs == 0
    assert "re-running the code raised Stop: no time left" in diagnosis.notes
    assert NOTE_CODE_STOPS in diagnosis.notes
