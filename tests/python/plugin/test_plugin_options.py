"""Registration, every command-line option and its ini key, and their bad
values (rejected with a message naming where the value came from)."""

import json
import re

import leakcheck
import pytest

from pytest_leakcheck import hunt, plugin, settings, terminal

FD_LEAK = '''
import os

def test_fd_leak():
    os.open(os.devnull, os.O_RDONLY)     # one descriptor more per run
'''


def test_loaded_without_p_with_help_shared_by_options_and_ini(pytester):
    result = pytester.runpytest_subprocess("--help")
    def squeeze(text):      # undo argparse's wrapping, which may split at "-"
        return "".join(text.split())

    text = squeeze(result.stdout.str())
    for option, key, help_text, metavar, _ in settings.OPTIONS:
        flag = option if metavar is None else f"{option}={metavar}"
        assert squeeze(f"{flag} {help_text}") in text
        # "(int | string)", "(args)", ...: each key with its type.
        assert re.search(re.escape(key) + r"\([a-z| ]+\):"
                         + re.escape(squeeze(help_text)), text), key
    assert squeeze(f"{settings.NO_LEAKS} {settings.HELP_NO_LEAKS}") in text


def test_marker_registered_with_its_signature(pytester):
    result = pytester.runpytest_subprocess("--markers")
    result.stdout.fnmatch_lines([f"@pytest.mark.{settings.MARKER_LINE[:70]}*"])


def test_header_names_the_settings_only_when_hunting(pytester,
                                                     clean_source):
    pytester.makepyfile(clean_source)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-repeat=3")
    probes = ", ".join(p for p in leakcheck.DEFAULT_PROBES)
    result.stdout.fnmatch_lines([plugin.MSG_HEADER.format(
        scope="every test (--leaks)", warmup=settings.DEFAULT_WARMUP,
        repeat=3, probes=probes)])
    quiet = pytester.runpytest_subprocess()
    assert "leakcheck:" not in quiet.stdout.str()


@pytest.mark.parametrize("where", ["cli", "ini", "none"])
def test_leaks_hunts_in_every_test(pytester, where, leaky_source,
                                   clean_source):
    pytester.makepyfile(test_leaky=leaky_source, test_clean=clean_source)
    args = []
    if where == "cli":
        args = ["--leaks"]
    elif where == "ini":
        pytester.makeini("[pytest]\nleaks = true\n")
    result = pytester.runpytest_subprocess(*args)
    if where == "none":
        result.assert_outcomes(passed=2)
        assert "LEAKED" not in result.stdout.str()
        return
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["LEAKED test_leaky.py::test_leaky - "
                                 + terminal.MSG_LEAK.format(
                                     probe="objects", growth="+1",
                                     also="*")])


def test_repeat_option_ini_and_precedence(pytester, read_report,
                                          leaky_source):
    pytester.makepyfile(test_leaky=leaky_source)
    pytester.makeini("[pytest]\nleaks = true\nleaks_repeat = 2\n")
    pytester.runpytest_subprocess("--leaks-report=ini.json")
    pytester.runpytest_subprocess("--leaks-report=cli.json",
                                  "--leaks-repeat=3")
    # The runs of a leak every run: `repeat`, or up to the window's twice
    # that while another probe that grew stays alive (3.9's native_bytes).
    for report, repeat in (("ini.json", 2), ("cli.json", 3)):
        rec = read_report(report)[1]["test_leaky.py::test_leaky"]
        assert rec["repeat"] == repeat, rec
        assert repeat <= rec["runs"] <= 2 * repeat, rec


WARMUP = '''
def test_counted():
    with open("runs.log", "a") as f:
        f.write("run\\n")

def test_after():
    pass
'''


@pytest.mark.parametrize("where", ["cli", "ini"])
def test_warmup_counts_the_reported_run(pytester, read_report, runs_log,
                                        where):
    pytester.makepyfile(WARMUP)
    args = ["--leaks", "--leaks-report=r.json"]
    if where == "cli":
        args.append("--leaks-warmup=3")
    else:
        pytester.makeini("[pytest]\nleaks_warmup = 3\n")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=2)
    rec = read_report()[1]["test_warmup_counts_the_reported_run.py::"
                           "test_counted"]
    assert rec["warmup"] == 3 and rec["verdict"] == "clean"
    # The reported run is the first warm-up run; then the measured runs,
    # the last warm-up run being the one when it grew nothing.
    assert len(runs_log()) == 3 + rec["runs"] - rec["warmup_measured"]


