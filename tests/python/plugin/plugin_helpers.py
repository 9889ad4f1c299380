"""Helpers the plugin's tests import (conftest.py's fixtures aside): a
module of its own, since another folder's conftest.py can be the one
imported as `conftest` when pytest is given files of both."""

import sys


def install_plugin(folder, module, source, project, version, entry):
    """A pytest plugin laid out as pip installs one, in `folder`: the
    module `module`.py holding `source`, and its distribution's dist-info
    with a pytest11 entry point named `entry` (pytest loads it when
    `folder` is on sys.path: run_with())."""
    (folder / f"{module}.py").write_text(source)
    info = folder / f"{module}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(
        f"[pytest11]\n{entry} = {module}\n")


def run_with(pytester, folder, *args, first=True):
    """pytest in a new interpreter whose sys.path has `folder` before
    site-packages (`first`: its entry points load before the installed
    ones) or after it."""
    add = (f"sys.path.insert(0, {str(folder)!r})" if first
           else f"sys.path.append({str(folder)!r})")
    return pytester.run(sys.executable, "-c", (
        f"import sys\n{add}\nimport pytest\n"
        f"sys.exit(pytest.main({list(args)!r}))\n"))
