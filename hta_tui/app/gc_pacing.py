"""Keep Python's full garbage collections out of the moments a user presses keys.

With every screen built the app holds about 200,000 objects the collector tracks (widgets,
their styles and render caches). A full collection walks all of them: 60-130 ms of frozen UI
at a random key (measured by bench/bench_keys.py). Objects that survived until a quiet moment
are long-lived, so the pacer freezes them (`gc.freeze`, Instagram's remedy for the same cost):
later collections walk only what is new. Cyclic garbage among frozen objects (a widget removed
later) is reclaimed by a full sweep, run only after the user has been quiet for a while.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: Seconds without input after which the pacer collects what is new and freezes the rest.
QUIET = 0.25
#: While quiet, what is new is frozen at least this often (seconds): loading makes objects too.
REFREEZE = 5.0
#: Seconds without input before a full sweep (unfreeze, collect everything, freeze again)...
LONG_QUIET = 20.0
#: ...and at most one full sweep this often (seconds).
FULL_EVERY = 60.0


@dataclass
class GcPacer:
    """Call `activity()` on every input event and `tick()` from a timer (every half second)."""

    clock: Callable[[], float] = time.monotonic
    collect: Callable[[], int] = gc.collect
    freeze: Callable[[], None] = gc.freeze
    unfreeze: Callable[[], None] = gc.unfreeze
    last_input: float = field(default=-1e9)
    last_full: float = field(default=-1e9)
    last_freeze: float = field(default=-1e9)
    pending: bool = True  # input since the last freeze

    def activity(self) -> None:
        self.last_input = self.clock()
        self.pending = True

    def tick(self) -> None:
        now = self.clock()
        quiet = now - self.last_input
        if quiet < QUIET:
            return
        if quiet >= LONG_QUIET and now - self.last_full >= FULL_EVERY:
            self.unfreeze()
            self.last_full = now
        elif not (self.pending or now - self.last_freeze >= REFREEZE):
            return
        self.collect()  # walks only what is not frozen
        self.freeze()
        self.last_freeze = now
        self.pending = False
