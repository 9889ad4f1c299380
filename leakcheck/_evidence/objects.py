"""Evidence from the objects themselves: the types whose live counts grew
(objects, and the allocator probes, whose growth is often objects), the
objects whose reference counts grew (refs), and what landed in
gc.garbage (garbage).  Also the short, safe descriptions of objects the
other parts of leakcheck print."""

import array
import gc
import itertools
import operator
import sys
import tracemalloc

from .. import _core, cpython
from . import TOP, Evidence
from .frames import charged_frame, ignored, owned_elsewhere

__all__ = ["TypeCensus", "RefCounts", "Garbage", "describe", "type_name",
           "garbage_by_type", "newest_objects", "growth", "allocated_frames",
           "origin"]


def type_name(cls):
    module = getattr(cls, "__module__", None)
    qualname = getattr(cls, "__qualname__", None) or cls.__name__
    if module in (None, "builtins"):
        return qualname
    return f"{module}.{qualname}"


def describe(obj, limit=80):
    """A short, safe description of an object: its type, and its repr when
    that is short and does not fail."""
    if isinstance(obj, type):
        return f"class {type_name(obj)}"
    name = type_name(type(obj))
    try:
        text = repr(obj)
    except Exception:
        text = ""
    if text and len(text) <= limit and not text.startswith("<"):
        return f"{name} {text}"
    return f"{name} object at {id(obj):#x}"


# ---- objects: the type census ---------------------------------------------

class TypeCensus(Evidence):
    """The live count of every type the collector tracks, before and after
    the runs: Diagnosis.objects.

    With `request.keep_objects`, also the objects the runs made that are
    still alive (`survivors`, oldest first), found without an id per
    object: a marker made just before the runs and moved to the end of the
    oldest generation; a full collection keeps that generation in order
    and appends what is younger, so the survivors are what follows the
    marker.  A dict that the collector had untracked and that tracks again
    (it was given a container) is among them too.  Where each was
    allocated goes with them (`allocated`: see origin()), read while
    tracemalloc still traces (the allocation evidence stops it later)."""

    probes = frozenset({"objects", "blocks", "py_bytes", "py_allocs"})

    def __init__(self, request):
        super().__init__(request)
        self.names = {}
        self.counts_before = None
        self.counts_after = None
        self.marker = None
        self.survivors = None
        self.allocated = None

    def before(self):
        # The census after the runs follows a collection, which untracks
        # the tuples and dicts that hold nothing to track (some just made
        # by the lines above): so must this one, or those would offset the
        # growth (a leaked tuple read as -1).
        _collect_fully()
        if self.request.keep_objects:
            self.marker = _Marker()
            gc.collect(1)       # the young (just the marker) go last
        self.counts_before = _type_census((), self.names)

    def after(self):
        # What the kinds inside this one let go of (the reference count
        # census) and that only a collection frees.
        gc.collect()
        own = [self.counts_before]
        if self.marker is not None:
            self.survivors = _after_marker(self.marker, self.counts_before)
            own += [self.marker, self.survivors]
        own.append(own)
        self.counts_after = _type_census(own, self.names)
        self.marker = None
        if self.survivors is not None:
            # After the census, which must not count what this makes.  A
            # function apart: a comprehension here would make `after` hold
            # a closure cell while it counts (a cell read as grown).
            self.allocated = _origins(self.survivors, self.request.ignore)

    def fill(self, diagnosis):
        diagnosis.objects = growth(self.counts_before, self.counts_after,
                                   self.names)
        if self.survivors is not None:
            diagnosis.survivors = self.survivors
            diagnosis.survivors_allocated = self.allocated
            self.survivors = self.allocated = None


def _collect_fully():
    """Collects until a collection untracks nothing more.  A collection
    untracks a tuple only when what it holds is untracked already, so
    nested ones (a tracemalloc snapshot's tracebacks) take one collection
    per level; the one before the census after the runs would untrack
    what is left, read as shrinking."""
    count = None
    for _ in range(4):
        gc.collect()
        now = len(gc.get_objects())
        if now == count:
            break
        count = now


class _Marker:
    """Where the objects made before the runs end in the collector's list."""


