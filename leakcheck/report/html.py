"""``python -m leakcheck html REPORT [REPORT ...] -o FILE``: one page a
person can open from a CI artifact, offline.

The page holds the summary of the newest run, each test that leaked in it
with a plot of its per-run growth for every probe (the threshold drawn
across) and its diagnosis, what the hunt cost (the CPU time leakcheck
added, by category, and the tests that ran more than once, each with what
its warm-up run grew), and, when the reports span several runs
(nightlies), a trend: which tests leaked on which night, new or known.

Reports come in the order given, oldest first.  Reports with the same run
identifier (environment.run_id: LEAKCHECK_RUN_ID, or the CI's run) belong
to one run (the shards of a suite, the jobs of a Python matrix), wherever
they stand in the list; reports with different identifiers are different
runs.  Reports without one (older reports, or runs outside CI without
LEAKCHECK_RUN_ID) fall back to their times: such a report joins the run
just before it when that run has no identifier either and began less than
RUN_GAP earlier; one without a readable "created" time is a run of its
own.  In a run, a test leaks when it leaks in any of its reports, and each
of those reports is shown.

The page is one file: its style inline, its plots inline SVG, no script,
nothing fetched.  Jinja2 renders it with autoescaping, so whatever a report
holds (test ids, reprs, file names) shows as text.  Reports are read by the
one reader (leakcheck.report.load_report): a missing, truncated or foreign
file is exit 2 with one line naming it.  The templates are package data of
leakcheck (leakcheck/templates).  Its front end is
leakcheck.report.commands.html.
"""

import datetime
import functools

from .diagnosis import object_names
from .files import UnusableInput, write_text
from .load import load_baseline, load_report
from .schema import (COST_CATEGORIES, RANK, REPORT_ORDER, SESSION_COSTS,
                     TIME_FORMAT, growth_text, is_known, run_id_of)

RUN_GAP = datetime.timedelta(hours=6)

# Section titles of the diagnosis' keys; a key not named here shows under
# its own name, as a table, a list or text, whatever it holds.
SECTION_TITLES = {
    "objects": "Objects that grew, by type",
    "allocations": "Where the surviving memory was allocated (Python lines)",
    "native": "Where the native memory was allocated (C lines)",
    "native_sites": "Where the native memory was allocated (C lines)",
    "heap_lines": "Python lines that ran when the C heap grew",
    "refcounts": "Objects whose reference count grew",
    "garbage": "Uncollectable objects in gc.garbage",
    "fds": "New file descriptors",
    "threads": "New threads",
    "chains": "What holds it",
    "survivors": "New objects that survived the runs",
    "notes": "Notes",
    "text": "Diagnosis",
}
_META_KEYS = ("leaking", "runs", "capture")
# Figures a diagnosis gives as totals over its re-runs, by section and
# column: shown per run, as the terminal's report shows them.
_TOTALS = {"objects": ("delta",), "allocations": ("size", "count"),
           "refcounts": ("delta",)}
# Figures a diagnosis gives per run already.
_PER_RUN = {"native": ("bytes", "blocks"), "native_sites": ("bytes", "blocks"),
            "heap_lines": ("bytes",)}
# Column headings other than the key, by section and column ("per run" is
# added to the figures above).
_HEADINGS = {("native", "objects"): "object file",
             ("native_sites", "objects"): "object file",
             ("allocations", "size"): "bytes",
             ("allocations", "count"): "blocks"}

# What the page calls the summary's cost categories (COST_CATEGORIES and
# SESSION_COSTS), in the terminal's words.
COST_LABELS = {"snapshots": "snapshots and settling",
               "extra_runs": "extra runs", "confirmation": "confirmation",
               "diagnosis": "diagnosis", "bookkeeping": "its own bookkeeping",
               "report": "the report", "session": "around the tests"}
# The tests that ran more than once the page lists, the slowest first.
RERUNS_LISTED = 20

# Plot geometry, in SVG user units (CSS pixels).
_PLOT_W, _PLOT_H = 230, 92
_PAD_LEFT, _PAD_RIGHT, _PAD_TOP, _PAD_BOTTOM = 44, 8, 10, 16


