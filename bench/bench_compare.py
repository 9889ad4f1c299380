"""What --leaks costs beside the other tools that hunt leaks in a pytest
suite: one generated suite of clean tests (bench_plugin.py's generate())
run by plain pytest, by pytest with leakcheck's --leaks, by pytest with
pytest-memray's --memray, and, on CPython's debug build, by plain pytest,
by pytest with --leaks and by pytest with pytest-leaks (-R, which reads
sys.gettotalrefcount and so needs that build).

    python bench/bench_compare.py [--tests 1000] [--rounds 3]
                                  [--kind fast|ordinary] [--timeout 600]
                                  [--pytest-leaks STAB:RUN] [--no-debug]
                                  [--debug-python /usr/bin/python3.11-dbg]

The release rows run under the interpreter running this script, whose
environment scripts/setup made (pytest, leakcheck, memray).  What the
bench installs itself it keeps under the temporary directory, one
directory per checkout (as scripts/test-python-matrix keeps its venvs):
pytest-memray, installed with pip --target and without its dependencies
(memray and pytest are the environment's own), on PYTHONPATH for its own
row alone (installed into the environment, it would be loaded by every
pytester run of tests/python); and a venv of --debug-python
(`python -m venv`, as the matrix makes its own) into which each run of
the bench installs pytest, pytest-leaks and this checkout's leakcheck
(--no-build-isolation, as scripts/setup does).  --pytest-leaks STAB:RUN
is pytest-leaks' -R argument: STAB warm-up runs of each test, then RUN
runs whose reference and block counts it compares; ":" (the default) is
its own default, 5:4.

Every run loads only the plugin it measures (PYTEST_DISABLE_PLUGIN_AUTOLOAD
and -p MODULE): pytest-leaks names its option --leaks too, and the
plugins the tests of tests/python need would otherwise cost every row
their imports.  The configurations alternate within each round; each
figure is the median over the rounds of the CPU time (user + system, read
from os.wait4 as bench_overhead.py reads it) and of the wall time of the
pytest process.  Ratios and the overhead per test ((median - plain's
median) / tests, in ms) are against the plain run of the same interpreter.

A run that outlives --timeout seconds is killed; its row reads "did not
finish in S s" and it is not run again.  A tool that cannot be installed or
run reads "unavailable: why" (a failed run of plain pytest or of --leaks
reads "failed: why" and makes the exit status 1).  The --leaks reports must
call every test clean; pytest-leaks' count of tests it calls leaked is
printed.
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_overhead import PLUGIN, once_count  # noqa: E402
from bench_plugin import KINDS, generate  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEMRAY_PLUGIN = "pytest_memray.plugin"
PYTEST_LEAKS_PLUGIN = "pytest_leaks.plugin"
# pytest-leaks' own defaults for -R's two numbers (its leaks_stab and
# leaks_run ini settings).
PYTEST_LEAKS_DEFAULTS = (5, 4)
# pip's own ResourceWarnings on a debug build are not ours (as in
# scripts/test-python-matrix).
PIP_ENV = dict(os.environ, PYTHONWARNINGS="ignore::ResourceWarning")


@dataclass
class Config:
    """One row: a pytest command, and what its runs gave."""
    build: str               # "release" or "debug"
    name: str
    python: str
    plugin: str = None       # the module loaded with -p; None: pytest alone
    args: list = field(default_factory=list)
    path: str = None         # PYTHONPATH of its runs, where plugin is
    optional: bool = False   # another project's tool: "unavailable", not "failed"
    why: str = None          # set: the row is not run (again), and says this
    cpu: list = field(default_factory=list)
    wall: list = field(default_factory=list)
    log: str = None          # the output of its last run


def pytest_leaks_runs(text):
    """-R's STAB:RUN, either number left out for pytest-leaks' default, as
    the two numbers."""
    m = re.fullmatch(r"(\d*):(\d*)", text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"--pytest-leaks: expected STAB:RUN (as pytest-leaks' -R), "
            f"got {text!r}")
    return tuple(int(g) if g else default
                 for g, default in zip(m.groups(), PYTEST_LEAKS_DEFAULTS))


def last_line(text, prefer="error"):
    """The last line of text that names prefer (any case), else its last
    line: what a failed command's output says in one line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    named = [line for line in lines if prefer in line.lower()]
    return (named or lines or ["(no output)"])[-1]


def wait(pid, timeout):
    """os.wait4's (status, resource usage) of the child pid once it has
    ended, or None when it was killed at timeout seconds."""
    lock = threading.Lock()
    ended = threading.Event()
    killed = threading.Event()

    def kill():
        # Until os.wait4 reaps the child, its pid names no other process.
        with lock:
            if not ended.is_set():
                killed.set()
                os.kill(pid, signal.SIGKILL)

    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    finally:
        with lock:
            ended.set()
        timer.cancel()
    _, status, usage = os.wait4(pid, 0)
    return None if killed.is_set() else (status, usage)


