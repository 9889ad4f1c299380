"""The session's JSON report, written through its crash journal, and the
baseline the session judges against: the plugin's side of
leakcheck.report, which owns the report's schema (its text lists every
field), its records (leakcheck.report.record, crashed_record), the
journal, and the one reader of reports and baselines.

While the session runs, every test's start, record and end go to the
journal REPORT.journal at once: a process that dies where nothing can
write loses nothing, and whoever reads the report next (the gate, the html
command, the next run) builds it from the journal, with the test that was
running as "crashed".  A hunted test's record, which comes when its every
phase is over, goes with its end in one write: two writes per test.  At
the end the report is written whole and atomically
(leakcheck.write_report), then the journal is removed.  The records are
not kept in memory meanwhile, only where each one is in the journal and
the summary: the report is written from there, the text of a record at a
time as the journal holds it (one the journal could not take is kept).
"""

import json
import os
import platform
import sys
import time

import leakcheck
import leakcheck.report as lcreport

from .ledger import Ledger

SCHEMA = lcreport.REPORT_SCHEMA
BASELINE_SCHEMA = lcreport.BASELINE_SCHEMA
VERDICTS = lcreport.VERDICTS
MSG_RECOVERED = ("leakcheck: the earlier run into {path} did not finish "
                 "({crashed}); its report was rebuilt from its journal")

is_known = lcreport.is_known


def load_baseline(path):
    """Known leaks {test id: frozenset of probes} from a baseline file that
    `python -m leakcheck gate --write-baseline` wrote, or from a report,
    read and checked by leakcheck.report.load_baseline.  ValueError with
    the reason when the file is unusable."""
    try:
        known = lcreport.load_baseline(path)
    except lcreport.UnusableInput as e:
        raise ValueError(str(e)) from None
    return {k: frozenset(v) for k, v in known.items()}