# ---- runs -----------------------------------------------------------------

def _created(report):
    text = report.get("created")
    if not isinstance(text, str):
        return None
    try:
        return datetime.datetime.strptime(text, TIME_FORMAT)
    except ValueError:
        return None


def group_runs(reports):
    """[[(path, report), ...] per run] of `reports` ((path, report) pairs
    in the order given), in the order their first reports come: reports
    with one run identifier form one run; a report without one joins the
    run before it when that run has no identifier either and the report
    was created less than RUN_GAP after that run's first report."""
    runs = []
    by_id = {}                  # run identifier -> its run
    start = None                # creation of the last run's first report
    for path, report in reports:
        run_id = run_id_of(report)
        if run_id is not None:
            if run_id in by_id:
                by_id[run_id].append((path, report))
            else:
                by_id[run_id] = [(path, report)]
                runs.append(by_id[run_id])
            continue
        created = _created(report)
        if (runs and created is not None and start is not None
                and run_id_of(runs[-1][0][1]) is None
                and datetime.timedelta(0) <= created - start < RUN_GAP):
            runs[-1].append((path, report))
        else:
            runs.append([(path, report)])
            start = created
    return runs


def _run_label(run):
    created = _created(run[0][1])
    label = created.strftime("%Y-%m-%d %H:%M") if created else run[0][0]
    run_id = run_id_of(run[0][1])
    return f"{label} (run {run_id})" if run_id is not None else label


def _report_label(path, report):
    env = report.get("environment")
    env = env if isinstance(env, dict) else {}
    python = env.get("python")
    bits = [f"Python {python}" if python else None,
            "debug build" if env.get("debug_build") else None]
    bits = [b for b in bits if b]
    return f"{path} ({', '.join(bits)})" if bits else path


def _merged_verdicts(run):
    """{test id: verdict} over a run's reports, merged as the gate merges
    them: a leak anywhere is a leak, then crashed, error, clean, skipped."""
    verdicts = {}
    for _, report in run:
        for rec in report["tests"]:
            old = verdicts.get(rec["id"])
            if old is None or RANK[rec["verdict"]] > RANK[old]:
                verdicts[rec["id"]] = rec["verdict"]
    return verdicts


# ---- plots ----------------------------------------------------------------

def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) \
        else None


def _short(value, unit):
    """A number short enough for a plot's axis: 65552 bytes -> 64K."""
    sign = "-" if value < 0 else ""
    value = abs(value)
    if unit == "bytes" and value >= 1024:
        for suffix in ("K", "M", "G"):
            value /= 1024
            if value < 1024 or suffix == "G":
                return f"{sign}{value:.3g}{suffix}"
    if value >= 10000:
        return f"{sign}{value / 1000:.3g}k"
    return f"{sign}{value}"


def plot(probe, deltas, threshold, unit, leaking):
    """The geometry of one probe's plot: a bar per measured run, red when
    it reached the threshold, and the threshold as a dashed line."""
    deltas = [d for d in map(_int, deltas) if d is not None]
    threshold = _int(threshold)
    top = max(deltas + [threshold or 0, 1])
    bottom = min(deltas + [0])
    inner_w = _PLOT_W - _PAD_LEFT - _PAD_RIGHT
    inner_h = _PLOT_H - _PAD_TOP - _PAD_BOTTOM

    def y(value):
        return round(_PAD_TOP + (top - value) * inner_h / (top - bottom), 1)

    slot = inner_w / max(len(deltas), 1)
    bars = []
    for i, d in enumerate(deltas):
        y0, y1 = sorted((y(0), y(d)))
        bars.append({
            "x": round(_PAD_LEFT + i * slot + slot * 0.15, 1),
            "w": round(slot * 0.7, 1), "y": y0, "h": max(y1 - y0, 1),
            "run": i + 1, "value": d,
            "hit": threshold is not None and d >= threshold,
            "label_x": round(_PAD_LEFT + (i + 0.5) * slot, 1)})
    return {
        "probe": probe, "unit": unit or "", "leaking": leaking,
        "deltas": deltas, "threshold": threshold, "bars": bars,
        "width": _PLOT_W, "height": _PLOT_H,
        "left": _PAD_LEFT, "right": _PLOT_W - _PAD_RIGHT,
        "zero_y": y(0), "threshold_y": (y(threshold)
                                        if threshold is not None else None),
        "top_y": _PAD_TOP, "top_label": _short(top, unit),
        "bottom_y": _PLOT_H - _PAD_BOTTOM,
        "bottom_label": _short(bottom, unit) if bottom else None,
        "axis_y": _PLOT_H - 4,
        "threshold_label": (_short(threshold, unit)
                            if threshold is not None else None),
    }


