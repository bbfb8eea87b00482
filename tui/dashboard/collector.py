"""The garbage collector's full passes kept short, and the long one taken while no one types.

A full pass visits every object the collector tracks; at 200 busy sessions on screen that was
100-240 ms (quiet machine), one every 1-2 s, longer as the run went on, and a key pressed
meanwhile waited for it: most of the session screen's slow keys. So what a full pass found
alive is frozen (`gc.freeze`) right after it (the start-up's objects once the first fleet is
drawn), and Python's next full pass visits only what is newer. A frozen object that dies in a
reference cycle is freed only by a pass over everything: every `every_s` seconds, once no key
has come for `quiet_s`, the dashboard thaws everything and makes that pass itself.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

FULL_PASS_EVERY_S = 30.0
"""How often, at most, the dashboard makes a full pass over everything."""

QUIET_FOR_S = 2.0
"""That pass waits until no key has come for this long."""


def full_passes() -> int:
    """Full passes the collector has made in this process."""
    return int(gc.get_stats()[2]["collections"])


class QuietCollector:
    """Short full passes, the long one between keys (`tick` once a second, `saw_key` per key,
    `freeze` once start-up is done, `release` at the end)."""

    def __init__(
        self,
        every_s: float = FULL_PASS_EVERY_S,
        quiet_s: float = QUIET_FOR_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every_s, self.quiet_s, self.clock = every_s, quiet_s, clock
        self.last_key = self.last_pass = clock()
        self.passes = 0
        """Full passes over everything made by `tick`."""
        self._seen = full_passes()

    def saw_key(self) -> None:
        """A key came: no pass over everything for a moment."""
        self.last_key = self.clock()

    def freeze(self) -> None:
        """Leave what lives now out of Python's own full passes."""
        gc.freeze()
        self._seen = full_passes()

    def release(self) -> None:
        """The dashboard closes: nothing frozen (a test's process goes on)."""
        gc.unfreeze()

    def tick(self) -> bool:
        """Freeze what Python's own full pass found alive since the last tick; make the pass
        over everything if it is due and no one types (True if it ran)."""
        now = self.clock()
        if now - self.last_pass >= self.every_s and now - self.last_key >= self.quiet_s:
            gc.unfreeze()
            gc.collect()
            self.freeze()
            self.last_pass = self.clock()
            self.passes += 1
            return True
        if full_passes() != self._seen:
            self.freeze()
        return False
