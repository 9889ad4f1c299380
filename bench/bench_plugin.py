"""What --leaks costs: a generated suite of clean tests run plain and with
--leaks (default settings), in one run, as a ratio; then the same under
pytest-xdist (-n 2) when it is installed.

    python bench/bench_plugin.py [--kind fast|ordinary|unittest] [--tests N]
                                 [--rounds 3] [--no-xdist]

--kind fast (the default, 300 tests): sub-millisecond tests (arithmetic,
fixtures, parametrized, strings, a class), where leakcheck's own work per
test shows most; the target is at most 2x.  --kind ordinary (100 tests):
tests that each do about ten milliseconds of real work (JSON, regular
expressions, sorting, a file in tmp_path, hashing, decimals), where the
cost is in running the tests again; the target is at most 1.25x.
--kind unittest (300 tests): unittest TestCase methods as fast as the
fast kind (setUp, assertions), which must run once as often as
functions do.

Each configuration runs `rounds` times in a fresh pytest process; the
figure is the fastest round.  Two ratios are printed: of pytest's own
session time (the "in 0.52s" it reports: collection and tests, which is
what --leaks changes) and of the whole process (with interpreter start and
plugin imports, which --leaks does not change).  With --leaks every test
must come out clean.  A clean test costs its reported run, which is also
its warm-up run and is read as well: when it grew nothing, it is the
measured run and the test runs once; else one more run is measured.  The
report of the --leaks run gives the runs per test (the reported run
included) and how many tests ran once.
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


ORDINARY_HEADER = '''\
import decimal
import hashlib
import json
import random
import re

import pytest


@pytest.fixture(scope="module")
def text():
    words = ["reading", "writing", "code", "tests", "running", "leaks"]
    rng = random.Random(0)
    return " ".join(rng.choice(words) for _ in range(50000))

'''

ORDINARY = (
    '''
def test_json_{n}():
    data = [{{"id": i, "name": "item%d" % i, "tags": ["a", "b"],
              "score": i / 7}} for i in range(5000)]
    assert json.loads(json.dumps(data)) == data
''',
    '''
def test_regex_{n}(text):
    assert len(re.findall(r"\\b\\w+ing\\b", text)) > 10000
''',
    '''
def test_sort_{n}():
    rng = random.Random({n})
    xs = [rng.random() for _ in range(50000)]
    assert sorted(xs)[0] == min(xs)
''',
    '''
def test_file_{n}(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("line\\n" * 50000)
    assert len(path.read_text().splitlines()) == 50000
''',
    '''
@pytest.mark.parametrize("algo", ["sha256", "md5"])
def test_hash_{n}(algo):
    digest = hashlib.new(algo)
    for i in range(5000):
        digest.update(b"%d" % i * 50)
    assert len(digest.hexdigest()) >= 32
''',
    '''
class TestDecimal{n}:
    def test_sum(self):
        total = sum(decimal.Decimal(i) / 7 for i in range(12000))
        assert total > 0
''',
)

UNITTEST_HEADER = '''\
import json
import unittest

'''

# unittest TestCase methods: pytest runs each as an item of its class, the
# TestCase made anew per method, setUp and the assertions of unittest.
UNITTEST = (
    '''
class TestRecord{n}(unittest.TestCase):
    def setUp(self):
        self.data = [1, 2, {m}]

    def test_sum(self):
        self.assertEqual(sum(self.data), {m} + 3)

    def test_json(self):
        self.assertEqual(json.loads(json.dumps(self.data)), self.data)
''',
    '''
class TestText{n}(unittest.TestCase):
    def test_upper(self):
        self.assertEqual("a{m}".upper(), "A{m}")
''',
)

KINDS = {"fast": (HEADER, TEMPLATES, 300),
         "ordinary": (ORDINARY_HEADER, ORDINARY, 100),
         "unittest": (UNITTEST_HEADER, UNITTEST, 300)}


def _size(template):
    """How many tests a template makes."""
    if "parametrize" in template:
        return 2
    return max(1, template.count("def test_"))


def generate(directory, tests, kind="fast", conftest=None):
    """Writes MODULES test modules holding `tests` tests of `kind` in all,
    and `conftest` (text) as their conftest.py when given."""
    header, templates, _ = KINDS[kind]
    per_module = [[] for _ in range(MODULES)]
    count = n = 0
    while count < tests:
        template = templates[n % len(templates)]
        size = _size(template)
        if count + size > tests:
            template = next(t for t in templates if _size(t) == 1)
            size = 1
        per_module[n % MODULES].append(template.format(n=n, m=n % 100))
        count += size
        n += 1
    for i, bodies in enumerate(per_module):
        with open(os.path.join(directory, f"test_gen_{i}.py"), "w") as f:
            f.write(header.format() + "".join(bodies))
    if conftest is not None:
        with open(os.path.join(directory, "conftest.py"), "w") as f:
            f.write(conftest)
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


def test_runs(report_path):
    """(tests, mean runs per test, max, tests run once, verdicts): runs of
    the test, the reported run included."""
    with open(report_path) as f:
        report = json.load(f)
    runs = [t["test_runs"] for t in report["tests"]]
    verdicts = {t["verdict"] for t in report["tests"]}
    return (len(runs), statistics.mean(runs), max(runs),
            sum(1 for r in runs if r == 1), verdicts)


def compare(label, directory, base_args, rounds, tests):
    report = os.path.join(directory, "leaks-report.json")
    plain_wall, plain_session = best(directory, base_args, rounds)
    leaks_wall, leaks_session = best(
        directory, [*base_args, "--leaks", f"--leaks-report={report}"], rounds)
    n, mean_runs, max_runs, once, verdicts = test_runs(report)
    print(f"{label}: {tests} tests, best of {rounds}; plain "
          f"{plain_session / tests * 1000:.1f} ms per test")
    print(f"  session: plain {plain_session:.2f}s, --leaks "
          f"{leaks_session:.2f}s, ratio {leaks_session / plain_session:.2f}x")
    print(f"  process: plain {plain_wall:.2f}s, --leaks {leaks_wall:.2f}s, "
          f"ratio {leaks_wall / plain_wall:.2f}x")
    print(f"  --leaks report: {n} tests, verdicts {sorted(verdicts)}, "
          f"runs per test: mean {mean_runs:.2f}, max {max_runs}; "
          f"{once} ran once")
    return leaks_session / plain_session


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kind", choices=sorted(KINDS), default="fast")
    p.add_argument("--tests", type=int, default=None,
                   help="how many (default: 300 fast, 100 ordinary)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-xdist", action="store_true",
                   help="skip the -n 2 comparison")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="leakcheck-bench-") as d:
        tests = generate(d, args.tests or KINDS[args.kind][2], args.kind)
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
