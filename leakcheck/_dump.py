"""Dumps of what a leak left behind: one file per leaking test, written by
``pytest --leaks-dump=DIR``, read by ``leakcheck.load_dump`` and summarised
by ``python -m leakcheck show FILE``.

The format is JSON lines, UTF-8.  The first line is the header:

    {"schema": "leakcheck-dump/1", "test": test id, "created": ISO time,
     "python": version, "leaking": [probes], "deltas": {probe: [per run]},
     "runs": re-runs the diagnosis made, "objects": lines that follow,
     "truncated": true when more were found than LIMIT,
     "capture": memray capture file or null,
     "fds": [{"fd": number, "target": what /proc/self/fd names: a path,
              "socket:[inode]", "pipe:[inode]", ...}] the re-runs left
             open (absent in dumps written before it was added),
     "sites": [text] the C line and the Python line the diagnosis found,
              as the gate's annotations say them (absent in older dumps)}

Each line after it is one object that the diagnosis' re-runs created and
that survived them, as found among the objects the garbage collector
tracks (containers, instances; a string or a number kept alone shows in
the diagnosis' allocation lines instead):

    {"type": qualified name, "size": sys.getsizeof, "repr": short text,
     "id": id(), "allocated": "file:line" or null,
     "chain": {"root", "kind", "expression", "path"} or null}

"repr" is the repr of builtin types only (a str, a number, a list of
those, ...), shortened; any other object reads "<TYPE object at 0x...>":
taking the repr never runs the code under test, which could raise or hang.
"size" is the object alone, not what it refers to.  "allocated" is the
line that allocated it, when tracemalloc traced that (the plugin's
diagnosis does, for the objects the collector tracks); else null.  "chain" is what keeps
it alive, as in a diagnosis' chains (root, then one step per reference).

"capture" names a file beside the dump (the dump's name, ending in
CAPTURE_SUFFIX): memray's capture of the re-runs, when memray made one
(``memray flamegraph --leaks FILE``).
"""

import datetime
import gc
import json
import os
import re
import sys
import types
from typing import (TYPE_CHECKING, Any, Dict, Iterable, Mapping, Optional,
                    Sequence, Union)

from ._chain import edge, find_chains
from ._evidence import PACKAGE_DIR, TOP
from ._evidence.frames import ignored
from ._evidence.objects import origin, type_name
from .gate import (UnusableInput, diagnosis_sites, is_int64, printable,
                   read_text, write_text)

if TYPE_CHECKING:
    from ._diagnose import Diagnosis

PathLike = Union[str, "os.PathLike[str]"]

SCHEMA = "leakcheck-dump/1"
SUFFIX = ".leaks.jsonl"
CAPTURE_SUFFIX = ".memray.bin"
REPR_LIMIT = 120
LIMIT = 1000              # objects listed per dump at most

__all__ = ["SCHEMA", "DumpError", "survivors", "write_dump", "load_dump",
           "summary", "dump_name"]


class DumpError(ValueError):
    """A dump that cannot be read; str() is the one-line reason."""


# ---- safe descriptions ----------------------------------------------------

_ATOMS = (type(None), bool, int, float, complex)
_TEXTS = (str, bytes, bytearray)
_CONTAINERS = (list, tuple, set, frozenset, dict)
_EMPTY = {list: "[]", tuple: "()", set: "set()", frozenset: "frozenset()",
          dict: "{}"}
_SIZE_SLOTS = (types.BuiltinFunctionType, types.MethodDescriptorType,
               types.WrapperDescriptorType)


