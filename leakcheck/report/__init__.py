"""leakcheck's report layer: the JSON report ``pytest --leaks-report``
writes, its crash journal, baselines, dumps, and the commands that read
them (``python -m leakcheck gate|html|show``).

    schema      the one owner of the report's facts: schema strings,
                verdicts and their merge order, records, "judged",
                "known", the summary, the checks of a reader
    files       reading without hanging, bounded JSON, atomic writing
    load        the one reader of reports and baselines
    journal     the crash journal a report is written through
    diagnosis   a diagnosis as lines of text
    gate        several reports judged as one against a baseline
    html        the HTML page (jinja2, imported when it renders)
    dump        the dump file's format, its reader and summary
    commands    the argparse front ends

Standard library only, but for html's rendering.  The pytest plugin uses
the names exported here.
"""

from .diagnosis import diagnosis_sites
from .dump import DumpError, load_dump
from .files import (Entries, RawJSON, UnusableInput, printable,
                    write_json as write_report)
from .journal import (MSG_CRASHED, MSG_UNFINISHED, InUse, Journal,
                      event_line, journal_path, record_line, recover)
from .load import load_baseline, load_report
from .schema import (BASELINE_SCHEMA, COST_CATEGORIES, JOURNAL_SCHEMA,
                     RECORD_FIELDS, SESSION_COSTS,
                     REPORT_ORDER, REPORT_SCHEMA, VERDICTS, crashed_record,
                     crashed_records, document, growth_text, is_known,
                     judged, record, Summary, sorted_document, summary_of)

__all__ = [
    "BASELINE_SCHEMA", "COST_CATEGORIES", "JOURNAL_SCHEMA", "RECORD_FIELDS",
    "REPORT_ORDER", "SESSION_COSTS",
    "REPORT_SCHEMA", "VERDICTS", "DumpError", "Entries", "InUse", "Journal",
    "RawJSON", "Summary",
    "MSG_CRASHED", "MSG_UNFINISHED", "UnusableInput", "crashed_record",
    "crashed_records", "sorted_document",
    "diagnosis_sites", "document", "event_line", "growth_text", "is_known",
    "journal_path", "judged",
    "load_baseline", "load_dump", "load_report", "printable", "record",
    "record_line", "recover", "summary_of", "write_report",
]
