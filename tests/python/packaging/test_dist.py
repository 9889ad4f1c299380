"""The distributions a user installs: the sdist and the wheel built from
it, with their metadata, license and type information, and the sdist
installed into a throwaway virtual environment, where the package, its C
extension and the pytest plugin must work without the source tree.

The sdist and wheel are built once per session with ``python -m build
--no-isolation`` (this environment's setuptools); the sdist is then
installed the way a user installs it, with pip and build isolation.
"""

import email
import os
import pathlib
import subprocess
import sys
import tarfile
import textwrap
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
VERSION = "0.1.0"

pytest.importorskip("build", reason="needs the build package (scripts/setup installs it)")


def run(*cmd, **kw):
    """Runs cmd; on failure the assertion shows its output."""
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True,
                          **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stdout}"
    return proc.stdout


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """The sdist and the wheel built from it."""
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT)
    sdist, = out.glob("leakcheck-*.tar.gz")
    wheel, = out.glob("leakcheck-*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def venv(dists, tmp_path_factory):
    """A throwaway venv holding pytest and leakcheck installed from the
    sdist; its python."""
    where = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", "--without-pip", where)
    python = where / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "-q",
        "--disable-pip-version-check", dists[0], "pytest")
    return python


def test_sdist_holds_the_sources_license_and_changelog(dists):
    with tarfile.open(dists[0]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for want in ("LICENSE", "CHANGELOG.md", "README.md", "ARCHITECTURE.md",
                 "pyproject.toml",
                 "setup.py", "c_api/include/leakcheck.h",
                 "c_api/src/internal.h", "c_api/src/scope.c",
                 "leakcheck/_core.c", "leakcheck/_core.pyi",
                 "leakcheck/_jsontext.c", "leakcheck/_jsontext.h",
                 "leakcheck/py.typed", "leakcheck/templates/report.html",
                 "leakcheck/cpython.py", "leakcheck/report/schema.py",
                 "leakcheck/report/commands/gate.py",
                 "pytest_plugin/pytest_leakcheck/plugin.py"):
        assert want in names, f"{want} is not in {dists[0].name}"


def test_wheel_metadata(dists):
    with zipfile.ZipFile(dists[1]) as whl:
        names = set(whl.namelist())
        info = f"leakcheck-{VERSION}.dist-info"
        meta = email.message_from_bytes(whl.read(f"{info}/METADATA"))
        entry_points = whl.read(f"{info}/entry_points.txt").decode()
    assert f"{info}/licenses/LICENSE" in names
    assert any(n.startswith("leakcheck/_core.") and n.endswith(".so")
               for n in names)
    assert "pytest_leakcheck/plugin.py" in names
    assert "leakcheck/templates/report.html" in names
    assert "leakcheck/py.typed" in names and "leakcheck/_core.pyi" in names
    assert "leakcheck = pytest_leakcheck.plugin" in entry_points
    assert meta["Name"] == "leakcheck" and meta["Version"] == VERSION
    assert meta["License-Expression"] == "MIT"
    assert meta["License-File"] == "LICENSE"
    assert meta["Requires-Python"] == ">=3.9"
    assert meta["Summary"].startswith("Makes leaks a test failure")
    assert meta["Description-Content-Type"] == "text/markdown"
    assert "native" in meta.get_all("Provides-Extra")   # leakcheck[native]
    assert "./scripts/test" in meta.get_payload()      # the README
    classifiers = meta.get_all("Classifier")
    for want in ("Framework :: Pytest", "Programming Language :: C",
                 "Programming Language :: Python :: 3.9",
                 "Programming Language :: Python :: 3.13",
                 "Programming Language :: Python :: 3.14",
                 "Programming Language :: Python :: 3.15",
                 "Operating System :: POSIX :: Linux"):
        assert want in classifiers


def test_installed_sdist_works_without_the_source_tree(venv, tmp_path):
    # The package and its extension come from the venv, and report their
    # metadata and license.
    check = textwrap.dedent("""
        import importlib.metadata as md, pathlib, sys
        import leakcheck, leakcheck._core
        site = pathlib.Path(sys.prefix).resolve()
        here = pathlib.Path(leakcheck.__file__).parent
        assert (here / "py.typed").is_file() and (here / "_core.pyi").is_file()
        for mod in (leakcheck, leakcheck._core):
            assert site in pathlib.Path(mod.__file__).resolve().parents, mod
        dist = md.distribution("leakcheck")
        assert dist.metadata["License-Expression"] == "MIT"
        lic = [f for f in dist.files if f.name == "LICENSE"]
        assert lic and "MIT License" in lic[0].read_text(), dist.files
        probes = {p.name: p for p in leakcheck.probes()}
        assert probes["fds"].available and probes["objects"].available
        with leakcheck.scope(probes=["fds", "objects"]):
            pass
        kept = []
        try:
            with leakcheck.scope(probes=["objects"]):
                kept.append([])
        except leakcheck.LeakError as e:
            assert "objects" in str(e), e
        else:
            raise AssertionError("a kept list went unseen")
        print("ok", leakcheck._core.__file__)
    """)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    out = run(venv, "-c", check, cwd=tmp_path, env=env)
    assert out.startswith("ok ")

    # The plugin, registered by the install alone: a leak fails, a clean
    # test passes.
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        import pytest
        KEPT = []

        @pytest.mark.noleak
        def test_leaks():
            KEPT.append([])          # one list more per run

        @pytest.mark.noleak
        def test_clean():
            assert sorted([2, 1]) == [1, 2]
    """))
    proc = subprocess.run(
        [str(venv), "-m", "pytest", "-p", "no:cacheprovider", "-q",
         "-rA", "test_user.py"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, universal_newlines=True)
    assert proc.returncode == 1, proc.stdout
    assert "PASSED test_user.py::test_clean" in proc.stdout, proc.stdout
    failed = [line for line in proc.stdout.splitlines()
              if "test_user.py::test_leaks" in line and "PASS" not in line]
    assert failed and "leak" in " ".join(failed).lower(), proc.stdout
