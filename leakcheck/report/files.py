"""The files of the report layer: reading them without hanging, parsing
their JSON within bounds, writing them whole or not at all.

Every reader here raises UnusableInput, whose str() is one line naming the
file and what is wrong with it; the commands print it and exit 2.
Standard library only: the gate runs wherever a report lands.
"""

import json
import os
import stat
import sys
import tempfile
from typing import Any, Mapping, Union

# JSON nested deeper than this is no leakcheck file (a report's deepest
# part, a diagnosis' chain step, is six levels down): refused before any
# reader, template or encoder recurses into it.
MAX_DEPTH = 64
# Integers longer than this are refused while parsing: converting one
# costs time quadratic in its length (CPython 3.11+ refuses them too, 3.9
# and 3.10 would take minutes).  Shorter ones that no field may hold (an
# int64 reading of 10**400) are refused by the check of that field, which
# names it.
MAX_DIGITS = 4300


class UnusableInput(Exception):
    """An input file a command cannot use; str() is the one-line reason."""


class _OutOfBounds(ValueError):
    pass


def read_text(path, what):
    """The UTF-8 text of the regular file `path`; UnusableInput naming
    `what` otherwise.  Opened without blocking and checked before it is
    read: a FIFO, a device (/dev/zero) or a directory is refused at once,
    never waited on or read without end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise UnusableInput(f"cannot read {what} {path}: {e.strerror or e}")
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnusableInput(f"{what} {path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    except OSError as e:
        raise UnusableInput(f"cannot read {what} {path}: {e.strerror or e}")
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UnusableInput(f"{what} {path} is not UTF-8 text")


def _int(text):
    if len(text) > MAX_DIGITS:
        raise _OutOfBounds(f"an integer of {len(text.lstrip('-'))} digits")
    return int(text)


def _float(text):
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _OutOfBounds(f"the number {text[:40]}")
    return value


def _constant(name):
    raise _OutOfBounds(f"the number {name}")


_decoder = json.JSONDecoder(parse_int=_int, parse_float=_float,
                            parse_constant=_constant)


def _too_deep(value):
    """Whether `value` nests deeper than MAX_DEPTH (walked without
    recursion)."""
    stack = [(value, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        elif not isinstance(value, list):
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((v, depth + 1) for v in value
                     if isinstance(v, (dict, list)))
    return False


class BadJSON(ValueError):
    """Text that decode() refuses: `kind` is "invalid" (not JSON), "deep"
    (nested deeper than MAX_DEPTH) or "range" (a number out of range);
    str() says what is wrong."""

    def __init__(self, kind, detail):
        super().__init__(detail)
        self.kind = kind


def decode(text):
    """`text` as JSON, within leakcheck's bounds; BadJSON otherwise."""
    try:
        value = _decoder.decode(text)
    except _OutOfBounds as e:
        raise BadJSON("range", str(e)) from None
    except RecursionError:
        raise BadJSON("deep", "nests too deeply") from None
    except ValueError as e:
        raise BadJSON("invalid", str(e)) from None
    if _too_deep(value):
        raise BadJSON("deep", "nests too deeply")
    return value


def parse_json(text, path, what):
    """`text` as JSON; UnusableInput naming `what` and `path` when it is
    not JSON, nests deeper than MAX_DEPTH, or holds a number no leakcheck
    file holds (longer than MAX_DIGITS, infinite, NaN)."""
    try:
        return decode(text)
    except BadJSON as e:
        if e.kind == "range":
            problem = f"it holds {e}, out of range"
        elif e.kind == "deep":
            problem = "its JSON nests too deeply to read"
        else:
            raise UnusableInput(f"{what} {path} is not valid JSON: {e}") \
                from None
        raise UnusableInput(f"{what} {path} is not a leakcheck file: "
                            f"{problem}") from None


def load_json(path, what):
    """The JSON document in the file `path` (see read_text, parse_json)."""
    return parse_json(read_text(path, what), path, what)


class Entries:
    """A top-level list of a document read as it is written: `count`
    entries that `entries()` yields (a report's tests, one at a time from
    its journal), so that a large report is never whole in memory.  An
    entry is a JSON value, or a RawJSON: its text, written as it is."""

    def __init__(self, count, entries):
        self.count = count
        self.entries = entries

    def __len__(self):
        return self.count

    def __iter__(self):
        return iter(self.entries())


class RawJSON(str):
    """The JSON text of an entry of Entries, ASCII only and encoded as
    encode_entry() encodes (a record as the journal holds it): written
    as it is, not decoded and encoded again."""

    __slots__ = ()


def layout(data):
    """JSON text of a report or baseline: one line per top-level key, and
    one line per entry of a top-level list or object, so that files diff
    and grep well.  ASCII only: a test id holding any code point, a lone
    surrogate too, is written escaped."""
    return "".join(layout_pieces(data))


