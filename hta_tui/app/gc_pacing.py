"""Keep Python's full garbage collections out of the moments a user presses keys.

With every screen built the app holds about 200,000 objects the collector tracks (widgets,
their styles and render caches). A full collection walks all of them: 60-130 ms of frozen UI
at a random key (measured by bench/bench_keys.py). So in every quiet moment the pacer freezes
what exists (`gc.freeze`, Instagram's remedy for the same cost; it costs nothing): later
collections walk only what is new. Python would still start full collections by itself, when
a quarter more objects have survived since the last one (a new screen does that), so while
the pacer runs those are left to it (`start`).

Cyclic garbage that was frozen (a widget removed later) is reclaimed by a full sweep. A sweep
is one C call that walks every tracked object (0.09-0.59 s of the UI thread at 1,000 ranks,
bench/MANY_RANKS.md) and cannot be split, so it runs only when nothing is pending (`idle`:
no file loading, no view computing: a result about to land is when a user presses keys), and
the end of that work counts as input (its result is when keys come); then after the user has
been quiet for a while, or in any quiet idle moment once it has been long enough. Once a
sweep took longer than SLOW_SWEEP the next waits for the user to be away (AWAY), with no
short-quiet fallback: a sweep in the pause between two keys would be the key's answer late.
A collection of what is new in a quiet moment was tried too: 10-50 ms, and a key pressed
just then waited for it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: Seconds without input after which the pacer freezes what is new.
QUIET = 0.25
#: While quiet, what is new is frozen at least this often (seconds): loading makes objects too.
REFREEZE = 5.0
#: Seconds without input before a full sweep (unfreeze, collect everything, freeze again)...
LONG_QUIET = 20.0
#: ...and at most one full sweep this often (seconds)...
FULL_EVERY = 60.0
#: ...but at least one this often (seconds), in a short quiet moment if there is no long one.
FULL_AT_LEAST = 600.0
#: Seconds a sweep may take before the next waits for the user to be away...
SLOW_SWEEP = 0.04
#: ...this many seconds without input (and nothing pending).
AWAY = 120.0
#: Younger collections before Python starts a full one itself (its default: 10), while the
#: pacer runs: in effect never.
AUTO_FULL_AFTER = 100_000


@dataclass
class GcPacer:
    """Call `activity()` on every input event and `tick()` from a timer (the app's: every
    GC_TICK seconds); `idle()` says whether nothing is pending (no sweep otherwise)."""

    clock: Callable[[], float] = time.monotonic
    collect: Callable[[], int] = gc.collect
    freeze: Callable[[], None] = gc.freeze
    unfreeze: Callable[[], None] = gc.unfreeze
    last_input: float = field(default=-1e9)
    last_full: float = field(default=-1e9)  # set to the start time
    last_freeze: float = field(default=-1e9)
    pending: bool = True  # input since the last freeze
    idle: Callable[[], bool] = lambda: True
    saved_threshold: tuple[int, int, int] | None = None
    #: seconds the last full sweep took (its collection)
    last_sweep: float = 0.0
    #: the last tick at which something was pending (`idle()` false)
    last_busy: float = field(default=-1e9)

    def __post_init__(self) -> None:
        self.last_full = self.clock()  # the start is as good as a sweep: nothing to free yet

    def start(self) -> None:
        """Leave full collections to the pacer (until `stop`)."""
        if self.saved_threshold is None:
            self.saved_threshold = gc.get_threshold()
            young, middle, _ = self.saved_threshold
            gc.set_threshold(young, middle, AUTO_FULL_AFTER)

    def stop(self) -> None:
        if self.saved_threshold is not None:
            gc.set_threshold(*self.saved_threshold)
            self.saved_threshold = None

    def activity(self) -> None:
        self.last_input = self.clock()
        self.pending = True

    def tick(self) -> None:
        now = self.clock()
        idle = self.idle()
        if not idle:
            self.last_busy = now
        if now - self.last_input < QUIET:
            return
        if idle and self._sweep_due(now):
            self.unfreeze()
            self.collect()
            self.last_sweep = self.clock() - now
            self.last_full = now
        elif not (self.pending or now - self.last_freeze >= REFREEZE):
            return
        self.freeze()
        self.last_freeze = now
        self.pending = False

    def _sweep_due(self, now: float) -> bool:
        """Long enough since the last sweep, and the user quiet long enough for what the last
        sweep cost (a slow one waits for the user to be away). Work that ended counts as
        input: a result that just landed is what the user reads and moves on."""
        since_full = now - self.last_full
        quiet = now - max(self.last_input, self.last_busy)
        if quiet < QUIET:
            return False
        if self.last_sweep > SLOW_SWEEP:
            return quiet >= AWAY and since_full >= FULL_EVERY
        return since_full >= FULL_AT_LEAST or (quiet >= LONG_QUIET and since_full >= FULL_EVERY)
