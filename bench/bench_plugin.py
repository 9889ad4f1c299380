"""What --leaks costs: a generated suite of fast, clean tests run plain and
with --leaks (default settings), in one run, as a ratio; then the same
under pytest-xdist (-n 2) when it is installed.

    python bench/bench_plugin.py [--tests 300] [--rounds 3] [--no-xdist]

Each configuration runs `rounds` times in a fresh pytest process; the
figure is the fastest round.  Two ratios are printed: of pytest's own
session time (the "in 0.52s" it reports: collection and tests, which is
what --leaks changes) and of the whole process (with interpreter start and
plugin imports, which --leaks does not change).  With --leaks every test
must come out clean: a clean test costs its reported run, which is also its
warm-up, and one measured run, so the floor of the session ratio is about
2x; the target is at most 3x.  The report of the --leaks run gives the
measured runs per test.
"""

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

MODULES = 10

HEADER = '''\
import pytest


@pytest.fixture
def numbers():
    return list(range(20))


@pytest.fixture(scope="module")
def table():
    return {{i: str(i) for i in range(100)}}

'''

TEMPLATES = (
    '''
def test_arith_{n}():
    assert sum(range({n} % 7 + 3)) >= 3
''',
    '''
def test_fixture_{n}(numbers, table):
    assert numbers[{n} % 20] == {n} % 20 and table[{n} % 100] == "{m}"
''',
    '''
@pytest.mark.parametrize("x", [1, 2])
def test_param_{n}(x):
    assert x * {n} >= {n}
''',
    '''
def test_strings_{n}():
    assert "-".join(["a", "b", "{n}"]).split("-")[-1] == "{n}"
''',
    '''
class TestGroup{n}:
    def test_method(self, numbers):
        assert len(numbers) == 20
''',
)


def generate(directory, tests):
    """Writes MODULES test modules holding `tests` tests in all."""
    per_module = [[] for _ in range(MODULES)]
    count = n = 0
    while count < tests:
        template = TEMPLATES[n % len(TEMPLATES)]
        size = 2 if "parametrize" in template else 1
        if count + size > tests:
            template, size = TEMPLATES[0], 1
        per_module[n % MODULES].append(template.format(n=n, m=n % 100))
        count += size
        n += 1
    for i, bodies in enumerate(per_module):
        with open(os.path.join(directory, f"test_gen_{i}.py"), "w") as f:
            f.write(HEADER.format() + "".join(bodies))
    return count


SESSION_TIME = re.compile(r" in ([0-9.]+)s")


# Plugins installed for the test suite's sake whose start-up cost is not
# leakcheck's: hypothesis's pytest plugin imports hypothesis in every
# session, with or without --leaks.
NOT_MEASURED = ["-p", "no:hypothesispytest"]


def run(directory, args):
    """(wall seconds, pytest's session seconds, exit status) of one run."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           *NOT_MEASURED, *args, directory]
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, cwd=directory)
    wall = time.perf_counter() - start
    found = SESSION_TIME.findall(proc.stdout)
    if proc.returncode != 0 or not found:
        sys.exit(f"bench_plugin: {' '.join(cmd)} failed "
                 f"(exit {proc.returncode}):\n{proc.stdout[-3000:]}")
    return wall, float(found[-1]), proc.returncode


def best(directory, args, rounds):
    results = [run(directory, args) for _ in range(rounds)]
    return min(r[0] for r in results), min(r[1] for r in results)


def measured_runs(report_path):
    with open(report_path) as f:
        report = json.load(f)
    runs = [t["runs"] for t in report["tests"]]
    verdicts = {t["verdict"] for t in report["tests"]}
    return len(runs), statistics.mean(runs), max(runs), verdicts


def compare(label, directory, base_args, rounds, tests):
    report = os.path.join(directory, "leaks-report.json")
    plain_wall, plain_session = best(directory, base_args, rounds)
    leaks_wall, leaks_session = best(
        directory, [*base_args, "--leaks", f"--leaks-report={report}"], rounds)
    n, mean_runs, max_runs, verdicts = measured_runs(report)
    print(f"{label}: {tests} tests, best of {rounds}")
    print(f"  session: plain {plain_session:.2f}s, --leaks "
          f"{leaks_session:.2f}s, ratio {leaks_session / plain_session:.2f}x")
    print(f"  process: plain {plain_wall:.2f}s, --leaks {leaks_wall:.2f}s, "
          f"ratio {leaks_wall / plain_wall:.2f}x")
    print(f"  --leaks report: {n} tests, verdicts {sorted(verdicts)}, "
          f"measured runs per test: mean {mean_runs:.2f}, max {max_runs}")
    return leaks_session / plain_session


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-xdist", action="store_true",
                   help="skip the -n 2 comparison")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="leakcheck-bench-") as d:
        tests = generate(d, args.tests)
        command = " ".join([os.path.basename(sys.executable), *sys.argv])
        print(f"python {sys.version.split()[0]}, command: {command}")
        compare("serial", d, [], args.rounds, tests)
        if not args.no_xdist:
            if importlib.util.find_spec("xdist") is None:
                print("-n 2: pytest-xdist is not installed")
            else:
                compare("-n 2", d, ["-n", "2"], args.rounds, tests)


if __name__ == "__main__":
    main()
