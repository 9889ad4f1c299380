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