def safe_repr(obj, limit=REPR_LIMIT):
    """A short repr that never runs code of the objects' own: reprs of
    builtin types only (not their subclasses, which may override
    __repr__), cut at `limit` characters; otherwise type and id."""
    text = _repr(obj, limit, 2)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _repr(obj, limit, depth):
    cls = type(obj)
    if cls in _ATOMS:
        if cls is int and obj.bit_length() > 4 * limit:
            return f"<int of {obj.bit_length()} bits>"
        return repr(obj)
    if cls in _TEXTS:
        text = repr(obj[:limit])
        return text if len(obj) <= limit else text + f"... ({len(obj)})"
    if cls in _CONTAINERS:
        if not obj:
            return _EMPTY[cls]
        if depth == 0:
            return f"<{cls.__name__} of {len(obj)}>"
        parts, used = [], 0
        if cls in (list, tuple):
            # What the collector sees, never iteration: a list or tuple a
            # C function made and left on an error path may hold unset
            # (NULL) items, which iterating would crash on.
            # (CPython's traversal visits them last to first.)
            items = gc.get_referents(obj)[::-1]
            if len(items) != len(obj):
                return (f"<{cls.__name__} of {len(obj)}, "
                        f"{len(obj) - len(items)} of them unset (NULL)>")
        else:
            items = obj.items() if cls is dict else obj
        for item in items:
            if used > limit:
                parts.append("...")
                break
            if cls is dict:
                part = (f"{_repr(item[0], limit, depth - 1)}: "
                        f"{_repr(item[1], limit, depth - 1)}")
            else:
                part = _repr(item, limit, depth - 1)
            parts.append(part)
            used += len(part) + 2
        inner = ", ".join(parts)
        if cls is list:
            return f"[{inner}]"
        if cls is tuple:
            return f"({inner}{',' if len(obj) == 1 else ''})"
        if cls is dict:
            return "{" + inner + "}"
        return f"{cls.__name__}({{{inner}}})" if cls is frozenset \
            else "{" + inner + "}"
    if cls is type:
        return f"<class {type_name(obj)}>"
    if cls in (types.FunctionType, types.BuiltinFunctionType):
        return f"<function {obj.__qualname__}>"
    if cls is types.ModuleType:
        return f"<module {obj.__name__}>"
    return f"<{type_name(cls)} object at {id(obj):#x}>"


def safe_size(obj):
    """sys.getsizeof(obj) when its type's __sizeof__ is a builtin one;
    otherwise object.__sizeof__ (a __sizeof__ written in Python is code
    under test)."""
    if isinstance(getattr(type(obj), "__sizeof__", None), _SIZE_SLOTS):
        try:
            return sys.getsizeof(obj)
        except Exception:
            pass
    return object.__sizeof__(obj)


def survivors(diagnosis, ignore=(), limit=LIMIT):
    """The entries of a dump for the objects a diagnosis kept
    (Diagnosis.survivors, made with keep_objects), which it drops: up to
    `limit`, and whether there were more.

    The runs also made objects that replaced older ones (a harness's log
    stream per run): alive, new, and no leak.  So of each type no more
    objects are kept than the type grew by, and a type the diagnosis does
    not list as grown is left out (unless its list was cut short).  The
    ones kept are, first, those the code under test allocated (when
    tracemalloc traced their allocation: the harness in `ignore`, folders,
    and leakcheck allocate the others), or else held from a module or
    frame outside the harness; then those nothing visible holds (C
    code's); the harness's last.  What a kept object alone refers to and
    the collector does not track (a str, bytes, a number: part of what it
    keeps alive) follows it."""
    objects = diagnosis.survivors or []
    allocated = getattr(diagnosis, "survivors_allocated", None) or []
    diagnosis.survivors = diagnosis.survivors_allocated = None
    harness = ignored(list(ignore))
    own = harness[0] + (os.path.join(PACKAGE_DIR, ""),)
    grown = {entry["type"]: entry["delta"] for entry in diagnosis.objects}
    listed_all = len(diagnosis.objects) < TOP
    try:
        chains = find_chains(objects)
        candidates = {}                 # type name -> [(rank, index)]
        places = {}                     # index -> where it was allocated
        for i, (obj, chain) in enumerate(zip(objects, chains)):
            name = type_name(type(obj))
            if listed_all and name not in grown:
                continue
            where = (allocated[i] if i < len(allocated)
                     else origin(obj, harness))
            if where is not None:
                places[i], theirs = where
                rank = 2 if theirs else 0
            elif chain is None:
                rank = 1
            else:
                root = chain.get("root_file")
                rank = 2 if root and os.path.abspath(root).startswith(own) \
                    else 0
            candidates.setdefault(name, []).append((rank, i))
        kept = []
        for name, found in candidates.items():
            found.sort()
            kept += [i for _, i in found[:grown.get(name, len(found))]]
        kept.sort()
        entries = []
        for i in kept:
            if len(entries) > limit:
                break
            entries.append(_entry(objects[i], _short_chain(chains[i]),
                                  places.get(i)))
            entries += _alone_held(objects[i], entries[-1]["chain"])
        return entries[:limit], len(entries) > limit or len(kept) > limit
    finally:
        objects.clear()


