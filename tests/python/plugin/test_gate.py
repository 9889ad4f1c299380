"""``python -m leakcheck``: its commands, help, version and usage errors,
and the gate over one or several reports, run as CI runs them."""

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
