"""Series (the stepping interface) and repeat(), over every probe."""

import pytest

import leakcheck
from leaks import IDS, LEAKS


def run_series(body, **kwargs):
    series = leakcheck.Series(**kwargs)
    calls = 0
    while series.next():
        body()
        calls += 1
    return series, calls


@pytest.mark.parametrize("case", LEAKS, ids=IDS)
def test_a_leak_grows_in_every_run(case, leaky, garbage_cleanup):
    series, calls = run_series(lambda: case.leak(leaky), warmup=1, repeat=3,
                               probes=[case.probe])
    assert series.done and series.leaked is True
    assert series.leaking == [case.probe]
    # A verdict on a probe that counts bytes alone is confirmed over 8 more
    # runs.
    runs = 3 + (8 if case.probe in ("py_bytes", "native_bytes") else 0)
    assert series.runs == runs and calls == 1 + runs
    assert series.warmup == 1 and series.repeat == 3
    assert series.probes == [case.probe]
    assert len(series.deltas[case.probe]) == runs
    assert min(series.deltas[case.probe]) >= series.thresholds[case.probe]
    report = series.report()
    assert report.startswith(f"leakcheck: series 'series' leaked (at {__file__}:")
    assert f"{case.probe:<12} grew in every run:" in report


@pytest.mark.parametrize("case", LEAKS, ids=IDS)
def test_a_clean_twin_stops_after_one_measured_run(case, leaky):
    measured = []
    for _ in range(5):
        series, calls = run_series(lambda: case.clean(leaky), warmup=1,
                                   repeat=4, probes=[case.probe])
        assert series.leaked is False, series.report()
        assert series.leaking == []
        measured.append(series.warmup_measured)
        if case.probe != "native_bytes":    # glibc's heap is noisy
            # The warm-up run, and two measured runs (the window) unless
            # the warm-up run grew nothing and was the measured run, or
            # read less (one measured run).
            assert series.runs == (1 if series.warmup_measured else
                                   calls - 1)
            assert calls in ((1,) if series.warmup_measured else (2, 3))
    # Warm, clean code grows nothing in its warm-up run either.
    assert measured[-1] is True, (measured, series.report())


def test_warmup_growth_says_what_made_the_measured_runs_due():
    kept = []

    def fills_once():
        if not kept:
            kept.append([])     # a list, and a place in `kept` for it

    series, calls = run_series(fills_once, warmup=1, repeat=4,
                               probes=["blocks", "objects", "fds"])
    assert series.leaked is False and not series.warmup_measured
    assert calls >= 2
    assert series.warmup_growth["blocks"] >= 2, series.warmup_growth
    assert series.warmup_growth["objects"] == 1, series.warmup_growth
    assert "fds" not in series.warmup_growth    # read, and moved nothing
    # Warm now: the warm-up run is the measured run, and grew nothing.
    series, calls = run_series(fills_once, warmup=1, repeat=4,
                               probes=["blocks", "objects"])
    assert series.warmup_measured and series.warmup_growth == {}
    # No warm-up run: nothing was read of one.
    series, _ = run_series(fills_once, warmup=0, repeat=2, probes="blocks")
    assert series.warmup_growth == {}


def test_next_keeps_returning_false_once_done():
    series, _ = run_series(lambda: None, warmup=0, repeat=2, probes="objects")
    assert series.next() is False and series.next() is False
    # Without a warm-up run to read, the window (2) needs two runs of
    # nothing.
    assert series.runs == 2 and series.window == 2


def test_rebase_leaves_what_was_made_between_runs_out():
    kept = []
    series = leakcheck.Series(warmup=1, repeat=2, probes="objects")
    with pytest.raises(RuntimeError):
        series.rebase()             # before the warm-up run is read
    assert series.next()
    kept.append([])                 # the warm-up run grows: runs are due
    assert series.next()
    # Made between two runs and kept: the measured run that follows does
    # not grow by it once the snapshot it is compared with is read again.
    kept.append([[] for _ in range(5)])
    series.rebase()
    while series.next():
        pass                        # the measured runs: nothing
    assert series.leaked is False
    assert set(series.deltas["objects"]) == {0}
    with pytest.raises(RuntimeError):
        series.rebase()             # done


