"""The API's arguments: out of range is a ValueError naming the argument,
the wrong type a TypeError naming it; never a MemoryError, an
OverflowError, or a run of a billion repetitions.  The ranges are the
pytest plugin's (its settings import them)."""

import pytest

import leakcheck
from leakcheck import _probes
from pytest_leakcheck import settings

INT64_MAX = 2 ** 63 - 1


def nothing():
    pass


def test_the_plugin_and_the_api_share_their_ranges():
    assert settings.MAX_RUNS == _probes.MAX_RUNS == 10000
    assert settings.MAX_TOLERANCE == _probes.MAX_TOLERANCE == INT64_MAX


@pytest.mark.parametrize("kwargs, message", [
    ({"repeat": 10 ** 9}, f"repeat must be <= 10000, got {10 ** 9}"),
    ({"repeat": 10 ** 30}, f"repeat must be <= 10000, got {10 ** 30}"),
    ({"repeat": 0}, "repeat must be >= 1, got 0"),
    ({"warmup": 10 ** 9}, f"warmup must be <= 10000, got {10 ** 9}"),
    ({"warmup": 10 ** 30}, f"warmup must be <= 10000, got {10 ** 30}"),
    ({"warmup": -1}, "warmup must be >= 0, got -1"),
    ({"tolerance": INT64_MAX + 1},
     f"tolerance must be <= {INT64_MAX}, got {INT64_MAX + 1}"),
    ({"tolerance": -1}, "tolerance must be >= 0, got -1"),
    ({"tolerance": {"blocks": 2 ** 64}},
     f"tolerance['blocks'] must be <= {INT64_MAX}, got {2 ** 64}"),
    ({"tolerance": {"blocks": -3}}, "tolerance['blocks'] must be >= 0, got -3"),
])
def test_repeat_out_of_range_is_a_value_error_naming_the_argument(
        kwargs, message):
    calls = []
    with pytest.raises(ValueError) as e:
        leakcheck.repeat(lambda: calls.append(1), **kwargs)
    assert str(e.value) == message
    assert calls == []          # refused before the first run


@pytest.mark.parametrize("kwargs, message", [
    ({"repeat": True}, "repeat must be an int, not bool"),
    ({"repeat": 4.0}, "repeat must be an int, not float"),
    ({"warmup": False}, "warmup must be an int, not bool"),
    ({"warmup": 1.5}, "warmup must be an int, not float"),
    ({"tolerance": True}, "tolerance must be an int, not bool"),
    ({"tolerance": 0.5}, "tolerance must be an int, not float"),
    ({"tolerance": {"fds": 1.0}}, "tolerance['fds'] must be an int, not float"),
    ({"thorough": 1}, "thorough must be a bool, not int"),
])
def test_repeat_wrong_type_is_a_type_error_naming_the_argument(kwargs,
                                                               message):
    with pytest.raises(TypeError) as e:
        leakcheck.repeat(nothing, **kwargs)
    assert str(e.value) == message


def test_the_largest_ranges_are_accepted():
    """INT64_MAX is the engine's largest tolerance; growth within it is no
    leak, in a series and in a scope."""
    kept = []

    def grow():
        kept.append([[] for _ in range(10)])    # GC-tracked objects

    with pytest.raises(leakcheck.LeakError):  # the same growth, judged
        leakcheck.repeat(grow, probes=["objects"])
    series = leakcheck.repeat(grow, probes=["objects"], tolerance=INT64_MAX)
    assert series.leaked is False
    assert series.thresholds == {"objects": INT64_MAX}
    series = leakcheck.repeat(grow, probes=["objects"],
                              tolerance={"objects": INT64_MAX})
    assert series.leaked is False
    series = leakcheck.repeat(nothing, warmup=0, repeat=10000,
                              probes=["objects"])
    assert series.leaked is False
    with leakcheck.scope(probes=["objects"], tolerance=INT64_MAX):
        grow()


@pytest.mark.parametrize("tolerance, error, message", [
    (INT64_MAX + 1, ValueError,
     f"tolerance must be <= {INT64_MAX}, got {INT64_MAX + 1}"),
    ({"objects": 10 ** 30}, ValueError,
     f"tolerance['objects'] must be <= {INT64_MAX}, got {10 ** 30}"),
    (-1, ValueError, "tolerance must be >= 0, got -1"),
    (True, TypeError, "tolerance must be an int, not bool"),
    (2.0, TypeError, "tolerance must be an int, not float"),
])
def test_scope_tolerance_out_of_range(tolerance, error, message):
    with pytest.raises(error) as e:
        leakcheck.scope(tolerance=tolerance)
    assert str(e.value) == message


@pytest.mark.parametrize("line, error, message", [
    (10 ** 30, ValueError, f"location line must be <= {2 ** 31 - 1}, "
                           f"got {10 ** 30}"),
    (-1, ValueError, "location line must be >= 0, got -1"),
    (True, TypeError, "location line must be an int, not bool"),
])
def test_series_location_line_out_of_range(line, error, message):
    with pytest.raises(error) as e:
        leakcheck.Series(location=("test.py", line))
    assert str(e.value) == message


@pytest.mark.parametrize("runs, error, message", [
    (10 ** 9, ValueError, f"runs must be <= 10000, got {10 ** 9}"),
    (10 ** 30, ValueError, f"runs must be <= 10000, got {10 ** 30}"),
    (0, ValueError, "runs must be >= 1, got 0"),
    (True, TypeError, "runs must be an int, not bool"),
    (2.0, TypeError, "runs must be an int, not float"),
])
def test_diagnose_runs_out_of_range(runs, error, message):
    calls = []
    with pytest.raises(error) as e:
        leakcheck.diagnose(lambda: calls.append(1), ["objects"], runs=runs)
    assert str(e.value) == message
    assert calls == []
