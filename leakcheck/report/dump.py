"""The format of a dump, what a leak left behind: one file per leaking test,
written by ``pytest --leaks-dump=DIR`` (leakcheck.write_dump gathers what
goes in it, write() writes it), read by load_dump() (public as
``leakcheck.load_dump``) and summarised by summary() for ``python -m
leakcheck show FILE``.

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
diagnosis does, for the objects the collector tracks); else null.
"chain" is what keeps it alive, as in a diagnosis' chains (root, then one step per reference).

"capture" names a file beside the dump (the dump's name, ending in
CAPTURE_SUFFIX): memray's capture of the re-runs, when memray made one
(``memray flamegraph --leaks FILE``).
"""

import hashlib
import json
import os
import re
from typing import Any, Dict, Union

from .files import BadJSON, UnusableInput, decode, read_text, write_text
from .schema import is_int64, now

SCHEMA = "leakcheck-dump/1"
SUFFIX = ".leaks.jsonl"
CAPTURE_SUFFIX = ".memray.bin"


class DumpError(UnusableInput, ValueError):
    """A dump that cannot be read; str() is the one-line reason."""


def dump_name(test_id):
    """The file name of a test's dump: readable, and distinct for distinct
    ids (a digest of the id), so that pytest-xdist workers writing into one
    folder never clash."""
    digest = hashlib.sha1(test_id.encode("utf-8", "replace")).hexdigest()
    path, sep, rest = test_id.partition("::")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(path) + sep
                  + rest)
    return f"{slug.strip('_.')[:80]}-{digest[:10]}{SUFFIX}"


def header(test_id, python, leaking, deltas, runs, objects, truncated,
           capture, fds, sites):
    """A dump's first line, as the module's text lists its fields."""
    return {"schema": SCHEMA, "test": test_id, "created": now(),
            "python": python, "leaking": list(leaking),
            "deltas": {k: list(v) for k, v in deltas.items()},
            "runs": runs, "objects": objects, "truncated": truncated,
            "capture": capture, "fds": [dict(entry) for entry in fds],
            "sites": list(sites)}


def write(path, head, entries):
    """Writes the dump of the header `head` and the object `entries` to
    `path`, whole or not at all.  Raises OSError."""
    write_text(path, "".join(json.dumps(line) + "\n"
                             for line in [head] + list(entries)))


def load_dump(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
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
            rows.append(decode(line))
        except BadJSON as e:
            problem = {"deep": "nests too deeply to read",
                       "range": f"holds {e}, out of range"}.get(
                e.kind, f"is not valid JSON (a truncated file?): {e}")
            raise DumpError(f"dump {path}: line {n} {problem}") from None
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


