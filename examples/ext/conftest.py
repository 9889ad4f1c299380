"""Builds the example extensions (leaky.c, fixed.c) when their tests run.

Each module is compiled once per source (its content and path) and
interpreter into a cache directory under the system temporary directory,
straight with the C compiler CPython was built with (no setuptools needed), and imported from
there.  Concurrent builds (pytest-xdist workers) are safe: each compiles to
a private name and renames it into place, and the rename is atomic.
"""

import hashlib
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = ("leaky", "fixed")


def _cache_dir():
    tag = sysconfig.get_config_var("SOABI") or sys.implementation.cache_tag
    d = os.path.join(tempfile.gettempdir(),
                     f"leakcheck-examples-{os.getuid()}", tag)
    os.makedirs(d, exist_ok=True)
    return d


def _compile(name):
    """The path of the built extension module `name`, built if missing."""
    src = os.path.join(HERE, f"{name}.c")
    with open(src, "rb") as f:
        # The source's path too: the build's debug information names it,
        # and a diagnosis prints it (a copy built elsewhere would name
        # that copy's folder).
        digest = hashlib.sha256(f.read() + src.encode() +
                                sys.version.encode()).hexdigest()
    out_dir = os.path.join(_cache_dir(), digest[:16])
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, name + sysconfig.get_config_var("EXT_SUFFIX"))
    if os.path.exists(out):
        return out
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    paths = sysconfig.get_paths()
    tmp = f"{out}.{os.getpid()}.tmp"
    cmd = [*cc, "-shared", "-fPIC", "-O1", "-g", "-Wall",
           f"-I{paths['include']}", f"-I{paths['platinclude']}",
           src, "-o", tmp]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        pytest.fail(f"cannot build the example extension {name}:\n"
                    f"$ {shlex.join(cmd)}\n{proc.stdout}", pytrace=False)
    os.replace(tmp, out)
    return out


def _load(name):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _compile(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


@pytest.fixture(scope="session")
def example_modules():
    """{"leaky": module, "fixed": module}, built on first use."""
    return {name: _load(name) for name in MODULES}


@pytest.fixture(params=MODULES)
def ext(request, example_modules):
    """Each test that takes `ext` runs twice: with the leaky module and
    with its fixed twin."""
    return example_modules[request.param]
