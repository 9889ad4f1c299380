"""Every test that ran is in the report, and no input crashes a session or
the gate: huge integers, probes that cannot be read here, corrupt
baselines, deep JSON, a FIFO, empty paths, ids an ASCII terminal cannot
print.  Each is a usage error (pytest) or exit 2 (the gate) in one line
naming where it came from."""

import json
import os
import stat
import sys

import pytest

import leakcheck
from leakcheck import gate
from pytest_leakcheck import settings

HUGE = "3000000000"


def gate_cli(pytester, *args):
    return pytester.run(sys.executable, "-m", "leakcheck", "gate", *args,
                        timeout=60)


def errors(result):
    """The non-empty lines on stderr (pytest ends a usage error with an
    empty one)."""
    return [line for line in result.errlines if line.strip()]


def cli_error(option, problem):
    return "ERROR: " + settings.MSG_BAD_VALUE.format(
        where=settings.WHERE_CLI.format(option=option), problem=problem)


BAD_MARKERS = '''
import pytest

def test_fine():
    pass

@pytest.mark.noleak(repeat="x")
def test_bad_repeat():
    pass

@pytest.mark.noleak(repeat=3000000000)
def test_huge_repeat():
    pass

@pytest.mark.noleak(probes=["bogus"])
def test_bad_probe():
    pass

@pytest.mark.noleak(warmup=10**20)
def test_huge_warmup():
    pass

@pytest.mark.noleak(tolerance=10**20)
def test_huge_tolerance():
    pass

@pytest.mark.noleak(tolerance={"blocks": 10**30})
def test_huge_tolerance_of_a_probe():
    pass
'''


def test_a_bad_marker_argument_is_in_the_report(pytester, read_report):
    pytester.makepyfile(test_markers=BAD_MARKERS)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result.assert_outcomes(passed=1, errors=6)
    assert "INTERNALERROR" not in result.stdout.str()
    report, recs = read_report()
    assert recs["test_markers.py::test_fine"]["verdict"] == "clean"
    where = settings.WHERE_MARKER.format(
        nodeid="test_markers.py::test_huge_repeat")
    huge = recs["test_markers.py::test_huge_repeat"]
    assert huge["verdict"] == "error" and huge["judged"] is False
    assert huge["reason"] == settings.MSG_BAD_VALUE.format(
        where=where, problem=settings.PROBLEM_INT_MAX.format(
            name="repeat", maximum=settings.MAX_RUNS, value=int(HUGE)))
    for name in ("test_bad_repeat", "test_bad_probe", "test_huge_warmup",
                 "test_huge_tolerance", "test_huge_tolerance_of_a_probe"):
        rec = recs[f"test_markers.py::{name}"]
        assert rec["verdict"] == "error" and rec["judged"] is False
        assert rec["reason"].startswith("leakcheck: @pytest.mark.noleak on ")
    # The gate does not pass a run whose tests it could not judge.
    result = gate_cli(pytester, "r.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "leakcheck gate: failing: not every test was judged *",
        f"  NOT JUDGED test_markers.py::test_huge_repeat: {huge['reason']}"])
    assert gate_cli(pytester, "r.json", "--allow-partial").ret == 0


