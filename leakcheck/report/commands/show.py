"""``python -m leakcheck show FILE [--top N]``: the front end of
leakcheck.report.dump's summary."""

import sys

from .. import dump
from ..files import print_lines, printable

HELP = ("summarise a dump that pytest --leaks-dump wrote: per type, count "
        "and bytes, largest first, and what holds them (exit 2: unusable "
        "input)")


def add_arguments(p):
    p.add_argument("dump", metavar="FILE",
                   help="a dump file (*.leaks.jsonl) from pytest --leaks-dump")
    p.add_argument("--top", type=int, default=20, metavar="N",
                   help="types shown at most (default 20)")


def run(args, out=None, err=None):
    """Prints the summary; returns 0, or 2 when the dump is unusable."""
    out = printable(sys.stdout if out is None else out)
    err = printable(sys.stderr if err is None else err)
    try:
        data = dump.load_dump(args.dump)
    except dump.DumpError as e:
        print_lines([f"leakcheck show: error: {e}"], err)
        return 2
    print_lines(dump.summary(data, top=max(args.top, 1)), out)
    return 0
