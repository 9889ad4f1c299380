"""What the plugin holds per clean test, and what writing the report adds:
N records shaped as a clean test's (default probes, one measured run) go
through the session's State and its Report (journal included) as a
session adds them; tracemalloc reads what stays held per test and the
peak of the final write above that.

    python bench/bench_plugin_memory.py [--tests 20000]
"""

import argparse
import gc
import os
import tempfile
import time
import tracemalloc
import types

import leakcheck
import leakcheck.report as lcreport
from pytest_leakcheck import report as reportmod
from pytest_leakcheck import session as sessionmod


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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tests", type=int, default=20000)
    n = p.parse_args().tests
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
