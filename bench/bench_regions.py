"""Where the instructions --leaks adds go, region by region, including the
regions the plugin's clocks cannot see (so the summary cannot count
them): bench_plugin.py's fast clean tests run plain and with --leaks under
valgrind's callgrind, counting the whole process or only one region of
it, and the share of each count that leakcheck's allocator hook
(c_api/src/pyhook.c) ran.

    python bench/bench_regions.py [--tests 200] [--python PATH]
                                  [--regions whole,phases,logging,exit]
                                  [--ll SIZE,ASSOC,LINE]

Regions:

    whole     the whole process
    phases    pytest's setup, call and teardown phases (every
              CallInfo.from_call: under --leaks the reported run's, and
              those of any extra run)
    logging   pytest's logging of each test: its logstart, logreport and
              logfinish hooks, every implementation
    exit      the interpreter's finalization (Py_FinalizeEx), after the
              session and after anything leakcheck reports

A region of Python code is counted by calling it through operator.call,
from a conftest.py the benchmark writes, and collecting only inside that
C function (--collect-atstart=no --toggle-collect=_operator_call); pytest
calls operator.call nowhere else.  --ll adds callgrind's cache simulation
with a last-level cache of that geometry (1048576,16,64: a 1 MiB L2, as
each core of the 2-core machine of 2026-12-04 has) and prints its misses
too: instructions do not show a cache left cold.

Printed per region, a test: the instructions plain and with --leaks, the
difference, and how many of the --leaks ones the allocator hook ran.
The probes are bench_instructions.py's (native_bytes left out: under
valgrind it fills glibc's cache before each reading)."""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_instructions import PROBES  # noqa: E402
from bench_overhead import pytest_output  # noqa: E402
from bench_plugin import generate  # noqa: E402

REGIONS = ("whole", "phases", "logging", "exit")

# Routes the region named by BENCH_REGION through operator.call.
CONFTEST = '''\
import operator
import os

_REGION = os.environ.get("BENCH_REGION")

if _REGION == "phases":
    import _pytest.runner
    _from_call = _pytest.runner.CallInfo.from_call.__func__

    def _routed(cls, func, when, reraise=None):
        return operator.call(_from_call, cls, func, when, reraise)

    _pytest.runner.CallInfo.from_call = classmethod(_routed)

elif _REGION == "logging":
    import pluggy
    _call = pluggy.HookCaller.__call__
    _LOGGING = ("pytest_runtest_logstart", "pytest_runtest_logreport",
                "pytest_runtest_logfinish")

    def _hook_call(self, **kwargs):
        if self.name in _LOGGING:
            return operator.call(_call, self, **kwargs)
        return _call(self, **kwargs)

    pluggy.HookCaller.__call__ = _hook_call
'''

TOGGLES = {"whole": [],
           "phases": ["--collect-atstart=no",
                      "--toggle-collect=_operator_call"],
           "logging": ["--collect-atstart=no",
                       "--toggle-collect=_operator_call"],
           "exit": ["--collect-atstart=no",
                    "--toggle-collect=Py_FinalizeEx"]}
COLLECTED = re.compile(r"Collected :((?: [0-9]+)+)")
# callgrind's events with --cache-sim=yes: Ir Dr Dw I1mr D1mr D1mw ILmr
# DLmr DLmw; the last-level misses are the last three.
LL_MISSES = slice(6, 9)


def count(directory, python, region, leaks, out, ll):
    """(instructions, last-level misses or None) that callgrind collected
    in `region` of one pytest run; its output file is `out`."""
    cache = ["--cache-sim=yes", f"--LL={ll}"] if ll else ["--cache-sim=no"]
    args = ["--leaks", f"--leaks-probes={PROBES}"] if leaks else []
    os.environ["BENCH_REGION"] = region
    try:
        text = pytest_output(
            "bench_regions", directory, python, args,
            prefix=("valgrind", "--tool=callgrind", *cache,
                    *TOGGLES[region], f"--callgrind-out-file={out}"))
    finally:
        del os.environ["BENCH_REGION"]
    found = COLLECTED.findall(text)
    if not found:
        sys.exit("bench_regions: callgrind printed no count")
    events = [int(n) for n in found[-1].split()]
    return events[0], (sum(events[LL_MISSES]) if ll else None)


def hook_share(out):
    """The instructions the allocator hook's own functions ran, from a
    callgrind output file."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=no",
                           "--threshold=100", "--auto=no", out],
                          capture_output=True, text=True).stdout
    total = 0
    for line in text.splitlines():
        fields = line.split()
        if fields and re.fullmatch(r"[0-9,]+", fields[0]) and \
                any("pyhook.c:" in f for f in fields):
            total += int(fields[0].replace(",", ""))
    return total


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=200)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    p.add_argument("--regions", default=",".join(REGIONS))
    p.add_argument("--ll", metavar="SIZE,ASSOC,LINE",
                   help="simulate the caches, with this last level")
    args = p.parse_args(argv)
    regions = args.regions.split(",")
    unknown = sorted(set(regions) - set(REGIONS))
    if unknown:
        p.error(f"unknown regions {unknown}: choose among {REGIONS}")
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            sys.exit(f"bench_regions: {tool} is not installed "
                     f"(scripts/setup installs valgrind)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="leakcheck-regions-") as d:
        tests = generate(d, args.tests, conftest=CONFTEST)
        for region in regions:
            out = os.path.join(d, "callgrind.out")
            plain, plain_ll = count(d, args.python, region, False, out,
                                    args.ll)
            leaks, leaks_ll = count(d, args.python, region, True, out,
                                    args.ll)
            rows.append((region, plain, leaks, hook_share(out), plain_ll,
                         leaks_ll))
    print(f"{tests} tests, counted by callgrind (probes {PROBES}); "
          f"instructions a test")
    print(f"{'region':>8} {'plain':>12} {'--leaks':>12} {'added':>10} "
          f"{'the hook':>9}" + (f" {'LL misses plain':>16} "
                                f"{'--leaks':>8}" if args.ll else ""))
    for region, plain, leaks, hook, plain_ll, leaks_ll in rows:
        line = (f"{region:>8} {plain / tests:12,.0f} {leaks / tests:12,.0f} "
                f"{(leaks - plain) / tests:+10,.0f} {hook / tests:9,.0f}")
        if args.ll:
            line += (f" {plain_ll / tests:16,.0f} "
                     f"{leaks_ll / tests:8,.0f}")
        print(line)


if __name__ == "__main__":
    main()