def _after_marker(marker, *own):
    """The tracked objects after `marker` in the oldest generation, the
    ones in `own` left out; [] when the marker is not found."""
    objects = gc.get_objects(generation=2)
    i = len(objects)
    while i:
        i -= 1
        if objects[i] is marker:
            break
    else:
        return []
    return [obj for obj in objects[i + 1:]
            if not any(obj is mine for mine in own)]


def _type_census(exclude, names):
    """{id(type): live objects of that type the collector tracks}, the
    objects in `exclude` left out; the names of the types go into
    `names`.  Keyed by id so as not to hold the types themselves (their
    reference counts would read as grown).

    It allocates nothing per object (no id(), no counter int): under
    tracemalloc, which records a traceback for every allocation, that
    would cost microseconds per object of the whole heap.  Each type gets
    a list, one item per object, that grows in amortized steps."""
    objects = gc.get_objects()
    buckets = {}
    for cls in map(type, objects):
        bucket = buckets.get(cls)
        if bucket is None:
            buckets[cls] = [None]
        else:
            bucket.append(None)
    del objects
    for obj in exclude:
        if gc.is_tracked(obj) and type(obj) in buckets:
            buckets[type(obj)].pop()
    counts = {}
    for cls, bucket in buckets.items():
        key = id(cls)
        counts[key] = len(bucket)
        if key not in names:
            names[key] = type_name(cls)
    return counts


def growth(before, after, names):
    """[{"type", "delta"}] of the types that grew, most first."""
    grown = [(count - before.get(key, 0), names[key])
             for key, count in after.items() if count > before.get(key, 0)]
    grown.sort(key=lambda item: (-item[0], item[1]))
    return [{"type": name, "delta": delta} for delta, name in grown[:TOP]]


def newest_objects(count):
    """The `count` objects the collector tracks that were made last: after
    a full collection the younger generations are at the end of the
    oldest (objects frozen with gc.freeze() are in none of them)."""
    return gc.get_objects(generation=2)[-count:] if count > 0 else []


# ---- refs: the reference count census ---------------------------------------

# Objects every piece of code shares (small ints, True, None), whose counts
# move with any code that stores them, and frames, which are running.
_SHARED_TYPES = (int, bool, type(None), type(sys._getframe()))


class RefCounts(Evidence):
    """The objects whose reference count grew by at least one per run:
    Diagnosis.refcounts."""

    probes = frozenset({"refs"})

    def __init__(self, request):
        super().__init__(request)
        self.census = None
        # What after() finds goes into this list, made before any census,
        # as tuples of strings and ints, which the collection before the
        # type census after the runs untracks: that census, around this
        # one, does not count them.
        self.grown = []

    def before(self):
        self.census = _refcount_census()

    def after(self):
        self.grown[:] = _refcount_growth(self.census, self.request.runs)
        self.census = None

    def fill(self, diagnosis):
        diagnosis.refcounts = [{"object": text, "type": name, "delta": delta}
                               for text, name, delta in self.grown]


def _refcount_census():
    """Every object the collector tracks and everything those refer to
    directly (strings, numbers, ...), with their reference counts.  The
    list keeps ids from being reused; it adds references to every count
    (one per time it holds the object), the same before and after.

    Nothing is allocated per object (under tracemalloc every allocation
    costs microseconds, and the heap can hold millions): no id(), no set.
    So an object referred to from several places is in the list more
    than once, told apart by id only among the few that grew.  Left out
    are what the report would leave out anyway (shared objects, immortal
    ones), whose counts are the large ones that would each cost an int,
    and the tracked referents, which gc.get_objects() lists already
    (unless objects are frozen: gc.get_objects() does not list those)."""
    objects = gc.get_objects()
    referents = gc.get_referents(*objects)
    if not gc.get_freeze_count():
        referents = itertools.filterfalse(gc.is_tracked, referents)
    objects += referents
    del referents
    objects[:] = itertools.filterfalse(_not_reported, objects)
    # Last, an object nothing else holds: its count after the runs is that
    # of an object the census alone keeps alive (see _kept_by_census).
    objects.append(_Held())
    return objects, _refcounts(objects)


class _Held:
    __slots__ = ()


