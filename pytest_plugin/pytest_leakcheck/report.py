"""The JSON report (schema "leakcheck-report/1") and the baseline reader.

A report is one JSON object:

    {"schema": "leakcheck-report/1",
     "partial": false,            # true when the run did not finish
     "partial_reasons": [...],    # why, when partial
     "created": "2026-01-01T00:00:00Z",
     "environment": {python, implementation, platform, pytest, leakcheck,
                     workers},
     "settings": {hunt: "all"|"marked", warmup, repeat, probes, baseline},
     "probes": {name: {unit, available, reason, threshold}},
     "summary": {"tests": n, "leak": n, "clean": n, "error": n,
                 "skipped": n, "known": n},
     "tests": [{"id", "verdict": "leak"|"clean"|"error"|"skipped",
                "outcome", "known", "reason", "warmup", "repeat", "runs",
                "probes", "leaking", "deltas": {probe: [int per run]},
                "thresholds": {probe: int}, "diagnosis", "worker",
                "unread": {probe: why it was asked for but not compared}},
               ...]}

`python -m leakcheck gate` reads it (leakcheck/gate.py, which keeps its own
copy of the schema names: the gate runs with the standard library alone).
Files are written by leakcheck.write_report, the gate's own writer: whole
and atomically (a temporary file renamed over the target), so a reader
never sees half a report.

While the session runs, the report is also written as checkpoints, marked
partial (CHECKPOINT_REASON): at the start, after each of the first
CHECKPOINT_FIRST tests, after every leak or error, and then when the
records grew by a twentieth and a second has passed (or every
CHECKPOINT_SECONDS): a few writes in a fast run, about 20 * ln(n) at most
in a long one.  A process that dies where nothing can write (a segfault
in a C extension, SIGKILL, the out-of-memory killer) leaves the last
checkpoint: a valid report of what finished, saying it is partial.  The
final write replaces it.
"""

import datetime
import json
import platform
import sys
import time

import leakcheck

SCHEMA = "leakcheck-report/1"
BASELINE_SCHEMA = "leakcheck-baseline/1"
VERDICTS = ("leak", "clean", "error", "skipped", "crashed")
CHECKPOINT_REASON = ("the run had not finished when this report was written "
                     "(a checkpoint: the process may have died)")
CHECKPOINT_FIRST = 20
CHECKPOINT_SHARE = 20       # new records per checkpoint: 1/20 of the total
CHECKPOINT_GAP = 1.0        # seconds between two of those at least
CHECKPOINT_SECONDS = 30.0


def load_baseline(path):
    """Known leaks {test id: frozenset of probes} from a baseline file that
    `python -m leakcheck gate --write-baseline` wrote, or from a report.
    ValueError with the reason when the file is unusable."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ValueError(e.strerror or str(e))
    except ValueError as e:
        raise ValueError(f"not valid JSON: {e}")
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema == SCHEMA and isinstance(data.get("tests"), list):
        return {t["id"]: frozenset(t.get("leaking") or ())
                for t in data["tests"]
                if isinstance(t, dict) and t.get("verdict") == "leak"}
    if schema == BASELINE_SCHEMA and isinstance(data.get("leaks"), dict):
        return {k: frozenset(v) for k, v in data["leaks"].items()
                if isinstance(v, list)}
    raise ValueError(f"schema {schema!r}, expected {BASELINE_SCHEMA!r} "
                     f"(or a {SCHEMA!r} report)")


def is_known(baseline, test_id, leaking):
    """Whether the baseline covers every probe that leaks now."""
    known = baseline.get(test_id)
    return known is not None and set(leaking) <= known


class Report:
    """The records of one session, kept by the process that writes the
    report (the only process, or the xdist controller)."""

    def __init__(self, path, settings, probes, environment):
        self.path = path
        self.settings = settings
        self.probes = probes
        self.environment = environment
        self.records = {}           # test id -> record, last one wins
        self.partial_reasons = []
        self.written = False        # the final write happened
        self.write_error = None     # why the last write failed
        self._checkpointed = None   # records at the last checkpoint
        self._checkpoint_time = 0.0

    def add(self, record):
        self.records[record["id"]] = record

    def mark_partial(self, reason):
        if reason not in self.partial_reasons:
            self.partial_reasons.append(reason)

    def summary(self):
        counts = {"tests": len(self.records)}
        counts.update({v: 0 for v in VERDICTS})
        counts["known"] = 0
        for r in self.records.values():
            counts[r["verdict"]] += 1
            counts["known"] += bool(r.get("known"))
        return counts

    def document(self, extra_reasons=()):
        reasons = self.partial_reasons + list(extra_reasons)
        return {
            "schema": SCHEMA,
            "partial": bool(reasons),
            "partial_reasons": reasons,
            "created": datetime.datetime.now(datetime.timezone.utc)
                               .strftime("%Y-%m-%dT%H:%M:%SZ"),
            "environment": self.environment,
            "settings": self.settings,
            "probes": self.probes,
            "summary": self.summary(),
            "tests": [self.records[k] for k in sorted(self.records)],
        }

    def write(self):
        leakcheck.write_report(self.path, self.document())
        self.written = True

    def checkpoint(self, record=None):
        """Writes the report so far, marked partial, when it is due (see the
        module's text): `record` is the one just added.  Never after the
        final write.  Raises OSError."""
        n, now = len(self.records), time.monotonic()
        if self.written or n == self._checkpointed:
            return
        since = now - self._checkpoint_time
        due = (self._checkpointed is None or n <= CHECKPOINT_FIRST
               or (record is not None
                   and record.get("verdict") in ("leak", "error"))
               or since >= CHECKPOINT_SECONDS
               or ((n - self._checkpointed) * CHECKPOINT_SHARE >= n
                   and since >= CHECKPOINT_GAP))
        if not due:
            return
        leakcheck.write_report(self.path,
                               self.document([CHECKPOINT_REASON]))
        self._checkpointed, self._checkpoint_time = n, now


def environment(config, leakcheck_version):
    """Where the report was made."""
    import pytest
    workers = config.getoption("numprocesses", None)
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "debug_build": hasattr(sys, "gettotalrefcount"),
        "platform": sys.platform + "-" + platform.machine(),
        "pytest": pytest.__version__,
        "leakcheck": leakcheck_version,
        "workers": workers if isinstance(workers, int) else None,
        "rootdir": str(config.rootpath),
    }
