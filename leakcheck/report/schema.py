"""What a leakcheck report is: the one owner of its schema strings, its
verdicts and their merge order, its records, and the checks a reader
makes on them.

A report (schema REPORT_SCHEMA) is one JSON object:

    {"schema": "leakcheck-report/1",
     "partial": false,            # true when the run did not finish
     "partial_reasons": [...],    # why, when partial
     "created": "2026-01-01T00:00:00Z",
     "environment": {python, implementation, debug_build, platform, pytest,
                     leakcheck, workers, rootdir, run_id},
     "settings": {hunt, warmup, repeat, probes, tolerance, thorough,
                  baseline},
     "probes": {name: {unit, available, reason, threshold}},
     "summary": {"tests": n, VERDICTS...: n, "known": n},
     "tests": [record, ...]}      # sorted by id

and each record (record() builds it, crashed_record() for a test whose
process died while it ran) holds RECORD_FIELDS:

    id, verdict (one of VERDICTS), outcome (what pytest said), known (the
    baseline knows the leak), judged (false when leakcheck could not judge
    the test: a bad marker argument, a test that passed then failed when
    run again, an engine error, a crash), reason, file and line (where the
    test is defined, relative to the rootdir), warmup, repeat, runs,
    warmup_measured, warmup_growth (null, or {probe: int}: what the last
    warm-up run grew or freed, read but not taken for the measured run, so
    that more runs were due: the reported run's first fills, say), probes,
    leaking, deltas {probe: [int per run]},
    thresholds {probe: int}, diagnosis (null or Diagnosis.to_dict()),
    worker, unread {probe: why it was asked for but not compared}, threads
    (other threads that ran while it measured), test_runs (times the test
    ran, all told), hunt_seconds (what they added to its first run),
    hunt_costs (null, or the CPU seconds leakcheck added to the test by
    COST_CATEGORIES: its snapshots and settling, extra runs, confirming
    runs, diagnosis, and its own bookkeeping; a record written before this
    field has none).

The "summary" holds "costs" too when its records have hunt_costs: their
sums by category, with "report", the seconds the report's journal and
writing took (up to the document's making; its journal's events are read
on the monotonic clock, the rest on the CPU clock), and "session", what the
plugin took outside the tests' hunts (its import and set-up, its hooks
around each test and in the reported runs, the session's end).

"run_id" (a string, or null) names the run a report belongs to, shared by
every shard and matrix job of one run.  Readers ignore what they do not
know.  A baseline (schema BASELINE_SCHEMA) is {"schema", "leaks": {test id:
[probes]}}.

Standard library only, and no import of the rest of leakcheck: every
reader and writer of reports imports this module, never the reverse.
"""

import datetime

from .files import UnusableInput

REPORT_SCHEMA = "leakcheck-report/1"
BASELINE_SCHEMA = "leakcheck-baseline/1"
JOURNAL_SCHEMA = "leakcheck-journal/1"

# How "created" times are written (UTC).
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def now():
    """The current time as "created" says it."""
    return datetime.datetime.now(datetime.timezone.utc).strftime(TIME_FORMAT)


# The verdicts, in the order of merging: a test's verdict over several
# reports (shards, a matrix, a night's jobs) is the first of these it has
# in any of them.  Reports and summaries list them in REPORT_ORDER.
VERDICTS = ("leak", "crashed", "error", "clean", "skipped")
REPORT_ORDER = ("leak", "clean", "error", "skipped", "crashed")
assert sorted(REPORT_ORDER) == sorted(VERDICTS)
# A verdict's weight in a merge: the higher wins.
RANK = {v: len(VERDICTS) - i for i, v in enumerate(VERDICTS)}

RECORD_FIELDS = ("id", "verdict", "outcome", "known", "reason", "file",
                 "line", "warmup", "repeat", "runs", "warmup_measured",
                 "warmup_growth", "probes", "leaking", "deltas",
                 "thresholds", "diagnosis", "worker", "unread", "threads",
                 "test_runs", "hunt_seconds", "judged", "hunt_costs")

# What leakcheck adds to a test, in a record's hunt_costs; the summary's
# "costs" adds the report's own, SESSION_COSTS.
COST_CATEGORIES = ("snapshots", "extra_runs", "confirmation", "diagnosis",
                   "bookkeeping")
