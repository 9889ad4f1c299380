"""Plugins people run beside leakcheck: a corpus of tests per plugin
(pytest-randomly, pytest-rerunfailures, pytest 9's subtests fixture and
unittest's subTest, doctests, pytest-benchmark's fixture, pytest-mock),
run under `pytest --leaks`.  Tests named ``test_leak_*`` (doctests: of a
function named ``leak_*``) leak for real (a module list that keeps what
each run appends); every other test is clean.  A leak verdict on a clean
test is a false alarm, a clean verdict on a leaking one a miss; both are
printed with their deltas, and so is a clean test that read other threads
running.  A flavour whose plugin is not importable is reported as not run.

    python bench/plugins_corpus.py [--rounds 1] [--python PYTHON]
                                   [-n WORKERS] [--flavor NAME ...]
    python bench/plugins_corpus.py --cost [--flavor NAME ...]

--cost measures, per flavour, the session's time plain and under --leaks
and the runs per test (`test_runs` in the report), with the flavour's
plugin loaded and with it disabled (``-p no:NAME``): a plugin whose
pytest_runtest_setup/teardown sends tests down the runner's whole-run path
shows as more runs per test than without it.

Exits 1 on any false alarm, miss or error verdict, or clean test that
read other threads running; the last line is the tally.  tests/python/plugin/test_plugin_neighbours.py runs one round of it
in ./scripts/test for the plugins installed there.
"""

import argparse
import importlib.util
import json
import pathlib
import subprocess
import sys
import tempfile
import time

# What every flavour's modules share: a module-scoped fixture (so the
# first test of a module sets it up and the last tears it down: the
# runner's fast and whole-run paths differ there) and the leaking list.
COMMON = '''
import json
import os
import random

import pytest

KEPT = []


@pytest.fixture(scope="module")
def table():
    return {{i: str(i) for i in range(50)}}


def test_plain_{n}(table):
    assert json.loads(json.dumps(table))["3"] == "3"


def test_leak_list_{n}(table):
    KEPT.append([table[1]] * 8)
'''

# Last in each test module: a clean test that tears the module down.
LAST = '''

def test_last_{n}(table):
    assert table[0] == "0"
'''

RANDOMLY = '''

@pytest.fixture(scope="module")
def drawn():
    return [random.random() for _ in range(10)]


def test_random_{n}():
    xs = list(range(20))
    random.shuffle(xs)
    assert sorted(xs) == list(range(20))
    assert 0 <= random.random() < 1


def test_choice_{n}(drawn):
    assert random.choice(drawn) in drawn
    assert len(random.sample(range(100), 5)) == 5


class TestSeeded{n}:
    def test_randint(self):
        assert 1 <= random.randint(1, 6) <= 6

    def test_gauss(self, drawn):
        assert isinstance(random.gauss(0, 1), float)


def test_leak_random_{n}():
    KEPT.append([random.random() for _ in range(4)])
'''

RERUNFAILURES = '''
ATTEMPTS = {{}}


def _fail_first(name):
    ATTEMPTS[name] = ATTEMPTS.get(name, 0) + 1
    if ATTEMPTS[name] == 1:
        raise AssertionError("flaky: fails on its first attempt only")


@pytest.mark.flaky(reruns=2)
def test_flaky_{n}():
    _fail_first("test_flaky_{n}")


@pytest.mark.flaky(reruns=2)
def test_marked_{n}(table):
    assert table[2] == "2"


def test_rerun_option_{n}():
    assert sorted("leak") == ["a", "e", "k", "l"]


@pytest.mark.flaky(reruns=2)
def test_leak_marked_{n}():
    KEPT.append(bytearray(64))
'''

SUBTESTS = '''
import unittest


def test_subtests_{n}(subtests):
    for i in range(3):
        with subtests.test(msg="square", i=i):
            assert i * i >= 0


def test_leak_subtests_{n}(subtests):
    for i in range(2):
        with subtests.test(i=i):
            KEPT.append([i] * 8)


class TestSubTest{n}(unittest.TestCase):
    def test_subtest(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertGreaterEqual(i * i, 0)

    def test_leak_subtest(self):
        for i in range(2):
            with self.subTest(i=i):
                KEPT.append([i] * 8)
'''

DOCTESTS = '''
KEPT = []


def square(x):
    """
    >>> square(3)
    9
    >>> [square(i) for i in range(4)]
    [0, 1, 4, 9]
    """
    return x * x


def words(text):
    """
    >>> words("a b  c")
    ['a', 'b', 'c']
    >>> import json; json.loads('{{"k": [1, 2]}}')
    {{'k': [1, 2]}}
    """
    return text.split()


class Box:
    """
    >>> b = Box(2)
    >>> b.value
    2
    """

    def __init__(self, value):
        self.value = value


def leak_into_list(x):
    """
    >>> leak_into_list(5)
    5
    """
    KEPT.append([x] * 8)
    return x
'''

