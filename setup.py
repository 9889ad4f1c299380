"""Builds leakcheck._core from the C engine's own sources (c_api/src/*.c,
never copied) plus leakcheck/_core.c and leakcheck/_jsontext.c, and
installs the packages ``leakcheck`` and ``pytest_leakcheck`` (which lives
in pytest_plugin/).
Project metadata and the pytest11 entry point are in pyproject.toml."""
import glob

from setuptools import Extension, setup

engine = sorted(glob.glob("c_api/src/*.c"))

core = Extension(
    "leakcheck._core",
    sources=["leakcheck/_core.c", "leakcheck/_jsontext.c"] + engine,
    include_dirs=["c_api/include", "c_api/src"],
    depends=["c_api/include/leakcheck.h", "leakcheck/_jsontext.h"] +
    glob.glob("c_api/src/*.h"),
    # The engine's lc_* symbols stay inside _core.so, so that a
    # libleakcheck.so loaded into the same process cannot interpose its
    # own copies (and state) on ours.  PyInit__core is exported by
    # PyMODINIT_FUNC regardless.
    extra_compile_args=["-std=gnu11", "-fvisibility=hidden"],
    libraries=["dl"],
)

setup(
    # leakcheck/templates holds data only (the HTML report's, read through
    # jinja2's PackageLoader), listed as a package so that setuptools
    # installs it without warning that it would be ignored.
    packages=["leakcheck", "leakcheck._evidence", "leakcheck.report",
              "leakcheck.report.commands", "leakcheck.templates",
              "pytest_leakcheck"],
    package_dir={"pytest_leakcheck": "pytest_plugin/pytest_leakcheck"},
    package_data={"leakcheck": ["py.typed", "*.pyi"],
                  "leakcheck.templates": ["*.html", "*.css"]},
    ext_modules=[core],
)
