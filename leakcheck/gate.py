"""``leakcheck.gate``: the names the gate had before the report layer
became leakcheck.report, kept for code that imports them from here.
Everything is defined there."""

from .report.commands.gate import HELP, add_arguments, main, run
from .report.diagnosis import diagnosis_sites
from .report.files import UnusableInput, printable
from .report.files import write_json
from .report.gate import (EXIT_NEW_LEAKS, EXIT_OK, EXIT_UNUSABLE, Test,
                          Verdict, baseline_from, combine, github_annotation)
from .report.load import load_baseline, load_report
from .report.schema import (BASELINE_SCHEMA, REPORT_SCHEMA, VERDICTS,
                            is_known, leaks_of, run_id_of)

__all__ = ["BASELINE_SCHEMA", "EXIT_NEW_LEAKS", "EXIT_OK", "EXIT_UNUSABLE",
           "HELP", "REPORT_SCHEMA", "VERDICTS", "Test", "UnusableInput",
           "Verdict", "add_arguments", "baseline_from", "combine",
           "diagnosis_sites", "github_annotation", "is_known", "leaks_of",
           "load_baseline", "load_report", "main", "printable", "run",
           "run_id_of", "write_json"]
