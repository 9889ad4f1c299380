"""`pytest --leaks` over tests/python/leakylib's extension: a strdup()
leak is named at the extension's line (not at glibc's string/strdup.c) in
the failure, the JSON report and the HTML page; a leaked dict of strings,
which the collector does not track, at its PyDict_New() line, with a
note saying why no type is named.

memray is the optional extra leakcheck[native]; ./scripts/test installs
it, and there these tests must not skip (LEAKCHECK_TESTS_NEED_MEMRAY)."""

import gc
import importlib.util
import json
import os
import pathlib
import sys

import pytest

try:
    import memray
except ImportError:
    memray = None

if memray is None and os.environ.get("LEAKCHECK_TESTS_NEED_MEMRAY"):
    raise ImportError("memray is needed here (pip install 'leakcheck[native]')")
pytestmark = pytest.mark.skipif(memray is None,
                                reason="memray is not installed")

TESTS = pathlib.Path(__file__).resolve().parents[1]
LEAKYLIB_C = TESTS / "leakylib" / "leakylib.c"


def _build_leakylib():
    """tests/python/api/conftest.py's build of leakylib (with -g)."""
    spec = importlib.util.spec_from_file_location(
        "leakylib_build", TESTS / "api" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_leakylib()


def c_line(marker):
    lines = LEAKYLIB_C.read_text().splitlines()
    hits = [i for i, text in enumerate(lines, 1) if marker in text]
    assert len(hits) == 1, marker
    return hits[0]


TEST_FILE = '''
import importlib.util

import pytest

spec = importlib.util.spec_from_file_location("leakylib", {path!r})
leakylib = importlib.util.module_from_spec(spec)
spec.loader.exec_module(leakylib)


def test_strdup():
    leakylib.leak_strdup("a" * 1000)


def test_strdup_freed():
    leakylib.clean_strdup("a" * 1000)


def test_dict_of_strings():
    leakylib.leak_str_dict(3)


def test_dict_of_strings_released():
    leakylib.clean_str_dict(3)
'''


def test_strdup_and_an_untracked_dict_are_named_at_the_extensions_lines(
        pytester):
    path = _build_leakylib()
    pytester.makepyfile(test_ext=TEST_FILE.format(path=path))
    result = pytester.runpytest_subprocess("--leaks",
                                           "--leaks-report=r.json")
    result.assert_outcomes(failed=2, passed=2)
    text = result.stdout.str()
    strdup_line = c_line("if ((copy = strdup(text)) == NULL)  /*")
    dict_line = c_line("if ((dict = PyDict_New()) == NULL)")
    so = os.path.basename(path)
    assert (f"leakylib.c:{strdup_line} leak_strdup() in {so}: 1001 bytes "
            f"in 1 block, made by strdup()") in text, text
    assert "strdup.c" not in text and "__GI_" not in text
    assert f"leakylib.c:{dict_line} str_dict()" in text
    assert "made by PyDict_New()" in text
    # CPython 3.14 tracks every dict; before, a dict of strings is not
    # tracked, and a note says why no type is named.
    if gc.is_tracked({"a": "b"}):
        assert "dict  +1" in text
    else:
        assert "no type: what grew is no object the garbage collector " \
            "tracks" in text

    report = json.loads((pytester.path / "r.json").read_text())
    tests = {t["id"].split("::")[1]: t for t in report["tests"]}
    assert tests["test_strdup_freed"]["verdict"] == "clean"
    assert tests["test_dict_of_strings_released"]["verdict"] == "clean"
    site = tests["test_strdup"]["diagnosis"]["native"][0]
    assert (site["file"], site["line"], site["function"], site["via"]) == \
        (str(LEAKYLIB_C), strdup_line, "leak_strdup", "strdup")
    sites = tests["test_dict_of_strings"]["diagnosis"]["native"]
    assert any(s["line"] == dict_line and s["via"] == "PyDict_New"
               for s in sites), sites

    page = pytester.run(sys.executable, "-m", "leakcheck", "html", "r.json",
                        "-o", "page.html")
    assert page.ret == 0, page.stderr.str()
    html = (pytester.path / "page.html").read_text()
    assert "leak_strdup" in html and str(strdup_line) in html
    assert "strdup.c" not in html and "__GI_" not in html