def _readable(probe):
    return any(p.name == probe and p.available for p in leakcheck.probes())


@pytest.mark.skipif(not _readable("refs"),
                    reason="the refs probe needs a debug build of CPython")
def test_a_rebased_run_reads_no_reference_of_the_series_own():
    """The snapshot rebase() reads and the one next() reads after the
    measured run hold the same references in the series' own frames, so a
    run of nothing reads refs 0 (up to 3.11, where False is not immortal,
    next()'s flag made it +1, and every test the plugin ran again on a
    debug build ran twice more)."""
    kept = []
    series = leakcheck.Series(warmup=1, repeat=2, probes="refs")
    assert series.next()
    kept.append([])                 # the warm-up run grows: runs are due
    assert series.next()
    series.rebase()
    while series.next():
        pass                        # the measured runs: nothing
    assert series.leaked is False
    assert series.deltas["refs"] == [0, 0], series.deltas


def test_without_rebase_what_was_made_between_runs_is_growth():
    kept = []
    series = leakcheck.Series(warmup=1, repeat=2, probes="objects")
    assert series.next()
    kept.append([])
    assert series.next()
    kept.append([[] for _ in range(5)])
    while series.next():
        pass
    # The six lists, less what else the test's frame let go meanwhile.
    assert series.deltas["objects"][0] >= 5


def test_warmup_zero_measures_from_the_first_run(leaky):
    armed = [False]

    def body():
        if armed[0]:
            leaky.leak_pymem(64)

    body()                  # its first call (3.9/3.10 keep its frame)
    armed[0] = True
    series, calls = run_series(body, warmup=0, repeat=2, probes="blocks")
    assert calls == 2 and series.deltas == {"blocks": [1, 1]}
    assert series.thresholds == {"blocks": 1}


def test_tolerance_sets_the_threshold_one_above(leaky):
    def two_blocks():
        leaky.leak_pymem(64)
        leaky.leak_pymem(64)

    calls = [0]                 # a small int: counting allocates nothing

    def two_blocks_every_second_call():
        calls[0] += 1
        if calls[0] % 2:
            two_blocks()

    # Threshold 3: the total rises to a new high by 3 once in four runs
    # (2, 2, 4, 4, 6, 6, 8): the probe dies within the window.  Not the
    # same two blocks every run: their total rises by 3 every second run,
    # a leak under any threshold once the series goes past its warm-up.
    series, _ = run_series(two_blocks_every_second_call, repeat=3,
                           probes="blocks", tolerance=2)
    assert series.thresholds == {"blocks": 3}
    assert not series.leaked, series.report()
    # Threshold 2: every second run raises it, a leak.
    calls[0] = 0
    series, _ = run_series(two_blocks_every_second_call, repeat=3,
                           probes="blocks", tolerance=1)
    assert series.thresholds == {"blocks": 2} and series.leaked
    series, _ = run_series(two_blocks, repeat=3, probes="blocks",
                           tolerance={"blocks": 1})
    assert series.thresholds == {"blocks": 2} and series.leaked
    assert series.deltas == {"blocks": [2, 2, 2]}


def test_growth_every_second_run_is_a_leak(leaky):
    runs = []

    def sometimes():
        runs.append(None)
        if len(runs) % 2:
            leaky.leak_pymem(64)

    series, _ = run_series(sometimes, warmup=0, repeat=4, probes="blocks")
    assert series.leaked, series.report()
    # Raised in runs 1, 3, 5 and 7 (the first call may grow a little more).
    assert series.deltas["blocks"][1:] == [0, 1] * 3
    assert "blocks       grew to a new high in 4 of 7 runs:" \
        in series.report()


