"""The CI leak gate: several reports judged as one against a baseline of
known leaks (``python -m leakcheck gate``; its front end is
leakcheck.report.commands.gate).

- exit 0 when nothing leaks beyond the baseline;
- exit 1 when something new leaks, listing each new leak on its own line;
  also when a report is partial (its run did not finish), holds a test
  that crashed, or one leakcheck could not judge (its record's "judged"
  is false: a bad marker argument, a test that passed, then failed when
  run again, an engine error), saying so, unless ``allow_partial``
  accepts that;
- exit 2 when an input is unusable (missing, not JSON, not the expected
  schema), with a one-line reason.

A test found in several reports has the verdict that comes first in
VERDICTS' merge order; it leaks in every probe that leaks in one of them,
and the message names the reports.  A leak is *known* when the baseline
lists its test id with every probe that leaks now (is_known).  With
``write_baseline`` every leak of the reports is recorded as known (the way
to accept today's leaks); without a baseline the gate then judges against
what it just wrote.

``github`` format also prints one GitHub Actions annotation per new leak
(and per crashed test) at the test's definition, so that it shows in the
pull request's diff; a leak's annotation holds its deltas and the C line
and Python line its diagnosis found (diagnosis_sites()).

Standard library only: the gate runs wherever the report lands, with no
compiler and no pytest.
"""

import os
import sys

from . import schema
from .diagnosis import diagnosis_sites, plural
from .files import UnusableInput, print_lines, printable, write_json
from .load import load_baseline, load_report
from .schema import REPORT_ORDER, is_known, judged, merged

EXIT_OK = 0
EXIT_NEW_LEAKS = 1
EXIT_UNUSABLE = 2


# ---- several reports as one -------------------------------------------------

class Test:
    """One test id over every report that holds it."""

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
        return merged(self.verdicts)

    def add(self, name, entry):
        self.verdicts.add(entry["verdict"])
        if entry["verdict"] == "leak":
            self.leaking.update(entry.get("leaking") or ())
            self.leaks_in.append((name, entry))
        elif entry["verdict"] == "crashed":
            self.crashed_in.append((name, entry))
        elif not judged(entry):
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
    return schema.baseline({t.id: t.leaking for t in combine(reports).values()
                            if "leak" in t.verdicts})


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
        counts = {v: 0 for v in REPORT_ORDER}
        for t in tests.values():
            counts[t.verdict] += 1
        shown = [v for v in REPORT_ORDER if v != "crashed" or counts[v]]
        checked = (f"{plural(len(tests), 'test')} checked: "
                   + ", ".join(f"{counts[v]} {v}" for v in shown))

        fresh = [t for t in tests.values() if t.leaks_in
                 and not is_known(known, t.id, t.leaking)]
        if fresh:
            self.status = EXIT_NEW_LEAKS
            self.lines.append(f"leakcheck gate: "
                              f"{plural(len(fresh), 'new leak')} "
                              f"({checked}):")
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
                reason = entry.get("reason")
                reason = (reason if isinstance(reason, str)
                          else "leakcheck could not judge it")
                where = f" in {name}" if several else ""
                unfinished.append(f"NOT JUDGED {t.id}{where}: {reason}")
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


def run(reports, baseline=None, write_baseline=None, format="text",
        allow_partial=False, out=None, err=None):
    """The gate over the report files `reports`, with the baseline file
    `baseline`, writing every leak as known to `write_baseline`; prints
    to `out` (the verdict) and `err` (why an input is unusable) and
    returns the exit status."""
    out = printable(sys.stdout if out is None else out)
    err = printable(sys.stderr if err is None else err)
    lines = []
    try:
        reports = [(path, load_report(path)) for path in reports]
        known = load_baseline(baseline) if baseline else {}
        if write_baseline:
            doc = baseline_from(reports)
            try:
                write_json(write_baseline, doc)
            except OSError as e:
                raise UnusableInput(f"cannot write baseline "
                                    f"{write_baseline}: "
                                    f"{e.strerror or e}")
            lines.append(f"leakcheck gate: wrote "
                         f"{plural(len(doc['leaks']), 'known leak')} to "
                         f"{write_baseline}")
            if not baseline:
                known = {k: set(v) for k, v in doc["leaks"].items()}
    except UnusableInput as e:
        print_lines([f"leakcheck gate: error: {e}"], err)
        return EXIT_UNUSABLE
    v = Verdict(reports, known, allow_partial=allow_partial)
    if format == "github":
        rootdirs = {name: (r.get("environment") or {}).get("rootdir")
                    for name, r in reports}
        for kind, test, title, message in v.annotations:
            source = (test.leaks_in or test.crashed_in)[0][0]
            rootdir = rootdirs.get(source)
            lines.append(github_annotation(
                test, title, message,
                rootdir if isinstance(rootdir, str) else None))
    print_lines(lines + v.lines, out)
    return v.status
