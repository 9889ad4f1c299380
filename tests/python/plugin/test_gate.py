"""``python -m leakcheck``: its commands, help, version and usage errors,
and the gate over one or several reports, run as CI runs them."""

import pathlib
import re
import shutil
import sys

import pytest

import leakcheck
from leakcheck import __main__ as cli


def run_cli(pytester, *args, **env):
    for k, v in env.items():
        pytester._monkeypatch.setenv(k, v)
    return pytester.run(sys.executable, "-m", "leakcheck", *args)


def test_version(pytester):
    from importlib.metadata import version
    assert leakcheck.__version__ == version("leakcheck")
    result = run_cli(pytester, "--version")
    assert result.ret == 0
    assert result.outlines == [f"leakcheck {leakcheck.__version__}"]


def test_help_lists_every_command(pytester):
    result = run_cli(pytester, "--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"usage: {cli.PROG} *"])
    for name in cli.COMMANDS:
        result.stdout.fnmatch_lines([f"    {name} *"])
    result = run_cli(pytester, "gate", "--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"usage: {cli.PROG} gate *",
                                 "*REPORT*", "*--baseline FILE*"])


@pytest.mark.parametrize("args, message", [
    ((), "the following arguments are required: COMMAND"),
    (("nope",), "argument COMMAND: invalid choice: 'nope'*"),
    (("gate",), "the following arguments are required: REPORT*"),
    (("gate", "r.json", "--bogus"), "unrecognized arguments: --bogus"),
])
def test_usage_errors_exit_2(pytester, args, message):
    result = run_cli(pytester, *args)
    assert result.ret == 2
    assert result.outlines == []
    result.stderr.fnmatch_lines(["usage: *", f"*: error: {message}"])
    assert "Traceback" not in result.stderr.str()


# ---- several reports as one ------------------------------------------------

COMMON = '''
import os

_KEPT = []

def test_everywhere():
    _KEPT.append([])

def test_only_in_b():
    if os.environ.get("SHARD") == "b":
        _KEPT.append([])

def test_clean():
    pass
'''

SHARD_A = '''
_KEPT = []

def test_a_leaks():
    _KEPT.append([])
'''

SHARD_B = '''
def test_b_clean():
    pass
'''


def line_of(path, name):
    """The 1-based line of `def name(` in the file at `path`."""
    return path.read_text().splitlines().index(f"def {name}():") + 1


@pytest.fixture
def two_reports(pytester, monkeypatch):
    """a.json and b.json: two jobs of one suite, each with a shard of its
    own and test_common.py, whose test_only_in_b leaks only in job b."""
    pytester.makepyfile(test_common=COMMON, test_a=SHARD_A, test_b=SHARD_B)
    for shard in "ab":
        monkeypatch.setenv("SHARD", shard)
        pytester.runpytest_subprocess("--leaks", f"--leaks-report={shard}.json",
                                      "test_common.py", f"test_{shard}.py")
    return "a.json", "b.json"


def test_several_reports_gate_as_one(pytester, two_reports):
    result = run_cli(pytester, "gate", *two_reports)
    assert result.ret == 1
    result.stdout.fnmatch_lines_random([
        "leakcheck gate: 3 new leaks (5 tests checked: 3 leak, 2 clean, "
        "0 error, 0 skipped):",
        "  LEAK test_common.py::test_everywhere: *objects* in a.json, b.json",
        "  LEAK test_common.py::test_only_in_b: *objects* in b.json",
        "  LEAK test_a.py::test_a_leaks: *objects* in a.json",
    ])
    assert len(result.outlines) == 4

    result = run_cli(pytester, "gate", *two_reports,
                     "--write-baseline", "known.json")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["leakcheck gate: wrote 3 known leaks to "
                                 "known.json"])
    for reports in (two_reports, two_reports[:1], two_reports[1:]):
        result = run_cli(pytester, "gate", *reports, "--baseline",
                         "known.json")
        assert result.ret == 0, result.outlines
        result.stdout.fnmatch_lines(["leakcheck gate: no new leaks (*"])


def test_github_annotations_at_the_definitions(pytester, two_reports):
    result = run_cli(pytester, "gate", *two_reports, "--format", "github")
    assert result.ret == 1
    errors = [l for l in result.outlines if l.startswith("::error ")]
    assert len(errors) == 3
    for name, test, jobs in [("test_common", "test_everywhere", "ab"),
                             ("test_common", "test_only_in_b", "b"),
                             ("test_a", "test_a_leaks", "a")]:
        line = line_of(pytester.path / f"{name}.py", test)
        head = (f"::error file={name}.py,line={line},title=leak%3A "
                f"{name}.py%3A%3A{test}::")
        found = [e[len(head):] for e in errors if e.startswith(head)]
        assert len(found) == 1, (head, errors)
        parts = found[0].split("%0A")
        deltas, sites = parts[:len(jobs)], parts[len(jobs):]
        assert [p.split(":")[0] for p in deltas] == [f"{j}.json" for j in jobs]
        assert all("objects +1 +1 +1" in p for p in deltas)
        # The line the diagnosis found, beside the deltas.
        kept = (pytester.path / f"{name}.py").read_text().splitlines().index(
            "        _KEPT.append([])" if test == "test_only_in_b"
            else "    _KEPT.append([])") + 1
        # An empty list is 1 block, or more where the interpreter keeps
        # some runs' allocations elsewhere (3.14's debug build: 1.5).
        assert len(sites) == 1 and re.fullmatch(
            rf"Python line {name}\.py:{kept}: \d+ bytes in [\d.]+ blocks? "
            rf"per run", sites[0]), sites
    # The text follows, as without --format.
    result.stdout.fnmatch_lines(["leakcheck gate: 3 new leaks *"])
    result = run_cli(pytester, "gate", *two_reports, "--format", "github",
                     "--baseline", "a.json")
    assert result.ret == 1
    assert len([l for l in result.outlines if l.startswith("::")]) == 1


# ---- the lines the diagnosis found, in annotations -------------------------

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "ext"


def test_github_annotation_names_the_c_line(pytester):
    """Over the example C extension: the annotation of the calloc leak sits
    at the test's definition and names leaky.c's allocating line."""
    pytest.importorskip("memray", reason="memray (leakcheck[native]) names "
                                         "C lines")
    for name in ("conftest.py", "leaky.c", "fixed.c", "test_ext_example.py"):
        shutil.copy(EXAMPLE / name, pytester.path / name)
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-report=r.json", "-k", "histogram and leaky",
        "test_ext_example.py")
    assert result.ret == 1, result.outlines
    c_line = next(i for i, text in enumerate(
        (EXAMPLE / "leaky.c").read_text().splitlines(), 1)
        if "table = calloc(" in text)
    test_line = next(i for i, text in enumerate(
        (EXAMPLE / "test_ext_example.py").read_text().splitlines(), 1)
        if text.startswith("def test_histogram("))
    result = run_cli(pytester, "gate", "r.json", "--format", "github")
    assert result.ret == 1
    errors = [l for l in result.outlines if l.startswith("::error ")]
    assert len(errors) == 1, errors
    head = (f"::error file=test_ext_example.py,line={test_line},title=leak%3A "
            f"test_ext_example.py%3A%3Atest_histogram[leaky]::native_bytes +")
    assert errors[0].startswith(head), errors
    sites = errors[0].split("%0A")[1:]
    assert sites and sites[0].startswith(
        f"C line leaky.c:{c_line} histogram(): "), sites
    assert "bytes in 1 block per run, called from test_ext_example.py:" \
        in sites[0]