def _entry(obj, chain, allocated=None):
    return {"type": type_name(type(obj)), "size": safe_size(obj),
            "repr": safe_repr(obj), "id": id(obj), "allocated": allocated,
            "chain": chain}


def _short_chain(chain):
    if chain is None:
        return None
    return {key: chain.get(key) for key in ("root", "kind", "expression",
                                            "path")}


def _place(obj):
    where = origin(obj, ((), frozenset()))
    return where[0] if where else None


def _untracked_referents(obj):
    """[(child, its reference count, read here)] for what `obj` refers to
    and the collector does not track."""
    out = []
    for child in gc.get_referents(obj):
        if not gc.is_tracked(child):
            out.append((child, sys.getrefcount(child)))
    return out


# The count _untracked_referents() reads for a child that only its object
# holds: that object's reference, get_referents' list's, and those of the
# loop and of getrefcount's argument, which 3.14 may borrow (not count).
# Read, not assumed: it is the count of a bytearray only a list holds.
_ALONE = _untracked_referents([bytearray()])[0][1]


def _held_alone(obj):
    return [child for child, count in _untracked_referents(obj)
            if count == _ALONE]


def _alone_held(obj, chain, depth=3):
    """Entries for what only `obj` refers to and the collector does not
    track (a str, bytes, a number; a dict of those, and what it holds),
    each with `chain` one step longer."""
    out = []
    for child in _held_alone(obj):
        step = edge(obj, child)
        longer = None
        if chain is not None:
            longer = dict(chain, path=chain["path"] + [
                {"edge": step, "type": type_name(type(child))}])
            expression = chain.get("expression")
            if not (expression and step.startswith((".", "["))):
                expression = None
            elif expression.endswith(".__dict__") and step[2:-2].isidentifier():
                expression = expression[:-len("__dict__")] + step[2:-2]
            else:
                expression += step
            longer["expression"] = expression
        out.append(_entry(child, longer, _place(child)))
        if depth > 1:
            out += _alone_held(child, longer, depth - 1)
    return out


# ---- files ---------------------------------------------------------------

def dump_name(test_id):
    """The file name of a test's dump: readable, and distinct for distinct
    ids (a digest of the id), so that pytest-xdist workers writing into one
    folder never clash."""
    import hashlib
    digest = hashlib.sha1(test_id.encode("utf-8", "replace")).hexdigest()
    path, sep, rest = test_id.partition("::")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(path) + sep
                  + rest)
    return f"{slug.strip('_.')[:80]}-{digest[:10]}{SUFFIX}"


def write_dump(directory: PathLike, test_id: str, diagnosis: "Diagnosis",
               deltas: Optional[Mapping[str, Sequence[int]]] = None,
               ignore: Iterable[PathLike] = ()) -> str:
    """Writes the dump of `test_id` into `directory` (made if missing),
    whole and atomically, from `diagnosis` (made with keep_objects, whose
    survivors it describes and drops: see survivors()); returns its path.
    `deltas` are the series' {probe: [growth per run]}.  memray's capture
    (Diagnosis.capture), when it was kept in `directory`, is renamed
    after the dump.  Raises OSError."""
    entries, truncated = survivors(diagnosis, ignore)
    directory = os.fspath(directory)
    path = os.path.join(directory, dump_name(test_id))
    capture = getattr(diagnosis, "capture", None)
    if capture and os.path.dirname(os.path.abspath(capture)) == \
            os.path.abspath(directory):
        named = path[:-len(SUFFIX)] + CAPTURE_SUFFIX
        os.replace(capture, named)
        capture = os.path.basename(named)
    header = {
        "schema": SCHEMA, "test": test_id,
        "created": datetime.datetime.now(datetime.timezone.utc)
                           .strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": ".".join(map(str, sys.version_info[:3])),
        "leaking": list(diagnosis.leaking), "deltas": dict(deltas or {}),
        "runs": diagnosis.runs, "objects": len(entries),
        "truncated": truncated, "capture": capture,
        "fds": [dict(entry) for entry in getattr(diagnosis, "fds", ())],
        "sites": diagnosis_sites(diagnosis.to_dict(), os.getcwd())}
    write_text(path, "".join(json.dumps(line) + "\n"
                             for line in [header] + entries))
    return path


