"""What glibc's mallinfo2() costs where the native_bytes probe calls it:
once in each snapshot, two a clean test.  mallinfo2() walks every free
chunk of every bin of every arena, and after a test has run those chunk
headers are out of the CPU's caches: this bench times it right after each
test (pytest_runtest_logfinish, between two tests' snapshots), twice in a
row, the first call on the caches the test left, the second on the ones
the first left, in bench_plugin.py's suite of fast clean tests run plain
and with --leaks (leakcheck's plugin alone, as bench_overhead.py runs it).

    python bench/bench_native_read.py [--tests 1000] [--rounds 3]
                                      [--python PATH] [--all-plugins]

--all-plugins lets pytest load every plugin installed (as
bench_overhead.py's option does): what they import and keep shapes the C
heap, and so how many free chunks mallinfo2() walks.

Printed for each configuration, over its rounds: the median of the first
calls (µs), of the second, and the free chunks mallinfo2() counted at the
session's end (ordblks, in the arenas' bins; smblks, in the fast bins).
The timings go into preallocated arrays (a list that grew would be the
tests' growth under --leaks), and mallinfo2() is called through ctypes,
whose own cost (well under a microsecond) is in both figures.  glibc
only.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_overhead import PLUGIN  # noqa: E402
from bench_plugin import NOT_MEASURED  # noqa: E402
from bench_plugin import generate  # noqa: E402

CONFTEST = '''\
import array
import ctypes
import time


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
        "fsmblks", "uordblks", "fordblks", "keepcost")]


_mallinfo2 = ctypes.CDLL(None).mallinfo2
_mallinfo2.restype = _Mallinfo2
_clock = time.perf_counter_ns
_N = {tests}
_COLD = array.array("q", [0] * _N)
_WARM = array.array("q", [0] * _N)
_AT = array.array("q", [0])


def pytest_runtest_logfinish():
    n = _AT[0]
    if n < _N:
        t0 = _clock()
        _mallinfo2()
        t1 = _clock()
        _mallinfo2()
        t2 = _clock()
        _COLD[n] = t1 - t0
        _WARM[n] = t2 - t1
        _AT[0] = n + 1


def pytest_unconfigure():
    n = _AT[0]
    info = _mallinfo2()
    with open("native-read.txt", "w") as f:
        f.write(f"{{n}} {{info.ordblks}} {{info.smblks}}\\n")
        f.write(" ".join(map(str, _COLD[:n])) + "\\n")
        f.write(" ".join(map(str, _WARM[:n])) + "\\n")
'''


def run(directory, python, leaks, autoload):
    """(first calls' ns, second calls' ns, ordblks, smblks) of one run."""
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "no:randomly", *NOT_MEASURED]
    if leaks:
        cmd += ["--leaks", "--leaks-report=" +
                os.path.join(directory, "report.json")]
    env = dict(os.environ)
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        cmd[3:3] = ["-p", PLUGIN]
    proc = subprocess.run(cmd + [directory], cwd=directory, env=env,
                          text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    if proc.returncode != 0 or not re.search(r"\d+ passed", proc.stdout):
        sys.exit(f"bench_native_read: {' '.join(cmd)} failed (exit "
                 f"{proc.returncode}):\n{proc.stdout[-3000:]}")
    with open(os.path.join(directory, "native-read.txt")) as f:
        head, cold, warm = f.read().splitlines()
    _, ordblks, smblks = map(int, head.split())
    return ([int(x) for x in cold.split()], [int(x) for x in warm.split()],
            ordblks, smblks)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    p.add_argument("--all-plugins", action="store_true",
                   help="load every pytest plugin installed")
    args = p.parse_args(argv)
    check = subprocess.run([args.python, "-c", "import ctypes; "
                            "ctypes.CDLL(None).mallinfo2"],
                           capture_output=True)
    if check.returncode != 0:
        sys.exit("bench_native_read: this C library has no mallinfo2() "
                 "(glibc 2.33 or later has)")
    with tempfile.TemporaryDirectory(prefix="leakcheck-native-") as d:
        tests = generate(d, args.tests)
        with open(os.path.join(d, "conftest.py"), "w") as f:
            f.write(CONFTEST.format(tests=tests))
        print(f"{tests} fast tests, {args.rounds} rounds, "
              + ("every plugin installed" if args.all_plugins
                 else "leakcheck's plugin alone")
              + "; mallinfo2() after each test, median µs (rounds' "
                "medians, then their median)")
        for name, leaks in (("plain", False), ("--leaks", True)):
            firsts, seconds, free = [], [], None
            for _ in range(args.rounds):
                cold, warm, ordblks, smblks = run(d, args.python, leaks,
                                                  args.all_plugins)
                firsts.append(statistics.median(cold) / 1000)
                seconds.append(statistics.median(warm) / 1000)
                free = (ordblks, smblks)
            print(f"  {name:<8} first call "
                  f"{' '.join(f'{x:.1f}' for x in firsts)} "
                  f"-> {statistics.median(firsts):.1f}; second "
                  f"{' '.join(f'{x:.1f}' for x in seconds)} "
                  f"-> {statistics.median(seconds):.1f}; free chunks at "
                  f"the end: {free[0]} in bins, {free[1]} in fast bins")


if __name__ == "__main__":
    main()