@pytest.mark.parametrize("args, option, problem", [
    (["--leaks-repeat", HUGE], "--leaks-repeat",
     settings.PROBLEM_INT_MAX.format(name="repeat", maximum=settings.MAX_RUNS,
                                     value=HUGE)),
    (["--leaks-warmup", str(10**20)], "--leaks-warmup",
     settings.PROBLEM_INT_MAX.format(name="warmup", maximum=settings.MAX_RUNS,
                                     value=str(10**20))),
    (["--leaks-report="], "--leaks-report", settings.PROBLEM_EMPTY_PATH),
    (["--leaks-baseline", ""], "--leaks-baseline",
     settings.PROBLEM_EMPTY_PATH),
])
def test_bad_command_line_values(pytester, clean_source, args, option,
                                  problem):
    pytester.makepyfile(clean_source)
    result = pytester.runpytest_subprocess("--leaks", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert errors(result) == [cli_error(option, problem)]


def _unreadable():
    return [p for p in leakcheck.probes() if not p.available]


@pytest.mark.parametrize("where", ["cli", "ini"])
def test_a_probe_that_cannot_be_read_here_is_a_usage_error(
        pytester, clean_source, where):
    missing = _unreadable()
    if not missing:
        pytest.skip("every probe can be read here")
    probe = missing[0]      # valgrind outside valgrind, refs on a release build
    problem = settings.PROBLEM_UNAVAILABLE.format(value=probe.name,
                                                  reason=probe.reason)
    pytester.makepyfile(clean_source)
    if where == "cli":
        result = pytester.runpytest_subprocess(
            "--leaks", f"--leaks-probes=blocks,{probe.name}")
        expected = cli_error("--leaks-probes", problem)
    else:
        ini = pytester.makeini(f"[pytest]\nleaks_probes = {probe.name}\n")
        result = pytester.runpytest_subprocess("--leaks")
        expected = "ERROR: " + settings.MSG_BAD_VALUE.format(
            where=settings.WHERE_INI.format(key="leaks_probes", inifile=ini),
            problem=problem)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert errors(result) == [expected]
    # 'all' is every probe that can be read.
    result = pytester.runpytest_subprocess("--leaks", "--leaks-probes=all")
    result.assert_outcomes(passed=1)


def _deep(n=100000):
    return "[" * n + "]" * n


# Each corrupt baseline: written as is, refused by the plugin and the gate.
CORRUPT_BASELINES = {
    "deep": _deep(),
    "entry without id": json.dumps({"schema": gate.REPORT_SCHEMA, "tests": [
        {"verdict": "leak", "leaking": ["blocks"]}]}),
    "leaking a number": json.dumps({"schema": gate.REPORT_SCHEMA, "tests": [
        {"id": "t.py::t", "verdict": "leak", "leaking": 5}]}),
    "list as id": json.dumps({"schema": gate.REPORT_SCHEMA, "tests": [
        {"id": ["t.py::t"], "verdict": "leak", "leaking": ["blocks"]}]}),
    "list of lists": json.dumps([["t.py::t", ["blocks"]]]),
    "leaking a string (report)": json.dumps({
        "schema": gate.REPORT_SCHEMA, "tests": [
            {"id": "t.py::t", "verdict": "leak", "leaking": "fds"}]}),
    "leaking a string (baseline)": json.dumps({
        "schema": gate.BASELINE_SCHEMA, "leaks": {"t.py::t": "fds"}}),
    "leaks a list": json.dumps({"schema": gate.BASELINE_SCHEMA,
                                "leaks": [["t.py::t", ["fds"]]]}),
    "not JSON": '{"schema": "leakcheck-baseline/1", "leaks": {',
    "not UTF-8": b'{"schema": "\xff"}',
}


def _write_baseline(path, shape):
    """Writes the corrupt baseline `shape` to `path`; returns `path`."""
    content = CORRUPT_BASELINES[shape]
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


@pytest.mark.parametrize("shape", CORRUPT_BASELINES)
def test_one_baseline_reader_refuses_every_corrupt_shape(
        pytester, clean_source, shape):
    path = _write_baseline(pytester.path / "known.json", shape)
    with pytest.raises(gate.UnusableInput) as excinfo:
        gate.load_baseline(str(path))
    reason = str(excinfo.value)

    pytester.makepyfile(clean_source)
    result = pytester.runpytest_subprocess("--leaks",
                                           "--leaks-baseline=known.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert errors(result) == [cli_error(
        "--leaks-baseline", settings.PROBLEM_BASELINE.format(
            value=path, reason=reason))]

    pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result = gate_cli(pytester, "r.json", "--baseline", "known.json")
    assert result.ret == gate.EXIT_UNUSABLE
    assert result.errlines == [
        f"leakcheck gate: error: {reason.replace(str(path), 'known.json')}"]


def test_deep_json_report_is_unusable(pytester):
    (pytester.path / "r.json").write_text(_deep())
    result = gate_cli(pytester, "r.json")
    assert result.ret == 2
    assert result.errlines == ["leakcheck gate: error: report r.json is not "
                               "a leakcheck file: its JSON nests too deeply "
                               "to read"]


