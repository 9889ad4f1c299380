"""What a user sees: a script that checks a C extension with a refcount
bug, run as its own process, fails with a message that says what leaked
and where."""

import os
import subprocess
import sys
import textwrap

from conftest import build_leakylib

SCRIPT = """\
import importlib.util
import leakcheck

spec = importlib.util.spec_from_file_location("leakylib", {path!r})
leakylib = importlib.util.module_from_spec(spec)
spec.loader.exec_module(leakylib)


def parse_row():
    return leakylib.leak_new_list(4)     # a reference too many, in C


def test_parse_row():
    parse_row()


leakcheck.repeat(test_parse_row)
"""


def run(tmp_path, source):
    script = tmp_path / "user_script.py"
    script.write_text(source)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True,
                          text=True, timeout=300, cwd=str(tmp_path))
    return script, proc


def test_a_refcount_leak_in_c_is_caught_with_what_and_where(tmp_path):
    script, proc = run(tmp_path, SCRIPT.format(path=build_leakylib()))
    assert proc.returncode == 1
    err = proc.stderr
    assert "leakcheck._errors.LeakError: leakcheck: series 'test_parse_row' "\
           "leaked" in err
    # What grew, in every run: found on a release build through the
    # allocator and the collector, not reference counts.
    for probe in ("blocks", "py_allocs", "objects"):
        assert f"  {probe:<12} grew in every run:" in err
    # What leaked: lists, one per run.
    assert "objects that grew (per run, re-running the code 2 times), most "\
           "first:\n  list  +1" in err
    # Where: the line that called into C, and the source line itself.
    assert f"  {script}:10: +" in err
    assert "      return leakylib.leak_new_list(4)     # a reference too " \
           "many, in C" in err
    assert f"    called from {script}:14" in err


def test_the_fixed_twin_passes(tmp_path):
    source = SCRIPT.format(path=build_leakylib()).replace(
        "leak_new_list", "clean_new_list") + textwrap.dedent("""\
        print("clean")
        """)
    _, proc = run(tmp_path, source)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "clean\n"
    assert os.path.exists(tmp_path / "user_script.py")
