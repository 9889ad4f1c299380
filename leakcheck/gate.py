"""The CI leak gate: ``python -m leakcheck gate REPORT [REPORT ...]
[--baseline FILE] [--write-baseline FILE] [--format text|github]
[--allow-partial]``.

It reads the reports that ``pytest --leaks-report=REPORT`` wrote (one, or
several judged as one: the shards of a run, the jobs of a Python matrix)
and judges them against a baseline of known leaks:

- exit 0 when nothing leaks beyond the baseline;
- exit 1 when something new leaks, listing each new leak on its own line;
  also when a report is partial (its run did not finish), holds a test
  that crashed, or one leakcheck could not judge (its error's reason
  starts with "leakcheck:": a bad marker argument, a test that passed,
  then failed when run again), saying so, unless ``--allow-partial``
  accepts that;
- exit 2 when an input is unusable (missing, not JSON, not the expected
  schema), with a one-line reason.

A test found in several reports leaks when it leaks in any of them, in
every probe that leaks in one; the message names the reports.  A leak is
*known* when the baseline lists its test id with every probe that leaks
now; a test that leaks in a probe the baseline does not list leaks anew.
``--write-baseline FILE`` records every leak of the reports as known (the
way to accept today's leaks); without ``--baseline`` the gate then judges
against what it just wrote.

``--format github`` also prints one GitHub Actions annotation per new leak
(and per crashed test) at the test's definition, so that it shows in the
pull request's diff; a leak's annotation holds its deltas and the C line
and Python line its diagnosis found (diagnosis_sites()).

Pure Python and standard library only: the gate runs wherever the report
lands, with no compiler and no pytest.  load_report() and UnusableInput are
the public reader of reports for every command.
"""

import json
import os
import stat
import sys
import tempfile
from typing import Any, Mapping, Union

REPORT_SCHEMA = "leakcheck-report/1"
BASELINE_SCHEMA = "leakcheck-baseline/1"
VERDICTS = ("leak", "clean", "error", "skipped", "crashed")

EXIT_OK = 0
EXIT_NEW_LEAKS = 1
EXIT_UNUSABLE = 2

HELP = ("fail CI when leakcheck reports hold a leak that the baseline does "
        "not know (exit 0: none; 1: new leaks, listed; 2: unusable input)")


class UnusableInput(Exception):
    """An input file the gate cannot judge; str() is the one-line reason."""


def read_text(path, what):
    """The UTF-8 text of the regular file `path`; UnusableInput naming
    `what` otherwise.  A FIFO or a device is refused without waiting for a
    writer."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise UnusableInput(f"cannot read {what} {path}: {e.strerror or e}")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnusableInput(f"{what} {path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    except OSError as e:
        raise UnusableInput(f"cannot read {what} {path}: {e.strerror or e}")
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UnusableInput(f"{what} {path} is not UTF-8 text")


def parse_json(text, path, what):
    """`text` as JSON; UnusableInput naming `what` and `path` otherwise."""
    try:
        return json.loads(text)
    except ValueError as e:
        raise UnusableInput(f"{what} {path} is not valid JSON: {e}")
    except RecursionError:
        raise UnusableInput(f"{what} {path} is not a leakcheck file: its "
                            f"JSON nests too deeply to read")


def _load_json(path, what):
    return parse_json(read_text(path, what), path, what)


def _schema_of(data):
    return data.get("schema") if isinstance(data, dict) else None


def _check_tests(data, path, what):
    """The test entries of a report, after checking the fields the gate
    relies on: each a dict with a string "id", a known "verdict" and a list
    of probe names as "leaking"."""
    tests = data.get("tests")
    if not isinstance(tests, list):
        raise UnusableInput(f"{what} {path} has no \"tests\" list")
    for i, t in enumerate(tests):
        if not isinstance(t, dict) or not isinstance(t.get("id"), str):
            raise UnusableInput(
                f"{what} {path}: tests[{i}] has no string \"id\"")
        if t.get("verdict") not in VERDICTS:
            raise UnusableInput(
                f"{what} {path}: tests[{i}] ({t['id']!r}) has verdict "
                f"{t.get('verdict')!r}, not one of {', '.join(VERDICTS)}")
        leaking = t.get("leaking", [])
        if not isinstance(leaking, list) or not all(
                isinstance(p, str) for p in leaking):
            raise UnusableInput(
                f"{what} {path}: tests[{i}] ({t['id']!r}) has a \"leaking\" "
                f"that is not a list of probe names")
        problem = _odd_field(t)
        if problem:
            raise UnusableInput(
                f"{what} {path}: tests[{i}] ({t['id']!r}) {problem}")
    reasons = data.get("partial_reasons", [])
    if not isinstance(reasons, list) or not all(
            isinstance(r, str) for r in reasons):
        raise UnusableInput(f"{what} {path}: \"partial_reasons\" is not a "
                            f"list of strings")
    for key in _OBJECTS:
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise UnusableInput(f"{what} {path}: \"{key}\" is not an object")
    run = (data.get("environment") or {}).get("run_id")
    if run is not None and not (isinstance(run, str) and run.strip()):
        raise UnusableInput(f"{what} {path}: \"environment\": \"run_id\" is "
                            f"not a non-empty string")
    return tests


def run_id_of(report):
    """The identifier of the run a report belongs to (its
    environment.run_id, shared by the shards and jobs of one run), or None
    when it names none (an older report)."""
    return (report.get("environment") or {}).get("run_id")


# Report fields the commands read, by the shape they must have when
# present (null stands for absent).
_OBJECTS = ("environment", "settings", "probes", "summary")
_TEST_INTS = ("runs", "test_runs", "warmup", "repeat", "line")
_INT64 = 1 << 63                        # the engine's readings are int64


def is_int64(value):
    """Whether `value` is an int the engine could have read (int64), not a
    bool."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and -_INT64 <= value < _INT64)


