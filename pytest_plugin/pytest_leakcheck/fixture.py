"""The `leakcheck` fixture: leakcheck's API with the settings that apply
to the test that requests it."""

import pytest

import leakcheck

from . import settings as settingsmod
from .session import STATE, UNSUPPORTED
from .settings import BadValue


class LeakcheckFixture:
    """What the `leakcheck` fixture gives a test: leakcheck's API with the
    settings that apply to this test (its noleak marker over the command
    line and ini file)."""

    def __init__(self, settings, name):
        self.settings = settings
        self.name = name

    def series(self, **overrides):
        """A leakcheck.Series with this test's settings; keyword arguments
        replace single settings."""
        kw = dict(warmup=self.settings.warmup, repeat=self.settings.repeat,
                  probes=list(self.settings.probes),
                  tolerance=self.settings.tolerance, name=self.name)
        kw.update(overrides)
        return leakcheck.Series(**kw)

    def check(self, func, *args, **kwargs):
        """leakcheck.repeat(func, *args, **kwargs) with this test's
        settings: raises leakcheck.LeakError, with the report and a
        diagnosis, when func leaks; returns the finished Series."""
        __tracebackhide__ = True
        return leakcheck.repeat(
            func, *args, warmup=self.settings.warmup,
            repeat=self.settings.repeat, probes=list(self.settings.probes),
            tolerance=self.settings.tolerance, **kwargs)

    def snapshot(self):
        """A snapshot of this test's probes."""
        return leakcheck.snapshot(list(self.settings.probes))

    def scope(self, **kwargs):
        """leakcheck.scope() over this test's probes and tolerance."""
        kwargs.setdefault("probes", list(self.settings.probes))
        if self.settings.tolerance is not None:
            kwargs.setdefault("tolerance", self.settings.tolerance)
        return leakcheck.scope(**kwargs)


@pytest.fixture(name="leakcheck")
def leakcheck_fixture(request):
    """leakcheck's API with this test's settings: .check(func, *args)
    raises LeakError when func leaks, .series(), .scope(), .snapshot(),
    .settings."""
    unsupported = request.config.stash.get(UNSUPPORTED, None)
    if unsupported is not None:
        pytest.skip(unsupported)
    state = request.config.stash[STATE]
    try:
        settings = settingsmod.for_item(request.node,
                                        state.settings.defaults)
    except BadValue as e:
        pytest.fail(str(e), pytrace=False)
    return LeakcheckFixture(settings, request.node.nodeid)