SESSION_COSTS = ("report", "session")

# How a report written before records had "judged" said that leakcheck
# could not judge a test: an error whose reason starts with this.  Read
# here only (judged()), never written.
_UNJUDGED_PREFIX = "leakcheck:"


def merged(verdicts):
    """The verdict of a test over the reports that hold it: the first of
    VERDICTS among `verdicts`."""
    return next(v for v in VERDICTS if v in verdicts)


def record(id, verdict, outcome, *, known=False, judged=True, reason=None,
           file=None, line=None, warmup=None, repeat=None, runs=0,
           warmup_measured=False, warmup_growth=None, probes=(),
           leaking=(), deltas=None,
           thresholds=None, diagnosis=None, worker=None, unread=None,
           threads=(), test_runs=0, hunt_seconds=0.0, hunt_costs=None):
    """A test's report record, its fields in RECORD_FIELDS' order (see the
    module's text).  `judged` is False when leakcheck could not judge the
    test (a bad marker argument, passed then failed on a re-run, an engine
    error); crashed_record() makes that of a crash.  Containers are
    copied."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of "
                         f"{', '.join(VERDICTS)}")
    return {"id": id, "verdict": verdict, "outcome": outcome,
             "known": bool(known), "reason": reason, "file": file,
             "line": line, "warmup": warmup, "repeat": repeat, "runs": runs,
             "warmup_measured": bool(warmup_measured),
             "warmup_growth": dict(warmup_growth) if warmup_growth else None,
             "probes": list(probes), "leaking": list(leaking),
             "deltas": {k: list(v) for k, v in (deltas or {}).items()},
             "thresholds": dict(thresholds or {}), "diagnosis": diagnosis,
             "worker": worker, "unread": dict(unread or {}),
             "threads": list(threads), "test_runs": test_runs,
             "hunt_seconds": hunt_seconds, "judged": bool(judged),
             "hunt_costs": None if hunt_costs is None else dict(hunt_costs)}


def crashed_record(test_id, reason, file=None, line=None, worker=None):
    """The record of a test that did not finish: its process, or its
    pytest-xdist worker, died while it ran."""
    return record(test_id, "crashed", "crashed", judged=False, reason=reason,
                  file=file, line=line, worker=worker)


def judged(entry):
    """Whether leakcheck judged the test of the record `entry`: its
    "judged" field; for a record written before that field, false for a
    crash and for an error whose reason starts with "leakcheck:" (how
    those reports said it)."""
    value = entry.get("judged")
    if isinstance(value, bool):
        return value
    if entry.get("verdict") == "crashed":
        return False
    reason = entry.get("reason")
    return not (entry.get("verdict") == "error" and isinstance(reason, str)
                and reason.startswith(_UNJUDGED_PREFIX))


def is_known(known, test_id, leaking):
    """Whether the baseline `known` ({test id: probes}, as load_baseline()
    gives it) knows the leak of `test_id` in the probes `leaking`: it lists
    the test with every probe that leaks now.  The one decision of "known"
    for the gate, the html command and the pytest plugin."""
    probes = known.get(test_id)
    return probes is not None and set(leaking) <= set(probes)


def growth_text(growth):
    """A record's warmup_growth as leakcheck says it, in the terminal and
    on the page: "blocks +2, objects +1" (what is not an int is left
    out)."""
    if not isinstance(growth, dict):
        return ""
    return ", ".join(f"{name} {delta:+d}" for name, delta in growth.items()
                     if isinstance(delta, int) and not isinstance(delta, bool))


def summary_of(records, session_costs=None):
    """The "summary" of a report of `records`: tests, a count per verdict
    (in REPORT_ORDER), and the leaks the baseline knows; "costs" when a
    record has hunt_costs or `session_costs` ({SESSION_COSTS: seconds}) is
    given."""
    summary = Summary()
    for r in records:
        summary.add(r)
    return summary.as_dict(session_costs)


class Summary:
    """summary_of() kept up to date record by record, for a writer that
    does not hold its records: add() each record, remove() one that a
    later record of the same test replaces."""

    def __init__(self):
        self.counts = {"tests": 0}
        self.counts.update({v: 0 for v in REPORT_ORDER})
        self.counts["known"] = 0
        self.costs = dict.fromkeys(COST_CATEGORIES, 0.0)
        self.costed = 0             # records with hunt_costs

    def add(self, record, sign=1):
        """Counts `record` (`sign` -1: takes it off); returns the CPU
        seconds its hunt_costs sum to, None when it has none."""
        counts = self.counts
        counts["tests"] += sign
        counts[record["verdict"]] += sign
        counts["known"] += sign * bool(record.get("known"))
        own = record.get("hunt_costs")
        if not isinstance(own, dict):
            return None
        self.costed += sign
        costs = self.costs
        total = 0.0
        for key in COST_CATEGORIES:
            value = own.get(key)
            if isinstance(value, (int, float)):
                costs[key] += sign * value
                total += value
        return total

    def remove(self, record):
        self.add(record, -1)

    def copy(self):
        other = Summary()
        other.counts = dict(self.counts)
        other.costs = dict(self.costs)
        other.costed = self.costed
        return other

    def as_dict(self, session_costs=None):
        """The summary (see summary_of)."""
        counts = dict(self.counts)
        costs = dict(self.costs) if self.costed else None
        if session_costs is not None:
            costs = costs or dict.fromkeys(COST_CATEGORIES, 0.0)
            costs.update(session_costs)
        if costs is not None:
            counts["costs"] = {k: round(v, 4) for k, v in costs.items()}
        return counts


def document(meta, records, running=(), reasons=(), created=None,
             unfinished=None, session_costs=None):
    """The report document of `meta` (settings, probes, environment),
    `records` {test id: record}, and `running` {test id: start event} of
    the tests that began and never finished: those without a record are
    reported crashed, with the reason `unfinished`.  `reasons` why the run
    did not finish make it partial."""
    records = dict(records)
    records.update(crashed_records(records, running, unfinished))
    return sorted_document(meta, [records[k] for k in sorted(records)],
                           reasons, created, session_costs)


def crashed_records(records, running, unfinished):
    """{test id: crashed_record()} of the tests in `running` {test id:
    start event} that have no record in `records`."""
    return {test_id: crashed_record(test_id, unfinished, start.get("file"),
                                    start.get("line"), start.get("worker"))
            for test_id, start in dict(running).items()
            if test_id not in records}


def sorted_document(meta, tests, reasons=(), created=None,
                    session_costs=None, summary=None):
    """document() of `tests`, the records sorted by id: a list, or a
    files.Entries that reads them one at a time (twice: for the summary,
    then to write them; once, when `summary`, their Summary, is given)."""
    reasons = list(dict.fromkeys(reasons))
    return {
        "schema": REPORT_SCHEMA,
        "partial": bool(reasons),
        "partial_reasons": reasons,
        "created": created or now(),
        "environment": meta.get("environment"),
        "settings": meta.get("settings"),
        "probes": meta.get("probes"),
        "summary": (summary_of(tests, session_costs) if summary is None
                    else summary.as_dict(session_costs)),
        "tests": tests,
    }


def leaks_of(report):
    """{test id: sorted leaking probe names} of a report's leak verdicts."""
    return {t["id"]: sorted(t.get("leaking") or [])
            for t in report["tests"] if t["verdict"] == "leak"}


