"""pytest-leaks defines --leaks too: with both plugins installed, pytest
stops with one line saying so and what to do, whichever loads first."""

import pytest

from plugin_helpers import install_plugin, run_with
from pytest_leakcheck import plugin

# pytest-leaks' option, as it registers it, under its entry point's name.
RIVAL = '''
def pytest_addoption(parser):
    group = parser.getgroup("leaks")
    group.addoption("-R", "--leaks", action="store", dest="leaks",
                    help="runs each test several times")
'''

@pytest.fixture
def rival(pytester):
    """A package that installs like pytest-leaks: a pytest_leaks module and
    its distribution's pytest11 entry point, in a folder of its own."""
    folder = pytester.mkdir("rival")
    install_plugin(folder, "pytest_leaks", RIVAL, "pytest-leaks", "0.3.1",
                   "leaks")
    pytester.makepyfile("def test_one():\n    pass\n")
    return folder


def run(pytester, folder, first, *args):
    """pytest with the rival's folder on sys.path before site-packages
    (its entry point then loads before leakcheck's) or after it."""
    return run_with(pytester, folder, "-p", "no:cacheprovider", *args,
                    first=first)


@pytest.mark.parametrize("first", [True, False],
                         ids=["rival-first", "leakcheck-first"])
def test_both_installed_is_one_line(pytester, rival, first):
    result = run(pytester, rival, first)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == f"ERROR: {plugin.MSG_RIVAL}"
    assert "Traceback" not in result.stderr.str()
    assert "ArgumentError" not in result.stderr.str()


@pytest.mark.parametrize("first", [True, False],
                         ids=["rival-first", "leakcheck-first"])
@pytest.mark.parametrize("disable", ["no:leaks", "no:leakcheck"])
def test_either_can_be_disabled(pytester, rival, first, disable):
    result = run(pytester, rival, first, "-p", disable)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*1 passed*"])
