"""What --leaks costs and finds on real projects' own test suites: each
project's sdist from PyPI, its extension built in place, its tests run
plain and with --leaks (default settings, or --leaks-thorough), in one
run.

    python bench/bench_suite.py [--rounds 1] [--work DIR] [--thorough]
                                [--settle-hooks] [PROJECT ...]

PROJECT is one of the recipes below (default: all of them).  Needs the
network (pip download) and a compiler; run it with the Python that has
leakcheck installed (the venv scripts/setup makes).  For each project it
prints the tests, pytest's session time plain and with --leaks (best of
`rounds`, each in a fresh pytest process) and their ratio, the runs per
checked test (its own included) and how many ran once, the tests that
fail or error under --leaks but not plain (none, unless leakcheck broke
them: a leak verdict is not counted there), and every test with
a leak verdict and the probes that grew: check each of those without
leakcheck (a bare loop of the test's body watching sys.getallocatedblocks()
or the C heap, bench/bare_loops.py) before calling it a leak.
--settle-hooks loads, in the --leaks runs, the pytest_leakcheck_settle
hook a project has in bench/suite_hooks (SETTLE below): what its own
caches cost in runs and verdicts.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile

# name: (pip requirement, build command, PYTHONPATH, tests: a path or a
# list of pytest's arguments), paths relative to the unpacked sdist.
RECIPES = {
    "markupsafe": ("markupsafe==3.0.2", ["setup.py", "build_ext", "-i"],
                   "src", "tests"),
    "msgpack": ("msgpack==1.1.0", ["setup.py", "build_ext", "-i"], ".",
                "test"),
    "simplejson": ("simplejson==3.19.3", ["setup.py", "build_ext", "-i"], ".",
                   "simplejson/tests"),
    "frozenlist": ("frozenlist==1.5.0",
                   ["-m", "Cython.Build.Cythonize", "-i", "-3",
                    "frozenlist/_frozenlist.pyx"], ".", "tests"),
    "ujson": ("ujson==5.10.0", ["setup.py", "build_ext", "-i"], ".", "tests"),
    "multidict": ("multidict==6.1.0", ["setup.py", "build_ext", "-i"], ".",
                  "tests"),
    "pyyaml": ("pyyaml==6.0.2", ["setup.py", "build_ext", "-i"], "lib",
               "tests/legacy_tests"),
    "regex": ("regex==2026.11.19", ["setup.py", "build_ext", "-i"], ".",
              "regex/tests/test_regex.py"),
    "pyrsistent": ("pyrsistent==0.20.0", ["setup.py", "build_ext", "-i"], ".",
                   "tests"),
    # unittest TestCase classes around a C extension (its bundled zstd is
    # compiled too: a minute of build).
    "zstandard": ("zstandard==0.25.0", ["setup.py", "build_ext", "-i"], ".",
                  "tests"),
    # Pure Python, tested with pytest-asyncio (auto mode, their own ini).
    "aiosignal": ("aiosignal==1.4.0", ["-c", "pass"], ".", "tests"),
    "async-lru": ("async-lru==2.4.0", ["-c", "pass"], ".", "tests"),
    "janus": ("janus==2.0.0", ["-c", "pass"], ".", "tests"),
    # A C extension tested through a session fixture parametrized over it
    # and its pure-Python twin, with hypothesis.
    "cbor2": ("cbor2==5.6.5", ["setup.py", "build_ext", "-i"], ".", "tests"),
    # unittest TestCase classes over a C extension and its Python twin;
    # their conftest.py is for the mypy test alone (it needs mypy).
    "immutables": ("immutables==0.21", ["setup.py", "build_ext", "-i"], ".",
                   ["--noconftest", "--ignore=tests/test_mypy.py", "tests"]),
}
# name: the module in bench/suite_hooks with that project's
# pytest_leakcheck_settle hook (--settle-hooks).
SETTLE = {"regex": "regex_caches"}
HOOKS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "suite_hooks")
# What building them needs beyond setuptools.
BUILD_REQUIRES = ["Cython", "setuptools_scm", "expandvars"]
# What the async suites test with; the others run without it (it warns at
# start-up, an error where a suite's ini turns warnings into errors).
TEST_REQUIRES = ["pytest-asyncio", "pytest-timeout", "frozenlist"]
ASYNC_SUITES = ("aiosignal", "async-lru", "janus")
NO_ASYNC = ["-p", "no:asyncio", "-p", "no:anyio", "-p", "no:trio"]

SESSION_TIME = re.compile(r" in ([0-9.]+)s")


def sh(cmd, cwd=None, env=None):
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench_suite: {' '.join(cmd)} failed "
                 f"(exit {proc.returncode}):\n{proc.stdout[-3000:]}")
    return proc.stdout


def prepare(work, name):
    """Downloads, unpacks and builds `name`; returns its folder."""
    requirement, build, _, _ = RECIPES[name]
    sdists = os.path.join(work, "sdist")
    os.makedirs(sdists, exist_ok=True)
    before = set(os.listdir(sdists))
    sh([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
        "--no-binary", ":all:", "-d", sdists, requirement])
    project, version = requirement.split("==")
    stem = project.lower().replace("-", "_")      # sdists name it so
    found = [f for f in os.listdir(sdists)
             if f.lower().replace("-", "_").startswith(stem)
             and version in f]
    archive = os.path.join(sdists, sorted(found or
                                          set(os.listdir(sdists)) - before)[0])
    with tarfile.open(archive) as tar:
        top = tar.getnames()[0].split("/")[0]
        folder = os.path.join(work, top)
        if not os.path.isdir(folder):
            tar.extractall(work)
    sh([sys.executable, *build], cwd=folder)
    return folder


def run(folder, pythonpath, tests, args, hooks=None):
    """(pytest's session seconds, output) of one run; a suite's own
    failures are fine (they are the same plain and with --leaks).
    `hooks`: a module of bench/suite_hooks loaded with -p."""
    path = os.path.join(folder, pythonpath)
    if hooks is not None:
        path += os.pathsep + HOOKS
        args = ["-p", hooks, *args]
    env = dict(os.environ, PYTHONPATH=path)
    # pytest-randomly off: a suite whose tests depend on their order
    # (pyrsistent's) would fail differently plain and with --leaks.
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "no:randomly", "-o", "addopts=", *args,
           *([tests] if isinstance(tests, str) else tests)]
    proc = subprocess.run(cmd, cwd=folder, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    found = SESSION_TIME.findall(proc.stdout)
    if proc.returncode not in (0, 1) or not found:
        sys.exit(f"bench_suite: {' '.join(cmd)} failed "
                 f"(exit {proc.returncode}):\n{proc.stdout[-3000:]}")
    return float(found[-1]), proc.stdout


FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def _failed(output):
    """The test ids pytest's short summary (-rfE) names as failed or in
    error."""
    return set(FAILED_LINE.findall(output))


def bench(work, name, rounds, extra=(), hooks=None):
    _, _, pythonpath, tests = RECIPES[name]
    tests = [tests] if isinstance(tests, str) else list(tests)
    if name not in ASYNC_SUITES:
        tests = [*NO_ASYNC, *tests]
    else:
        # Their pinned ini predates pytest-asyncio 1.x, which warns (an
        # error under their filterwarnings) when this is unset.
        tests = ["-o", "asyncio_default_fixture_loop_scope=function", *tests]
    folder = prepare(work, name)
    report = os.path.join(work, f"{name}-leaks.json")
    plain_runs = [run(folder, pythonpath, tests, ["-rfE"])
                  for _ in range(rounds)]
    leaks_runs = [run(folder, pythonpath, tests,
                      ["-rfE", "--leaks", f"--leaks-report={report}",
                       *extra], hooks)
                  for _ in range(rounds)]
    plain = min(seconds for seconds, _ in plain_runs)
    leaks = min(seconds for seconds, _ in leaks_runs)
    with open(report, encoding="utf-8") as f:
        records = json.load(f)["tests"]
    checked = [t for t in records if t["verdict"] in ("clean", "leak")]
    runs = [t.get("test_runs", 0) for t in checked] or [0]
    leaking = [t for t in records if t["verdict"] == "leak"]
    errors = [t for t in records if t["verdict"] == "error"]
    print(f"{name} ({RECIPES[name][0]}): {len(records)} tests; session "
          f"plain {plain:.2f}s, --leaks {leaks:.2f}s, ratio "
          f"{leaks / plain:.2f}x; runs per checked test (its own "
          f"included): mean {statistics.mean(runs):.2f}, total {sum(runs)}, "
          f"max {max(runs)}, "
          f"{sum(1 for r in runs if r == 1)} of {len(checked)} ran once")
    print(f"  {len(leaking)} leak verdicts, {len(errors)} errors (tests "
          f"that failed or errored)")
    # A test that fails or errors with --leaks and not without, for a
    # reason other than its leak verdict, is leakcheck's fault.
    failed_plain = set().union(*(_failed(out) for _, out in plain_runs))
    leak_ids = {t["id"] for t in leaking}
    only = sorted(set().union(*(_failed(out) for _, out in leaks_runs))
                  - failed_plain - leak_ids)
    print(f"  {len(failed_plain)} failed or errored plain; "
          f"{len(only)} only under --leaks"
          + "".join(f"\n  ONLY UNDER --leaks {i}" for i in only))
    for t in leaking:
        grew = "; ".join(
            f"{p} " + " ".join(f"{d:+d}" for d in t["deltas"][p])
            for p in t["leaking"])
        print(f"  LEAK {t['id']}: {grew}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("projects", nargs="*", metavar="PROJECT",
                   help=f"one of {', '.join(RECIPES)} (default: all)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--thorough", action="store_true",
                   help="hunt with --leaks-thorough")
    p.add_argument("--settle-hooks", action="store_true",
                   help="load a project's settle hook of bench/suite_hooks "
                   f"in the --leaks runs (for {', '.join(SETTLE)})")
    p.add_argument("--work", default=os.path.join(
        os.environ.get("TMPDIR", "/tmp"), "leakcheck-bench-suites"))
    args = p.parse_args(argv)
    unknown = [name for name in args.projects if name not in RECIPES]
    if unknown:
        p.error(f"unknown project {unknown[0]!r}; known: "
                f"{', '.join(RECIPES)}")
    os.makedirs(args.work, exist_ok=True)
    sh([sys.executable, "-m", "pip", "install", "-q", *BUILD_REQUIRES,
        *TEST_REQUIRES])
    print(f"python {sys.version.split()[0]}, command: "
          f"{' '.join([os.path.basename(sys.executable), *sys.argv])}")
    for name in args.projects or list(RECIPES):
        bench(args.work, name, args.rounds,
              ["--leaks-thorough"] if args.thorough else [],
              SETTLE.get(name) if args.settle_hooks else None)


if __name__ == "__main__":
    main()