def baseline(leaks):
    """The baseline document of `leaks` {test id: probes}."""
    return {"schema": BASELINE_SCHEMA,
            "leaks": {k: sorted(leaks[k]) for k in sorted(leaks)}}


def run_id_of(report):
    """The identifier of the run a report belongs to (its
    environment.run_id, shared by the shards and jobs of one run), or None
    when it names none (an older report)."""
    env = report.get("environment")
    return env.get("run_id") if isinstance(env, dict) else None


# ---- checks of what a reader is given ---------------------------------------

_INT64 = 1 << 63                        # the engine's readings are int64
# Report parts the commands read, by the shape they must have when present
# (null stands for absent).
_OBJECTS = ("environment", "settings", "probes", "summary")
_TEST_INTS = ("runs", "test_runs", "warmup", "repeat", "line")


def is_int64(value):
    """Whether `value` is an int the engine could have read (int64), not a
    bool."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and -_INT64 <= value < _INT64)


def is_deltas(value):
    """Whether `value` is {probe: [int64 per run]}."""
    return isinstance(value, dict) and all(
        isinstance(v, list) and all(is_int64(d) for d in v)
        for v in value.values())


def is_names(value):
    """Whether `value` is a list of strings (probe names)."""
    return isinstance(value, list) and all(isinstance(p, str) for p in value)


def entry_problem(t):
    """What is wrong with the shape of the test entry `t`, or None: it must
    be an object with a string "id", a verdict of VERDICTS and a list of
    probe names as "leaking"; its other fields, when present, of the types
    record() gives them."""
    if not isinstance(t, dict) or not isinstance(t.get("id"), str):
        return "has no string \"id\""
    if t.get("verdict") not in VERDICTS:
        return (f"has verdict {t.get('verdict')!r}, not one of "
                f"{', '.join(VERDICTS)}")
    if not is_names(t.get("leaking", [])):
        return "has a \"leaking\" that is not a list of probe names"
    for key in _TEST_INTS:
        if t.get(key) is not None and not is_int64(t[key]):
            return f"has a \"{key}\" that is not an integer"
    if t.get("diagnosis") is not None and not isinstance(t["diagnosis"], dict):
        return "has a \"diagnosis\" that is not an object"
    if t.get("deltas") is not None and not is_deltas(t["deltas"]):
        return "has \"deltas\" that are not lists of integers by probe"
    thresholds = t.get("thresholds")
    if thresholds is not None and not (isinstance(thresholds, dict) and all(
            is_int64(v) for v in thresholds.values())):
        return "has \"thresholds\" that are not integers by probe"
    if t.get("file") is not None and not isinstance(t["file"], str):
        return "has a \"file\" that is not a string"
    if t.get("judged") is not None and not isinstance(t["judged"], bool):
        return "has a \"judged\" that is not true or false"
    return None


def check_report(data, path, what="report"):
    """`data`, the report read from `path`, after checking the shape of
    what the commands read (UnusableInput naming `what` and `path`
    otherwise), every entry given its "judged" field (judged()) when it was
    written without one."""
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != REPORT_SCHEMA:
        raise UnusableInput(
            f"{what} {path} has schema {schema!r}, expected {REPORT_SCHEMA!r}")
    tests = data.get("tests")
    if not isinstance(tests, list):
        raise UnusableInput(f"{what} {path} has no \"tests\" list")
    for i, t in enumerate(tests):
        problem = entry_problem(t)
        if problem:
            name = f" ({t['id']!r})" if isinstance(t, dict) and isinstance(
                t.get("id"), str) else ""
            raise UnusableInput(f"{what} {path}: tests[{i}]{name} {problem}")
    if not is_names(data.get("partial_reasons", [])):
        raise UnusableInput(f"{what} {path}: \"partial_reasons\" is not a "
                            f"list of strings")
    for key in _OBJECTS:
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise UnusableInput(f"{what} {path}: \"{key}\" is not an object")
    run = run_id_of(data)
    if run is not None and not (isinstance(run, str) and run.strip()):
        raise UnusableInput(f"{what} {path}: \"environment\": \"run_id\" is "
                            f"not a non-empty string")
    for t in tests:
        t["judged"] = judged(t)
    return data


def check_baseline(data, path):
    """Known leaks {test id: set of probes} of the baseline document
    `data` read from `path`, or of the report it is (its leaks);
    UnusableInput otherwise."""
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema == REPORT_SCHEMA:
        check_report(data, path, "baseline")
        return {k: set(v) for k, v in leaks_of(data).items()}
    if schema != BASELINE_SCHEMA:
        raise UnusableInput(
            f"baseline {path} has schema {schema!r}, expected "
            f"{BASELINE_SCHEMA!r} (or a {REPORT_SCHEMA!r} report)")
    leaks = data.get("leaks")
    if not isinstance(leaks, dict) or not all(
            is_names(v) for v in leaks.values()):
        raise UnusableInput(
            f"baseline {path} has no \"leaks\" object mapping test ids to "
            f"lists of probe names")
    return {k: set(v) for k, v in leaks.items()}