def _odd_field(t):
    """What is wrong with a test entry's optional fields, or None."""
    for key in _TEST_INTS:
        if t.get(key) is not None and not is_int64(t[key]):
            return f"has a \"{key}\" that is not an integer"
    if t.get("diagnosis") is not None and not isinstance(t["diagnosis"], dict):
        return "has a \"diagnosis\" that is not an object"
    deltas = t.get("deltas")
    if deltas is not None and not (isinstance(deltas, dict) and all(
            isinstance(v, list) and all(is_int64(d) for d in v)
            for v in deltas.values())):
        return "has \"deltas\" that are not lists of integers by probe"
    thresholds = t.get("thresholds")
    if thresholds is not None and not (isinstance(thresholds, dict) and all(
            is_int64(v) for v in thresholds.values())):
        return "has \"thresholds\" that are not integers by probe"
    if t.get("file") is not None and not isinstance(t["file"], str):
        return "has a \"file\" that is not a string"
    return None


def _read_document(path, what):
    """The JSON document at `path`, or the report its journal holds."""
    from . import journal
    path = os.fspath(path)
    if path.endswith(journal.SUFFIX):
        return journal.read(path)
    if os.path.lexists(journal.journal_path(path)):
        return journal.read(journal.journal_path(path))
    return _load_json(path, what)


