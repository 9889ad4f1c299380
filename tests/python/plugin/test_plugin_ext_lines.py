"""`pytest --leaks` over tests/python/leakylib's extension: a strdup()
leak is named at the extension's line (not at glibc's string/strdup.c) in
the failure, the JSON report and the HTML page; a leaked dict of strings,
which the collector does not track, at its PyUnicode_FromFormat() lines
(and its PyDict_New() line when the dict was not taken from CPython's
free list), with a note saying why no type is named.  With --leaks-diagnose=cheap, memray
re-runs only a test whose C heap alone grew.

memray is the optional extra leakcheck[native]; ./scripts/test installs
it, and there these tests must not skip (LEAKCHECK_TESTS_NEED_MEMRAY)."""

import gc
import importlib.util
import json
import os
import pathlib
import sys

import pytest

from leakcheck._evidence.native import NOTE_CHEAP

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
    key_line = c_line('PyObject *key = PyUnicode_FromFormat("key-%zd", i);')
    so = os.path.basename(path)
    assert (f"leakylib.c:{strdup_line} leak_strdup() in {so}: 1001 bytes "
            f"in 1 block, made by strdup()") in text, text
    assert "strdup.c" not in text and "__GI_" not in text
    # The strings are new in every run.  The dict is named at its
    # PyDict_New() line when it is, but CPython may hand out a dict freed
    # earlier from its free list (3.12 does here), which no allocator sees.
    assert f"leakylib.c:{key_line} str_dict()" in text
    assert "made by PyUnicode_FromFormat()" in text
    if f"leakylib.c:{dict_line} str_dict()" in text:
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
    assert any(s["line"] == key_line and s["via"] == "PyUnicode_FromFormat"
               for s in sites), sites
    assert all(s["via"] == "PyDict_New"
               for s in sites if s["line"] == dict_line), sites

    page = pytester.run(sys.executable, "-m", "leakcheck", "html", "r.json",
                        "-o", "page.html")
    assert page.ret == 0, page.stderr.str()
    html = (pytester.path / "page.html").read_text()
    assert "leak_strdup" in html and str(strdup_line) in html
    assert "strdup.c" not in html and "__GI_" not in html


# --leaks-diagnose=cheap: a PyMem block lost by C code is named at the
# test's Python line with no memray re-run (a note says the C line was
# left out), where the default names its C line; a malloc() only the C
# heap sees still gets its C line.
CHEAP_TESTS = '''

def test_pymem():
    leakylib.leak_pymem(3000)


def test_malloc():
    leakylib.leak_native(5000)
'''
# The line of the call, in the file pytester writes (stripped).
PYMEM_LINE = (TEST_FILE + CHEAP_TESTS).strip().splitlines().index(
    "    leakylib.leak_pymem(3000)") + 1


@pytest.mark.parametrize("mode", ["cheap", "full"])
def test_cheap_runs_memray_only_for_the_c_heap_alone(pytester, read_report,
                                                      mode):
    pytester.makepyfile(test_ext=TEST_FILE.format(path=_build_leakylib())
                        + CHEAP_TESTS)
    result = pytester.runpytest_subprocess(
        "--leaks", f"--leaks-diagnose={mode}", "--leaks-report=r.json",
        "-k", "pymem or malloc")
    result.assert_outcomes(failed=2, deselected=4)
    _, tests = read_report()
    pymem = tests["test_ext.py::test_pymem"]["diagnosis"]
    malloc = tests["test_ext.py::test_malloc"]["diagnosis"]
    assert [s["function"] for s in malloc["native"]] == ["leak_native"]
    assert NOTE_CHEAP not in malloc["notes"]
    assert any(a["line"] == PYMEM_LINE for a in pymem["allocations"]), pymem
    if mode == "cheap":
        assert pymem["native"] == []
        assert NOTE_CHEAP in pymem["notes"]
        result.stdout.fnmatch_lines([f"note: {NOTE_CHEAP}"])
    else:
        assert [s["function"] for s in pymem["native"]] == ["leak_pymem"]
        assert NOTE_CHEAP not in pymem["notes"]