def test_a_fifo_is_refused_without_waiting(pytester):
    os.mkfifo(pytester.path / "r.json")
    result = gate_cli(pytester, "r.json")
    assert result.ret == 2
    assert result.errlines == ["leakcheck gate: error: report r.json is not "
                               "a regular file"]
    (pytester.path / "ok.json").write_text(json.dumps(
        {"schema": gate.REPORT_SCHEMA, "tests": []}))
    result = gate_cli(pytester, "ok.json", "--baseline", "r.json")
    assert result.ret == 2


@pytest.mark.parametrize("args", [
    ("",), ("r.json", "--write-baseline", ""), ("r.json", "--baseline", " ")])
def test_empty_paths_fail_loudly(pytester, args):
    (pytester.path / "r.json").write_text(json.dumps(
        {"schema": gate.REPORT_SCHEMA, "tests": []}))
    result = gate_cli(pytester, *args)
    assert result.ret == 2
    result.stderr.fnmatch_lines(["*: error: argument *: an empty path *"])


UNICODE = '''
_KEPT = []

def test_café():
    _KEPT.append([])
'''


@pytest.mark.parametrize("encoding", ["ascii", "utf-8"])
def test_ids_any_terminal_can_take(pytester, monkeypatch, encoding):
    """A non-ASCII id on an ASCII stdout, a lone surrogate on any: the
    gate prints them escaped and its exit status stays the verdict's."""
    pytester.makepyfile(test_uni=UNICODE)
    pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    report = gate.load_report(str(pytester.path / "r.json"))
    lone = dict(report["tests"][0], id="test_uni.py::test_\udcff")
    report["tests"].append(lone)
    leakcheck.write_report(str(pytester.path / "r2.json"), report)
    monkeypatch.setenv("PYTHONIOENCODING", encoding)
    for fmt in ("text", "github"):
        result = gate_cli(pytester, "r2.json", "--format", fmt)
        assert result.ret == 1, result.errlines
        assert result.errlines == []
        out = result.stdout.str()
        assert ("test_caf\\xe9" if encoding == "ascii" else "test_café") in out
        assert "test_\\udcff" in out
    result = gate_cli(pytester, "r2.json", "--write-baseline", "known.json")
    assert result.ret == 0
    result = gate_cli(pytester, "r2.json", "--baseline", "known.json")
    assert result.ret == 0


def test_huge_ini_count(pytester, clean_source):
    pytester.makepyfile(clean_source)
    ini = pytester.makeini(f"[pytest]\nleaks = true\nleaks_repeat = {HUGE}\n")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert errors(result) == ["ERROR: " + settings.MSG_BAD_VALUE.format(
        where=settings.WHERE_INI.format(key="leaks_repeat", inifile=ini),
        problem=settings.PROBLEM_INT_MAX.format(
            name="repeat", maximum=settings.MAX_RUNS,
            # an integer from pytest 9 on (the int type), a string before
            value=int(HUGE) if settings.installed_pytest() >= (9, 0)
            else HUGE))]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_baseline_on_a_device_is_written_there_not_replaced(pytester):
    """--write-baseline /dev/full: exit 2 naming it, and /dev/full stays a
    device (as root, a rename over it made it a file)."""
    pytester.makepyfile(test_uni=UNICODE)
    pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json")
    result = gate_cli(pytester, "r.json", "--write-baseline", "/dev/full")
    assert result.ret == 2
    assert errors(result) == ["leakcheck gate: error: cannot write baseline "
                              "/dev/full: No space left on device"]
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


GOOD_TEST = {"id": "t.py::test_a", "verdict": "leak", "leaking": ["blocks"],
             "runs": 3, "deltas": {"blocks": [1, 1, 1]},
             "thresholds": {"blocks": 1}, "diagnosis": None, "file": "t.py",
             "line": 3}


