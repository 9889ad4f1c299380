"""A free-threaded build (3.13t, 3.14t) is refused in one line, and then
nothing is judged.  None can be had here: the build's mark,
sysconfig's Py_GIL_DISABLED, is set by a conftest that patches
sysconfig.get_config_var, and everything after that check is real."""

import sysconfig

import pytest

import leakcheck
from leakcheck._probes import FREE_THREADED

FAKE_FREE_THREADED = '''
import sysconfig

_real = sysconfig.get_config_var


def _free_threaded(name):
    return 1 if name == "Py_GIL_DISABLED" else _real(name)


sysconfig.get_config_var = _free_threaded
'''

LEAKY_MARKED = '''
import pytest

_KEPT = []


@pytest.mark.noleak
def test_leaky():
    _KEPT.append([])


def test_fixture(leakcheck):
    pass
'''


def test_a_default_build_is_supported():
    assert not sysconfig.get_config_var("Py_GIL_DISABLED")
    assert leakcheck.unsupported() is None


def test_a_free_threaded_build_is_refused_in_one_line(monkeypatch):
    real = sysconfig.get_config_var
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: (
        1 if name == "Py_GIL_DISABLED" else real(name)))
    assert leakcheck.unsupported() == FREE_THREADED
    assert "\n" not in FREE_THREADED


@pytest.mark.parametrize("args", [(), ("--leaks", "--leaks-report=r.json")])
def test_the_plugin_judges_nothing_and_says_so_once(pytester, args):
    pytester.makeconftest(FAKE_FREE_THREADED)
    pytester.makepyfile(test_leaky=LEAKY_MARKED)
    result = pytester.runpytest_subprocess("-rs", *args)
    result.assert_outcomes(passed=1, skipped=1)
    assert result.stdout.lines.count(FREE_THREADED) == 1
    result.stdout.fnmatch_lines(["*SKIPPED*" + FREE_THREADED[:40] + "*"])
    assert not (pytester.path / "r.json").exists()


def test_without_the_mark_the_same_file_is_judged(pytester):
    pytester.makepyfile(test_leaky=LEAKY_MARKED)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, failed=1)
    assert FREE_THREADED not in result.stdout.str()
