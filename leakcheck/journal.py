"""``leakcheck.journal``: the crash journal's names, kept for code that
imports them from here.  Everything is defined in leakcheck.report.journal
(the journal) and leakcheck.report.schema (the report it holds)."""

from .report.journal import (MSG_CRASHED, MSG_DIED, MSG_IN_USE,
                             MSG_IN_USE_UNKNOWN, MSG_RUNNING,
                             MSG_UNFINISHED, SUFFIX, InUse, Journal,
                             journal_path, read, read_state, recover)
from .report.schema import (JOURNAL_SCHEMA, REPORT_SCHEMA, VERDICTS,
                            crashed_record, document)

__all__ = ["JOURNAL_SCHEMA", "MSG_CRASHED", "MSG_DIED", "MSG_IN_USE",
           "MSG_IN_USE_UNKNOWN", "MSG_RUNNING", "MSG_UNFINISHED",
           "REPORT_SCHEMA", "SUFFIX", "VERDICTS", "InUse", "Journal",
           "crashed_record", "document", "journal_path", "read",
           "read_state", "recover"]
