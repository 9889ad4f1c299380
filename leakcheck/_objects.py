"""Checks on particular objects: their reference counts, whether they die,
and whether the collector found anything it cannot free."""

import gc
import sys
import weakref
from types import TracebackType
from typing import Any, Literal, Optional, Type

from . import _core
from ._settle import settle_and_collect
from ._chain import find_chain
from ._evidence.objects import describe, garbage_by_type, type_name
from ._errors import LeakError

__all__ = ["refcounts", "watch", "Handle", "assert_finalized",
           "assert_no_garbage"]


def _counts(objects):
    return [sys.getrefcount(obj) for obj in objects]


class refcounts:
    """A context manager that fails with LeakError when the reference count
    of any of `objs` is higher at the end of the block than at its start::

        with leakcheck.refcounts(arg, result_cache):
            extension.function(arg)

    Immortal objects (CPython 3.12+: None, small ints, interned strings,
    ...) are skipped: their counts never change.  On older versions such
    shared objects change with any code, so pass objects of your own.  When
    the block raises, no check is made.  After the block, ``before`` and
    ``after`` hold the counts.
    """

    def __init__(self, *objs: object) -> None:
        self._objs = objs
        self.before: Optional[list[int]] = None
        self.after: Optional[list[int]] = None

    def __enter__(self) -> "refcounts":
        self.before = _counts(self._objs)
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        if exc_type is not None:
            return False
        self.after = _counts(self._objs)
        grown = [i for i, (before, after) in
                 enumerate(zip(self.before, self.after))
                 if after > before and not _core.is_immortal(self._objs[i])]
        if not grown:
            return False
        from ._diagnose import Diagnosis
        diagnosis = Diagnosis(["refs"])
        lines = [f"leakcheck: reference counts grew in the refcounts() "
                 f"block ({len(grown)} of {len(self._objs)} object"
                 f"{'' if len(self._objs) == 1 else 's'})"]
        for i in grown:
            delta = self.after[i] - self.before[i]
            lines.append(f"  {describe(self._objs[i])}: {self.before[i]} -> "
                         f"{self.after[i]} ({delta:+d})")
            diagnosis.refcounts.append({
                "object": describe(self._objs[i]),
                "type": type_name(type(self._objs[i])), "delta": delta})
            diagnosis.chains.append(
                find_chain([self._objs[i]], exclude=(self._objs,)))
        report = "\n".join(lines) + "\n" + str(diagnosis)
        raise LeakError(report, diagnosis)


class Handle:
    """A weak reference to a watched object, for assert_finalized()."""

    __slots__ = ("_ref", "description", "where")

    def __init__(self, ref: "weakref.ref[Any]", description: str,
                 where: str) -> None:
        self._ref = ref
        self.description = description   # what it was, for reports
        self.where = where               # "file:line" of the watch() call

    @property
    def alive(self) -> bool:
        return self._ref() is not None

    def __repr__(self) -> str:
        state = "alive" if self.alive else "finalized"
        return (f"<leakcheck.Handle of {self.description} "
                f"(watched at {self.where}, {state})>")


def watch(obj: object) -> Handle:
    """A Handle on `obj` that does not keep it alive; assert_finalized()
    fails while the object lives.  TypeError for objects that cannot be
    weakly referenced."""
    try:
        ref = weakref.ref(obj)
    except TypeError:
        raise TypeError(
            f"leakcheck.watch() needs an object that supports weak "
            f"references, and {type_name(type(obj))} objects do not (as int, "
            f"str, tuple, and classes with __slots__ without '__weakref__'); "
            f"check such objects with leakcheck.refcounts()") from None
    frame = sys._getframe(1)
    return Handle(ref, describe(obj), f"{frame.f_code.co_filename}:"
                                      f"{frame.f_lineno}")


def assert_finalized(*handles: Handle) -> None:
    """After a full collection, fails with LeakError for every watched
    object still alive, with the chain of references from a root (a module
    global, a frame's local, a class attribute, or C code when nothing the
    collector sees holds it) that keeps it alive."""
    for handle in handles:
        if not isinstance(handle, Handle):
            raise TypeError(f"assert_finalized() takes the handles "
                            f"leakcheck.watch() returns, not "
                            f"{type(handle).__name__}")
    settle_and_collect()
    from ._diagnose import Diagnosis
    diagnosis = Diagnosis()
    for handle in handles:
        holder = [handle._ref()]
        if holder[0] is None:
            continue
        chain = find_chain(holder)
        chain["watched_at"] = handle.where
        diagnosis.chains.append(chain)
        del holder
    if not diagnosis.chains:
        return
    n = len(diagnosis.chains)
    report = (f"leakcheck: {n} watched object{'' if n == 1 else 's'} "
              f"{'was' if n == 1 else 'were'} not finalized\n"
              + str(diagnosis))
    raise LeakError(report, diagnosis)


def assert_no_garbage() -> None:
    """After a full collection, fails with LeakError when gc.garbage holds
    anything (objects in reference cycles the collector cannot free), with
    their types.  gc.garbage and the collector's debug flags are left as
    they are."""
    settle_and_collect()
    if not gc.garbage:
        return
    from ._diagnose import Diagnosis
    diagnosis = Diagnosis(["garbage"])
    diagnosis.garbage = garbage_by_type(len(gc.garbage))
    n = len(gc.garbage)
    report = (f"leakcheck: gc.garbage holds {n} uncollectable object"
              f"{'' if n == 1 else 's'}\n" + str(diagnosis))
    raise LeakError(report, diagnosis)
