"""``python -m leakcheck COMMAND ...``: the command line of leakcheck.

Commands:
  gate REPORT [--baseline FILE] [--write-baseline FILE]
        judge a pytest --leaks-report file for CI (see leakcheck.gate)
"""

import sys

USAGE = ("usage: python -m leakcheck gate REPORT [--baseline FILE] "
         "[--write-baseline FILE]")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip() if argv else USAGE,
              file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "gate":
        from leakcheck.gate import main as gate_main
        return gate_main(rest)
    print(f"leakcheck: unknown command {command!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