def test_the_commands_take_odd_shapes_with_exit_2_and_one_line(pytester):
    """What each command made of these before: gate --format github an
    AttributeError, html an UndefinedError from its template; a lone
    surrogate in an id made html's page unwritable."""
    leakcheck.write_report(str(pytester.path / "odd.json"), {
        "schema": gate.REPORT_SCHEMA, "environment": "text",
        "tests": [dict(GOOD_TEST, diagnosis="text")]})
    for args in (("gate", "odd.json", "--format", "github"),
                 ("html", "odd.json", "-o", "page.html")):
        result = pytester.run(sys.executable, "-m", "leakcheck", *args,
                              timeout=60)
        assert result.ret == 2
        assert len(errors(result)) == 1 and "Traceback" not in \
            result.stderr.str(), result.stderr.str()
    leakcheck.write_report(str(pytester.path / "lone.json"), {
        "schema": gate.REPORT_SCHEMA,
        "tests": [dict(GOOD_TEST, id="t.py::test_\udcff")]})
    result = pytester.run(sys.executable, "-m", "leakcheck", "html",
                          "lone.json", "-o", "page.html", timeout=60)
    assert result.ret == 0, result.stderr.str()
    assert "test_\\udcff" in (pytester.path / "page.html").read_text()


@pytest.mark.parametrize("shape", CORRUPT_BASELINES)
def test_html_takes_the_gates_baseline_and_refuses_what_it_refuses(
        pytester, shape):
    path = _write_baseline(pytester.path / "known.json", shape)
    with pytest.raises(gate.UnusableInput) as excinfo:
        gate.load_baseline("known.json")
    leakcheck.write_report(str(pytester.path / "r.json"), {
        "schema": gate.REPORT_SCHEMA, "tests": [GOOD_TEST]})
    result = pytester.run(sys.executable, "-m", "leakcheck", "html",
                          "r.json", "--baseline", "known.json",
                          "-o", "page.html", timeout=60)
    assert result.ret == 2
    assert result.errlines == [f"leakcheck html: error: {excinfo.value}"]
    assert not (pytester.path / "page.html").exists()


@pytest.mark.parametrize("run_id", [3, "", " ", ["night"], {"id": 1}, True])
def test_a_run_id_that_is_not_a_string_is_unusable(pytester, run_id):
    leakcheck.write_report(str(pytester.path / "r.json"), {
        "schema": gate.REPORT_SCHEMA, "environment": {"run_id": run_id},
        "tests": [GOOD_TEST]})
    for command, args in (("gate", ()), ("html", ("-o", "page.html"))):
        result = pytester.run(sys.executable, "-m", "leakcheck", command,
                              "r.json", *args, timeout=60)
        assert result.ret == 2
        assert result.errlines == [
            f'leakcheck {command}: error: report r.json: "environment": '
            f'"run_id" is not a non-empty string']


@pytest.mark.parametrize("diagnosis", [
    {"native": ["text"], "allocations": [3]},
    {"native": [{"file": 3, "line": "x"}], "allocations": [{"file": None}]},
    {"native": [{"file": "a.c", "line": 10 ** 400, "bytes": "many",
                 "blocks": None, "caller": "text", "via": 5}],
     "allocations": [{"file": "t.py", "line": -1, "size": 1.5,
                      "count": 2}], "runs": 0},
    {"native": "text", "heap_lines": [{"file": "t.py", "bytes": [1]}]},
])
def test_annotations_take_odd_diagnosis_lines(pytester, diagnosis):
    """A diagnosis' lines of odd shapes: the annotation names what it can,
    nothing crashes."""
    leakcheck.write_report(str(pytester.path / "r.json"), {
        "schema": gate.REPORT_SCHEMA, "tests": [
            dict(GOOD_TEST, verdict="leak", leaking=["blocks"],
                 diagnosis=diagnosis)]})
    result = gate_cli(pytester, "r.json", "--format", "github")
    assert result.ret == 1, result.stderr.str()
    assert result.errlines == []
    assert len([l for l in result.outlines if l.startswith("::error")]) == 1


@pytest.mark.parametrize("sites", ["text", [1], [None], {"a": "b"}])
def test_show_refuses_dump_sites_of_the_wrong_shape(pytester, sites):
    path = pytester.path / "d.leaks.jsonl"
    path.write_text(json.dumps({"schema": "leakcheck-dump/1", "objects": 0,
                                "sites": sites}) + "\n")
    result = pytester.run(sys.executable, "-m", "leakcheck", "show",
                          str(path), timeout=60)
    assert result.ret == 2
    assert result.errlines == [f'leakcheck show: error: dump {path}: line 1 has '
                               f'"sites" that are not a list of strings']
