"""The report commands of ``python -m leakcheck``, one module each: HELP,
add_arguments(parser), run(args) (see leakcheck.__main__).  Each is a thin
front end over leakcheck.report."""

import argparse


def path_argument(text):
    """argparse type of a file path: an empty one (an unset variable?) is
    a usage error."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path (an unset variable?)")
    return text


def parser(name, module):
    """The parser of the command `name` alone, as ``python -m leakcheck
    NAME`` has it."""
    from leakcheck.__main__ import PROG
    p = argparse.ArgumentParser(prog=f"{PROG} {name}", description=module.HELP)
    module.add_arguments(p)
    return p
