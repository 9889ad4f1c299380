"""What the session keeps of every test, in a mapping the collector does
not walk at each test.

CPython's collector untracks a dict whose keys and values are all atomic
(strings, numbers) when a full collection finds it so, and tracks it again
as soon as a value that may hold references goes in: a new tuple, a dict.
Tracked again, the dict is young, and the next collection walks every
entry.  Each snapshot of a hunt is a full collection of what is not frozen,
so a plain dict of every test's result, given the last test's between two
tests, was walked whole by the first snapshot of every test: a cost per
test that grew with the tests run.  A Ledger's dict maps each
key to an int, which never makes it tracked; the values are in a list,
which the session's freezer freezes with the rest, each new value young
until the next freeze.
"""


class Ledger:
    """A mapping of test ids to values, the last value set for an id
    winning, read in the order ids were first set."""

    __slots__ = ("_at", "_values")

    def __init__(self):
        self._at = {}               # key -> index in _values
        self._values = []

    def __setitem__(self, key, value):
        at = self._at.get(key)
        if at is None:
            self._at[key] = len(self._values)
            self._values.append(value)
        else:
            self._values[at] = value

    def __getitem__(self, key):
        return self._values[self._at[key]]

    def get(self, key, default=None):
        at = self._at.get(key)
        return default if at is None else self._values[at]

    def __contains__(self, key):
        return key in self._at

    def __len__(self):
        return len(self._at)

    def __iter__(self):
        return iter(self._at)

    def values(self):
        return iter(self._values)

    def items(self):
        return zip(self._at, self._values)