def load_report(path):
    """The report at `path` as a dict; UnusableInput when it is not one.
    Every test entry has a string "id", a verdict of VERDICTS and a list of
    probe names as "leaking".

    A crash journal beside it (``PATH.journal``: its run did not end, see
    leakcheck.journal) is read instead, and so is a journal named as
    `path`: the report is built from it, with the test that was running
    when the process died as ``crashed``."""
    data = _read_document(path, "report")
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
    report (its leaks become the baseline); UnusableInput otherwise.  The
    one reader of baselines: the pytest plugin's --leaks-baseline uses it
    too."""
    data = _read_document(path, "baseline")
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


def is_known(known, test_id, leaking):
    """Whether the baseline `known` ({test id: probes}, as load_baseline()
    gives it) knows the leak of `test_id` in the probes `leaking`: it lists
    the test with every probe that leaks now.  The one decision of "known"
    for the gate, the html command and the pytest plugin."""
    probes = known.get(test_id)
    return probes is not None and set(leaking) <= set(probes)


# ---- several reports as one -------------------------------------------------

class Test:
    """One test id over every report that holds it."""

    # A test's verdict over several reports: the first of these it has.
    ORDER = ("leak", "crashed", "error", "clean", "skipped")

    def __init__(self, test_id):
        self.id = test_id
        self.verdicts = set()
        self.leaking = set()        # probes leaking in any report
        self.leaks_in = []          # [(report name, entry)] where it leaks
        self.crashed_in = []        # [(report name, entry)] where it crashed
        self.unjudged_in = []       # [(report name, entry)] where leakcheck
                                    # could not judge it (a bad marker, ...)
        self.file = None            # where it is defined, when a report says
        self.line = None

    @property
    def verdict(self):
        return next(v for v in self.ORDER if v in self.verdicts)

    def add(self, name, entry):
        self.verdicts.add(entry["verdict"])
        if entry["verdict"] == "leak":
            self.leaking.update(entry.get("leaking") or ())
            self.leaks_in.append((name, entry))
        elif entry["verdict"] == "crashed":
            self.crashed_in.append((name, entry))
        elif entry["verdict"] == "error" and isinstance(
                entry.get("reason"), str) and entry["reason"].startswith(
                    "leakcheck:"):
            self.unjudged_in.append((name, entry))
        if self.file is None and isinstance(entry.get("file"), str):
            line = entry.get("line")
            self.file = entry["file"]
            self.line = line if isinstance(line, int) and line > 0 else None


def combine(reports):
    """{test id: Test} of `reports`, [(name, report dict)], in the order
    the reports list them."""
    tests = {}
    for name, report in reports:
        for entry in report["tests"]:
            tests.setdefault(entry["id"], Test(entry["id"])).add(name, entry)
    return tests


def baseline_from(reports):
    """The baseline document that accepts every leak of `reports`, a list
    of (name, report dict) or one report dict."""
    if isinstance(reports, dict):
        reports = [(None, reports)]
    leaks = {t.id: sorted(t.leaking) for t in combine(reports).values()
             if "leak" in t.verdicts}
    return {"schema": BASELINE_SCHEMA, "leaks": dict(sorted(leaks.items()))}


def render(data):
    """JSON text of a report or baseline: one line per top-level key, and
    one line per entry of a top-level list or object, so that files diff
    and grep well.  ASCII only: a test id holding any code point, a lone
    surrogate too, is written escaped."""
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


def write_json(path: Union[str, "os.PathLike[str]"],
               data: Mapping[str, Any]) -> None:
    """Writes a report or baseline `data` to `path` atomically, in the
    layout render() gives: readers see the old file or the whole new one,
    never a part, even when the process is killed while writing.  Public
    as leakcheck.write_report."""
    write_text(path, render(data))


def write_text(path, text, errors="strict"):
    """Writes `text` to `path` atomically (a temporary file beside it,
    renamed over it), its folder made if missing.  A path that names
    something other than a regular file (a device, a pipe, a terminal:
    /dev/stdout, /dev/full) is written in place, never replaced by a file.
    `errors` is the UTF-8 encoder's (an HTML page escapes a lone surrogate
    with "backslashreplace").  Raises OSError."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        regular = True
    if not regular:
        with open(path, "w", encoding="utf-8", errors=errors) as f:
            f.write(text)
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".leakcheck-", suffix=".tmp",
                               dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)   # as open() would, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8", errors=errors) as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _deltas(entry):
    deltas = entry.get("deltas")
    deltas = deltas if isinstance(deltas, dict) else {}
    parts = []
    for probe in entry.get("leaking") or ():
        runs = deltas.get(probe)
        runs = [d for d in runs if isinstance(d, int)] \
            if isinstance(runs, list) else []
        parts.append(f"{probe} " + " ".join(f"{d:+d}" for d in runs)
                     if runs else probe)
    return "; ".join(parts)


def _relative(path, rootdir):
    """`path` relative to `rootdir` when it lies in it."""
    if rootdir and os.path.isabs(path) and os.path.isabs(rootdir):
        rel = os.path.relpath(path, rootdir)
        if not rel.startswith(os.pardir):
            return rel
    return path


def _place(entry, rootdir):
    """"file:line function()" of a diagnosis entry, or None when it names
    no place."""
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
        return None
    text = _relative(entry["file"], rootdir)
    if is_int64(entry.get("line")) and entry["line"] > 0:
        text += f":{entry['line']}"
    if isinstance(entry.get("function"), str) and entry["function"]:
        text += f" {entry['function']}()"
    return text


def _first(diagnosis, key):
    entries = diagnosis.get(key)
    return entries[0] if isinstance(entries, list) and entries else None


