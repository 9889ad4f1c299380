"""leakcheck.report.schema: the one owner of the report's facts."""

import pytest

import leakcheck.report as lcreport
from leakcheck.report import files, gate, html, schema
from leakcheck.report.files import UnusableInput

from report_helpers import leak, report_of

# The record the plugin wrote before "judged" (today's plugin record).
PLUGIN_FIELDS = {"id", "verdict", "outcome", "known", "reason", "file",
                 "line", "warmup", "repeat", "runs", "warmup_measured",
                 "probes", "leaking", "deltas", "thresholds", "diagnosis",
                 "worker", "unread", "threads", "test_runs", "hunt_seconds"}
# The record of a crash before "judged".
CRASHED_FIELDS = PLUGIN_FIELDS - {"warmup_measured"}


def test_a_record_keeps_every_field_and_adds_judged():
    rec = lcreport.record(
        "t.py::test_a", "clean", "passed", known=False, reason=None,
        file="t.py", line=3, warmup=1, repeat=3, runs=3,
        warmup_measured=True, probes=["blocks"], leaking=[],
        deltas={"blocks": (0, 0, 0)}, thresholds={"blocks": 1},
        diagnosis=None, worker="gw0", unread={"refs": "release build"},
        threads=["t"], test_runs=4, hunt_seconds=0.25, judged=True)
    assert set(rec) == PLUGIN_FIELDS | {"judged", "hunt_costs",
                                        "warmup_growth"}
    assert tuple(rec) == lcreport.RECORD_FIELDS
    assert rec["warmup_growth"] is None
    assert rec["deltas"] == {"blocks": [0, 0, 0]}
    assert rec["judged"] is True and rec["worker"] == "gw0"
    assert rec["warmup_measured"] is True and rec["test_runs"] == 4


def test_the_defaults_are_those_of_a_test_not_yet_measured():
    rec = lcreport.record("t", "error", "failed", reason="x", judged=False)
    assert rec["runs"] == 0 and rec["probes"] == [] and rec["deltas"] == {}
    assert rec["known"] is False and rec["judged"] is False
    assert rec["hunt_seconds"] == 0.0 and rec["diagnosis"] is None
    assert rec["hunt_costs"] is None


def test_the_summary_sums_the_costs_of_records_that_have_them():
    old = lcreport.record("t.py::test_old", "clean", "passed")
    new = lcreport.record("t.py::test_new", "clean", "passed",
                          hunt_costs=dict(snapshots=0.5, extra_runs=0.25,
                                          confirmation=0, diagnosis=1,
                                          bookkeeping=0.125))
    assert "costs" not in schema.summary_of([old])
    assert schema.summary_of([old, new])["costs"] == {
        "snapshots": 0.5, "extra_runs": 0.25, "confirmation": 0.0,
        "diagnosis": 1.0, "bookkeeping": 0.125}
    assert schema.summary_of([old], {"report": 0.5})["costs"] == {
        **dict.fromkeys(lcreport.COST_CATEGORIES, 0.0), "report": 0.5}


def test_a_record_refuses_an_unknown_verdict():
    with pytest.raises(ValueError, match="verdict 'maybe' is not one of"):
        lcreport.record("t", "maybe", "passed")


def test_a_crashed_record_is_a_record_not_judged():
    rec = lcreport.crashed_record("t", "it died", "t.py", 4, "gw1")
    assert CRASHED_FIELDS <= set(rec)
    assert (rec["verdict"], rec["outcome"], rec["judged"]) == \
        ("crashed", "crashed", False)
    assert (rec["file"], rec["line"], rec["worker"], rec["reason"]) == \
        ("t.py", 4, "gw1", "it died")
    assert rec["warmup"] is None and rec["repeat"] is None


@pytest.mark.parametrize("entry, judged", [
    ({"verdict": "error", "reason": "leakcheck: @pytest.mark.noleak on x"},
     False),
    ({"verdict": "error", "reason": "not checked: the test failed"}, True),
    ({"verdict": "error", "reason": None}, True),
    ({"verdict": "crashed", "reason": "the process died"}, False),
    ({"verdict": "clean"}, True),
    ({"verdict": "error", "reason": "leakcheck: x", "judged": True}, True),
    ({"verdict": "clean", "judged": False}, False),
])
def test_judged_reads_the_field_or_an_older_reports_reason(entry, judged):
    assert schema.judged(entry) is judged


def test_a_report_read_has_judged_on_every_entry(tmp_path):
    old = report_of({"id": "a", "verdict": "error",
                     "reason": "leakcheck: could not measure the test: x"},
                    {"id": "b", "verdict": "clean"})
    data = schema.check_report(old, "r.json")
    assert [t["judged"] for t in data["tests"]] == [False, True]


