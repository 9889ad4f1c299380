"""What the plugin holds per clean test, and what writing the report adds:
N records shaped as a clean test's (default probes, one measured run) go
through the session's State and its Report (journal included) as a
session adds them; tracemalloc reads what stays held per test and the
peak of the final write above that.

    python bench/bench_plugin_memory.py [--tests 20000] [--sessions]

--sessions measures a real session's instead: bench_plugin.py's fast
clean tests, SMALL and LARGE of them, each run by pytest plain and with
--leaks (a report written); at the session's end (after a collection)
the run reads sys.getallocatedblocks() and its resident size.  What
--leaks holds per test is the growth from the small suite to the large
one, with --leaks less plain: what the plugin, pytest's own objects and
whatever holds a test's reports keep of each test to the end.
"""

import argparse
import gc
import os
import sys
import tempfile
import time
import tracemalloc
import types

import leakcheck
import leakcheck.report as lcreport
from pytest_leakcheck import report as reportmod
from pytest_leakcheck import session as sessionmod

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_overhead import pytest_output  # noqa: E402
from bench_plugin import generate  # noqa: E402

SMALL, LARGE = 1000, 5000       # --sessions: the two suites' sizes

# Read at the very end of the session: after every other
# pytest_sessionfinish, the report written.
SESSION_CONFTEST = '''\
import gc
import os
import sys

import pytest


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    gc.collect()
    with open("/proc/self/statm") as f:
        resident = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    with open(os.environ["BENCH_MEMORY_OUT"], "w") as f:
        f.write(f"{sys.getallocatedblocks()} {resident}")
'''


def clean_record(n):
    """A clean test's record as the hunt makes it: the default probes this
    interpreter reads, the others unread (refs on a release build), the
    CPU seconds of its hunt."""
    info = {p.name: p for p in leakcheck.probes()}
    probes = [p for p in leakcheck.DEFAULT_PROBES if info[p].available]
    unread = {p: info[p].reason for p in leakcheck.DEFAULT_PROBES
              if not info[p].available}
    test_id = f"tests/test_gen_{n % 50}.py::test_case_{n}"
    return test_id, lcreport.record(
        test_id, "clean", "passed", file=f"tests/test_gen_{n % 50}.py",
        line=n % 400 + 1, warmup=1, repeat=4, runs=1, warmup_measured=True,
        probes=probes, deltas={p: [0] for p in probes},
        thresholds={p: 1 for p in probes}, unread=unread, test_runs=1,
        hunt_seconds=0.0007,
        hunt_costs=dict.fromkeys(lcreport.COST_CATEGORIES, 0.0001))


def held_at_end(tests, leaks):
    """(blocks, resident bytes) at the end of a session of `tests` fast
    clean tests, run with --leaks (and a report) when `leaks`."""
    with tempfile.TemporaryDirectory(prefix="leakcheck-memory-") as d:
        generate(d, tests, conftest=SESSION_CONFTEST)
        out = os.path.join(d, "held.txt")
        os.environ["BENCH_MEMORY_OUT"] = out
        args = (["--leaks", f"--leaks-report={os.path.join(d, 'r.json')}"]
                if leaks else [])
        pytest_output("bench_plugin_memory", d, sys.executable, args)
        with open(out) as f:
            blocks, resident = map(int, f.read().split())
    return blocks, resident


def sessions():
    found = {}
    for name in ("plain", "--leaks"):
        for tests in (SMALL, LARGE):
            found[name, tests] = held_at_end(tests, name == "--leaks")
    print(f"held at the session's end, per test from {SMALL} to {LARGE} "
          f"fast clean tests:")
    per_test = {}
    for name in ("plain", "--leaks"):
        (b0, r0), (b1, r1) = found[name, SMALL], found[name, LARGE]
        per_test[name] = ((b1 - b0) / (LARGE - SMALL),
                          (r1 - r0) / (LARGE - SMALL))
        print(f"  {name:8} {per_test[name][0]:6.1f} blocks, "
              f"{per_test[name][1]:7.0f} bytes resident")
    print(f"  --leaks adds {per_test['--leaks'][0] - per_test['plain'][0]:.1f}"
          f" blocks and {per_test['--leaks'][1] - per_test['plain'][1]:.0f} "
          f"resident bytes a test")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tests", type=int, default=20000)
    p.add_argument("--sessions", action="store_true")
    args = p.parse_args()
    if args.sessions:
        sessions()
        return
    n = args.tests
    folder = tempfile.mkdtemp()
    state = sessionmod.State(types.SimpleNamespace(), None, {})
    state.report = reportmod.Report(
        os.path.join(folder, "r.json"), settings={}, probes=[],
        environment={})
    state.report.open()
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for i in range(n):
        test_id, rec = clean_record(i)
        state.report.start(test_id, (rec["file"], rec["line"]))
        state.logging = test_id         # its phases are over, as in a hunt
        state.add(rec)
        state.logging = None
        state.report.finish(test_id)
        del rec
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.reset_peak()
    began = time.process_time()
    state.report.write()
    cpu = time.process_time() - began
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    print(f"{n} clean records: {held / n:.0f} bytes held per test; the "
          f"final write peaked {max(0, peak - held) / 2**20:.1f} MB above "
          f"that, {cpu * 1000:.0f} ms of CPU (under tracemalloc)")


if __name__ == "__main__":
    main()
