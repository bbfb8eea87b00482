"""The garbage collector's full passes, taken while no one types.

A full pass visits every object the collector tracks; at 200 sessions on screen that was
100-240 ms (quiet machine), one every 1-2 s, and a key pressed meanwhile waited for it: most
of the session screen's slow keys. So the dashboard keeps the objects a full pass found alive
frozen (`gc.freeze`), out of the passes Python starts by itself, which then visit only what
is newer, lets Python start a full pass ten times less often, and every `every_s` seconds,
once no key has come for `quiet_s`, thaws everything and makes a full pass itself, so a
frozen object that died since is still freed.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

FULL_PASS_EVERY_S = 30.0
"""How often, at most, the dashboard makes a full pass over everything."""

QUIET_FOR_S = 2.0
"""That pass waits until no key has come for this long."""

FULL_PASS_AFTER = 100
"""Python starts a full pass of its own after this many passes of the middle generation (its
default, 10, was one every 1-2 s at 200 busy sessions)."""


class QuietCollector:
    """Full garbage-collection passes between keys (`tick` once a second, `saw_key` per key)."""

    def __init__(
        self,
        every_s: float = FULL_PASS_EVERY_S,
        quiet_s: float = QUIET_FOR_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every_s, self.quiet_s, self.clock = every_s, quiet_s, clock
        self.last_key = self.last_pass = clock()
        self.passes = 0
        self._thresholds: tuple[int, int, int] | None = None
        """Python's own thresholds while the dashboard's are in force."""

    def saw_key(self) -> None:
        """A key came: no full pass for a moment."""
        self.last_key = self.clock()

    def freeze(self) -> None:
        """Leave what lives now out of Python's own passes (start-up: the widgets, the fleet),
        and make Python's full passes rarer."""
        if self._thresholds is None:
            self._thresholds = gc.get_threshold()
            young, middle, _ = self._thresholds
            gc.set_threshold(young, middle, FULL_PASS_AFTER)
        gc.freeze()
        self.last_pass = self.clock()

    def release(self) -> None:
        """The dashboard closes: Python's own thresholds again, nothing frozen (a test's
        process goes on)."""
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
        gc.unfreeze()

    def tick(self) -> bool:
        """Make the full pass if it is due and no one types; True if it ran."""
        now = self.clock()
        if now - self.last_pass < self.every_s or now - self.last_key < self.quiet_s:
            return False
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.last_pass = self.clock()
        self.passes += 1
        return True
