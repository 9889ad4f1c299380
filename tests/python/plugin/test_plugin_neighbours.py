"""Plugins people run beside leakcheck (bench/plugins_corpus.py has a
corpus for each): pytest-benchmark's fixture, pytest-rerunfailures'
reruns and pytest-randomly's reseeding, under --leaks.  Each test skips
when its plugin is not installed."""

import pathlib
import subprocess
import sys

import pytest

from pytest_leakcheck import hunt

CORPUS = pathlib.Path(__file__).parents[3] / "bench" / "plugins_corpus.py"

pytestmark = pytest.mark.neighbour_plugins


def test_a_round_of_the_plugins_corpus_is_judged_right():
    proc = subprocess.run([sys.executable, str(CORPUS)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 false alarms, 0 misses, 0 errors" in proc.stdout, proc.stdout


BENCHMARKS = '''
import pytest

KEPT = []


def test_clean(benchmark):
    assert benchmark(sorted, [3, 1, 2]) == [1, 2, 3]


def test_leak(benchmark):
    benchmark.pedantic(KEPT.append, args=(bytearray(64),), rounds=2)


@pytest.fixture(scope="module")
def table():
    return {"a": 1}


def test_clean_last_of_module(benchmark, table):
    benchmark(dict.get, table, "a")
'''


def test_benchmark_fixture(pytester, read_report, monkeypatch):
    """Each run appends its result to the session's list: an extra run's
    is dropped (it read as a leak; the table listed the test per run), and
    the last test of the module is torn down (its report made with the
    item's funcargs, which the plugin's hook reads: it crashed)."""
    pytest.importorskip("pytest_benchmark")
    # Run by a pytest-xdist worker, the session below inherits its name,
    # and pytest-benchmark, taking itself for one, prints no table.
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makepyfile(BENCHMARKS)
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-report=r.json", "--benchmark-max-time=0.002",
        "--benchmark-min-rounds=2", "--benchmark-warmup=off",
        "--benchmark-columns=min", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    _, recs = read_report()
    verdicts = {i.rsplit("::")[-1]: r["verdict"] for i, r in recs.items()}
    assert verdicts == {"test_clean": "clean", "test_leak": "leak",
                        "test_clean_last_of_module": "clean"}
    assert "INTERNALERROR" not in result.stdout.str()
    table = [line for line in result.stdout.lines
             if line.startswith("test_") and line.rstrip().endswith(")")]
    assert sorted(line.split()[0] for line in table) == [
        "test_clean", "test_clean_last_of_module", "test_leak"]


FLAKY = '''
import pytest

ATTEMPTS = []
SECOND = []
KEPT = []


@pytest.mark.flaky(reruns=2)
def test_fails_first():
    ATTEMPTS.append(1)
    assert len(ATTEMPTS) > 1


@pytest.mark.flaky(reruns=2)
def test_fails_second():
    SECOND.append(1)          # grows: run again
    assert len(SECOND) != 2


@pytest.mark.flaky(reruns=2)
def test_leaks():
    KEPT.append(bytearray(64))


def test_fails_always():
    with open("runs.log", "a") as f:
        f.write("run\\n")
    assert False
'''


def test_rerunfailures(pytester, read_report, runs_log):
    """A test pytest-rerunfailures reruns passes as it would without
    --leaks (it failed: the plugin reruns it; a later run failed: its
    reported run stands), not judged, and says why; a flaky-marked test
    that leaks is caught; one that always fails runs once more than
    without --leaks (the run that failed first is not logged), and
    fails."""
    pytest.importorskip("pytest_rerunfailures")
    pytester.makepyfile(FLAKY)
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-report=r.json", "--reruns=1",
        "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert (outcomes["passed"], outcomes["failed"], outcomes["rerun"]) == \
        (2, 2, 1), outcomes
    _, recs = read_report()
    recs = {i.rsplit("::")[-1]: r for i, r in recs.items()}
    assert recs["test_fails_first"]["verdict"] == "skipped"
    assert recs["test_fails_first"]["reason"] == "not checked: " + \
        hunt.MSG_FLAKY_FIRST.format(outcome="failed")
    assert recs["test_fails_second"]["verdict"] == "skipped"
    assert recs["test_fails_second"]["outcome"] == "passed"
    assert recs["test_fails_second"]["reason"] == "not checked: " + \
        hunt.MSG_FLAKY_LATER.format(outcome="failed", when="call")
    assert recs["test_leaks"]["verdict"] == "leak"
    # Its first run, then pytest-rerunfailures' run and its one rerun.
    assert len(runs_log()) == 3


SEEDED = '''
import random

import pytest


@pytest.fixture(scope="module")
def drawn():
    value = random.random()
    with open("drawn.log", "a") as f:
        f.write(f"{value!r}\\n")
    return value


def test_first(drawn):
    assert 0 <= drawn < 1


def test_last(drawn):
    assert 0 <= random.random() < 1
'''


def test_randomly_takes_the_fast_path(pytester, read_report):
    """pytest-randomly's setup and teardown hooks only reseed (and cache
    each node id's CRC, made before the reported run): each test runs as
    often as without the plugin; the module-scoped fixture is set up
    before the reported run, with the seed the setup phase gives it (as
    without --leaks), and the module is torn down without one more run of
    its last test."""
    pytest.importorskip("pytest_randomly")
    pytester.makepyfile(SEEDED)
    args = ["-p", "no:cacheprovider", "--randomly-seed=7",
            "--randomly-dont-reorganize"]
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=2)
    plain = (pytester.path / "drawn.log").read_text()
    (pytester.path / "drawn.log").unlink()
    result = pytester.runpytest_subprocess(
        *args, "--leaks", "--leaks-report=r.json")
    result.assert_outcomes(passed=2)
    assert (pytester.path / "drawn.log").read_text() == plain
    recs = list(read_report()[1].values())
    runs = [r["test_runs"] for r in recs]
    pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--leaks",
        "--leaks-report=r.json").assert_outcomes(passed=2)
    assert runs == [r["test_runs"] for r in read_report()[1].values()]
    # The last test ran its warm-up and measured runs and no more (no run
    # to tear the module down): once, where the reported run is read as
    # the measured run (release builds from 3.11: test_plugin_once.py).
    last = recs[-1]
    assert last["test_runs"] == \
        last["warmup"] + last["runs"] - last["warmup_measured"], last
    if sys.version_info >= (3, 11) and (
            not hasattr(sys, "gettotalrefcount")
            or sys.version_info < (3, 12)):
        # (test_plugin_once.py: RUNS_ONCE)
        assert runs[-1] == 1


BAD_MARKER = '''
import pytest


@pytest.fixture(scope="module")
def table():
    with open("runs.log", "a") as f:
        f.write("table\\n")
    return {}


@pytest.mark.benchmark(bogus=1)
def test_bad_marker(benchmark, table):
    benchmark(dict, table)
'''


def test_a_harmless_setup_hook_that_raises_stops_the_early_setup(
        pytester, runs_log):
    """pytest-benchmark's setup hook raises on a bad marker before pytest
    sets any fixture up: run ahead of the shared fixtures, it keeps them
    from being set up early too, and the test errors as without --leaks."""
    pytest.importorskip("pytest_benchmark")
    pytester.makepyfile(BAD_MARKER)
    result = pytester.runpytest_subprocess("--leaks", "-p",
                                           "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ValueError: benchmark mark can't have "
                                 "'bogus' keyword argument*"])
    assert runs_log() == []
