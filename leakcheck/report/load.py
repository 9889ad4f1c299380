"""The one reader of reports and baselines, for every command and for the
pytest plugin's --leaks-baseline."""

import os

from . import journal
from .files import load_json
from .schema import check_baseline, check_report


def read_document(path, what):
    """The JSON document at `path`, or the report its journal holds (a
    journal named as `path`, or one beside it: its run did not end)."""
    path = os.fspath(path)
    if path.endswith(journal.SUFFIX):
        return journal.read(path)
    if os.path.lexists(journal.journal_path(path)):
        return journal.read(journal.journal_path(path))
    return load_json(path, what)


def load_report(path):
    """The report at `path` as a dict; UnusableInput (one line naming the
    file and what is wrong) when it is not one.  Every test entry has the
    shape leakcheck.report.schema.entry_problem() checks, and a "judged"
    field.

    A crash journal beside it (``PATH.journal``: its run did not end, see
    leakcheck.report.journal) is read instead, and so is a journal named
    as `path`: the report is built from it, with the test that was running
    when the process died as ``crashed``."""
    return check_report(read_document(path, "report"), path)


def load_baseline(path):
    """Known leaks {test id: set of probes} from a baseline file, or from a
    report (its leaks become the baseline); UnusableInput otherwise."""
    return check_baseline(read_document(path, "baseline"), path)