def load_dump(path: PathLike) -> Dict[str, Any]:
    """The dump at `path`: its header as a dict, with "objects" replaced by
    the list of its objects (dicts: type, size, repr, id, chain).  Raises
    DumpError (a ValueError) with a one-line reason when `path` cannot be
    read or is not a dump of a known version."""
    try:
        # A FIFO or a device is refused without waiting for a writer.
        lines = read_text(path, "dump").splitlines()
    except UnusableInput as e:
        raise DumpError(str(e)) from None
    if not lines:
        raise DumpError(f"dump {path} is empty")
    rows = []
    for n, line in enumerate(lines, 1):
        try:
            rows.append(json.loads(line))
        except ValueError as e:
            raise DumpError(f"dump {path}: line {n} is not valid JSON "
                            f"(a truncated file?): {e}")
        except RecursionError:
            raise DumpError(f"dump {path}: line {n} nests too deeply to "
                            f"read")
        if not isinstance(rows[-1], dict):
            raise DumpError(f"dump {path}: line {n} is not a JSON object")
    header = rows[0]
    if header.get("schema") != SCHEMA:
        raise DumpError(f"dump {path} has schema {header.get('schema')!r}, "
                        f"expected {SCHEMA!r}")
    problem = _odd_header(header)
    if problem:
        raise DumpError(f"dump {path}: line 1 {problem}")
    objects = rows[1:]
    for n, entry in enumerate(objects, 2):
        size = entry.get("size")
        if not isinstance(entry.get("type"), str) or not _is_size(size):
            raise DumpError(f"dump {path}: line {n} has no string \"type\" "
                            f"and integer \"size\"")
    if isinstance(header.get("objects"), int) and \
            header["objects"] != len(objects):
        raise DumpError(f"dump {path} lists {len(objects)} objects, its "
                        f"header says {header['objects']} (a truncated "
                        f"file?)")
    data = dict(header)
    data["objects"] = objects
    return data


def _is_size(value):
    return is_int64(value) and value >= 0


def _odd_header(header):
    """What is wrong with the header fields summary() reads, or None."""
    leaking = header.get("leaking")
    if leaking is not None and not (isinstance(leaking, list) and all(
            isinstance(p, str) for p in leaking)):
        return "has a \"leaking\" that is not a list of probe names"
    deltas = header.get("deltas")
    if deltas is not None and not (isinstance(deltas, dict) and all(
            isinstance(v, list) and all(is_int64(d) for d in v)
            for v in deltas.values())):
        return "has \"deltas\" that are not lists of integers by probe"
    if header.get("objects") is not None and not _is_size(header["objects"]):
        return "has an \"objects\" count that is not an integer"
    fds = header.get("fds")
    if fds is not None and not (isinstance(fds, list) and all(
            isinstance(e, dict) and _is_size(e.get("fd"))
            and isinstance(e.get("target"), str) for e in fds)):
        return ("has \"fds\" that are not a list of {\"fd\": integer, "
                "\"target\": string}")
    sites = header.get("sites")
    if sites is not None and not (isinstance(sites, list) and all(
            isinstance(e, str) for e in sites)):
        return "has \"sites\" that are not a list of strings"
    return None


# ---- the summary ----------------------------------------------------------

def _bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f}{unit}" if unit != "B" else f"{n}B"
        n /= 1024


_INDEX = re.compile(r"\[\d+\]")


