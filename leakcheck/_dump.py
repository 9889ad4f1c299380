"""What a leak left behind, gathered for its dump: the objects a
diagnosis' re-runs created and that survived them, each with its type,
size, a repr that runs no code of theirs, and the chain that holds it.
write_dump() (public as leakcheck.write_dump) gathers them and writes the
file through leakcheck.report.dump, which owns the format (read it there)
and its reader, load_dump (public as leakcheck.load_dump).
"""

import gc
import os
import sys
import types
from typing import (TYPE_CHECKING, Iterable, Mapping, Optional, Sequence,
                    Union)

from ._chain import edge, find_chains
from ._evidence import TOP, is_own
from ._evidence.frames import ignored
from ._evidence.objects import origin, type_name
from .report import dump
from .report.diagnosis import diagnosis_sites
from .report.dump import (CAPTURE_SUFFIX, SCHEMA, SUFFIX, DumpError,
                          dump_name, load_dump)

if TYPE_CHECKING:
    from ._diagnose import Diagnosis

PathLike = Union[str, "os.PathLike[str]"]

REPR_LIMIT = 120
LIMIT = 1000              # objects listed per dump at most

__all__ = ["SCHEMA", "DumpError", "survivors", "write_dump", "load_dump",
           "dump_name"]


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
                root = root and os.path.abspath(root)
                rank = 2 if root and (root.startswith(harness[0])
                                      or is_own(root)) else 0
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


# ---- the file ------------------------------------------------------------

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
    head = dump.header(
        test_id, ".".join(map(str, sys.version_info[:3])), diagnosis.leaking,
        deltas or {}, diagnosis.runs, len(entries), truncated, capture,
        getattr(diagnosis, "fds", ()),
        diagnosis_sites(diagnosis.to_dict(), os.getcwd()))
    dump.write(path, head, entries)
    return path