def test_one_merge_order_for_the_gate_and_the_page():
    assert schema.VERDICTS[0] == "leak"
    assert sorted(schema.REPORT_ORDER) == sorted(schema.VERDICTS)
    for i, first in enumerate(schema.VERDICTS):
        for later in schema.VERDICTS[i + 1:]:
            assert schema.merged({first, later}) == first
            assert schema.RANK[first] > schema.RANK[later]
            t = gate.Test("t")
            t.add("a", {"verdict": later, "id": "t"})
            t.add("b", {"verdict": first, "id": "t"})
            assert t.verdict == first
            run = [("a", report_of({"id": "t", "verdict": later})),
                   ("b", report_of({"id": "t", "verdict": first}))]
            assert html._merged_verdicts(run) == {"t": first}


def test_known_means_every_leaking_probe_is_in_the_baseline():
    known = {"a": {"blocks", "objects"}}
    assert lcreport.is_known(known, "a", ["blocks"])
    assert lcreport.is_known(known, "a", [])
    assert not lcreport.is_known(known, "a", ["blocks", "fds"])
    assert not lcreport.is_known(known, "b", [])


def test_summary_counts_every_verdict_in_report_order():
    recs = [leak("a", known=True), leak("b"),
            lcreport.crashed_record("c", "died"),
            lcreport.record("d", "clean", "passed")]
    assert schema.summary_of(recs) == {"tests": 4, "leak": 2, "clean": 1,
                                    "error": 0, "skipped": 0, "crashed": 1,
                                    "known": 1}
    assert list(schema.summary_of([]))[1:-1] == list(schema.REPORT_ORDER)


def test_document_reports_a_test_that_never_finished_as_crashed():
    doc = lcreport.document(
        {"settings": {"repeat": 3}}, {"a": leak("a")},
        running={"b": {"start": "b", "file": "t.py", "line": 9}},
        reasons=["died", "died"], created="2026-01-01T00:00:00Z",
        unfinished="gone")
    assert doc["schema"] == lcreport.REPORT_SCHEMA
    assert doc["partial"] is True and doc["partial_reasons"] == ["died"]
    assert [t["id"] for t in doc["tests"]] == ["a", "b"]
    b = doc["tests"][1]
    assert (b["verdict"], b["reason"], b["line"], b["judged"]) == \
        ("crashed", "gone", 9, False)
    assert doc["summary"]["crashed"] == 1 and doc["settings"] == {"repeat": 3}


@pytest.mark.parametrize("entry, problem", [
    ([], 'has no string "id"'),
    ({"id": 5, "verdict": "leak"}, 'has no string "id"'),
    ({"id": "a"}, "has verdict None, not one of leak, crashed, error, "
                  "clean, skipped"),
    ({"id": "a", "verdict": "leak", "leaking": [["blocks"]]},
     'has a "leaking" that is not a list of probe names'),
    ({"id": "a", "verdict": "leak", "runs": True},
     'has a "runs" that is not an integer'),
    ({"id": "a", "verdict": "leak", "line": 10 ** 400},
     'has a "line" that is not an integer'),
    ({"id": "a", "verdict": "leak", "deltas": {"blocks": [10 ** 400]}},
     'has "deltas" that are not lists of integers by probe'),
    ({"id": "a", "verdict": "leak", "thresholds": {"blocks": "1"}},
     'has "thresholds" that are not integers by probe'),
    ({"id": "a", "verdict": "leak", "file": ["t.py"]},
     'has a "file" that is not a string'),
    ({"id": "a", "verdict": "leak", "judged": "no"},
     'has a "judged" that is not true or false'),
])
def test_entry_problem_names_the_field(entry, problem):
    assert schema.entry_problem(entry) == problem
    with pytest.raises(UnusableInput) as e:
        schema.check_report(report_of(entry), "r.json")
    assert str(e.value).startswith("report r.json: tests[0]")
    assert str(e.value).endswith(problem)


def test_a_built_record_passes_the_readers_check():
    assert schema.entry_problem(leak()) is None
    assert schema.entry_problem(lcreport.crashed_record("t", "x")) is None


def test_a_document_read_as_it_is_written_is_laid_out_the_same(tmp_path):
    """A report whose tests are an Entries (read one at a time) is the
    same text as the one whose tests are a list."""
    tests = [lcreport.record(f"t.py::test_{n}", "clean", "passed",
                             hunt_costs=dict.fromkeys(
                                 lcreport.COST_CATEGORIES, 0.25))
             for n in range(3)]
    meta = {"settings": {"hunt": "all"}, "probes": {}, "environment": {}}
    for listed in (tests, []):
        doc = schema.sorted_document(meta, listed, ["why"], created="x")
        streamed = schema.sorted_document(
            meta, lcreport.Entries(len(listed), lambda: iter(listed)),
            ["why"], created="x")
        assert streamed["summary"] == doc["summary"]
        path = tmp_path / "r.json"
        lcreport.write_report(path, streamed)
        assert path.read_text() == files.layout(doc)
        assert schema.document(meta, {t["id"]: t for t in listed},
                               reasons=["why"], created="x") == doc
