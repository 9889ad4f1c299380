"""The kinds of evidence a diagnosis gathers, one module each:

    objects   the types whose live counts grew, reference counts, gc.garbage
    pyalloc   the Python lines that allocated what survived (tracemalloc)
    native    the C lines that allocated what survived (memray)
    system    new file descriptors and threads

Every kind is an Evidence.  diagnose() makes one of each kind the leaking
probes ask for and drives them all through one protocol, so that a new
kind is one class more and nothing else changes.
"""

import os

__all__ = ["Evidence", "Request", "call", "CALL_SITE", "PACKAGE_DIR", "TOP",
           "is_own"]

# leakcheck's own folder, and its pytest plugin's, installed beside it:
# their frames are the harness's, never the leak's (the plugin's fixture
# calls repeat() for the test).
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OWN = (os.path.join(PACKAGE_DIR, ""),
        os.path.join(os.path.dirname(PACKAGE_DIR), "pytest_leakcheck", ""))
TOP = 10                  # entries shown per section


class Request:
    """What a diagnosis was asked: `leaking` (a set of probe names), `runs`
    (re-runs to compare), `ignore` (absolute paths of a harness's folders
    and files), `capture_dir` (where memray's capture is kept, or None),
    `keep_objects` (keep the objects the runs left alive in
    Diagnosis.survivors), `cheap` (each kind gathers the least that still
    explains the leak: see diagnose())."""

    def __init__(self, leaking, runs, ignore=(), capture_dir=None,
                 keep_objects=False, cheap=False):
        self.leaking = leaking
        self.runs = runs
        self.ignore = ignore
        self.capture_dir = capture_dir
        self.keep_objects = keep_objects
        self.cheap = cheap


class Evidence:
    """One kind of evidence.  diagnose() makes one of each kind whose
    `wanted()` is true, then calls, in this order:

        prepare(run)      to set up what must see runs before the ones
                          that count (tracemalloc traces one run first):
                          run(n) re-runs the code n times and returns
                          what stopped it ("Type: message", never the
                          exception, whose frames would be counted), or
                          None; prepare returns that too
        before()          outermost kind first, before the shared re-runs
        after()           innermost kind first, after those runs (and a
                          settle and full collection)
        abandon()         instead of after(), for each kind begun, when
                          a before() or after() raised: undo what
                          before() started
        own_runs(run)     for a kind that must watch runs of its own (a
                          tracker that would distort the others), when
                          the runs so far raised nothing; returns what
                          run(n) returned
        fill(diagnosis)   once all of the above is done, for each kind
                          whose after() ran, in diagnose()'s order (a
                          kind may read what earlier kinds filled)
        notes()           then for every kind, whatever became of the
                          runs: what it has to say about why it found
                          nothing (a list of lines)

    The shared runs are nested in every before()/after() pair, so that
    what one kind keeps is there when the others count, before and after
    alike.  Nothing here may raise for the code under diagnosis: what
    goes wrong becomes a note."""

    # The probes whose growth this kind explains.
    probes = frozenset()
    # Whether it watches the shared runs (before() and after() do
    # something): when no kind does, they are not made.
    shared = True

    def __init__(self, request):
        self.request = request

    @classmethod
    def wanted(cls, request):
        return bool(request.leaking & cls.probes)

    def prepare(self, run):
        return None

    def before(self):
        pass

    def after(self):
        pass

    def abandon(self):
        pass

    def own_runs(self, run):
        pass

    def fill(self, diagnosis):
        pass

    def notes(self):
        return []


def is_own(filename):
    """True for a file of leakcheck or of its pytest plugin."""
    return filename.startswith(_OWN)


def call(run_once):
    # The one line every re-run goes through (CALL_SITE): what run_once
    # allocates here with no frame of its own is charged to the caller.
    return run_once()


CALL_SITE = (call.__code__.co_filename, call.__code__.co_firstlineno + 3)