def measure(config, directory, timeout):
    """Runs config's pytest on directory once: (CPU seconds, wall seconds)
    of the process, or None after setting config.why (it failed or was
    killed at the timeout)."""
    cmd = [config.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           *(["-p", config.plugin] if config.plugin else []),
           *config.args, directory]
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    if config.path:
        env["PYTHONPATH"] = config.path
    with open(config.log, "w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                cwd=directory, env=env)
        waited = wait(proc.pid, timeout)
        wall = time.perf_counter() - start
        if waited is None:
            proc.returncode = -signal.SIGKILL
            config.why = f"did not finish in {timeout:g} s"
            return None
        status, usage = waited
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            out.seek(0)
            word = "unavailable" if config.optional else "failed"
            config.why = (f"{word}: exit {proc.returncode} "
                          f"({' '.join(cmd[3:-1])}): {last_line(out.read())}")
            return None
    return usage.ru_utime + usage.ru_stime, wall


def pip(python, *args):
    """None when `python -m pip install args` succeeds, else why not."""
    proc = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         *args], capture_output=True, text=True, env=PIP_ENV, cwd=ROOT)
    if proc.returncode == 0:
        return None
    return f"pip install {' '.join(args)}: {last_line(proc.stderr)}"


def cache(name):
    """The path of name in the directory where the bench keeps what it
    installs, one per checkout."""
    return os.path.join(tempfile.gettempdir(),
                        f"leakcheck-bench-compare-{os.getuid()}-"
                        f"{zlib.crc32(ROOT.encode())}", name)


def memray_path(python):
    """(the directory holding pytest-memray for python, None), installed
    there the first time; (None, why) when it cannot be had."""
    target = cache("pytest-memray")
    if not os.path.isdir(os.path.join(target, "pytest_memray")):
        why = pip(python, "--no-deps", "--target", target, "pytest-memray")
        if why:
            return None, why
    return target, None


def debug_venv(python):
    """(the venv's python, None) of the debug build's venv, with pytest,
    pytest-leaks and this checkout's leakcheck installed; (None, why) when
    it cannot be had."""
    if not os.access(python, os.X_OK):
        return None, f"{python} is not installed"
    venv = cache("py" + os.path.basename(python).replace("python", ""))
    venv_python = os.path.join(venv, "bin", "python")
    if not (os.path.exists(venv_python) and subprocess.run(
            [venv_python, "-c", ""], capture_output=True).returncode == 0):
        proc = subprocess.run([python, "-m", "venv", "--clear", venv],
                              capture_output=True, text=True, env=PIP_ENV)
        if proc.returncode != 0:
            return None, f"{python} -m venv: {last_line(proc.stderr)}"
    print(f"bench_compare: installing pytest, pytest-leaks and leakcheck "
          f"into {venv}", file=sys.stderr)
    why = (pip(venv_python, "pytest", "pytest-leaks", "setuptools>=77",
               "wheel")
           or pip(venv_python, "--no-build-isolation", "--force-reinstall",
                  ROOT))
    return (None, why) if why else (venv_python, None)


def versions(python, names, path=None):
    """{name: installed version or None} of distributions in python's
    environment (and path), and "python": its version (with " debug" on a
    debug build)."""
    code = ("import importlib.metadata as m, sys\n"
            "print(sys.version.split()[0] + (' debug' if hasattr(sys, "
            "'gettotalrefcount') else ''))\n"
            "for n in sys.argv[1:]:\n"
            "    try: print(m.version(n))\n"
            "    except m.PackageNotFoundError: print('')\n")
    env = dict(os.environ, PYTHONPATH=path) if path else None
    out = subprocess.run([python, "-c", code, *names], capture_output=True,
                         text=True, check=True, env=env).stdout.splitlines()
    return {"python": out[0],
            **{n: v or None for n, v in zip(names, out[1:])}}