def _not_reported(obj):
    # Settling fills the emptied type cache slots with a string of its
    # own (until the engine's trim gives them the engine's, which no
    # Python code reaches): its count follows how many slots the runs'
    # lookups took.
    return (type(obj) in _SHARED_TYPES or _core.is_immortal(obj)
            or obj is cpython.TYPE_CACHE_FILLER)


def _refcounts(objects):
    # An array, not a list: a list of ints would add references to the
    # small ints it holds, and they would read as grown.
    return array.array("q", map(sys.getrefcount, objects))


def _refcount_growth(census, runs):
    """(description, type name, growth) of the objects whose count grew by
    at least one per run."""
    objects, before = census
    after = _refcounts(objects)
    deltas = list(map(operator.sub, after, before))
    del after
    # compress() hands on only the pairs whose delta is big enough; zip
    # reuses its tuple for the others: nothing allocated per object
    # (operator.le, not runs.__le__, whose every call builds a tuple).
    hits = itertools.compress(zip(objects, deltas),
                              map(operator.le, itertools.repeat(runs),
                                  deltas))
    seen, grown = set(), []
    for obj, delta in hits:
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        grown.append((-delta, len(grown), obj))
    del hits, deltas, seen
    # A heap type holds a reference from each of its instances.  What the
    # runs replaced (pytest's log streams, every phase) the census kept
    # alive: on CPython 3.12+, where io's types are heap types, _io.StringIO
    # would read as grown by what the census held.  Such growth is not
    # the code's.
    grown = [(negative, i, obj) for negative, i, obj in grown
             if not isinstance(obj, type)
             or -negative - _kept_by_census(objects, obj) >= runs]
    grown.sort(key=lambda item: item[:2])
    return [(describe(obj), type_name(type(obj)), -negative)
            for negative, _, obj in grown[:TOP]]


def _kept_by_census(objects, cls):
    """How many instances of `cls` in the census are alive only because
    the census holds them (their count is that of the census's last
    object, which nothing else holds)."""
    alone = sys.getrefcount(objects[-1])
    return sum(1 for obj in objects
               if type(obj) is cls and sys.getrefcount(obj) == alone)


# ---- garbage ------------------------------------------------------------------

class Garbage(Evidence):
    """What is in gc.garbage, by type, and how much of it is new:
    Diagnosis.garbage."""

    probes = frozenset({"garbage"})

    def before(self):
        self.count_before = len(gc.garbage)

    def after(self):
        # Now, not in fill(): other kinds' runs of their own come between.
        self.garbage = garbage_by_type(self.count_before)

    def fill(self, diagnosis):
        diagnosis.garbage = self.garbage


def garbage_by_type(before):
    """[{"type", "count", "new"}] of gc.garbage, the items from index
    `before` on counted as new."""
    counts, new = {}, {}
    for i, obj in enumerate(gc.garbage):
        name = type_name(type(obj))
        counts[name] = counts.get(name, 0) + 1
        if i >= before:
            new[name] = new.get(name, 0) + 1
    ranked = sorted(counts, key=lambda name: (-new.get(name, 0),
                                              -counts[name], name))
    return [{"type": name, "count": counts[name], "new": new.get(name, 0)}
            for name in ranked[:TOP]]


def allocated_frames(obj):
    """The (file, line) frames, oldest first, that allocated `obj`, when
    tracemalloc traced it; else None."""
    if not tracemalloc.is_tracing():
        return None
    tb = tracemalloc.get_object_traceback(obj)
    return [(frame.filename, frame.lineno) for frame in tb] if tb else None


def _origins(objects, ignore):
    ignore = ignored(ignore)
    return [origin(obj, ignore) for obj in objects]


def origin(obj, ignore):
    """("file:line" that allocated `obj`, whether that allocation is a
    harness's or leakcheck's: see frames.owned_elsewhere), or None when
    tracemalloc did not trace it.  `ignore` as frames.ignored() gives it.
    The text is new: nothing here keeps a reference to a file name, whose
    count the refs evidence may be comparing."""
    frames = allocated_frames(obj)
    if not frames:
        return None
    charged = charged_frame(frames)
    if charged is None:
        return None, True
    return ("%s:%d" % frames[charged],
            owned_elsewhere(frames, charged, ignore))


