"""The page's parts, computed in-process: plots, diagnosis sections,
unusable input."""

import copy
import fnmatch

import pytest

from leakcheck.report import html as _html

from report_helpers import command


def test_plot_geometry():
    p = _html.plot("native_bytes", [65552, 0, -16], 1, "bytes", True)
    assert [b["hit"] for b in p["bars"]] == [True, False, False]
    assert p["top_label"] == "64K" and p["bottom_label"] == "-16"
    assert p["bottom_y"] >= p["zero_y"] >= p["threshold_y"] >= p["top_y"]
    bars = p["bars"]
    assert bars[0]["y"] == p["top_y"] and bars[2]["y"] == p["zero_y"]


@pytest.mark.parametrize("content, reason", [
    (None, "cannot read report {path}: No such file or directory"),
    ('{"schema": "leakcheck-report/1", "tests": [', "*is not valid JSON*"),
    ('{"schema": "other/1"}', "report {path} has schema 'other/1'*"),
    (b"\xff\xfe", "report {path} is not UTF-8 text"),
])
def test_unusable_input_exits_2(tmp_path, content, reason):
    path = tmp_path / "bad.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    result = command("html", path, "-o", tmp_path / "out.html")
    assert result.status == 2
    assert result.out == []
    assert len(result.err) == 1
    assert fnmatch.fnmatch(result.err[0], "leakcheck html: error: "
                           + reason.format(path=path))
    assert not (tmp_path / "out.html").exists()


# The diagnosis of the example extension's checksum leak, as a report made
# by `pytest --leaks` over examples/ext holds it (memray's C line, with the
# object file that holds it; tracemalloc's Python line, its figures the
# total over the diagnosis' 2 re-runs).
CHECKSUM_DIAGNOSIS = {
    "leaking": ["blocks", "py_bytes", "py_allocs", "native_bytes"],
    "runs": 2, "objects": [],
    "allocations": [{"file": "/src/ext/test_ext_example.py", "line": 31,
                     "size": 4096, "count": 2,
                     "source": "assert ext.checksum(data) == 1",
                     "traceback": [{"file": "/src/ext/test_ext_example.py",
                                    "line": 31}]}],
    "native": [{"file": "/src/ext/leaky.c", "line": 73,
                "function": "checksum",
                "caller": {"file": "/src/ext/test_ext_example.py",
                           "line": 31, "function": "test_checksum"},
                "via": None, "bytes": 2048, "blocks": 1,
                "objects": ["/tmp/build/leaky.cpython-311-x86_64-linux-gnu"
                            ".so"]}],
    "heap_lines": [], "refcounts": [], "garbage": [], "fds": [],
    "threads": [], "chains": [], "notes": [], "capture": None}


def test_c_lines_name_the_object_file_and_figures_are_per_run():
    shown = {s["title"]: s for s in _html.sections(CHECKSUM_DIAGNOSIS)}
    c_lines = shown["Where the native memory was allocated (C lines)"]
    assert c_lines["columns"] == ["where", "caller", "via", "bytes per run",
                                  "blocks per run", "object file"]
    assert c_lines["rows"] == [[
        ["/src/ext/leaky.c:73 checksum()"],
        ["/src/ext/test_ext_example.py:31 test_checksum()"], [""],
        ["2,048"], ["1"], ["leaky.cpython-311-x86_64-linux-gnu.so"]]]
    python_lines = shown["Where the surviving memory was allocated "
                         "(Python lines)"]
    assert python_lines["columns"][:3] == ["where", "bytes per run",
                                           "blocks per run"]
    assert python_lines["rows"][0][1:3] == [["2,048"], ["1"]]


def test_two_builds_of_one_extension_are_named_whole():
    # Two builds loaded at once, both defining the function: by file name
    # they would read "leaky.so or leaky.so".
    diagnosis = copy.deepcopy(CHECKSUM_DIAGNOSIS)
    builds = ["/tmp/a/leaky.so", "/tmp/b/leaky.so"]
    diagnosis["native"][0]["objects"] = builds
    shown = {s["title"]: s for s in _html.sections(diagnosis)}
    c_lines = shown["Where the native memory was allocated (C lines)"]
    assert c_lines["rows"][0][-1] == ["/tmp/a/leaky.so or /tmp/b/leaky.so"]
    diagnosis["native"][0]["objects"] = ["/tmp/a/leaky.so", "/tmp/b/other.so"]
    shown = {s["title"]: s for s in _html.sections(diagnosis)}
    c_lines = shown["Where the native memory was allocated (C lines)"]
    assert c_lines["rows"][0][-1] == ["leaky.so or other.so"]