def layout_pieces(data):
    """layout()'s text in pieces, an entry of a top-level list (or
    Entries) at a time."""
    yield "{\n"
    for i, (key, value) in enumerate(data.items()):
        head = f"{chr(10) if i else ''}  {json.dumps(key)}: "
        comma = "," if i < len(data) - 1 else ""
        if isinstance(value, Entries) and not len(value):
            value = []
        if isinstance(value, (list, Entries)) and len(value):
            yield head + "["
            encode = _entry_text if isinstance(value, Entries) \
                else json.dumps
            for n, v in enumerate(value):
                yield f"{',' if n else ''}\n    {encode(v)}"
            yield "\n  ]" + comma
        elif isinstance(value, dict) and value and key != "environment":
            items = [f"    {json.dumps(k)}: {json.dumps(v)}"
                     for k, v in value.items()]
            yield head + "{\n" + ",\n".join(items) + "\n  }" + comma
        else:
            yield head + json.dumps(value) + comma
    yield "\n}\n"


# The engine's writer of json.dumps()'s text (leakcheck/_jsontext.c), for
# the values it takes; the json module's for the others, and wherever the
# engine is not built.
try:
    from .._core import json_text as _json_text
except ImportError:
    _json_text = None


def one_shot_encoder(**options):
    """JSONEncoder(check_circular=False, **options).encode, the same text,
    without what encode() makes anew at every call (a C encoder, and a
    closure for floats): the C encoder is made once, when this Python's
    json module has one.  With json's defaults but the separators (and
    `default`), the engine's json_text() writes what it can (the same
    text, in one buffer), the json module the rest."""
    encoder = json.JSONEncoder(check_circular=False, **options)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None or encoder.indent is not None:
        return encoder.encode
    strings = (json.encoder.encode_basestring_ascii if encoder.ensure_ascii
               else json.encoder.encode_basestring)
    try:
        chunks = make(None, encoder.default, strings, None,
                      encoder.key_separator, encoder.item_separator,
                      encoder.sort_keys, encoder.skipkeys,
                      encoder.allow_nan)
    except TypeError:           # a json module of another shape
        return encoder.encode
    join = "".join

    def encode(value):
        return join(chunks(value, 0))
    if _json_text is None or not encoder.ensure_ascii or \
            not encoder.allow_nan or encoder.sort_keys or encoder.skipkeys:
        return encode
    items, keys = encoder.item_separator, encoder.key_separator

    def encode_fast(value):
        text = _json_text(value, items, keys)
        return text if text is not None else join(chunks(value, 0))
    return encode_fast


# json.dumps() without the check for circular references, for Entries (a
# report's tests: trees of dicts, lists and scalars); the same text.  The
# journal encodes its records so too (default=str for what JSON has no
# type for, which reads back as that string): their text is the entry's.
encode_entry = one_shot_encoder(default=str)


def _entry_text(entry):
    return entry if type(entry) is RawJSON else encode_entry(entry)


def write_json(path: Union[str, "os.PathLike[str]"],
               data: Mapping[str, Any]) -> None:
    """Writes a report or baseline `data` to `path` atomically, in the
    layout layout() gives (see write_text).  Public as
    leakcheck.write_report."""
    write_text(path, layout_pieces(data))


def write_text(path, text, errors="strict"):
    """Writes `text` to `path` whole or not at all: into a temporary file
    beside it, flushed to disk (fsync), renamed over it; its folder made
    if missing.  Readers see the old file or the whole new one, even when
    the process is killed while writing.  A symbolic link is followed (its
    target is replaced, the link stays).  A path that names something other
    than a regular file (a device, a pipe, a terminal: /dev/stdout,
    /dev/full) is written in place, never replaced by a file.  `errors` is
    the UTF-8 encoder's (an HTML page escapes a lone surrogate with
    "backslashreplace").  `text` may be an iterable of pieces, written as
    they come.  Raises OSError."""
    path = os.fspath(path)
    pieces = (text,) if isinstance(text, str) else text
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        regular = None
    if regular is False:
        with open(path, "w", encoding="utf-8", errors=errors) as f:
            for piece in pieces:
                f.write(piece)
        return
    if regular:
        path = os.path.realpath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".leakcheck-", suffix=".tmp",
                               dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)   # as open() would, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8", errors=errors,
                       newline="") as f:
            for piece in pieces:
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def printable(stream):
    """`stream`, set to write what its encoding cannot (a lone surrogate, a
    non-ASCII id on an ASCII terminal) as escapes rather than fail."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError):
            pass
    return stream


def print_lines(lines, out):
    """Prints `lines`; a reader that stops early (``| head``) changes
    nothing."""
    try:
        for line in lines:
            print(line, file=out)
        out.flush()
    except BrokenPipeError:
        if out is sys.stdout:
            # Nothing more can be written; keep the interpreter's final
            # flush from failing too.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