def summary(dump, top=20):
    """The lines `python -m leakcheck show` prints: per type, count and
    bytes, largest first, as meliae's summarize() does, then for the
    largest types what holds most of their objects."""
    objects = dump["objects"]
    by_type = {}
    for entry in objects:
        row = by_type.setdefault(entry["type"], [0, 0, 0, {}])
        row[0] += 1
        row[1] += entry["size"]
        row[2] = max(row[2], entry["size"])
        chain = entry.get("chain")
        if isinstance(chain, dict):
            held = chain.get("expression") or chain.get("root")
            if isinstance(held, str):
                held = _INDEX.sub("[...]", held)
                row[3][held] = row[3].get(held, 0) + 1
    total = sum(row[1] for row in by_type.values())
    lines = [f"leakcheck dump of {dump.get('test')} ({dump.get('schema')})"]
    deltas = dump.get("deltas") or {}
    leaking = dump.get("leaking") or []
    if leaking:
        lines.append("leaked: " + "; ".join(
            f"{p} " + " ".join(f"{d:+d}" for d in deltas.get(p, ())
                               if isinstance(d, int))
            for p in leaking))
    extra = " (cut short: more were found)" if dump.get("truncated") else ""
    sites = dump.get("sites") or []
    if sites:
        lines.append("the diagnosis found:")
        lines += [f"  {site}" for site in sites]
    fds = _fd_lines(dump)
    if not objects:
        if not fds:
            lines.append(_why_no_objects(leaking, sites, dump))
        return lines + fds + _capture_line(dump)
    lines.append(f"Total {len(objects)} objects{extra}, {len(by_type)} "
                 f"types, Total size = {_bytes(total)} ({total} bytes)")
    lines.append(f"{'Index':>5} {'Count':>7} {'%':>3} {'Size':>10} {'%':>3} "
                 f"{'Cum':>3} {'Max':>8} Kind")
    ranked = sorted(by_type.items(), key=lambda kv: (-kv[1][1], -kv[1][0],
                                                     kv[0]))
    cum = 0
    for i, (name, (count, size, biggest, _)) in enumerate(ranked[:top]):
        cum += size
        lines.append(
            f"{i:>5} {count:>7} {_pct(count, len(objects)):>3} {size:>10} "
            f"{_pct(size, total):>3} {_pct(cum, total):>3} {biggest:>8} "
            f"{name}")
    if len(ranked) > top:
        lines.append(f"  ... and {len(ranked) - top} more types")
    held_lines = []
    for name, (count, _, _, held) in ranked[:5]:
        if held:
            where, n = max(held.items(), key=lambda kv: (kv[1], kv[0]))
            held_lines.append(f"  {name}: {n} of {count} held by {where}")
    if held_lines:
        lines.append("Held by (the commonest chain of each largest type):")
        lines += held_lines
    return lines + fds + _capture_line(dump)


# Probes whose growth is memory Python allocated, an object or not.
_MEMORY_PROBES = ("refs", "blocks", "py_bytes", "py_allocs")


def _why_no_objects(leaking, sites, dump):
    """Why a dump lists no surviving object, from what leaked."""
    where = ("the lines above say where it was allocated" if sites else
             "the test's failure report says where it was allocated"
             + (", and memray's capture below" if dump.get("capture")
                else ""))
    memory = [p for p in leaking if p in _MEMORY_PROBES]
    if memory:
        return (f"no surviving objects listed: what grew ({', '.join(memory)})"
                f" is memory no object the garbage collector tracks holds (a "
                f"str, bytes or int kept alone, a PyMem buffer, an object a C "
                f"function made and never tracked); {where}")
    if "objects" in leaking:
        return ("no surviving objects listed: the objects that grew while "
                "measured did not survive the diagnosis' re-runs (a cache "
                f"that fills up, then stops?); {where}")
    if leaking:
        return (f"no surviving objects listed: what grew "
                f"({', '.join(leaking)}) is no Python object; {where}")
    return ("no surviving objects listed (they are looked for when objects "
            "or allocator probes leak)")


def _fd_lines(dump):
    fds = dump.get("fds") or []
    if not fds:
        return []
    return (["file descriptors the re-runs left open (fd -> what it is):"]
            + [f"  {entry['fd']} -> {entry['target']}" for entry in fds])


def _capture_line(dump):
    if not dump.get("capture"):
        return []
    return [f"memray capture: {dump['capture']} (memray flamegraph "
            f"--leaks FILE)"]


def _pct(part, whole):
    return int(100 * part / whole) if whole else 0


# ---- the command ----------------------------------------------------------

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
        dump = load_dump(args.dump)
    except DumpError as e:
        print(f"leakcheck show: error: {e}", file=err)
        return 2
    for line in summary(dump, top=max(args.top, 1)):
        print(line, file=out)
    return 0
