"""The diagnosis under the plugin names the test's lines, not pytest's:
pytest sets PYTEST_CURRENT_TEST through os.environ every phase, which
allocates in the standard library (os.py, or <frozen os>); a test that
sets environment variables itself allocates in the same lines."""

import os

ENVIRON = '''
import itertools
import os

_n = itertools.count()

def set_var():
    os.environ["LC_PLUGIN_%d" % next(_n)] = "v" * 64      # HELPER_LINE

def test_env_in_body():
    os.environ["LC_BODY_%d" % next(_n)] = "v" * 64        # BODY_LINE

def test_env_in_helper():
    set_var()
'''


def _line(path, marker):
    lines = path.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def _owner(entry, test_file):
    """The innermost frame of an allocation entry outside the standard
    library: the test file's, or another file's (pytest's)."""
    for frame in entry["traceback"]:
        name = frame["file"]
        if name.startswith("<frozen ") or os.path.basename(name) == "os.py":
            continue
        return (frame["file"], frame["line"])
    return None


def test_environment_variables_the_test_sets_are_its_pytest_s_are_not(
        pytester, read_report):
    path = pytester.makepyfile(test_environ=ENVIRON)
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-probes=blocks,py_allocs", "--leaks-report=r.json",
        "-p", "no:cacheprovider")
    assert result.ret == 1
    _, recs = read_report()
    test_file = str(path)
    for name, marker in (("test_env_in_body", "# BODY_LINE"),
                         ("test_env_in_helper", "# HELPER_LINE")):
        line = _line(path, marker)
        rec = recs[f"test_environ.py::{name}"]
        assert rec["verdict"] == "leak", rec
        allocations = rec["diagnosis"]["allocations"]
        owners = {_owner(entry, test_file) for entry in allocations}
        # The test's line is there, called from by os.environ's ...
        assert (test_file, line) in owners, allocations
        # ... and nothing that pytest had os.environ allocate.
        assert all(owner is not None and owner[0] == test_file
                   for owner in owners), allocations
        assert f"called from {test_file}:{line}" in result.stdout.str()
