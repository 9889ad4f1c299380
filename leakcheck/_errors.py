"""The exception every leakcheck verdict raises."""

__all__ = ["LeakError"]


class LeakError(AssertionError):
    """Something leaked.  ``str(error)`` and ``error.report`` are the
    readable report: what grew, by how much, and the diagnosis (what leaked
    and where); ``error.diagnosis`` is the Diagnosis, or None when there is
    none (``error.diagnosis.to_dict()`` for a JSON report)."""

    def __init__(self, report, diagnosis=None):
        super().__init__(report)
        self.report = report
        self.diagnosis = diagnosis