@pytest.mark.parametrize("where", ["cli", "ini"])
def test_probes_option_and_ini(pytester, read_report, where):
    pytester.makepyfile(FD_LEAK)
    if where == "cli":
        blind = ["--leaks-probes=blocks,objects"]
        seeing = ["--leaks-probes=fds"]
    else:
        pytester.makeini("[pytest]\nleaks_probes = blocks, objects\n")
        blind = []
        seeing = ["--leaks-probes", "fds,blocks"]
    pytester.runpytest_subprocess("--leaks", "--leaks-report=blind.json",
                                  *blind).assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess("--leaks",
                                           "--leaks-report=see.json", *seeing)
    result.assert_outcomes(failed=1)
    test_id = "test_probes_option_and_ini.py::test_fd_leak"
    assert read_report("blind.json")[1][test_id]["verdict"] == "clean"
    assert read_report("blind.json")[1][test_id]["probes"] == [
        "blocks", "objects"]
    assert read_report("see.json")[1][test_id]["leaking"] == ["fds"]


def test_report_ini_path_is_relative_to_the_ini_file(pytester, monkeypatch,
                                                     clean_source):
    pytester.makepyfile(clean_source)
    pytester.makeini("[pytest]\nleaks = true\nleaks_report = out/r.json\n")
    sub = pytester.mkdir("sub")
    monkeypatch.chdir(sub)
    result = pytester.runpytest_subprocess(str(pytester.path))
    result.assert_outcomes(passed=1)
    assert (pytester.path / "out" / "r.json").is_file()
    assert not (sub / "out").exists()
    result.stdout.fnmatch_lines([terminal.MSG_REPORT_WRITTEN.format(
        path=pytester.path / "out" / "r.json", partial="")])


@pytest.mark.parametrize("where", ["cli", "ini"])
def test_baseline_known_leaks_do_not_fail(pytester, read_report, where,
                                          leaky_source, clean_source):
    pytester.makepyfile(test_leaky=leaky_source, test_clean=clean_source)
    baseline = {"schema": "leakcheck-baseline/1",
                "leaks": {"test_leaky.py::test_leaky": [
                    "refs", "blocks", "objects", "py_allocs", "py_bytes"]}}
    pytester.makefile(".json", known=json.dumps(baseline))
    if where == "cli":
        args = ["--leaks-baseline=known.json"]
    else:
        pytester.makeini("[pytest]\nleaks_baseline = known.json\n")
        args = []
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           "-rA", *args)
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "*" + hunt.SECTION_KNOWN + "*",
        "KNOWN LEAK test_leaky.py::test_leaky - *",
    ])
    rec = read_report()[1]["test_leaky.py::test_leaky"]
    assert rec["verdict"] == "leak" and rec["known"] is True


def _cli(option, problem):
    return settings.MSG_BAD_VALUE.format(
        where=settings.WHERE_CLI.format(option=option), problem=problem)


BAD_CLI = [
    (["--leaks-repeat=0"], _cli("--leaks-repeat", settings.PROBLEM_INT.format(
        name="repeat", minimum=1, value="0"))),
    (["--leaks-repeat", "x"], _cli("--leaks-repeat",
                                   settings.PROBLEM_INT.format(
                                       name="repeat", minimum=1, value="x"))),
    (["--leaks-warmup=-1"], _cli("--leaks-warmup", settings.PROBLEM_INT.format(
        name="warmup", minimum=0, value="-1"))),
    (["--leaks-probes=blocks,bogus"], _cli(
        "--leaks-probes", settings.PROBLEM_PROBE.format(
            value="bogus", valid=", ".join(leakcheck.PROBE_NAMES)))),
]


@pytest.mark.parametrize("args, message", BAD_CLI)
def test_bad_command_line_values_name_the_option(pytester, args, message,
                                                 clean_source):
    pytester.makepyfile(clean_source)
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


