"""The exception every leakcheck verdict raises."""

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ._diagnose import Diagnosis

__all__ = ["LeakError"]


class LeakError(AssertionError):
    """Something leaked.  ``str(error)`` and ``error.report`` are the
    readable report: what grew, by how much, and the diagnosis (what leaked
    and where); ``error.diagnosis`` is the Diagnosis, or None when there is
    none (``error.diagnosis.to_dict()`` for a JSON report)."""

    def __init__(self, report: str,
                 diagnosis: "Optional[Diagnosis]" = None) -> None:
        super().__init__(report)
        self.report = report
        self.diagnosis = diagnosis
