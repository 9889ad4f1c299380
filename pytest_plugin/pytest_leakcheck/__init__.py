"""pytest-leakcheck: leaks as test failures.

The plugin lives in pytest_leakcheck.plugin, which pytest loads through the
``pytest11`` entry point ``leakcheck`` when the ``leakcheck`` distribution
is installed: ``@pytest.mark.noleak``, ``--leaks`` and friends, the
``leakcheck`` fixture, and the JSON report that ``python -m leakcheck gate``
judges.
"""