class Report:
    """The records of one session, kept by the process that writes the
    report (the only process, or the xdist controller), each event
    journaled as it happens."""

    def __init__(self, path, settings, probes, environment, outside=None,
                 summary=None):
        self.path = path
        # The CPU seconds the plugin took outside the tests' hunts so far
        # (a callable), for the summary's "session" cost.
        self.outside = outside
        self.meta = {"settings": settings, "probes": probes,
                     "environment": environment}
        # test id -> where its record is in the journal, (offset, length),
        # in a Ledger (see there); and the records not journaled yet (or
        # that the journal could not take), newer than any line of theirs.
        # The last record of a test wins.  The summary (`summary`, the
        # session's: its costs are the terminal's too) is kept as they
        # come.
        self.where = Ledger()
        self.kept = {}
        self.summary = lcreport.Summary() if summary is None else summary
        self.running = {}           # test id -> start event, until finished
        self.partial_reasons = []
        self.written = False        # the final write happened
        self.write_error = None     # why the last write failed
        self.journal = None
        self.pending = None         # a record event to write with the next
        self.cpu = 0.0              # seconds journaling (see _event) and
                                    # writing (CPU seconds)

    def open(self):
        """Starts the journal.  A journal left by an earlier run that died
        becomes that run's report first; returns what to say about it, or
        None.  Raises OSError when the report's place cannot be written."""
        said = None
        if os.path.isdir(self.path):
            raise IsADirectoryError(21, "Is a directory")
        os.makedirs(os.path.dirname(os.path.abspath(self.path)),
                    exist_ok=True)
        try:
            doc = lcreport.recover(self.path, leakcheck.write_report)
        except lcreport.UnusableInput as e:
            said = f"leakcheck: ignored {e}"
        else:
            if doc is not None:
                crashed = [t["id"] for t in doc["tests"]
                           if t["verdict"] == "crashed"]
                said = MSG_RECOVERED.format(
                    path=self.path,
                    crashed=("crashed: " + ", ".join(crashed)) if crashed
                    else "; ".join(doc["partial_reasons"]))
        jpath = lcreport.journal_path(self.path)
        self.journal = lcreport.Journal(jpath, self.meta)
        return said

    def _event(self, event=None, record=None):
        """Journals, in one write: the pending record (add()'s with_finish)
        when there is one, then `record`, then `event` (a dict)."""
        journal = self.journal
        if journal is None or self.written:
            return
        pending = self.pending
        if pending is None and record is None and event is None:
            return
        if pending is not None:
            self.pending = None
        # Timed on the monotonic clock, not the CPU clock: the CPU clock is
        # a system call (about 0.6 us, twice for each of a test's two
        # events), a clock read in user space is not, and an event's
        # encoding and write(2) are work the process does, or waits on
        # the disk for, on its behalf either way.
        began = time.perf_counter()
        try:
            if pending is None and record is None:
                journal.append(lcreport.event_line(event).encode("ascii"))
            else:
                self._journal_records(
                    [r for r in (pending, record) if r is not None], event)
        except OSError as e:
            self.write_error = f"{e.strerror or e}"
        self.cpu += time.perf_counter() - began

    def _journal_records(self, records, event):
        """Appends the lines of `records`, then of `event` (or none), and
        notes where each record's line is."""
        lines = [lcreport.record_line(record) for record in records]
        if event is not None:
            lines.append(lcreport.event_line(event))
        at = self.journal.append("".join(lines).encode("ascii"))
        for record, line in zip(records, lines):
            test_id = record["id"]
            if self.kept.get(test_id) is record:
                del self.kept[test_id]
                self.where[test_id] = (at, len(line))
            at += len(line)

    def start(self, test_id, location=None):
        path, lineno = (location or (None, None))[:2]
        event = {"start": test_id,
                 "file": path.replace(os.sep, "/") if path else None,
                 "line": None if lineno is None else lineno + 1}
        self.running[test_id] = event
        self._event(event)

    def add(self, record, with_finish=False):
        """Journals `record`; with `with_finish` (its test's phases are all
        over: only its end is left to log), in one write with that end, or
        with whatever event comes first.  Returns what the summary's add()
        does: the CPU seconds of its hunt_costs, or None."""
        test_id = record["id"]
        if test_id in self.kept or test_id in self.where:
            self.summary.remove(self._record(test_id))
        self.kept[test_id] = record        # until journaled
        total = self.summary.add(record)
        if with_finish and self.pending is None:
            self.pending = record
        else:
            self._event(record=record)
        return total

    def finish(self, test_id):
        if self.running.pop(test_id, None) is not None:
            self._event({"finish": test_id})
        elif self.pending is not None:
            self._event()

    def mark_partial(self, reason):
        if reason not in self.partial_reasons:
            self.partial_reasons.append(reason)
            self._event({"partial": reason})

    def _record(self, test_id, raw=False):
        """The record of `test_id`, read back from the journal; with `raw`,
        as the JSON text the journal holds (lcreport.RawJSON) when it is
        there."""
        record = self.kept.get(test_id)
        if record is not None:
            return record
        text = self.journal.read_record(self.where[test_id])
        return text if raw else json.loads(text)

    def document(self):
        """The report's document; its tests (lcreport.Entries) are read from
        the journal as they are written."""
        reasons = self.partial_reasons
        crashed = lcreport.crashed_records(
            self.where, {test_id: start for test_id, start
                         in self.running.items() if test_id not in self.kept},
            lcreport.MSG_UNFINISHED.format(reason=reasons[-1])
            if reasons else lcreport.MSG_CRASHED)
        ids = sorted([*self.where, *crashed,
                      *(test_id for test_id in self.kept
                        if test_id not in self.where)])
        summary = self.summary.copy()
        for rec in crashed.values():
            summary.add(rec)

        def tests():
            for test_id in ids:
                rec = crashed.get(test_id)
                yield rec if rec is not None else self._record(test_id,
                                                               raw=True)

        return lcreport.sorted_document(
            self.meta, lcreport.Entries(len(ids), tests), reasons,
            session_costs=self.session_costs(), summary=summary)

    def session_costs(self):
        """The summary's SESSION_COSTS: the report's own CPU seconds, and
        the plugin's outside the tests' hunts."""
        costs = {"report": round(self.cpu, 4)}
        if self.outside is not None:
            costs["session"] = round(self.outside(), 4)
        return costs

    def write(self):
        """The final write: the report whole, then no journal.  Raises
        OSError (the journal stays: nothing is lost)."""
        self._event({"done": True})
        began = time.process_time()
        try:
            leakcheck.write_report(self.path, self.document())
        finally:
            self.cpu += time.process_time() - began
        self.written = True
        if self.journal is not None:
            self.journal.close(remove=True)


# Where a run's identifier comes from: (environment variable, prefix of the
# id written), the first one set wins.
RUN_ID_SOURCES = (("LEAKCHECK_RUN_ID", ""),
                  ("GITHUB_RUN_ID", "github-run-"),
                  ("CI_PIPELINE_ID", "gitlab-pipeline-"))


def run_id(environ=None):
    """The identifier of the run this session belongs to, shared by every
    shard and job of it (RUN_ID_SOURCES), or None when nothing names
    one."""
    environ = os.environ if environ is None else environ
    for name, prefix in RUN_ID_SOURCES:
        value = environ.get(name, "").strip()
        if value:
            return prefix + value
    return None


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
        "run_id": run_id(),
    }
