"""The CI leak gate: ``python -m leakcheck gate REPORT [--baseline FILE]
[--write-baseline FILE]``.

It reads a report that ``pytest --leaks-report=REPORT`` wrote and judges it
against a baseline of known leaks:

- exit 0 when nothing leaks beyond the baseline;
- exit 1 when something new leaks, listing each new leak on its own line;
- exit 2 when an input is unusable (missing, not JSON, not the expected
  schema), with a one-line reason.

A leak is *known* when the baseline lists its test id with every probe that
leaks now; a test that leaks in a probe the baseline does not list leaks
anew.  ``--write-baseline FILE`` records every leak of REPORT as known (the
way to accept today's leaks); without ``--baseline`` the gate then judges
against what it just wrote, and exits 0.

Pure Python and standard library only: the gate runs wherever the report
lands, with no compiler and no pytest.
"""

import argparse
import json
import os
import sys
import tempfile

REPORT_SCHEMA = "leakcheck-report/1"
BASELINE_SCHEMA = "leakcheck-baseline/1"
VERDICTS = ("leak", "clean", "error", "skipped")

EXIT_OK = 0
EXIT_NEW_LEAKS = 1
EXIT_UNUSABLE = 2


class UnusableInput(Exception):
    """An input file the gate cannot judge; str() is the one-line reason."""


def _load_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UnusableInput(f"cannot read {what} {path}: {e.strerror or e}")
    except UnicodeDecodeError:
        raise UnusableInput(f"{what} {path} is not UTF-8 text")
    try:
        return json.loads(text)
    except ValueError as e:
        raise UnusableInput(f"{what} {path} is not valid JSON: {e}")


def _schema_of(data):
    return data.get("schema") if isinstance(data, dict) else None


def _check_tests(data, path, what):
    """The test entries of a report, after checking the fields the gate
    relies on: each a dict with a string "id" and a known "verdict"."""
    tests = data.get("tests")
    if not isinstance(tests, list):
        raise UnusableInput(f"{what} {path} has no \"tests\" list")
    for i, t in enumerate(tests):
        if not isinstance(t, dict) or not isinstance(t.get("id"), str):
            raise UnusableInput(
                f"{what} {path}: tests[{i}] has no string \"id\"")
        if t.get("verdict") not in VERDICTS:
            raise UnusableInput(
                f"{what} {path}: tests[{i}] ({t['id']}) has verdict "
                f"{t.get('verdict')!r}, not one of {', '.join(VERDICTS)}")
        leaking = t.get("leaking", [])
        if not isinstance(leaking, list) or not all(
                isinstance(p, str) for p in leaking):
            raise UnusableInput(
                f"{what} {path}: tests[{i}] ({t['id']}) has a \"leaking\" "
                f"that is not a list of probe names")
    return tests


def load_report(path):
    """The report at `path` as a dict; UnusableInput when it is not one."""
    data = _load_json(path, "report")
    schema = _schema_of(data)
    if schema != REPORT_SCHEMA:
        raise UnusableInput(
            f"report {path} has schema {schema!r}, expected {REPORT_SCHEMA!r}")
    _check_tests(data, path, "report")
    return data


def leaks_of(report):
    """{test id: sorted leaking probe names} of a report's leak verdicts."""
    return {t["id"]: sorted(t.get("leaking") or [])
            for t in report["tests"] if t["verdict"] == "leak"}


def load_baseline(path):
    """Known leaks {test id: set of probes} from a baseline file, or from a
    report (its leaks become the baseline); UnusableInput otherwise."""
    data = _load_json(path, "baseline")
    schema = _schema_of(data)
    if schema == REPORT_SCHEMA:
        _check_tests(data, path, "baseline")
        return {k: set(v) for k, v in leaks_of(data).items()}
    if schema != BASELINE_SCHEMA:
        raise UnusableInput(
            f"baseline {path} has schema {schema!r}, expected "
            f"{BASELINE_SCHEMA!r} (or a {REPORT_SCHEMA!r} report)")
    leaks = data.get("leaks")
    if not isinstance(leaks, dict) or not all(
            isinstance(v, list) and all(isinstance(p, str) for p in v)
            for v in leaks.values()):
        raise UnusableInput(
            f"baseline {path} has no \"leaks\" object mapping test ids to "
            f"lists of probe names")
    return {k: set(v) for k, v in leaks.items()}


def baseline_from(report):
    """The baseline document that accepts every leak of `report`."""
    return {"schema": BASELINE_SCHEMA,
            "leaks": dict(sorted(leaks_of(report).items()))}