def _per_run(total, runs):
    """A total growth over `runs` re-runs per run, as the terminal's
    report says it: a whole number when it divides."""
    return str(total // runs) if total % runs == 0 else f"{total / runs:.1f}"


def diagnosis_sites(diagnosis, rootdir=None):
    """The lines a leak's diagnosis found, as text: the C line that
    allocated the most of what survived, and the Python line (the one that
    allocated it, or, when no C frame was seen, the one that ran when the
    C heap grew), each with its growth per run; [] when it found none."""
    if not isinstance(diagnosis, dict):
        return []
    sites = []
    native = _first(diagnosis, "native")
    where = _place(native, rootdir)
    if where:
        text = f"C line {where}"
        if is_int64(native.get("bytes")) and is_int64(native.get("blocks")):
            text += (f": {native['bytes']} bytes in "
                     f"{_plural(native['blocks'], 'block')} per run")
        if isinstance(native.get("via"), str) and native["via"]:
            text += f", made by {native['via']}()"
        caller = _place(native.get("caller"), rootdir)
        if caller:
            text += f", called from {caller}"
        sites.append(text)
    runs = diagnosis.get("runs")
    allocation = _first(diagnosis, "allocations")
    heap = _first(diagnosis, "heap_lines")
    where = _place(allocation, rootdir)
    if where:
        text = f"Python line {where}"
        size, count = allocation.get("size"), allocation.get("count")
        if is_int64(size) and is_int64(count) and is_int64(runs) and runs > 0:
            blocks = _per_run(count, runs)
            text += (f": {_per_run(size, runs)} bytes in {blocks} "
                     f"block{'' if blocks == '1' else 's'} per run")
        sites.append(text)
    elif _place(heap, rootdir):
        text = (f"Python line {_place(heap, rootdir)}, which ran when the C "
                f"heap grew")
        if is_int64(heap.get("bytes")):
            text += f": {heap['bytes']} bytes per run"
        sites.append(text)
    return sites


def _plural(n, word):
    return f"{n} {word}{'s' if n != 1 else ''}"


def _rootdir(reports, name):
    """The rootdir of the report `name` of `reports`, or None."""
    for n, report in reports:
        if n == name:
            rootdir = (report.get("environment") or {}).get("rootdir")
            return rootdir if isinstance(rootdir, str) else None
    return None


class Verdict:
    """What the gate found: `status`, the text `lines`, and `annotations`
    [(kind, test, title, message)] for the findings that fail the gate."""

    def __init__(self, reports, known, allow_partial=False):
        self.status = EXIT_OK
        self.lines = []
        self.annotations = []
        several = len(reports) > 1
        tests = combine(reports)
        counts = {v: 0 for v in VERDICTS}
        for t in tests.values():
            counts[t.verdict] += 1
        shown = [v for v in VERDICTS if v != "crashed" or counts[v]]
        checked = (f"{_plural(len(tests), 'test')} checked: "
                   + ", ".join(f"{counts[v]} {v}" for v in shown))

        fresh = [t for t in tests.values() if t.leaks_in
                 and not is_known(known, t.id, t.leaking)]
        if fresh:
            self.status = EXIT_NEW_LEAKS
            self.lines.append(f"leakcheck gate: {_plural(len(fresh), 'new leak')}"
                              f" ({checked}):")
        else:
            leaks = sum(1 for t in tests.values() if t.leaks_in)
            self.lines.append(f"leakcheck gate: no new leaks ({checked}"
                              + (f"; {leaks} known from the baseline"
                                 if leaks else "") + ")")
        for t in fresh:
            old = known.get(t.id)
            extra = (f" (baseline knows only {', '.join(sorted(old))})"
                     if old else "")
            where = (" in " + ", ".join(n for n, _ in t.leaks_in)
                     if several else "")
            self.lines.append(f"  LEAK {t.id}: "
                              f"{', '.join(sorted(t.leaking)) or '?'}"
                              f"{where}{extra}")
            message = "\n".join((f"{n}: " if several else "") + _deltas(e)
                                for n, e in t.leaks_in)
            sites = next((s for s in (diagnosis_sites(
                e.get("diagnosis"), _rootdir(reports, n))
                for n, e in t.leaks_in) if s), [])
            message = "\n".join([message] + sites)
            self.annotations.append(("leak", t, f"leak: {t.id}", message))
        for t in sorted(tests.values(), key=lambda t: t.id):
            if t.id in known and t.verdict == "clean":
                self.lines.append(f"  fixed (in the baseline, clean now): "
                                  f"{t.id}")

        unfinished = []
        for name, report in reports:
            if report.get("partial"):
                reasons = "; ".join(report.get("partial_reasons") or ())
                unfinished.append(f"report {name} is partial, its run did not "
                                  f"finish ({reasons or 'no reason given'})")
        for t in tests.values():
            for name, entry in t.unjudged_in:
                where = f" in {name}" if several else ""
                unfinished.append(f"NOT JUDGED {t.id}{where}: "
                                  f"{entry['reason']}")
            for name, entry in t.crashed_in:
                reason = entry.get("reason")
                reason = reason if isinstance(reason, str) else "it crashed"
                where = f" in {name}" if several else ""
                unfinished.append(f"CRASHED {t.id}{where}: {reason}")
                self.annotations.append(("crashed", t, f"crashed: {t.id}",
                                         reason))
        if unfinished:
            if allow_partial:
                self.lines.append("leakcheck gate: note: accepted "
                                  "(--allow-partial):")
            else:
                self.status = EXIT_NEW_LEAKS
                self.lines.append("leakcheck gate: failing: not every test "
                                  "was judged (--allow-partial accepts "
                                  "this):")
            self.lines.extend(f"  {u}" for u in unfinished)
        if allow_partial:
            self.annotations = [a for a in self.annotations
                                if a[0] != "crashed"]


def _escape(text, properties=False):
    """GitHub Actions workflow command escaping, of a message or (with
    `properties`) of a property's value."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if properties:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def github_annotation(test, title, message, rootdir=None):
    """One ``::error`` workflow command at the test's definition; the file
    is made relative to the current directory when the report's rootdir
    lies in it (the checkout GitHub runs in)."""
    props = []
    if test.file:
        path = test.file
        if rootdir and os.path.isabs(rootdir):
            full = os.path.join(rootdir, path)
            rel = os.path.relpath(full, os.getcwd())
            if not rel.startswith(os.pardir):
                path = rel
        props.append(f"file={_escape(path.replace(os.sep, '/'), True)}")
        if test.line:
            props.append(f"line={test.line}")
    props.append(f"title={_escape(title, True)}")
    return f"::error {','.join(props)}::{_escape(message)}"


def printable(stream):
    """`stream`, set to write what its encoding cannot (a lone surrogate, a
    non-ASCII id on an ASCII terminal) as escapes rather than fail."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError):
            pass
    return stream


def _print(lines, out):
    """Prints `lines`; a reader that stops early (``| head``) changes
    nothing."""
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


def _path_argument(text):
    import argparse
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path (an unset variable?)")
    return text


def add_arguments(p):
    p.add_argument("reports", metavar="REPORT", nargs="+",
                   type=_path_argument,
                   help="a JSON file pytest --leaks-report wrote; several "
                        "are judged as one (shards, a Python matrix)")
    p.add_argument("--baseline", metavar="FILE", type=_path_argument,
                   help="known leaks: a file --write-baseline wrote, or an "
                        "older report")
    p.add_argument("--write-baseline", metavar="FILE", type=_path_argument,
                   help="write every leak of the reports to FILE as known")
    p.add_argument("--format", choices=("text", "github"), default="text",
                   help="github: also one GitHub Actions ::error annotation "
                        "per new leak and per crashed test, at the test's "
                        "definition, naming the C and Python lines the "
                        "diagnosis found (default: text)")
    p.add_argument("--allow-partial", action="store_true",
                   help="do not fail on a partial report (its run did not "
                        "finish), a crashed test, or a test leakcheck could "
                        "not judge; judge the leaks alone")


def main(argv=None, out=None, err=None):
    """Runs the gate as ``python -m leakcheck gate`` would; returns its exit
    status (argparse usage errors exit 2 through SystemExit)."""
    import argparse
    from leakcheck.__main__ import PROG
    p = argparse.ArgumentParser(prog=f"{PROG} gate", description=HELP)
    add_arguments(p)
    return run(p.parse_args(argv), out=out, err=err)


def run(args, out=None, err=None):
    """The gate over parsed arguments; returns the exit status."""
    out = printable(sys.stdout if out is None else out)
    err = printable(sys.stderr if err is None else err)
    lines = []
    try:
        reports = [(path, load_report(path)) for path in args.reports]
        known = load_baseline(args.baseline) if args.baseline else {}
        if args.write_baseline:
            doc = baseline_from(reports)
            try:
                write_json(args.write_baseline, doc)
            except OSError as e:
                raise UnusableInput(f"cannot write baseline "
                                    f"{args.write_baseline}: "
                                    f"{e.strerror or e}")
            lines.append(f"leakcheck gate: wrote "
                         f"{_plural(len(doc['leaks']), 'known leak')} to "
                         f"{args.write_baseline}")
            if not args.baseline:
                known = {k: set(v) for k, v in doc["leaks"].items()}
    except UnusableInput as e:
        _print([f"leakcheck gate: error: {e}"], err)
        return EXIT_UNUSABLE
    v = Verdict(reports, known, allow_partial=args.allow_partial)
    if args.format == "github":
        rootdirs = {name: (r.get("environment") or {}).get("rootdir")
                    for name, r in reports}
        for kind, test, title, message in v.annotations:
            source = (test.leaks_in or test.crashed_in)[0][0]
            rootdir = rootdirs.get(source)
            lines.append(github_annotation(
                test, title, message,
                rootdir if isinstance(rootdir, str) else None))
    _print(lines + v.lines, out)
    return v.status
