"""What the crash journal costs: per test, the three lines a report writer
appends (start, record, finish: one write(2) each); then, for the whole
session, the final report written from the records and the report rebuilt
from a journal left by a dead run (what the gate does then).

    python bench/bench_journal.py [--tests 10000] [--rounds 5]

Records are shaped as a clean test's under the default probes.  Each figure
is the fastest of `rounds`; the per-test figure is that round's time
divided by --tests, and should not grow with --tests.
"""

import argparse
import os
import tempfile
import time

import leakcheck
from leakcheck import journal
from pytest_leakcheck.report import Report


def record(i, probes):
    return {"id": f"tests/test_mod{i // 100}.py::test_case_{i}",
            "verdict": "clean", "outcome": "passed", "known": False,
            "reason": None, "file": f"tests/test_mod{i // 100}.py",
            "line": 10 + i % 100, "warmup": 1, "repeat": 4, "runs": 1,
            "probes": probes, "leaking": [],
            "deltas": {p: [0] for p in probes},
            "thresholds": {p: 1 for p in probes}, "diagnosis": None,
            "worker": None, "unread": {}}


def one_round(n, directory):
    probes = list(leakcheck.DEFAULT_PROBES)
    path = os.path.join(directory, "r.json")
    rep = Report(path, settings={}, probes={}, environment={})
    rep.open()
    recs = [record(i, probes) for i in range(n)]
    t0 = time.perf_counter()
    for rec in recs:
        rep.start(rec["id"], (rec["file"], rec["line"] - 1, ""))
        rep.add(rec)
        rep.finish(rec["id"])
    t1 = time.perf_counter()
    size = rep.journal.size     # its lines (the file is reserved ahead)
    jcopy = os.path.join(directory, "dead.json.journal")
    with open(journal.journal_path(path), "rb") as f, \
            open(jcopy, "wb") as g:
        g.write(f.read())
    t2 = time.perf_counter()
    rep.write()
    t3 = time.perf_counter()
    doc = journal.read(jcopy)
    t4 = time.perf_counter()
    assert len(doc["tests"]) == n and not os.path.exists(
        journal.journal_path(path))
    os.unlink(jcopy)
    return (t1 - t0) / n, t3 - t2, t4 - t3, size


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    results = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as d:
            results.append(one_round(args.tests, d))
    per_test = min(r[0] for r in results)
    final = min(r[1] for r in results)
    rebuild = min(r[2] for r in results)
    size = results[0][3]
    print(f"{args.tests} tests, {len(leakcheck.DEFAULT_PROBES)} probes, "
          f"best of {args.rounds}:")
    print(f"  journal, per test (3 lines): {per_test * 1e6:.1f} us")
    print(f"  journal size: {size / args.tests:.0f} bytes per test")
    print(f"  final report written: {final * 1e3:.1f} ms")
    print(f"  report rebuilt from a dead run's journal: "
          f"{rebuild * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