def configs(args, directory):
    """The rows, in the order they run within a round, and the line that
    names each interpreter and what it has installed."""
    report = os.path.join(directory, "{}-leaks-report.json")
    release = sys.executable
    path, why = memray_path(release)
    found = versions(release, ["pytest", "pytest-memray"], path)
    rows = [
        Config("release", "plain", release),
        Config("release", "--leaks", release, PLUGIN,
               ["--leaks", f"--leaks-report={report.format('release')}"]),
        Config("release", "--memray", release, MEMRAY_PLUGIN, ["--memray"],
               path=path, optional=True, why=why and f"unavailable: {why}"),
    ]
    headers = [f"release: python {found['python']} ({release}), pytest "
               f"{found['pytest']}, pytest-memray {found['pytest-memray']}"]
    if args.no_debug:
        return rows, headers
    stab, run = args.pytest_leaks
    debug = [
        Config("debug", "plain", None),
        Config("debug", "--leaks", None, PLUGIN,
               ["--leaks", f"--leaks-report={report.format('debug')}"]),
        Config("debug", f"pytest-leaks -R {stab}:{run}", None,
               PYTEST_LEAKS_PLUGIN, ["-R", f"{stab}:{run}"], optional=True),
    ]
    venv_python, why = debug_venv(args.debug_python)
    if why:
        for row in debug:
            row.why = f"unavailable: {why}"
        headers.append(f"debug: {args.debug_python}: {why}")
        return rows + debug, headers
    found = versions(venv_python, ["pytest", "pytest-leaks"])
    for row in debug:
        row.python = venv_python
    headers.append(f"debug: python {found['python']} ({venv_python}, a venv "
                   f"of {args.debug_python}), pytest {found['pytest']}, "
                   f"pytest-leaks {found['pytest-leaks']}")
    return rows + debug, headers


def table(rows, tests):
    """The table's lines: medians, ratios and overhead per test against the
    plain row of the same build."""
    plain = {row.build: row for row in rows if row.name == "plain"}
    lines = [f"{'build':<8} {'configuration':<22} {'cpu s':>8} {'x plain':>8} "
             f"{'wall s':>8} {'x plain':>8} {'ms/test cpu':>12} "
             f"{'ms/test wall':>12}"]
    for row in rows:
        head = f"{row.build:<8} {row.name:<22}"
        if row.why:
            lines.append(f"{head} {row.why}")
            continue
        cpu, wall = statistics.median(row.cpu), statistics.median(row.wall)
        base = plain[row.build]
        if base.why:
            lines.append(f"{head} {cpu:8.3f} {'-':>8} {wall:8.3f} {'-':>8}")
            continue
        base_cpu = statistics.median(base.cpu)
        base_wall = statistics.median(base.wall)
        extra = ((f"{(cpu - base_cpu) / tests * 1000:12.3f} "
                  f"{(wall - base_wall) / tests * 1000:12.3f}")
                 if row is not base else f"{'-':>12} {'-':>12}")
        lines.append(f"{head} {cpu:8.3f} {cpu / base_cpu:7.2f}x "
                     f"{wall:8.3f} {wall / base_wall:7.2f}x {extra}")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--kind", choices=sorted(KINDS), default="fast",
                   help="bench_plugin.py's kinds of test")
    p.add_argument("--timeout", type=float, default=600, metavar="S",
                   help="seconds a run may take before it is killed")
    p.add_argument("--pytest-leaks", type=pytest_leaks_runs, default=":",
                   metavar="STAB:RUN",
                   help="pytest-leaks' -R (default ':', its own 5:4)")
    p.add_argument("--no-debug", action="store_true",
                   help="skip the debug build's rows")
    p.add_argument("--debug-python", default="/usr/bin/python3.11-dbg",
                   metavar="PATH")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="leakcheck-compare-") as d:
        suite = os.path.join(d, "suite")
        os.mkdir(suite)
        tests = generate(suite, args.tests, args.kind)
        rows, headers = configs(args, d)
        for i, row in enumerate(rows):
            row.log = os.path.join(d, f"out-{i}.txt")
        for _ in range(args.rounds):
            for row in rows:
                if row.why is None:
                    measured = measure(row, suite, args.timeout)
                    if measured:
                        row.cpu.append(measured[0])
                        row.wall.append(measured[1])
        command = " ".join([os.path.basename(sys.executable), *sys.argv])
        print(f"command: {command}")
        print(f"{tests} tests ({args.kind}), {args.rounds} rounds "
              f"interleaved, median of each; cpu = user + system of the "
              f"pytest process, wall = its elapsed time; timeout "
              f"{args.timeout:g} s per run")
        print("\n".join(headers))
        print("\n".join(table(rows, tests)))
        print("rounds, cpu s / wall s: " + "; ".join(
            f"{row.build} {row.name} " + ", ".join(
                f"{c:.3f}/{w:.3f}" for c, w in zip(row.cpu, row.wall))
            for row in rows if row.cpu))
        for row in rows:
            if row.why:
                continue
            if row.plugin == PLUGIN:
                n, once, _ = once_count(row.args[1].split("=", 1)[1])
                print(f"{row.build} --leaks report: {n} tests, all clean, "
                      f"{once} ran once")
            elif row.plugin == PYTEST_LEAKS_PLUGIN:
                with open(row.log) as f:
                    print(f"{row.build} {row.name}: "
                          f"{last_line(f.read(), prefer='').strip('= ')}")
    if any(row.why and row.why.startswith("failed") for row in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