BENCHMARK = '''

def _work():
    return sorted(range(200), key=lambda x: -x)


def _leaky():
    KEPT.append(bytearray(32))


def test_bench_sorted_{n}(benchmark):
    assert benchmark(_work)[0] == 199


def test_bench_pedantic_{n}(benchmark, table):
    benchmark.pedantic(json.dumps, args=(table,), rounds=3, iterations=2)


@pytest.mark.benchmark(group="g{n}", min_rounds=2)
def test_bench_marked_{n}(benchmark):
    benchmark(str.upper, "leak")


def test_leak_bench_{n}(benchmark):
    benchmark.pedantic(_leaky, rounds=3, iterations=1)
'''

MOCK = '''
import os.path


class Service:
    def fetch(self, key):
        return key.upper()


def test_patch_object_{n}(mocker):
    mocker.patch.object(os.path, "exists", return_value=True)
    assert os.path.exists("/nowhere/at/all")


def test_patch_{n}(mocker):
    m = mocker.patch("json.dumps", return_value="{{}}")
    assert json.dumps({{"a": 1}}) == "{{}}"
    m.assert_called_once()


def test_spy_{n}(mocker):
    s = Service()
    spy = mocker.spy(s, "fetch")
    assert s.fetch("a") == "A"
    spy.assert_called_once_with("a")


def test_stub_{n}(mocker):
    stub = mocker.stub(name="callback")
    stub(1, 2)
    stub.assert_called_once_with(1, 2)


def test_magic_{n}(mocker, table):
    m = mocker.MagicMock()
    m.get.return_value = table[4]
    assert m.get(4) == "4"


def test_leak_mock_{n}(mocker):
    KEPT.append(mocker.Mock())
'''

# name: (module that must import, plugin name for -p no:, the plugin's
# own pytest arguments, other pytest arguments, {file name: source}).
FLAVOURS = {
    "randomly": ("pytest_randomly", "randomly", [], [],
                 {f"test_randomly_{n}.py": COMMON + RANDOMLY + LAST
                  for n in range(3)}),
    "rerunfailures": ("pytest_rerunfailures", "rerunfailures",
                      ["--reruns", "1"], [],
                      {f"test_rerun_{n}.py": COMMON + RERUNFAILURES + LAST
                       for n in range(3)}),
    "subtests": ("_pytest.subtests", None, [], [],
                 {f"test_subtests_{n}.py": COMMON + SUBTESTS + LAST
                  for n in range(3)}),
    "doctests": ("doctest", None, [], ["--doctest-modules"],
                 {f"mod_{n}.py": DOCTESTS for n in range(3)}),
    "benchmark": ("pytest_benchmark", "benchmark",
                  ["--benchmark-max-time=0.002", "--benchmark-min-rounds=2",
                   "--benchmark-warmup=off"], [],
                  {f"test_bench_{n}.py": COMMON + BENCHMARK + LAST
                   for n in range(3)}),
    "mock": ("pytest_mock", "pytest_mock", [], [],
             {f"test_mock_{n}.py": COMMON + MOCK + LAST for n in range(3)}),
}

# Every third-party plugin this corpus knows (and the async ones), kept
# out of the flavours that are not its own.
_PLUGINS = ("randomly", "rerunfailures", "benchmark", "pytest_mock",
            "asyncio", "anyio", "trio")


def _args(name, plugin_on=True):
    """The pytest arguments of flavour `name`, its plugin on or off (with
    the plugin's own options)."""
    _, plugin, own, other, _ = FLAVOURS[name]
    args = []
    for off in _PLUGINS:
        if not (plugin_on and off == plugin):
            args += ["-p", f"no:{off}"]
    return args + (own if plugin_on else []) + other


def available(python, name):
    """Whether the flavour's plugin imports under `python`."""
    module = FLAVOURS[name][0]
    if python == sys.executable:
        try:
            return importlib.util.find_spec(module) is not None
        except ImportError:
            return False
    proc = subprocess.run([python, "-c", f"import {module}"],
                          capture_output=True)
    return proc.returncode == 0


def make_folder(root, name):
    folder = pathlib.Path(root) / name
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    for fname, source in FLAVOURS[name][4].items():
        n = fname.rsplit("_", 1)[-1].split(".")[0]
        (folder / fname).write_text(source.format(n=n))
    return folder


def run_pytest(python, folder, args, leaks=True):
    """One session; returns (seconds, report records or None, output)."""
    report = folder / "report.json"
    if report.exists():
        report.unlink()
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    if leaks:
        cmd += ["--leaks", f"--leaks-report={report}"]
    began = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    took = time.perf_counter() - began
    if proc.returncode not in (0, 1) or (leaks and not report.exists()):
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"plugins_corpus: {cmd!r} in {folder} exited "
                         f"{proc.returncode}")
    if not leaks:
        return took, None, proc.stdout
    with open(report, encoding="utf-8") as f:
        return took, json.load(f)["tests"], proc.stdout


def leaky(test_id):
    """The corpus' truth: whether the test leaks."""
    last = test_id.rsplit("::", 1)[-1]
    return "test_leak_" in last or ".leak_" in last or \
        last.startswith("leak_")


