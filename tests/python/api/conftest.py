"""Fixtures of the leakcheck package's tests.

``leaky`` is tests/python/leakylib/leakylib.c, an extension that leaks on
purpose (a leak_* function and a clean_* twin per probe).  It is compiled
once per source and interpreter into a cache directory under the system
temporary directory, straight with the C compiler CPython was built with,
and imported from there.  pytest-xdist workers may build at once: each
compiles to a private name and renames it into place.
"""

import gc
import hashlib
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile

import pytest

import leakcheck

HERE = os.path.dirname(os.path.abspath(__file__))
LEAKYLIB = os.path.join(os.path.dirname(HERE), "leakylib", "leakylib.c")

RELEASE_BUILD = not hasattr(sys, "gettotalrefcount")


def build_leakylib(debug_info=True):
    """The path of the compiled leakylib for this interpreter (built with
    -g unless `debug_info` is false)."""
    flags = ["-g"] if debug_info else []
    with open(LEAKYLIB, "rb") as f:
        # The source's path too: the debug information names it, and the
        # tests of C lines compare it with this checkout's.
        digest = hashlib.sha256(f.read() + LEAKYLIB.encode()
                                + sys.version.encode()
                                + sys.executable.encode()
                                + repr(flags).encode()).hexdigest()
    tag = sysconfig.get_config_var("SOABI") or sys.implementation.cache_tag
    out_dir = os.path.join(tempfile.gettempdir(),
                           f"leakcheck-tests-{os.getuid()}", tag, digest[:16])
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir,
                       "leakylib" + sysconfig.get_config_var("EXT_SUFFIX"))
    if os.path.exists(out):
        return out
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    paths = sysconfig.get_paths()
    tmp = f"{out}.{os.getpid()}.tmp"
    cmd = [*cc, "-shared", "-fPIC", "-O1", *flags, "-Wall", "-pthread",
           f"-I{paths['include']}", f"-I{paths['platinclude']}",
           LEAKYLIB, "-o", tmp]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        pytest.fail(f"cannot build leakylib:\n$ {shlex.join(cmd)}\n"
                    f"{proc.stdout}", pytrace=False)
    os.replace(tmp, out)
    return out


@pytest.fixture(scope="session")
def leakylib_build():
    """build_leakylib, for tests that need another build of it."""
    return build_leakylib


@pytest.fixture(scope="session")
def leaky():
    """The leakylib module."""
    if "leakylib" not in sys.modules:
        spec = importlib.util.spec_from_file_location("leakylib",
                                                      build_leakylib())
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["leakylib"] = module
    module = sys.modules["leakylib"]
    yield module
    module.release_kept()
    _drop_legacy_garbage()


@pytest.fixture
def garbage_cleanup():
    """Empties gc.garbage of leakylib's uncollectable cycles afterwards."""
    yield
    _drop_legacy_garbage()


def _drop_legacy_garbage():
    """Breaks and drops leakylib's uncollectable cycles in gc.garbage (a
    diagnosis re-runs a test's code, and may leave more of them than the
    test made; a test may load its own build of leakylib), so that no
    test sees another's."""
    def legacy(obj):        # of any build of leakylib loaded
        return type(obj).__qualname__ == "Legacy" and \
            type(obj).__module__ == "leakylib"
    for obj in list(gc.garbage):
        if legacy(obj):
            obj.unlink()
    gc.garbage[:] = [o for o in gc.garbage if not legacy(o)]
    gc.collect()


@pytest.fixture
def python_probes():
    """The Python probes readable here (refs only on debug builds)."""
    return [p.name for p in leakcheck.probes()
            if p.available and p.name in ("refs", "blocks", "py_bytes",
                                          "py_allocs", "objects", "garbage")]


def pytest_collection_modifyitems(config, items):
    """These tests drive leakcheck's own verdicts over code that leaks on
    purpose: under `pytest --leaks` they are reported, not hunted."""
    here = os.path.dirname(os.path.abspath(__file__))
    # They also assert exact deltas of the whole process, which a
    # pytest-xdist worker cannot give: execnet's thread allocates and frees
    # at any moment.  They run serially (scripts/test, the matrix).
    in_worker = "PYTEST_XDIST_WORKER" in os.environ
    for item in items:
        if str(item.path).startswith(here + os.sep):
            item.add_marker(pytest.mark.leaky(
                reason="exercises leakcheck with code that leaks on purpose"))
            if in_worker:
                item.add_marker(pytest.mark.skip(
                    reason="exact process-wide deltas: run serially, "
                           "not under pytest-xdist"))
