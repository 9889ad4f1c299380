"""The hooks the leakcheck plugin calls, for conftest.py files and plugins.

Loaded by pytest_addhooks in plugin.py, as pytest-xdist loads its own.  A
conftest.py that must also load with the plugin disabled (-p no:leakcheck)
marks its implementation @pytest.hookimpl(optionalhook=True).
"""

import pytest


@pytest.hookspec
def pytest_leakcheck_settle(item):
    """Called after every run of a checked test that the plugin repeats,
    before the snapshot that may follow (and after each run its diagnosis
    makes), and before the test's first run when that run is read too (one
    warm-up run, the default), with ``item`` the test.

    Clear here what your own code fills on first use and keeps for good, per
    run, without being a leak: a cache keyed by a value each run makes anew
    (a tmp_path, a new object), a registry of callbacks, a memo that grows
    with the inputs.  leakcheck already clears the interpreter's and the
    standard library's caches (see leakcheck's settle) and lets warm-up
    runs fill what is filled once.  Every implementation runs; what they
    return is ignored.  Keep it cheap and allocation-neutral: whatever it
    leaves allocated counts in the measured runs.
    """
