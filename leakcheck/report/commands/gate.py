"""``python -m leakcheck gate REPORT [REPORT ...] [--baseline FILE]
[--write-baseline FILE] [--format text|github] [--allow-partial]``: the
front end of leakcheck.report.gate."""

import sys

from .. import gate
from . import parser, path_argument

HELP = ("fail CI when leakcheck reports hold a leak that the baseline does "
        "not know (exit 0: none; 1: new leaks, listed; 2: unusable input)")


def add_arguments(p):
    p.add_argument("reports", metavar="REPORT", nargs="+",
                   type=path_argument,
                   help="a JSON file pytest --leaks-report wrote; several "
                        "are judged as one (shards, a Python matrix)")
    p.add_argument("--baseline", metavar="FILE", type=path_argument,
                   help="known leaks: a file --write-baseline wrote, or an "
                        "older report")
    p.add_argument("--write-baseline", metavar="FILE", type=path_argument,
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


def run(args, out=None, err=None):
    """The gate over parsed arguments; returns the exit status."""
    return gate.run(args.reports, baseline=args.baseline,
                    write_baseline=args.write_baseline, format=args.format,
                    allow_partial=args.allow_partial, out=out, err=err)


def main(argv=None, out=None, err=None):
    """Runs the gate as ``python -m leakcheck gate`` would; returns its exit
    status (argparse usage errors exit 2 through SystemExit)."""
    return run(parser("gate", sys.modules[__name__]).parse_args(argv),
               out=out, err=err)