def test_growth_every_third_run_is_a_leak_in_thorough_mode_only(leaky):
    def every_third():
        calls = []

        def body():
            calls.append(None)
            if len(calls) % 3 == 1:
                leaky.leak_pymem(64)
        return body

    series, _ = run_series(every_third(), warmup=0, repeat=3,
                           probes="blocks")
    assert not series.leaked and series.window == 2
    series, _ = run_series(every_third(), warmup=0, repeat=3,
                           probes="blocks", thorough=True)
    assert series.leaked and series.window == 3 and series.thorough
    # Raised in runs 1, 4 and 7; then confirmed over 512 more.
    assert series.main_runs == 7 and series.runs == 7 + 512


def test_growth_back_and_forth_is_not_a_leak():
    kept = []

    def back_and_forth():
        if kept:
            kept.pop()
        else:
            kept.append([[] for _ in range(8)])

    series, _ = run_series(back_and_forth, warmup=0, repeat=4,
                           probes="objects")
    assert not series.leaked, series.report()


def test_growth_that_dies_out_runs_on_until_it_stops():
    cache = {}
    step = [256]

    def fills_in_shrinking_steps():
        for _ in range(step[0]):
            cache[object()] = None
        step[0] //= 2

    series, _ = run_series(fills_in_shrinking_steps, warmup=0, repeat=4,
                           probes="blocks")
    assert not series.leaked, series.report()
    assert series.main_runs == 4 and series.runs > 4
    assert "growth that dies out, no leak" in series.report()


def test_thorough_must_be_a_bool():
    with pytest.raises(TypeError, match="thorough must be a bool"):
        leakcheck.Series(thorough="yes")


def test_the_report_appends_a_diagnosis(leaky):
    series, _ = run_series(lambda: leaky.leak_new_list(2), repeat=2,
                           probes="objects", name="lists")
    diagnosis = leakcheck.diagnose(lambda: leaky.leak_new_list(2),
                                   series.leaking)
    report = series.report(diagnosis)
    assert report.startswith("leakcheck: series 'lists' leaked")
    assert "objects that grew (per run, re-running the code 2 times)" \
        in report
    assert repr(series) == "<leakcheck.Series 'lists' leaked: objects, 2 runs>"


@pytest.mark.parametrize("case", LEAKS, ids=IDS)
def test_repeat_raises_with_the_report_and_a_diagnosis(case, leaky,
                                                        garbage_cleanup):
    with pytest.raises(leakcheck.LeakError) as info:
        leakcheck.repeat(case.leak, leaky, repeat=3, probes=[case.probe])
    error = info.value
    name = case.leak.__qualname__
    assert f"series '{name}' leaked (at {__file__}:" in error.report
    assert error.diagnosis.leaking == [case.probe]
    assert error.diagnosis.runs == 2


@pytest.mark.parametrize("case", LEAKS, ids=IDS)
def test_repeat_returns_the_finished_series_when_clean(case, leaky):
    series = leakcheck.repeat(case.clean, leaky, probes=[case.probe])
    assert isinstance(series, leakcheck.Series)
    assert series.done and not series.leaked
    assert series.runs <= 2 or case.probe == "native_bytes"


def test_repeat_passes_arguments_and_uses_default_probes(leaky):
    seen = [None, 0]                    # (last arguments, calls): no growth

    def work(a, b, *, c):
        seen[:] = [(a, b, c), seen[1] + 1]
        leaky.clean_pymem(a)

    series = leakcheck.repeat(work, 64, 2, c=3, warmup=2, repeat=5)
    # Two warm-up runs, then the measured ones: one, unless a run moved
    # the native heap once (3.9/3.10 swap the frame a code object keeps);
    # none when the second warm-up run grew nothing and was measured.
    assert seen == [(64, 2, 3),
                    2 + series.runs - series.warmup_measured], series.deltas
    assert not series.leaked
    readable = {p.name for p in leakcheck.probes() if p.available}
    assert set(series.probes) == set(leakcheck.DEFAULT_PROBES) & readable
    assert series.name == "test_repeat_passes_arguments_and_uses_default_" \
                          "probes.<locals>.work"


