"""leakcheck.scope() as a context manager and as a decorator, over every
probe: each leak fails it, each clean twin never does."""

import pytest

import leakcheck
import leakcheck.cpython
from leaks import ALSO, IDS, LEAKS, warm_after_profilers

CLEAN_RUNS = 15


@pytest.mark.parametrize("case", LEAKS, ids=IDS)
def test_a_leak_fails_the_scope(case, leaky, garbage_cleanup):
    case.clean(leaky)                   # first use of the code path
    with pytest.raises(leakcheck.LeakError) as info:
        with leakcheck.scope(probes=[case.probe]):
            case.leak(leaky)
    error = info.value
    assert isinstance(error, AssertionError)
    assert str(error) == error.report
    assert f"  {case.probe:<12} grew by +" in error.report
    assert error.diagnosis is not None
    assert error.diagnosis.leaking == [case.probe]


@pytest.mark.parametrize("case", LEAKS, ids=IDS)
def test_a_clean_twin_never_fails_the_scope(case, leaky):
    case.clean(leaky)
    for _ in range(CLEAN_RUNS):
        with leakcheck.scope(probes=[case.probe]) as s:
            case.clean(leaky)
        assert s.leaked is False and s.leaking == []
        assert s.deltas[case.probe] <= s_tolerance(case.probe)


def s_tolerance(probe):
    return {p.name: p.tolerance for p in leakcheck.probes()}[probe]


@pytest.mark.parametrize("case", [c for c in LEAKS
                                  if c.probe in leakcheck.DEFAULT_PROBES],
                         ids=[c.probe for c in LEAKS
                              if c.probe in leakcheck.DEFAULT_PROBES])
def test_default_probes_catch_the_leak_and_pass_the_twin(case, leaky,
                                                         garbage_cleanup):
    case.clean(leaky)
    for _ in range(5):
        with leakcheck.scope():
            case.clean(leaky)
    with pytest.raises(leakcheck.LeakError) as info:
        with leakcheck.scope() as s:
            case.leak(leaky)
    assert case.probe in s.leaking
    assert set(s.leaking) >= ALSO.get(case.probe, set())
    assert set(s.probes) <= set(leakcheck.DEFAULT_PROBES)
    assert info.value.diagnosis.leaking == s.leaking


@pytest.mark.parametrize("case", LEAKS, ids=IDS)
def test_as_a_decorator(case, leaky, garbage_cleanup):
    calls = []

    @leakcheck.scope(probes=[case.probe])
    def leaking(n):
        calls.append(n)
        case.leak(leaky)

    @leakcheck.scope(probes=[case.probe])
    def clean(n):
        case.clean(leaky)

    assert leaking.__name__ == "leaking"
    case.clean(leaky)                   # first use of the code path
    clean.__wrapped__(0)                # and of the function's own code
    warm_after_profilers()
    clean(0)
    for i in range(5):
        assert clean(i) is None
    with pytest.raises(leakcheck.LeakError) as info:
        leaking(7)
    # The failing call ran again under the diagnosis, with its arguments.
    assert calls[0] == 7 and len(calls) >= 1 + info.value.diagnosis.runs
    assert set(calls) == {7}
    assert "scope 'test_as_a_decorator.<locals>.leaking' leaked" in \
        info.value.report


def test_tolerance_allows_that_much_growth(leaky):
    leaky.clean_pymem(64)
    with leakcheck.scope(probes=["blocks"], tolerance=3) as s:
        for _ in range(3):
            leaky.leak_pymem(64)
    assert s.deltas == {"blocks": 3} and not s.leaked
    with pytest.raises(leakcheck.LeakError) as info:
        with leakcheck.scope(probes=["blocks"], tolerance={"blocks": 3}):
            for _ in range(4):
                leaky.leak_pymem(64)
    assert "blocks       grew by +4 blocks (tolerance 3)" in info.value.report


def test_the_results_stay_on_the_scope(leaky):
    with leakcheck.scope(probes="blocks,objects", name="mine") as s:
        pass
    assert s.leaked is False and s.leaking == []
    assert s.probes == ["blocks", "objects"]
    assert s.deltas == {"blocks": 0, "objects": 0}
    assert s.report.startswith("leakcheck: scope 'mine' is clean (at ")
    assert "within tolerance: blocks +0, objects +0" in s.report


def test_an_exception_in_the_body_is_not_a_verdict(leaky):
    with pytest.raises(KeyError):
        with leakcheck.scope(probes=["blocks"]) as s:
            leaky.leak_pymem(64)
            raise KeyError("boom")
    assert s.leaked is None


def test_a_scope_cannot_be_entered_twice_at_once():
    # fds: what is measured here is pytest.raises' machinery, which may run
    # for the first time since a profiler was removed (see
    # warm_after_profilers); the point is the RuntimeError.
    s = leakcheck.scope(probes=["fds"])
    with s:
        with pytest.raises(RuntimeError, match="already active"):
            with s:
                pass
    with s:                             # again, once it has ended
        pass


def test_exit_without_enter_says_so():
    s = leakcheck.scope(probes=["fds"])
    for exc in (None, KeyError):
        with pytest.raises(RuntimeError, match="^leakcheck.scope is not "
                           "active: __exit__ without __enter__$"):
            s.__exit__(exc, None, None)
    with s:
        pass
    with pytest.raises(RuntimeError, match="not active"):
        s.__exit__(None, None, None)            # twice


def test_nested_scopes_judge_their_own_spans(leaky):
    leaky.clean_pymem(64)
    with pytest.raises(leakcheck.LeakError):
        with leakcheck.scope(probes=["blocks"], name="outer") as outer:
            with leakcheck.scope(probes=["blocks"], name="inner") as inner:
                pass
            leaky.leak_pymem(64)
    assert inner.leaked is False
    assert outer.leaking == ["blocks"]


def test_python_code_that_keeps_objects_is_caught():
    kept = []

    class Record:
        pass

    def work():
        kept.append(Record())

    work()
    with pytest.raises(leakcheck.LeakError) as info:
        with leakcheck.scope():
            work()
    objects = info.value.diagnosis.objects
    assert objects[0]["type"].endswith(
        "test_python_code_that_keeps_objects_is_caught.<locals>.Record")
    assert objects[0]["delta"] == 1


@pytest.mark.parametrize("leak, clean", [
    ("leak_native", "clean_native"), ("leak_strdup", "clean_strdup")])
def test_a_small_native_leak_fails_a_default_scope(leaky, leak, clean):
    # The C engine's scope tolerates no native growth; neither does this
    # API's, but for the C heap's noise of 3.9 and 3.10
    # (leakcheck.cpython.SCOPE_NATIVE_TOLERANCE): one forgotten free() of
    # 2 KB or a 1,000-byte strdup fails.
    noise = leakcheck.cpython.SCOPE_NATIVE_TOLERANCE
    arg = 2048 if leak == "leak_native" else "a" * 1000
    getattr(leaky, clean)(arg)
    for _ in range(CLEAN_RUNS):
        with leakcheck.scope() as s:
            getattr(leaky, clean)(arg)
        assert abs(s.deltas["native_bytes"]) <= noise, s.report
    with pytest.raises(leakcheck.LeakError) as info:
        with leakcheck.scope() as s:
            getattr(leaky, leak)(arg)
    assert s.leaking == ["native_bytes"]
    assert s.deltas["native_bytes"] >= 1000
    assert "native_bytes grew by +" in info.value.report
    assert f"(tolerance {noise})" in info.value.report
    assert {p.name: p.tolerance for p in leakcheck.probes()}[
        "native_bytes"] == 0
