"""``python -m leakcheck COMMAND ...``: leakcheck's command line.

Each command is a module of this package named in COMMANDS, which defines

    HELP                    one line, shown by ``python -m leakcheck --help``
    add_arguments(parser)   its arguments, on an argparse parser
    run(args)               does the work; returns the exit status

Adding a command is writing that module and one line in COMMANDS.  Every
command's module is imported to build the help, so importing one must stay
cheap: a command that needs a heavy library imports it in run().

Exit status 2 is a usage error, as argparse gives it: a bad option, an
unknown command, no command at all.
"""

import argparse
import importlib
import sys

PROG = "python -m leakcheck"

COMMANDS = {
    "gate": "leakcheck.report.commands.gate",
    "html": "leakcheck.report.commands.html",
    "show": "leakcheck.report.commands.show",
}


def build_parser():
    import leakcheck
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="leakcheck's commands: judge, show and keep what "
                    "pytest --leaks-report found.")
    parser.add_argument("--version", action="version",
                        version=f"leakcheck {leakcheck.__version__}")
    sub = parser.add_subparsers(title="commands", dest="command",
                                metavar="COMMAND")
    sub.required = True
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(name, help=module.HELP,
                                 description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