def _plots(rec, probes_info):
    """The plots of a record's probes, leaking ones first, and the names of
    the probes that did not move in any run (listed, not drawn)."""
    deltas = rec.get("deltas") if isinstance(rec.get("deltas"), dict) else {}
    thresholds = (rec.get("thresholds")
                  if isinstance(rec.get("thresholds"), dict) else {})
    leaking = rec.get("leaking") or []
    names = [p for p in leaking if p in deltas]
    names += [p for p in deltas if p not in names]
    plots, flat = [], []
    for name in names:
        values = deltas[name] if isinstance(deltas[name], list) else []
        if name not in leaking and not any(map(_int, values)):
            flat.append(name)
            continue
        info = probes_info.get(name) if isinstance(probes_info, dict) else None
        unit = info.get("unit") if isinstance(info, dict) else None
        plots.append(plot(name, values, thresholds.get(name), unit,
                          name in leaking))
    return plots, flat


# ---- the diagnosis --------------------------------------------------------

def _scalar(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _where(entry):
    """file:line (function) of a dict that names a place, else None."""
    if not (isinstance(entry, dict) and "file" in entry):
        return None
    text = _scalar(entry.get("file"))
    if text and entry.get("line") is not None:
        text += f":{_scalar(entry['line'])}"
    function = entry.get("function") or entry.get("func")
    if function:
        text += f" {_scalar(function)}()" if text else f"{_scalar(function)}()"
    return text


def _cell(value, key=None):
    """The lines a table cell shows for a JSON value."""
    if isinstance(value, list) and value and all(
            _int(v) is not None for v in value):
        return [" ".join(f"{v:,}" for v in value)]     # one per run
    if isinstance(value, list):
        lines = []
        for item in value:
            where = _where(item)
            if where is not None:
                lines.append(where)
            elif isinstance(item, dict):
                lines.append(", ".join(f"{k}: {_scalar(v)}"
                                       for k, v in item.items()))
            else:
                lines.append(_scalar(item))
        return lines
    if isinstance(value, dict):
        where = _where(value)
        if where is not None:
            return [where]
        return [f"{k}: {_scalar(v)}" for k, v in value.items()]
    if key in ("delta", "size", "count", "bytes") and _int(value) is not None:
        return [f"{value:+d}" if key == "delta" else f"{value:,}"]
    return [_scalar(value)]


def _per_run(total, runs, sign):
    """A total growth over `runs` re-runs as growth per run, as the
    terminal's report says it (a whole number when it divides)."""
    if total % runs == 0:
        value = total // runs
        return f"{value:+,d}" if sign else f"{value:,}"
    return f"{total / runs:+,.1f}" if sign else f"{total / runs:,.1f}"


def _object_files(value):
    """The object files of a C line (several when several define its
    function), by name, as the terminal's report shows them."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [object_names(value)]
    return _cell(value)


def _table(entries, section=None, runs=None):
    """Columns, their headings and rows of a list of dicts, the section
    `section` of a diagnosis of `runs` re-runs; a place (file, line, function)
    becomes one "where" column, and figures are per run."""
    columns = []
    placed = any(_where(e) is not None for e in entries)
    if placed:
        columns.append("where")
    for entry in entries:
        for key in entry:
            if placed and key in ("file", "line", "function", "func"):
                continue
            if key not in columns:
                columns.append(key)
    totals = _TOTALS.get(section, ()) if runs else ()
    per_run = totals + (_PER_RUN.get(section, ()) if runs else ())
    rows = []
    for entry in entries:
        row = []
        for column in columns:
            value = entry.get(column)
            if column == "where":
                row.append([_where(entry) or ""])
            elif column in totals and _int(value) is not None:
                row.append([_per_run(value, runs, column == "delta")])
            elif column == "objects" and section in ("native", "native_sites"):
                row.append(_object_files(value))
            else:
                row.append(_cell(value, column))
        rows.append(row)
    headings = [_HEADINGS.get((section, c), c) for c in columns]
    headings = [f"{h} per run" if c in per_run else h
                for h, c in zip(headings, columns)]
    return {"columns": headings, "rows": rows,
            "numeric": [c in ("delta", "size", "count", "bytes", "blocks",
                              "new", "fd") for c in columns]}


def sections(diagnosis):
    """The diagnosis as sections the template shows: each a dict with a
    "title" and a "kind" (table, chains, list, text) and what that kind
    shows.  Every key of the diagnosis shows, known or not."""
    if not isinstance(diagnosis, dict):
        if diagnosis in (None, "", [], {}):
            return []
        return [{"title": "Diagnosis", "kind": "text",
                 "text": _scalar(diagnosis)}]
    out = []
    runs = _int(diagnosis.get("runs"))
    runs = runs if runs and runs > 0 else None
    for key, value in diagnosis.items():
        if key in _META_KEYS or value in (None, "", [], {}):
            continue
        title = SECTION_TITLES.get(key, key.replace("_", " ").capitalize())
        if key == "chains" and isinstance(value, list) and all(
                isinstance(c, dict) for c in value):
            out.append({"title": title, "kind": "chains",
                        "chains": [_chain(c) for c in value]})
        elif isinstance(value, list) and all(isinstance(v, dict)
                                             for v in value):
            out.append({"title": title, "kind": "table",
                        **_table(value, key, runs)})
        elif isinstance(value, list):
            out.append({"title": title, "kind": "list",
                        "entries": [_scalar(v) for v in value]})
        elif isinstance(value, dict):
            out.append({"title": title, "kind": "table",
                        "columns": ["key", "value"],
                        "rows": [[[_scalar(k)], _cell(v)]
                                 for k, v in value.items()],
                        "numeric": [False, False]})
        else:
            out.append({"title": title, "kind": "text",
                        "text": _scalar(value)})
    return out


def _chain(chain):
    path = chain.get("path") if isinstance(chain.get("path"), list) else []
    return {"object": _scalar(chain.get("object")),
            "watched_at": _scalar(chain.get("watched_at")),
            "root": _scalar(chain.get("root")),
            "expression": _scalar(chain.get("expression")),
            "steps": [(_scalar(s.get("edge")), _scalar(s.get("type")))
                      if isinstance(s, dict) else (_scalar(s), "")
                      for s in path],
            "unseen_refs": _int(chain.get("unseen_refs"))}


def _diagnosis_meta(diagnosis):
    if not isinstance(diagnosis, dict):
        return {}
    return {"runs": _int(diagnosis.get("runs")),
            "capture": _scalar(diagnosis.get("capture"))}


# ---- the page -------------------------------------------------------------

def _summary(run):
    counts = {v: 0 for v in REPORT_ORDER}
    verdicts = _merged_verdicts(run)
    for v in verdicts.values():
        counts[v] += 1
    reports = []
    for path, report in run:
        env = report.get("environment")
        env = env if isinstance(env, dict) else {}
        settings = report.get("settings")
        settings = settings if isinstance(settings, dict) else {}
        probes = settings.get("probes")
        reports.append({
            "label": path, "created": _scalar(report.get("created")),
            "python": _scalar(env.get("python")),
            "debug": bool(env.get("debug_build")),
            "platform": _scalar(env.get("platform")),
            "tests": len(report["tests"]),
            "leaks": sum(1 for t in report["tests"]
                         if t["verdict"] == "leak"),
            "settings": ", ".join(
                f"{k} {_scalar(settings[k])}" for k in ("warmup", "repeat")
                if k in settings),
            "probes": (", ".join(map(_scalar, probes))
                       if isinstance(probes, list) else ""),
            "partial": bool(report.get("partial")),
            "partial_reasons": [_scalar(r) for r in
                                report.get("partial_reasons") or []
                                if r is not None],
        })
    return {"tests": len(verdicts), "counts": counts, "reports": reports}


def _cost(run, labels):
    """What the hunt cost in the run: the CPU seconds its reports' summaries
    say leakcheck added, by category (None when no report says), and the
    tests that ran more than once, RERUNS_LISTED of them (the longest
    hunts first), each with what its warm-up run grew.  `labels`: the
    reports' labels, named in a row when the run has several reports."""
    totals = dict.fromkeys(COST_CATEGORIES + SESSION_COSTS, 0.0)
    costed = False
    tests = 0
    reruns = []
    for (_, report), label in zip(run, labels):
        summary = report.get("summary")
        costs = summary.get("costs") if isinstance(summary, dict) else None
        if isinstance(costs, dict):
            for key in totals:
                value = costs.get(key)
                if isinstance(value, (int, float)) and \
                        not isinstance(value, bool):
                    totals[key] += value
                    costed = True
        for rec in report["tests"]:
            tests += 1
            runs = _int(rec.get("test_runs"))
            if runs is None or runs < 2:
                continue
            seconds = rec.get("hunt_seconds")
            seconds = (float(seconds) if isinstance(seconds, (int, float))
                       and not isinstance(seconds, bool) else 0.0)
            reruns.append({"id": rec["id"], "runs": runs,
                           "seconds": seconds,
                           "report": label if len(run) > 1 else None,
                           "growth": growth_text(rec.get("warmup_growth"))})
    reruns.sort(key=lambda r: (-r["seconds"], r["id"]))
    total = sum(totals.values())
    return {
        "total": total if costed else None,
        "per_test_ms": 1000 * total / tests if costed and tests else None,
        "categories": [(COST_LABELS[key], seconds)
                       for key, seconds in totals.items()] if costed else [],
        "tests": tests,
        "hunted": len(reruns),
        "extra_runs": sum(r["runs"] - 1 for r in reruns),
        "reruns": reruns[:RERUNS_LISTED],
    }


def _leak_streaks(runs_verdicts):
    """{test id: index of the run its current streak of leaks began}, for
    the tests leaking in the last run."""
    last = len(runs_verdicts) - 1
    streaks = {}
    for test_id, verdict in runs_verdicts[last].items():
        if verdict != "leak":
            continue
        i = last
        while i > 0 and runs_verdicts[i - 1].get(test_id) == "leak":
            i -= 1
        streaks[test_id] = i
    return streaks


def _leaking_tests(run, runs_verdicts, labels, baseline=None):
    """The tests that leaked in the last run, each with the records of the
    reports it leaked in.  A leak is known when `baseline` ({test id:
    probes}, leakcheck.report.load_baseline()) knows it as the gate decides
    it (leakcheck.report.is_known, over the probes it leaks in any report of
    the run); without `baseline`, when every report says it is (the run
    had --leaks-baseline)."""
    streaks = _leak_streaks(runs_verdicts)
    tests = {}
    for path, report in run:
        probes_info = report.get("probes")
        for rec in report["tests"]:
            if rec["verdict"] != "leak":
                continue
            test = tests.setdefault(rec["id"], {"id": rec["id"],
                                                "records": [],
                                                "baseline": True,
                                                "probes": set()})
            test["baseline"] = test["baseline"] and bool(rec.get("known"))
            test["probes"].update(rec.get("leaking") or ())
            diagnosis = rec.get("diagnosis")
            plots, flat = _plots(rec, probes_info)
            test["records"].append({
                "report": _report_label(path, report),
                "leaking": [_scalar(p) for p in rec.get("leaking") or []],
                "runs": _scalar(rec.get("runs")),
                "warmup": _scalar(rec.get("warmup")),
                "worker": _scalar(rec.get("worker")),
                "plots": plots, "flat": flat,
                "meta": _diagnosis_meta(diagnosis),
                "sections": sections(diagnosis),
            })
    out = []
    for n, test_id in enumerate(sorted(tests), 1):
        test = tests[test_id]
        since = streaks.get(test_id, len(runs_verdicts) - 1)
        probes = test.pop("probes")
        if baseline is not None:
            test["baseline"] = is_known(baseline, test_id, probes)
        if test["baseline"]:
            status, why = "known", "in the baseline"
        elif baseline and baseline.get(test_id):
            status, why = "new", ("the baseline knows only "
                                  + ", ".join(sorted(baseline[test_id])))
        elif since < len(runs_verdicts) - 1:
            status, why = "known", f"leaking since {labels[since]}"
        else:
            status, why = "new", ("first leaked in this run"
                                  if len(runs_verdicts) > 1 else "")
        test.update(anchor=f"leak-{n}", status=status, why=why)
        out.append(test)
    return out


def _trend(runs_verdicts, labels):
    """Rows of the trend table: every test that leaked in some run, each
    cell the run's verdict, a leak marked new when the run before did not
    leak it."""
    ids = sorted({t for verdicts in runs_verdicts
                  for t, v in verdicts.items() if v == "leak"})
    last = runs_verdicts[-1]
    ids.sort(key=lambda t: (last.get(t) != "leak", t))
    rows = []
    for test_id in ids:
        cells = []
        for i, verdicts in enumerate(runs_verdicts):
            v = verdicts.get(test_id)
            if v == "leak":
                before = runs_verdicts[i - 1].get(test_id) if i else None
                cells.append(("leak-new", "new leak") if before != "leak"
                             else ("leak-known", "leak"))
            elif v is None:
                cells.append(("absent", "–"))
            else:
                cells.append((v, v))
        rows.append({"id": test_id, "cells": cells})
    totals = [sum(1 for v in verdicts.values() if v == "leak")
              for verdicts in runs_verdicts]
    return {"labels": labels, "rows": rows, "totals": totals}


def page_context(reports, title=None, baseline=None):
    """Everything the template shows, from (path, report) pairs in the
    order given (oldest first), and the known leaks `baseline` ({test id:
    probes}) when one was given."""
    runs = group_runs(reports)
    labels = [_run_label(run) for run in runs]
    runs_verdicts = [_merged_verdicts(run) for run in runs]
    last = runs[-1]
    return {
        "title": title or "leakcheck report",
        "generated": datetime.datetime.now(datetime.timezone.utc)
                             .strftime("%Y-%m-%d %H:%M UTC"),
        "run_label": labels[-1],
        "summary": _summary(last),
        "cost": _cost(last, [_report_label(p, r) for p, r in last]),
        "leaks": _leaking_tests(last, runs_verdicts, labels, baseline),
        "trend": _trend(runs_verdicts, labels) if len(runs) > 1 else None,
        "runs": len(runs),
    }


@functools.lru_cache(maxsize=None)
def _template():
    """The page's template, compiled once per process."""
    import jinja2
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("leakcheck", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined)
    return env.get_template("report.html")


def render(reports, title=None, baseline=None):
    """The page's HTML text for (path, report) pairs, oldest first, with
    the known leaks `baseline` ({test id: probes}) when given."""
    return _template().render(**page_context(reports, title, baseline))


# ---- the page written ----------------------------------------------------

def write_page(report_paths, output, title=None, baseline_path=None):
    """Reads the reports at `report_paths` (oldest first) and the baseline
    at `baseline_path` when given, and writes their page to `output`, whole
    or not at all; returns the reports read, [(path, report)].
    UnusableInput (one line) when an input is unusable or `output` cannot
    be written."""
    reports = [(path, load_report(path)) for path in report_paths]
    baseline = (load_baseline(baseline_path)
                if baseline_path is not None else None)
    text = render(reports, title, baseline)
    try:
        # Whole or not at all: a page killed while written is no page.
        write_text(output, text, errors="backslashreplace")
    except OSError as e:
        raise UnusableInput(f"cannot write {output}: {e.strerror or e}")
    return reports
