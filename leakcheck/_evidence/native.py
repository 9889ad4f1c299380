"""Evidence from the C heap: where the native memory that survived the
runs was allocated."""

from . import Evidence

__all__ = ["NativeAllocations"]


class NativeAllocations(Evidence):
    """The C lines of what leaked (native_bytes)."""

    probes = frozenset({"native_bytes"})

    def fill(self, diagnosis):
        diagnosis.notes.append(
            "native_bytes counts malloc() outside CPython's allocators, which "
            "tracemalloc cannot see: run under valgrind (the valgrind probe) "
            "for the allocating stacks")
