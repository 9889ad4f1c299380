"""The text of a leak's diagnosis where one line must say it: the gate's
annotations, a dump's header, the ``show`` summary."""

import os

from .schema import is_int64


def relative(path, rootdir):
    """`path` relative to `rootdir` when it lies in it."""
    if rootdir and os.path.isabs(path) and os.path.isabs(rootdir):
        rel = os.path.relpath(path, rootdir)
        if not rel.startswith(os.pardir):
            return rel
    return path


def object_names(paths):
    """The object files of a C line as a report names them: "a.so", or
    "a.so or b.so" when several define its function.  By file name, but
    where two share one (two builds of one extension loaded at once),
    whole: "x.so or x.so" would tell them apart no more than one name."""
    names = [path.rsplit("/", 1)[-1] for path in paths]
    if len(set(names)) < len(names):
        names = list(paths)
    return " or ".join(names)


def _place(entry, rootdir):
    """"file:line function()" of a diagnosis entry, or None when it names
    no place."""
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
        return None
    text = relative(entry["file"], rootdir)
    if is_int64(entry.get("line")) and entry["line"] > 0:
        text += f":{entry['line']}"
    if isinstance(entry.get("function"), str) and entry["function"]:
        text += f" {entry['function']}()"
    return text


def _first(diagnosis, key):
    entries = diagnosis.get(key)
    return entries[0] if isinstance(entries, list) and entries else None


def per_run(total, runs):
    """A total growth over `runs` re-runs per run, as the terminal's
    report says it: a whole number when it divides."""
    return str(total // runs) if total % runs == 0 else f"{total / runs:.1f}"


def plural(n, word):
    return f"{n} {word}{'s' if n != 1 else ''}"


def diagnosis_sites(diagnosis, rootdir=None):
    """The lines a leak's diagnosis found, as text: the C line that
    allocated the most of what survived, and the Python line (the one that
    allocated it, or, when no C frame was seen, the one that ran when the
    C heap grew), each with its growth per run; [] when it found none."""
    if not isinstance(diagnosis, dict):
        return []
    sites = []
    native = _first(diagnosis, "native")
    where = _place(native, rootdir)
    if where:
        text = f"C line {where}"
        if is_int64(native.get("bytes")) and is_int64(native.get("blocks")):
            text += (f": {native['bytes']} bytes in "
                     f"{plural(native['blocks'], 'block')} per run")
        if isinstance(native.get("via"), str) and native["via"]:
            text += f", made by {native['via']}()"
        caller = _place(native.get("caller"), rootdir)
        if caller:
            text += f", called from {caller}"
        sites.append(text)
    runs = diagnosis.get("runs")
    allocation = _first(diagnosis, "allocations")
    heap = _first(diagnosis, "heap_lines")
    where = _place(allocation, rootdir)
    if where:
        text = f"Python line {where}"
        size, count = allocation.get("size"), allocation.get("count")
        if is_int64(size) and is_int64(count) and is_int64(runs) and runs > 0:
            blocks = per_run(count, runs)
            text += (f": {per_run(size, runs)} bytes in {blocks} "
                     f"block{'' if blocks == '1' else 's'} per run")
        sites.append(text)
    elif _place(heap, rootdir):
        text = (f"Python line {_place(heap, rootdir)}, which ran when the C "
                f"heap grew")
        if is_int64(heap.get("bytes")):
            text += f": {heap['bytes']} bytes per run"
        sites.append(text)
    return sites