def render(data):
    """JSON text of a report or baseline: one line per top-level key, and
    one line per entry of a top-level list or object, so that files diff
    and grep well."""
    lines = []
    for i, (key, value) in enumerate(data.items()):
        head = f"  {json.dumps(key)}: "
        comma = "," if i < len(data) - 1 else ""
        if isinstance(value, list) and value:
            items = [f"    {json.dumps(v)}" for v in value]
            lines.append(head + "[\n" + ",\n".join(items) + "\n  ]" + comma)
        elif isinstance(value, dict) and value and key != "environment":
            items = [f"    {json.dumps(k)}: {json.dumps(v)}"
                     for k, v in value.items()]
            lines.append(head + "{\n" + ",\n".join(items) + "\n  }" + comma)
        else:
            lines.append(head + json.dumps(value) + comma)
    return "{\n" + "\n".join(lines) + "\n}\n"


def write_json(path, data):
    """Writes a report or baseline `data` to `path` atomically, in the
    layout render() gives: readers see the old file or the whole new one,
    never a part.  Public as leakcheck.write_report."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".leakcheck-", suffix=".tmp",
                               dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)   # as open() would, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(render(data))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def new_leaks(report, known):
    """[(test id, probes)] of the leaks in `report` that `known` does not
    cover, in report order."""
    out = []
    for test_id, probes in leaks_of(report).items():
        if not set(probes) <= known.get(test_id, set()):
            out.append((test_id, probes))
    return out


def verdict(report, known):
    """(exit status, lines to print) of `report` judged against `known`:
    EXIT_NEW_LEAKS when something new leaks, else EXIT_OK."""
    tests = report["tests"]
    leaks = leaks_of(report)
    fresh = new_leaks(report, known)
    counts = {v: 0 for v in VERDICTS}
    for t in tests:
        counts[t["verdict"]] += 1
    checked = (f"{len(tests)} test{'s' if len(tests) != 1 else ''} checked: "
               + ", ".join(f"{counts[v]} {v}" for v in VERDICTS))
    lines = []
    if report.get("partial"):
        lines.append("leakcheck gate: note: the report is partial (the run "
                     "did not finish); only the tests it holds were judged")
    if fresh:
        lines.append(f"leakcheck gate: {len(fresh)} new leak"
                     f"{'s' if len(fresh) != 1 else ''} ({checked}):")
        for test_id, probes in fresh:
            old = known.get(test_id)
            extra = (f" (baseline knows only {', '.join(sorted(old))})"
                     if old else "")
            lines.append(f"  LEAK {test_id}: {', '.join(probes) or '?'}"
                         f"{extra}")
    else:
        known_now = len(leaks)
        lines.append(f"leakcheck gate: no new leaks ({checked}"
                     + (f"; {known_now} known from the baseline"
                        if known_now else "") + ")")
    clean = {t["id"] for t in tests if t["verdict"] == "clean"}
    for test_id in sorted((set(known) - set(leaks)) & clean):
        lines.append(f"  fixed (in the baseline, clean now): {test_id}")
    return (EXIT_NEW_LEAKS if fresh else EXIT_OK), lines


def judge(report, known, out=sys.stdout):
    """Prints the verdict of `report` against `known` and returns the exit
    status.  A reader that stops early (``| head``) does not change it."""
    status, lines = verdict(report, known)
    try:
        for line in lines:
            print(line, file=out)
        out.flush()
    except BrokenPipeError:
        if out is sys.stdout:
            # Nothing more can be written; keep the interpreter's final
            # flush from failing too.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
    return status


HELP = ("fail CI when leakcheck reports hold a leak that the baseline does "
        "not know (exit 0: none; 1: new leaks, listed; 2: unusable input)")


def add_arguments(p):
    p.add_argument("report", metavar="REPORT",
                   help="the JSON file pytest --leaks-report wrote")
    p.add_argument("--baseline", metavar="FILE",
                   help="known leaks: a file --write-baseline wrote, or an "
                        "older report")
    p.add_argument("--write-baseline", metavar="FILE",
                   help="write every leak of REPORT to FILE as known")


def main(argv=None, out=None, err=None):
    """Runs the gate as ``python -m leakcheck gate`` would; returns its exit
    status (argparse usage errors exit 2 through SystemExit)."""
    from leakcheck.__main__ import PROG
    p = argparse.ArgumentParser(prog=f"{PROG} gate", description=HELP)
    add_arguments(p)
    return run(p.parse_args(argv), out=out, err=err)


def run(args, out=None, err=None):
    """The gate over parsed arguments; returns the exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        report = load_report(args.report)
        known = load_baseline(args.baseline) if args.baseline else {}
        if args.write_baseline:
            doc = baseline_from(report)
            try:
                write_json(args.write_baseline, doc)
            except OSError as e:
                raise UnusableInput(f"cannot write baseline "
                                    f"{args.write_baseline}: "
                                    f"{e.strerror or e}")
            print(f"leakcheck gate: wrote {len(doc['leaks'])} known leak"
                  f"{'s' if len(doc['leaks']) != 1 else ''} to "
                  f"{args.write_baseline}", file=out)
            if not args.baseline:
                known = {k: set(v) for k, v in doc["leaks"].items()}
    except UnusableInput as e:
        print(f"leakcheck gate: error: {e}", file=err)
        return EXIT_UNUSABLE
    return judge(report, known, out=out)