@pytest.mark.parametrize("key, value, problem", [
    # An integer from pytest 9 on (the int type), a string before.
    ("leaks_repeat", "-2", settings.PROBLEM_INT.format(
        name="repeat", minimum=1,
        value=-2 if settings.installed_pytest() >= (9, 0) else "-2")),
    # pytest 9.0 and 9.1 reject it themselves (named where, all the same).
    ("leaks_warmup", "two", settings.PROBLEM_INT.format(
        name="warmup", minimum=0, value="two")
        if settings.ini_types()["int"] != "int" else "*"),
    ("leaks_probes", "nope", settings.PROBLEM_PROBE.format(
        value="nope", valid=", ".join(leakcheck.PROBE_NAMES))),
])
def test_bad_ini_values_name_the_ini_file(pytester, key, value, problem,
                                          clean_source):
    pytester.makepyfile(clean_source)
    ini = pytester.makefile(".ini", pytest=f"[pytest]\n{key} = {value}\n")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    where = settings.WHERE_INI.format(key=key, inifile=ini)
    result.stderr.fnmatch_lines([
        "ERROR: " + settings.MSG_BAD_VALUE.format(where=where,
                                                  problem=problem)])


def test_unwritable_report_is_a_usage_error(pytester, clean_source):
    """Found before any test runs, not after an hour of them."""
    pytester.makepyfile(clean_source)
    pytester.makefile(".txt", notadir="a file, not a folder")
    result = pytester.runpytest_subprocess("--leaks-report=notadir.txt/r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: " + _cli("--leaks-report", settings.PROBLEM_REPORT.format(
            value="*notadir.txt/r.json", reason="*"))])


def test_unusable_baseline_is_a_usage_error(pytester, clean_source):
    pytester.makepyfile(clean_source)
    pytester.makefile(".json", wrong='{"schema": "something/9"}')
    result = pytester.runpytest_subprocess("--leaks-baseline=wrong.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: " + _cli("--leaks-baseline", settings.PROBLEM_BASELINE.format(
            value=pytester.path / "wrong.json", reason="*"))])


OVERRIDDEN = [
    # (command line, ini key, its bad value, the problem)
    ("--leaks", "leaks", "maybe", settings.PROBLEM_BOOL.format(
        value="maybe")),
    ("--leaks-repeat=3", "leaks_repeat", "x", settings.PROBLEM_INT.format(
        name="repeat", minimum=1, value="x")),
    ("--leaks-warmup=1", "leaks_warmup", "-1", settings.PROBLEM_INT.format(
        name="warmup", minimum=0,
        value=-1 if settings.installed_pytest() >= (9, 0) else "-1")),
    ("--leaks-probes=blocks", "leaks_probes", "bogus",
     settings.PROBLEM_PROBE.format(value="bogus",
                                   valid=", ".join(leakcheck.PROBE_NAMES))),
    ("--leaks-thorough", "leaks_thorough", "perhaps",
     settings.PROBLEM_BOOL.format(value="perhaps")),
    ("--leaks-diagnose=off", "leaks_diagnose", "fast",
     settings.PROBLEM_DIAGNOSE.format(valid=", ".join(
         settings.DIAGNOSE_MODES), value="fast")),
]


@pytest.mark.parametrize("how", ["-o", "ini file"])
@pytest.mark.parametrize("option, key, value, problem", OVERRIDDEN)
def test_bad_ini_value_is_refused_when_the_command_line_overrides_it(
        pytester, clean_source, how, option, key, value, problem):
    """`--leaks -o leaks=maybe` once ran silently: the ini value was not
    read at all when the command line set the option."""
    pytester.makepyfile(clean_source)
    if how == "-o":
        result = pytester.runpytest_subprocess(option, "-o", f"{key}={value}")
        where = settings.WHERE_OVERRIDE.format(key=key)
    else:
        ini = pytester.makefile(".ini",
                                pytest=f"[pytest]\n{key} = {value}\n")
        result = pytester.runpytest_subprocess(option)
        where = settings.WHERE_INI.format(key=key, inifile=ini)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: " + settings.MSG_BAD_VALUE.format(where=where,
                                                  problem=problem)])
