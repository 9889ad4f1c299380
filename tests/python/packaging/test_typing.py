"""leakcheck is typed (PEP 561): the installed package carries py.typed
and a stub for its C extension, and a program using the public API passes
``mypy --strict``.  A wrong call is caught, so the types are not Any; the
stub matches the built extension (mypy's stubtest); and every name in
leakcheck.__all__ that can be called is annotated, so that API added later
cannot slip through untyped."""

import inspect
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import leakcheck

pytest.importorskip("mypy", reason="needs mypy (scripts/setup installs it)")

# Uses every public name, as a user's typed code would; it also runs.
CONSUMER = '''
from typing import Any, Optional

import leakcheck
from leakcheck import (Diagnosis, Handle, LeakError, ProbeInfo, Series,
                       Snapshot)


class Thing:
    pass


def work() -> None:
    sorted([3, 1, 2])


@leakcheck.scope(probes=["fds"])
def checked(n: int, label: str = "") -> None:
    work()


def main(report_path: str) -> None:
    version: str = leakcheck.__version__
    infos: list[ProbeInfo] = leakcheck.probes()
    available = [info.name for info in infos if info.available]
    names: tuple[str, ...] = leakcheck.PROBE_NAMES + leakcheck.DEFAULT_PROBES

    before: Snapshot = leakcheck.snapshot(["fds", "threads"])
    after = leakcheck.snapshot("fds,threads")
    deltas: dict[str, int] = after - before
    fds: int = after["fds"]
    maybe: Optional[int] = after.get("threads")
    mask: int = after.mask

    with leakcheck.scope(probes=("fds",), tolerance={"fds": 1}) as s:
        work()
    leaked: Optional[bool] = s.leaked
    grown: dict[str, int] = s.deltas
    checked(1, label="x")

    series: Series = leakcheck.repeat(work, warmup=1, repeat=2,
                                      probes=["fds"], tolerance=0)
    runs: int = series.runs
    per_run: dict[str, list[int]] = series.deltas
    manual = Series(warmup=0, repeat=2, probes="fds", name="manual")
    while manual.next():
        work()
    text: str = manual.report()

    diagnosis: Diagnosis = leakcheck.diagnose(work, ["fds"], runs=1)
    data: dict[str, Any] = diagnosis.to_dict()
    notes: list[str] = diagnosis.notes

    obj = Thing()
    handle: Handle = leakcheck.watch(obj)
    del obj
    leakcheck.assert_finalized(handle)
    alive: bool = handle.alive
    leakcheck.assert_no_garbage()

    kept = Thing()
    with leakcheck.refcounts(kept, handle) as counts:
        work()
    was: Optional[list[int]] = counts.before

    try:
        with leakcheck.scope(probes=["fds"]):
            descriptor = open(report_path, "w")
    except LeakError as error:
        message: str = error.report
        why: Optional[Diagnosis] = error.diagnosis
        descriptor.close()
    else:
        raise SystemExit("the open file went unseen")

    leakcheck.write_report(report_path, {"schema": "leakcheck-report/1",
                                         "tests": []})


if __name__ == "__main__":
    import sys
    main(sys.argv[1])
    print("ok")
'''

# Each of these must be refused, with the error mypy gives for it.
WRONG = {
    'leakcheck.repeat(lambda: None, warmup="1")': 'Argument "warmup"',
    'leakcheck.scope(probes=["fds"], tolerance="1")': 'Argument "tolerance"',
    'leakcheck.snapshot()["fds"] + ""': 'Unsupported operand types',
    'leakcheck.watch(1).alive.upper()': '"bool" has no attribute "upper"',
    'leakcheck.assert_finalized(object())': 'Argument 1 to "assert_finalized"',
}


def mypy(path, cwd):
    """mypy --strict on `path` as a user runs it: the installed leakcheck,
    not the source tree."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MYPYPATH", "PYTHONPATH")}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", os.devnull,
         "--hide-error-context", "--no-error-summary", str(path)],
        cwd=str(cwd), env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, universal_newlines=True)


def test_installed_package_is_typed():
    where = pathlib.Path(leakcheck.__file__).parent
    assert (where / "py.typed").is_file()
    assert (where / "_core.pyi").is_file()


def test_consumer_passes_mypy_strict_and_runs(tmp_path):
    consumer = tmp_path / "consumer.py"
    consumer.write_text(CONSUMER)
    wrong = tmp_path / "wrong.py"
    wrong.write_text("import leakcheck\n\n" + "\n".join(WRONG) + "\n")

    proc = mypy(consumer, tmp_path)
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout

    proc = mypy(wrong, tmp_path)
    assert proc.returncode == 1, proc.stdout
    for line, (call, error) in enumerate(WRONG.items(), start=3):
        assert any(out.startswith(f"wrong.py:{line}: error: ") and error in out
                   for out in proc.stdout.splitlines()), (call, proc.stdout)

    run = subprocess.run([sys.executable, str(consumer),
                          str(tmp_path / "report.json")],
                         cwd=str(tmp_path), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True)
    assert run.returncode == 0 and run.stdout.endswith("ok\n"), run.stdout


def test_core_stub_matches_the_extension(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "leakcheck._core"],
        cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True)
    assert proc.returncode == 0, proc.stdout


def _unannotated(func, skip_first):
    sig = inspect.signature(func)
    params = list(sig.parameters.values())[1 if skip_first else 0:]
    missing = [p.name for p in params if p.annotation is p.empty]
    if sig.return_annotation is sig.empty:
        missing.append("return")
    return missing


def test_every_public_callable_is_annotated():
    missing = {}
    for name in leakcheck.__all__:
        obj = getattr(leakcheck, name)
        if inspect.isclass(obj):
            if obj.__module__.startswith("leakcheck._core") or issubclass(
                    obj, tuple):
                continue        # typed by _core.pyi; NamedTuple fields
            for attr, value in vars(obj).items():
                if attr.startswith("_") and attr not in (
                        "__init__", "__call__", "__enter__", "__exit__"):
                    continue
                if isinstance(value, property):
                    value = value.fget
                if inspect.isfunction(value):
                    gaps = _unannotated(value, skip_first=True)
                    if gaps:
                        missing[f"{name}.{attr}"] = gaps
        elif inspect.isfunction(obj):
            gaps = _unannotated(obj, skip_first=False)
            if gaps:
                missing[name] = gaps
    assert not missing, f"public API without annotations: {missing}"