def _costed_report():
    """A report of four tests: two ran once, two more often (one of them
    a leak), with the summary's costs."""
    import leakcheck.report as lcreport
    costs = {"snapshots": 0.002, "extra_runs": 0.0, "confirmation": 0.0,
             "diagnosis": 0.0, "bookkeeping": 0.001}
    records = {
        "t.py::test_once": lcreport.record(
            "t.py::test_once", "clean", "passed", test_runs=1,
            hunt_seconds=0.0, hunt_costs=costs),
        "t.py::test_cache": lcreport.record(
            "t.py::test_cache", "clean", "passed", test_runs=3,
            hunt_seconds=0.02, hunt_costs=dict(costs, extra_runs=0.02),
            warmup_growth={"blocks": 2, "objects": 1}),
        "t.py::test_leak": lcreport.record(
            "t.py::test_leak", "leak", "failed", test_runs=5,
            hunt_seconds=0.25, leaking=["objects"],
            deltas={"objects": [1, 1, 1, 1]},
            hunt_costs=dict(costs, extra_runs=0.05, diagnosis=0.2),
            warmup_growth={"objects": 1}),
        "t.py::test_skip": lcreport.record(
            "t.py::test_skip", "skipped", "skipped"),
    }
    return lcreport.document({"settings": {"warmup": 1, "repeat": 4}},
                             records,
                             session_costs={"report": 0.01, "session": 0.1})


def test_the_page_says_what_the_hunt_cost_and_why_tests_ran_again():
    report = _costed_report()
    cost = _html.page_context([("r.json", report)])["cost"]
    assert cost["tests"] == 4
    assert cost["hunted"] == 2 and cost["extra_runs"] == 6
    # The longest hunts first, each with what its warm-up run grew.
    assert [(r["id"], r["runs"], r["growth"]) for r in cost["reruns"]] == [
        ("t.py::test_leak", 5, "objects +1"),
        ("t.py::test_cache", 3, "blocks +2, objects +1")]
    assert cost["reruns"][0]["report"] is None      # one report in the run
    categories = dict(cost["categories"])
    assert categories["extra runs"] == pytest.approx(0.07)
    assert categories["diagnosis"] == pytest.approx(0.2)
    assert categories["around the tests"] == pytest.approx(0.1)
    assert cost["total"] == pytest.approx(sum(categories.values()))
    assert cost["per_test_ms"] == pytest.approx(cost["total"] * 1000 / 4)
    page = _html.render([("r.json", report)])
    assert "t.py::test_cache" in page and "blocks +2, objects +1" in page
    assert "2 tests ran more than once (6 runs beyond the reported ones)" \
        in page
    assert "around the tests 0.10 s" in page
    # A run whose tests all ran once says so.
    report["tests"] = [t for t in report["tests"]
                       if t["id"] == "t.py::test_once"]
    assert _html.page_context([("r.json", report)])["cost"]["hunted"] == 0
    assert "No test ran more than once." in _html.render([("r.json",
                                                          report)])


def test_the_page_lists_the_longest_hunts_of_many_and_of_old_reports():
    report = _costed_report()
    # A report written before records had costs: the tests that ran again
    # are listed all the same, without a total.
    del report["summary"]["costs"]
    template = next(t for t in report["tests"]
                    if t["id"] == "t.py::test_cache")
    for n in range(_html.RERUNS_LISTED + 5):
        report["tests"].append(dict(template, id=f"t.py::test_{n:02}",
                                    hunt_seconds=n / 1000))
    cost = _html.page_context([("r.json", report)])["cost"]
    assert cost["total"] is None and cost["categories"] == []
    assert cost["hunted"] == _html.RERUNS_LISTED + 7
    assert len(cost["reruns"]) == _html.RERUNS_LISTED
    assert cost["reruns"][0]["id"] == "t.py::test_leak"
    page = _html.render([("r.json", report)])
    assert "leakcheck added" not in page
    assert f"the {_html.RERUNS_LISTED} longest hunts" in page