def test_an_exception_from_the_code_propagates():
    def boom():
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        leakcheck.repeat(boom)


def _native_keeper(runs_that_keep, every=1):
    """A body that keeps a malloc()ed block in each of its first
    `runs_that_keep` runs (after the first four, only in every `every`th
    run: a reallocated buffer's growth), then frees what it takes: what
    glibc's heap does when it creeps for a few runs, and a forgotten free()
    when `runs_that_keep` is unbounded."""
    import ctypes
    import ctypes.util
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    kept = (ctypes.c_void_p * 64)()     # no Python object per run
    count = [0]
    calls = [0]

    def body():
        calls[0] += 1
        block = libc.malloc(4096)
        skip = calls[0] > 5 and calls[0] % every
        if not skip and count[0] < min(runs_that_keep, len(kept)):
            kept[count[0]] = block
            count[0] += 1
        else:
            libc.free(block)
    body.release = lambda: [libc.free(kept[i]) for i in range(count[0])]
    return body


def _raw_grower(runs_that_grow, every=1):
    """A body that grows one PyMem_RawRealloc()ed block by 4 KiB in each
    of its first `runs_that_grow` runs (after the first five, only in every
    `every`th run): py_bytes grows, with no new block, allocation or
    object.  A dict or list resized with room to spare creeps that way for
    a few runs; a buffer that is never given back grows so for good."""
    import ctypes
    api = ctypes.pythonapi
    api.PyMem_RawRealloc.restype = ctypes.c_void_p
    api.PyMem_RawRealloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    api.PyMem_RawFree.argtypes = [ctypes.c_void_p]
    state = [api.PyMem_RawRealloc(None, 4096), 4096, 0, 0]  # block, size, calls, grown

    def body():
        state[2] += 1
        skip = state[2] > 5 and state[2] % every
        if not skip and state[3] < runs_that_grow:
            state[1] += 4096
            state[0] = api.PyMem_RawRealloc(state[0], state[1])
            state[3] += 1
    body.release = lambda: api.PyMem_RawFree(state[0])
    return body


# (probe, the body's factory, the probes read, least growth per run of the
# first four: PyMem_RawRealloc's first 4 KiB can read 4080)
_BYTE_PROBES = [
    ("native_bytes", _native_keeper, ["native_bytes", "blocks"], 4096),
    ("py_bytes", _raw_grower, ["py_bytes", "py_allocs", "blocks"], 4000),
]


@pytest.mark.parametrize("probe, make, probes, least", _BYTE_PROBES,
                         ids=[p[0] for p in _BYTE_PROBES])
@pytest.mark.parametrize("keeps, every, leaked", [
    (6, 1, False),          # creeps for a few runs, then stops
    (10**6, 1, True),       # a forgotten free() in every run
    (10**6, 2, True),       # a buffer that grows in every other run
])
def test_a_verdict_on_a_byte_probe_alone_is_confirmed_by_more_runs(
        probe, make, probes, least, keeps, every, leaked):
    body = make(keeps, every)
    body()
    try:
        series = leakcheck.Series(warmup=0, repeat=4, probes=probes)
        while series.next():
            body()
    finally:
        body.release()
    assert series.leaked is leaked, series.report()
    deltas = series.deltas[probe]
    # Four runs grew: the first series alone would have called it a leak.
    assert all(d >= least for d in deltas[:4]), deltas
    assert len(deltas) == series.runs
    assert series.runs == 4 + 8
    if leaked:
        assert series.leaking == [probe]
        assert "  confirmed over 8 more runs" in series.report()
    else:
        assert series.leaking == [] and sum(deltas[-4:]) < 1
        assert "not confirmed over 8 more runs" in series.report()
    assert len(series.deltas["blocks"]) == 4      # no confirmation for it
