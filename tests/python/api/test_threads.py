"""Threads allocating while snapshots are taken: the allocator hook counts
from every thread (the raw domain without the GIL), readings stay exact,
and verdicts on the main thread's code stay right."""

import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

import leakcheck

PROBES = ["blocks", "py_bytes", "py_allocs", "objects", "threads"]


class Churn:
    """Threads that allocate and free until stopped: two in C through every
    PyMem domain and malloc (leakylib.churn), one in Python."""

    def __init__(self, leaky):
        self.leaky = leaky
        self.stop = threading.Event()
        self.rounds = [0, 0, 0]
        self.threads = []

    def _c(self, slot):
        while not self.stop.is_set():
            self.rounds[slot] += self.leaky.churn(0.02)

    def _python(self, slot):
        while not self.stop.is_set():
            [{"i": i, "s": str(i)} for i in range(10)]
            self.rounds[slot] += 1

    def __enter__(self):
        self.stop.clear()
        self.threads = [threading.Thread(target=self._c, args=(0,)),
                        threading.Thread(target=self._c, args=(1,)),
                        threading.Thread(target=self._python, args=(2,))]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join()
        self.threads = []
        return False


def wait_for_threads(count, timeout=5.0):
    deadline = time.monotonic() + timeout
    while leakcheck.snapshot(["threads"])["threads"] > count:
        assert time.monotonic() < deadline, "threads did not end"
        time.sleep(0.01)


def test_counts_come_back_after_threads_allocated_meanwhile(leaky):
    churn = Churn(leaky)
    with churn:                          # first use of all of it
        time.sleep(0.05)
    churn.rounds[:] = [0, 0, 0]
    before = leakcheck.snapshot(PROBES)
    with churn:
        for _ in range(20):
            leakcheck.snapshot(PROBES)
            with leakcheck.scope(probes=PROBES, tolerance=1 << 30):
                time.sleep(0.002)
    wait_for_threads(before["threads"])
    allocated = min(churn.rounds) > 20  # they did allocate meanwhile
    churn.rounds[:] = [0, 0, 0]         # (counts over 256 are new ints)
    after = leakcheck.snapshot(PROBES)
    assert allocated
    delta = after - before
    # Millions of allocations and frees from four threads, the raw ones
    # without the GIL: the hook's count still matches pymalloc's own, and
    # the raw and large bytes are all back.  (threading's own containers
    # may have resized by a block or two: starting threads is a first
    # use of sorts.)
    assert delta["py_allocs"] == delta["blocks"], delta
    assert abs(delta["py_bytes"]) <= 4096, delta   # (and their tables)
    assert abs(delta["blocks"]) <= 8, delta
    assert delta["threads"] == 0, delta


def test_a_leak_is_caught_while_other_threads_allocate(leaky):
    def leak_many():
        for _ in range(300):
            leaky.leak_pymem(64)

    # A Series, not repeat(): repeat() would diagnose under tracemalloc,
    # and starting or stopping tracemalloc swaps CPython's raw allocator,
    # which threads allocating without the GIL must not be doing then.
    with Churn(leaky):
        series = leakcheck.Series(probes=["blocks", "py_allocs"],
                                  tolerance=100, repeat=3)
        while series.next():
            leak_many()
    assert series.leaked and series.leaking == ["blocks", "py_allocs"]


def test_clean_code_passes_while_other_threads_allocate(leaky):
    def clean_many():
        for _ in range(300):
            leaky.clean_pymem(64)

    with Churn(leaky):
        for _ in range(3):
            series = leakcheck.Series(probes=["blocks", "py_allocs"],
                                      tolerance=100, repeat=3)
            while series.next():
                clean_many()
            assert not series.leaked


def test_a_scope_in_a_thread_of_its_own(leaky):
    """Scopes work off the main thread too."""
    results = []

    def worker():
        leaky.clean_pymem(64)
        with leakcheck.scope(probes="blocks,py_allocs", tolerance=10):
            pass                # a first scope in a new thread (3.9: +1)
        with leakcheck.scope(probes="blocks,py_allocs") as s:
            leaky.clean_pymem(64)
        results.append(s.leaked)
        try:
            with leakcheck.scope(probes="blocks,py_allocs"):
                leaky.leak_pymem(64)
        except leakcheck.LeakError as e:
            results.append(e.diagnosis.leaking)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert results == [False, ["blocks", "py_allocs"]]


BENCH = pathlib.Path(__file__).parents[3] / "bench"
FIRST_THREAD = BENCH / "first_thread.py"
STRESS = BENCH / "stress_threads.py"


def test_a_thread_run_before_the_first_reading_keeps_its_stack():
    """bench/first_thread.py: a joined C thread of a small stack (64 KiB)
    run once before the process's first reading, then between three pairs
    of snapshots, grows nothing in any pair: the engine's settling at its
    first heap reading (c_api/src/heap.c) leaves the stacks glibc cached
    before it.  Evicted, the thread's next run would get a new stack and
    TLS vector.  Nor does it with the engine's reading first."""
    proc = subprocess.run([sys.executable, str(FIRST_THREAD)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()[1:]
    assert [line.split() for line in lines] == [
        ["warmed", "first", "+0", "+0", "+0"],
        ["engine", "first", "+0", "+0", "+0"]], proc.stdout


@pytest.mark.parametrize("early_tracemalloc", ["0", "1"],
                         ids=["own-hooks", "table-after-tracemalloc"])
def test_eight_threads_allocating_while_snapshots_are_taken(
        early_tracemalloc):
    """bench/stress_threads.py for 2 seconds (30 by default): no crash, and
    a scope around it all comes out clean."""
    env = dict(os.environ, PYTHONTRACEMALLOC=early_tracemalloc)
    proc = subprocess.run([sys.executable, str(STRESS), "--seconds", "2"],
                          env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "8 threads, 2 s:" in proc.stdout


def _tick(stop):
    while not stop.wait(0.002):
        pass


def _blocked(thread):
    """Waits until `thread` stops using the CPU (blocked in a wait)."""
    from leakcheck._verdicts import _cpu_ns
    last = None
    while last is None or _cpu_ns(thread) != last:
        last = _cpu_ns(thread)
        time.sleep(0.02)


def test_reports_name_the_threads_that_ran_while_measuring(leaky):
    """A thread that used the CPU while a scope or series measured is
    named; one that waited all along (a server blocked in accept(),
    pytest-rerunfailures' with pytest-xdist installed) allocated nothing
    and is not."""
    stop = threading.Event()
    ticker = threading.Thread(target=_tick, args=(stop,), name="ticker")
    idle = threading.Thread(target=stop.wait, name="idle")
    ticker.start()
    idle.start()
    _blocked(idle)
    try:
        with pytest.raises(leakcheck.LeakError) as info:
            with leakcheck.scope(probes=["blocks"]):
                leaky.leak_pymem(64)
        series = leakcheck.Series(probes=["blocks"], repeat=2)
        while series.next():
            pass
    finally:
        stop.set()
        ticker.join()
        idle.join()
    assert "other threads ran while it measured" in info.value.report
    assert "ticker (_tick)" in info.value.report
    assert "idle" not in info.value.report
    assert series.threads == ["ticker (_tick)"]
    with leakcheck.scope(probes=["blocks"], tolerance=1 << 30) as alone:
        pass
    assert alone.threads == []
