"""The plugin's tests run pytest in a subprocess (pytester's
runpytest_subprocess) on throwaway test files, as a user would.

pytester is loaded from pytest_configure rather than with
``pytest_plugins = ["pytester"]``: pytest refuses pytest_plugins in a
conftest below the rootdir as soon as it is not an initial conftest, which
this one is not under ``pytest tests/python``.
"""

import json
import os
import pathlib

import pytest


def pytest_configure(config):
    if not config.pluginmanager.has_plugin("pytester"):
        config.pluginmanager.import_plugin("pytester")
    config.addinivalue_line(
        "markers", "async_plugins: the test's pytest runs load the async "
        "test plugins (pytest-asyncio, anyio, pytest-trio)")
    config.addinivalue_line(
        "markers", "neighbour_plugins: the test's pytest runs load the "
        "plugins people run beside leakcheck (pytest-randomly, "
        "pytest-rerunfailures, pytest-benchmark, pytest-mock)")


# The async test plugins scripts/setup installs for test_plugin_async.py
# are kept out of every other test's pytest runs: pytest-asyncio warns on
# stderr at start-up, which tests of the plugin's own messages read.
ASYNC_PLUGINS_OFF = "-p no:asyncio -p no:anyio -p no:trio"
# So are those test_plugin_neighbours.py runs beside leakcheck:
# pytest-randomly would reorder and reseed every other test's runs.
NEIGHBOUR_PLUGINS_OFF = ("-p no:randomly -p no:rerunfailures "
                         "-p no:benchmark -p no:pytest_mock")
PLUGINS_OFF = {"async_plugins": ASYNC_PLUGINS_OFF,
               "neighbour_plugins": NEIGHBOUR_PLUGINS_OFF}


@pytest.fixture(autouse=True)
def _plugins_off(request, monkeypatch):
    off = [opts for marker, opts in PLUGINS_OFF.items()
           if request.node.get_closest_marker(marker) is None]
    if off:
        if "pytester" in request.fixturenames:
            # Made first: pytester removes PYTEST_ADDOPTS as it starts.
            request.getfixturevalue("pytester")
        addopts = os.environ.get("PYTEST_ADDOPTS", "")
        monkeypatch.setenv("PYTEST_ADDOPTS", " ".join([addopts, *off]).strip())


LEAKY = '''
_KEPT = []

def test_leaky():
    _KEPT.append([])          # one list more per run: blocks and objects
'''

CLEAN = '''
def test_clean():
    assert sorted([3, 1, 2]) == [1, 2, 3]
'''


@pytest.fixture
def leaky_source():
    """A test file whose test leaks one list per run."""
    return LEAKY


@pytest.fixture
def clean_source():
    """A test file whose test leaks nothing."""
    return CLEAN


@pytest.fixture
def read_report(pytester):
    """read_report(name="r.json") -> (report dict, {test id: record})."""
    def read(name="r.json"):
        with open(pytester.path / name, encoding="utf-8") as f:
            report = json.load(f)
        return report, {t["id"]: t for t in report["tests"]}
    return read


@pytest.fixture
def runs_log(pytester):
    """Tests write a line to runs.log per event; this reads the lines."""
    def read():
        path = pytester.path / "runs.log"
        return path.read_text().split() if path.exists() else []
    return read


def pytest_collection_modifyitems(config, items):
    """These tests run pytest in subprocesses, some on code that leaks on
    purpose; hunting in this process would measure only the spawning."""
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.leaky(
                reason="runs pytest in subprocesses over leaking examples"))
