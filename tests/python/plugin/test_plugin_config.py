"""The ini keys in every place pytest reads them: pytest 9's native TOML
table [tool.pytest], [tool.pytest.ini_options], pytest.ini and -o; bad
values name where they came from; hunting turned off for one run."""

import leakcheck
import pytest

from pytest_leakcheck import settings

NATIVE_TOML = settings.installed_pytest() >= (9, 0)
needs_native_toml = pytest.mark.skipif(
    not NATIVE_TOML, reason="[tool.pytest] needs pytest 9")

# The same settings written four ways: hunt in every test, 2 warm-up runs,
# 2 measured runs, the probes fds and objects.
CONFIGS = {
    "tool.pytest": ("pyproject.toml", """
[tool.pytest]
leaks = true
leaks_repeat = 2
leaks_warmup = 2
leaks_probes = ["fds", "objects"]
"""),
    "ini_options": ("pyproject.toml", """
[tool.pytest.ini_options]
leaks = true
leaks_repeat = 2
leaks_warmup = "2"
leaks_probes = ["fds", "objects"]
"""),
    "pytest.ini": ("pytest.ini", """
[pytest]
leaks = true
leaks_repeat = 2
leaks_warmup = 2
leaks_probes = fds, objects
"""),
    "-o": (None, ["-o", "leaks=true", "-o", "leaks_repeat=2",
                  "-o", "leaks_warmup=2", "-o", "leaks_probes=fds objects"]),
}


def _configure(pytester, how):
    name, content = CONFIGS[how]
    if name is None:
        return list(content)
    pytester.makefile(name[name.index("."):], **{
        name[:name.index(".")]: content})
    return []


@pytest.mark.parametrize("how", [
    pytest.param("tool.pytest", marks=needs_native_toml),
    "ini_options", "pytest.ini", "-o"])
def test_every_config_place_sets_every_key(pytester, read_report,
                                           leaky_source, how):
    pytester.makepyfile(test_leaky=leaky_source)
    args = _configure(pytester, how)
    result = pytester.runpytest_subprocess("--leaks-report=r.json", *args)
    result.assert_outcomes(failed=1)
    report, recs = read_report()
    assert report["settings"]["hunt"] == "all"
    assert report["settings"]["warmup"] == 2
    assert report["settings"]["repeat"] == 2
    assert report["settings"]["probes"] == ["fds", "objects"]
    rec = recs["test_leaky.py::test_leaky"]
    assert rec["leaking"] == ["objects"] and rec["runs"] == 2


def _message(where, problem):
    return "ERROR: " + settings.MSG_BAD_VALUE.format(where=where,
                                                     problem=problem)


def _ini(pytester, key, name):
    return settings.WHERE_INI.format(key=key, inifile=pytester.path / name)


BAD = [
    pytest.param("tool.pytest", "pyproject.toml",
                 "[tool.pytest]\nleaks_repeat = 0\n", "leaks_repeat",
                 settings.PROBLEM_INT.format(name="repeat", minimum=1,
                                             value=0),
                 marks=needs_native_toml, id="toml-int"),
    pytest.param("tool.pytest", "pyproject.toml",
                 '[tool.pytest]\nleaks_probes = ["fds", "bogus"]\n',
                 "leaks_probes",
                 settings.PROBLEM_PROBE.format(
                     value="bogus", valid=", ".join(leakcheck.PROBE_NAMES)),
                 marks=needs_native_toml, id="toml-probes"),
    # A value of a type no union takes: pytest's own words, after where.
    pytest.param("tool.pytest", "pyproject.toml",
                 "[tool.pytest]\nleaks_warmup = 1.5\n", "leaks_warmup", "*",
                 marks=needs_native_toml, id="toml-float"),
    pytest.param("ini_options", "pyproject.toml",
                 '[tool.pytest.ini_options]\nleaks_warmup = "two"\n',
                 "leaks_warmup",
                 settings.PROBLEM_INT.format(name="warmup", minimum=0,
                                             value="two")
                 if settings.ini_types()["int"] != "int" else "*",
                 id="ini_options-int"),
    pytest.param("pytest.ini", "pytest.ini", "[pytest]\nleaks = maybe\n",
                 "leaks",
                 settings.PROBLEM_BOOL.format(value="maybe")
                 if settings.installed_pytest() >= (9, 2) else "*",
                 id="ini-bool"),
]


@pytest.mark.parametrize("how, name, content, key, problem", BAD)
def test_bad_values_name_the_file_and_key(pytester, clean_source, how, name,
                                          content, key, problem):
    pytester.makepyfile(clean_source)
    pytester.makefile(name[name.index("."):],
                      **{name[:name.index(".")]: content})
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([_message(_ini(pytester, key, name),
                                          problem)])
    assert "Traceback" not in result.stderr.str()


def test_bad_override_names_the_o_option(pytester, clean_source):
    pytester.makepyfile(clean_source)
    pytester.makeini("[pytest]\nleaks_repeat = 3\n")
    result = pytester.runpytest_subprocess("-o", "leaks_repeat=x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([_message(
        settings.WHERE_OVERRIDE.format(key="leaks_repeat"),
        settings.PROBLEM_INT.format(name="repeat", minimum=1, value="x")
        if settings.ini_types()["int"] != "int" else "*")])


NOLEAK_LEAKY = '''
import pytest

_KEPT = []

@pytest.mark.noleak
def test_marked():
    _KEPT.append([])
'''


@pytest.mark.parametrize("off", [["-o", "leaks=false"], ["--no-leaks"],
                                 ["--leaks", "--no-leaks"]])
def test_hunting_turned_off_for_one_run(pytester, leaky_source, off):
    pytester.makepyfile(test_leaky=leaky_source)
    pytester.makeini("[pytest]\nleaks = true\n")
    pytester.runpytest_subprocess().assert_outcomes(failed=1)
    pytester.runpytest_subprocess(*off).assert_outcomes(passed=1)


def test_no_leaks_skips_marked_tests_too(pytester):
    pytester.makepyfile(NOLEAK_LEAKY)
    pytester.runpytest_subprocess().assert_outcomes(failed=1)
    pytester.runpytest_subprocess("-o", "leaks=false").assert_outcomes(
        failed=1)
    pytester.runpytest_subprocess("--no-leaks").assert_outcomes(passed=1)
