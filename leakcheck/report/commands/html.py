"""``python -m leakcheck html REPORT [REPORT ...] -o FILE [--title TEXT]
[--baseline FILE]``: the front end of leakcheck.report.html (which imports
jinja2 when it renders, not when this module is imported)."""

import sys

from ..files import UnusableInput, print_lines, printable
from . import parser, path_argument

HELP = ("write one self-contained HTML page of leakcheck reports: a growth "
        "plot and the diagnosis of every leaking test, a trend over runs "
        "(exit 2: unusable input)")


def add_arguments(p):
    p.add_argument("reports", metavar="REPORT", nargs="+",
                   help="JSON files pytest --leaks-report wrote; several "
                        "runs (nightlies) oldest first")
    p.add_argument("-o", "--output", metavar="FILE", required=True,
                   help="the HTML file to write")
    p.add_argument("--title", help="the page's title")
    p.add_argument("--baseline", metavar="FILE", type=path_argument,
                   help="known leaks, as for 'gate --baseline': a file "
                        "'gate --write-baseline' wrote, or an older report; "
                        "a leak is marked known as the gate would judge it "
                        "(without it: as the run's --leaks-baseline did)")


def run(args, out=None, err=None):
    """Writes the page; returns the exit status: 0, or 2 on unusable
    input."""
    from .. import html
    out = printable(sys.stdout if out is None else out)
    err = printable(sys.stderr if err is None else err)
    try:
        reports = html.write_page(args.reports, args.output, args.title,
                                  args.baseline)
    except UnusableInput as e:
        print_lines([f"leakcheck html: error: {e}"], err)
        return 2
    leaks = sum(1 for _, r in reports for t in r["tests"]
                if t["verdict"] == "leak")
    print_lines([f"leakcheck html: wrote {args.output} ({len(reports)} "
                 f"report{'s' if len(reports) != 1 else ''}, {leaks} leak "
                 f"record{'s' if leaks != 1 else ''})"], out)
    return 0


def main(argv=None, out=None, err=None):
    """Runs the command as ``python -m leakcheck html`` would; returns its
    exit status (argparse usage errors exit 2 through SystemExit)."""
    return run(parser("html", sys.modules[__name__]).parse_args(argv),
               out=out, err=err)