def wrong(rec):
    """'false alarm', 'miss', 'error' or None for a right verdict."""
    if rec["verdict"] in ("error", "crashed"):
        return "error"
    if rec["verdict"] == "leak" and not leaky(rec["id"]):
        return "false alarm"
    if rec["verdict"] == "clean" and leaky(rec["id"]):
        return "miss"
    return None


def hunt(python, root, names, rounds, workers):
    """Runs each flavour `rounds` times; prints every wrong verdict; returns
    {flavour: tally}."""
    extra = ["-n", str(workers)] if workers else []
    tallies = {}
    for name in names:
        if not available(python, name):
            tallies[name] = None
            continue
        folder = make_folder(root, name)
        tally = tallies[name] = dict.fromkeys(
            ("tests", "clean", "leak", "error", "skipped", "crashed",
             "false alarm", "miss", "threads noise"), 0)
        for _ in range(rounds):
            _, records, _ = run_pytest(python, folder,
                                       _args(name) + extra)
            for rec in records:
                tally["tests"] += 1
                tally[rec["verdict"]] += 1
                why = wrong(rec)
                if why in ("false alarm", "miss"):
                    tally[why] += 1
                if why:
                    print(f"{why.upper()} ({name}): {rec['id']} "
                          f"{rec['verdict']} {rec.get('deltas')} "
                          f"{rec.get('reason') or ''}")
                if rec.get("threads") and rec["verdict"] == "clean":
                    tally["threads noise"] += 1
                    print(f"THREADS ({name}): {rec['id']} "
                          f"{rec['threads']}")
    return tallies


def cost(python, root, names):
    """Prints, per flavour, the plain and --leaks session times (the
    faster of two) and the runs per clean and per leaking test, with its
    plugin and, where its tests run without it, with it disabled."""
    print(f"{'flavour':14} {'plugin':6} {'clean':>5} {'leak':>4} "
          f"{'plain s':>8} {'leaks s':>8} {'ratio':>6} {'runs/clean':>10} "
          f"{'runs/leak':>9}")
    for name in names:
        if not available(python, name):
            print(f"{name:14} not run: {FLAVOURS[name][0]} is not "
                  "importable")
            continue
        folder = make_folder(root, name)
        for on in (True, False) if FLAVOURS[name][1] else (True,):
            args = _args(name, on)
            plain = min(run_pytest(python, folder, args, leaks=False)[0]
                        for _ in range(2))
            times = []
            for _ in range(2):
                took, records, _ = run_pytest(python, folder, args)
                times.append(took)
            if not on and any(r["verdict"] == "error" for r in records):
                print(f"{name:14} {'off':6} (its tests need the plugin)")
                continue
            leaks = min(times)
            runs = {verdict: [r["test_runs"] for r in records
                              if r["verdict"] == verdict]
                    for verdict in ("clean", "leak")}
            per = {verdict: sum(v) / max(len(v), 1)
                   for verdict, v in runs.items()}
            print(f"{name:14} {'on' if on else 'off':6} "
                  f"{len(runs['clean']):5d} {len(runs['leak']):4d} "
                  f"{plain:8.2f} {leaks:8.2f} {leaks / plain:6.2f} "
                  f"{per['clean']:10.2f} {per['leak']:9.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("-n", dest="workers", default=None)
    parser.add_argument("--flavor", action="append", default=None,
                        choices=sorted(FLAVOURS))
    parser.add_argument("--cost", action="store_true",
                        help="measure plain against --leaks instead")
    args = parser.parse_args(argv)
    names = args.flavor or list(FLAVOURS)
    with tempfile.TemporaryDirectory(prefix="plugins-corpus-") as tmp:
        if args.cost:
            cost(args.python, tmp, names)
            return 0
        tallies = hunt(args.python, tmp, names, args.rounds, args.workers)
    bad = 0
    for name, t in tallies.items():
        if t is None:
            print(f"plugins_corpus: {name}: not run "
                  f"({FLAVOURS[name][0]} is not importable)")
            continue
        t["error"] += t.pop("crashed")
        bad += t["false alarm"] + t["miss"] + t["error"] + \
            t["threads noise"]
        print(f"plugins_corpus: {name}: {t['tests']} tests, "
              f"{t['clean']} clean, {t['leak']} leak, {t['error']} error, "
              f"{t['skipped']} skipped; {t['false alarm']} false alarms, "
              f"{t['miss']} misses, {t['threads noise']} threads noise")
    run = [t for t in tallies.values() if t is not None]
    version = subprocess.run(
        [args.python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True, text=True).stdout.strip()
    print(f"plugins_corpus: Python {version}, {len(run)} of {len(tallies)} "
          f"flavours run: {sum(t['tests'] for t in run)} tests, "
          f"{sum(t['false alarm'] for t in run)} false alarms, "
          f"{sum(t['miss'] for t in run)} misses, "
          f"{sum(t['error'] for t in run)} errors")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
