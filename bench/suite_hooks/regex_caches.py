"""A pytest_leakcheck_settle hook for regex's own suite, as a user of
regex would write it in a conftest.py: regex's caches emptied between
runs (bench/bench_suite.py --settle-hooks loads it with -p)."""

import regex
import regex._main


def pytest_leakcheck_settle(item):
    regex.purge()                           # compiled patterns
    regex._main._named_args.clear()         # what purge() leaves
    regex._main._replacement_cache.clear()
