"""The view on screen first (issue 27, point 4). A view's computation passes checkpoints
(analysis/checkpoint.py: before it reads its frames, before each of the registry's tables,
each rank's shared view and each job-wide intermediate, each rank of the heavy per-rank
tables). There, work for a view no longer shown waits while the shown view wants its numbers
(from its key until they are on the screen: its worker queued, reading frames, computing, the
numbers being drawn), and goes on once it has them: so the view on screen gets the cores, and
a view visited on the way still finishes in the background (shown at once when visited
again). Work whose worker was cancelled (a newer computation of the same view took over)
stops there.

Held work keeps its worker's thread: the app's loop gets enough threads (`WORKER_THREADS`)
that the shown view's worker never queues behind held ones (asyncio's default, 6 on two
cores, did: the shown view then waited for work left behind to finish). Should it queue
anyway, the hold lapses after `QUEUED_GRACE` seconds, so held work cannot wait for a worker
that waits for its thread.

Held work goes on only once the view shown has been on the screen for `LINGER` seconds too:
views passed through on the way to another (keys a fraction of a second apart) do not get
their work left behind going between two keys, where the next view's key would find it in
the middle of a piece (issue 27: every view right after visiting every other view). The
read-ahead (app/read_ahead.py: the frames and shared tables every view needs) does not wait
for that: held through a walk, it left the view at its end to build them.

Work left behind goes on one view at a time (`_slot`: the view left last first), the read-ahead
beside it: once the view shown lingered, 10-17 views left behind by a walk through every view
used to go on all at once, and the next key found each of them in the middle of a piece
(polars' threads of every one of them still inside a collect, which a checkpoint cannot stop).

While a view's key waits to be handled (`key_waiting`: Textual handles it once the screen
being built is mounted), the view shown is about to be left: its own work waits at its next
checkpoint too (the first, before it reads its frames, for a view whose worker has just
started), so it does not start a piece that would run on beside the next view's.

The read-ahead waits while the view shown computes (a computation of it running, not all of
them waiting at a checkpoint) or wants its numbers, but not while a view's key waits: through
a walk of keys it goes on while the next view's key waits and each view's work waits for it,
so the view at the walk's end finds the frames, HTA's views, the steps and the operator trees
made (held through the walk, it left the target to build them: Operators 1.5 s, Launch
1.1 s after every other view); from the target's key on it waits again. A piece of it never
makes a view wait: the steps and trees it makes are built outside the lock a view's build
holds (`hta_view.made_ahead`), the views of each rank under none.

Until a screen just shown has drawn its first picture (`drawing`, from the switch to its
first refresh, at most `DRAW_GRACE`), every background thread that passes checkpoints waits
at its next one: the views' work (the shown view's own, which starts after that refresh
anyway), the read-ahead and the overview's findings (`while_drawing`). The read-ahead still
goes on while the next view's key waits (through a walk, as above: held while each screen of
the walk was drawn, it left the target to make Operators' trees and Launch's rank views).
A Python thread running beside the UI thread takes the GIL from it at every release (each
loop's `select`, each polars call) for up to the switch interval, and one taken off its core
while it holds the GIL (the machine's load, or its lower priority) stops the UI thread until
it runs again (bench/MANY_RANKS.md, pkey18 and pkey19): the screen's first picture, the
key's answer, is drawn by the UI thread alone.

A modal on top (help, a picker) leaves the view under it shown. The overview computes in the
app's own worker, which never waits: while it is shown, the views left behind go on (one at a
time).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from textual.screen import ModalScreen, Screen
from textual.worker import Worker

from hta_tui.app.mixin import AppMixin

#: Seconds between looks at a held worker's cancellation while it waits.
HOLD_POLL = 0.05
#: Threads of the app's loop for its workers: every view's at once, held ones included.
WORKER_THREADS = 64
#: Seconds a shown view that wants numbers but whose computation has not started holds the
#: others: its worker may be queued for a thread that held work keeps.
QUEUED_GRACE = 2.0
#: Seconds a view is shown before work left behind goes on (when it is not computing): the
#: user looks at it rather than passing through it.
LINGER = 0.5
#: Seconds a view's key may wait to be handled and still hold the shown view's work (a key
#: Textual never hands to the app must not hold it for ever).
KEY_GRACE = 2.0
#: Seconds a screen just shown may take to draw its first picture and still hold the
#: background work (a screen never refreshed, or removed first, must not hold it for ever).
DRAW_GRACE = 1.0


class Superseded(Exception):
    """Raised at a checkpoint of work whose worker was cancelled."""


class Foreground:
    """Which view is shown, and whether its computation runs (thread-safe): the checkpoints
    of every other view's work wait while it does."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._shown: object | None = None
        self._shown_since = float("-inf")
        self._running: dict[int, int] = {}  # id(view) -> its computations running
        self._wanting: dict[int, float] = {}  # id(view) -> since when it wants its numbers
        #: id(view) -> its computations waiting at a checkpoint now (tests, benchmarks)
        self.holding: dict[int, int] = {}
        self._left: dict[int, float] = {}  # id(view) -> when another view was shown instead
        #: id(view) of the one view left behind whose work goes on (`_holds`)
        self._slot: int | None = None
        self._key_since: float | None = None  # a view's key waits to be handled since
        #: id(screen) shown and not drawn yet, and since when (`drawing`)
        self._drawing: tuple[int, float] | None = None

    def show(self, view: object) -> None:
        with self._changed:
            if view is not self._shown:
                now = time.monotonic()
                self._shown_since = now
                if self._shown is not None:
                    self._left[id(self._shown)] = now
                if self._slot == id(view):  # shown, it no longer counts as left behind
                    self._slot = None
            self._shown = view
            self._changed.notify_all()

    def key_waiting(self, waiting: bool) -> None:
        """Main thread: a view's key waits to be handled (the shown view is about to be
        left), or none does any more."""
        with self._changed:
            if not waiting:
                if self._key_since is not None:
                    self._key_since = None
                    self._changed.notify_all()
            elif self._key_since is None:
                self._key_since = time.monotonic()

    def drawing(self, screen: object, waiting: bool) -> None:
        """Main thread: `screen` was just shown and its first picture is not drawn yet
        (`waiting`), or it is drawn (only the screen being drawn clears it)."""
        with self._changed:
            if waiting:
                self._drawing = (id(screen), time.monotonic())
            elif self._drawing is not None and self._drawing[0] == id(screen):
                self._drawing = None
                self._changed.notify_all()

    @property
    def being_drawn(self) -> bool:
        """A screen just shown has not drawn its first picture (for at most `DRAW_GRACE`)."""
        drawing = self._drawing
        return drawing is not None and time.monotonic() - drawing[1] < DRAW_GRACE

    @property
    def leaving(self) -> bool:
        """A view's key waits to be handled (for at most `KEY_GRACE`)."""
        since = self._key_since
        return since is not None and time.monotonic() - since < KEY_GRACE

    @property
    def shown(self) -> object | None:
        return self._shown

    @contextmanager
    def running(self, view: object) -> Iterator[None]:
        """A computation of `view` runs inside the block."""
        with self._changed:
            self._running[id(view)] = self._running.get(id(view), 0) + 1
        try:
            yield
        finally:
            with self._changed:
                self._running[id(view)] -= 1
                if not self._running[id(view)]:
                    del self._running[id(view)]
                    if self._slot == id(view):
                        self._slot = None
                self._changed.notify_all()

    def wants(self, view: object, wanting: bool) -> None:
        """Main thread: `view` waits for numbers (a computation asked, from its key until
        they are shown), or has them (or none are coming)."""
        with self._changed:
            if wanting:
                self._wanting.setdefault(id(view), time.monotonic())
            elif self._wanting.pop(id(view), None) is not None:
                self._changed.notify_all()

    def _holds(self, view: object, lingers: bool = True) -> bool:
        """Under `_changed`: whether `view`'s work waits now. A view left behind that goes
        on takes the slot (`_take_slot`) until its computations end or it is shown."""
        shown = self._shown
        if shown is None:
            return False
        if self.being_drawn and (lingers or not self.leaving):
            return True  # the key's answer: the UI thread draws it alone (see `drawing`)
        if shown is view:  # about to be left: no new piece
            return self.leaving
        if not lingers:  # the read-ahead
            return self._read_ahead_holds(shown)
        if id(shown) in self._running:
            return True
        now = time.monotonic()
        since = self._wanting.get(id(shown))
        if since is not None and now - since < QUEUED_GRACE:
            return True
        if self.leaving:
            return True
        if now - self._shown_since < LINGER:
            return True
        return not self._take_slot(view)

    def _read_ahead_holds(self, shown: object) -> bool:
        """Under `_changed`: whether the read-ahead waits: while the view shown computes
        (a computation of it running, not all of them waiting at a checkpoint) or wants its
        numbers, unless a view's key waits (it is about to be left)."""
        if self._running.get(id(shown), 0) > self.holding.get(id(shown), 0):
            return True
        since = self._wanting.get(id(shown))
        return since is not None and not self.leaving and time.monotonic() - since < QUEUED_GRACE

    def _take_slot(self, view: object) -> bool:
        """Under `_changed`: `view`, left behind, may go on: no other view left behind is
        going on (its computations ended, or it was shown again), and of those waiting
        none was left later."""
        slot = self._slot
        if slot == id(view):
            return True
        if slot is not None and slot in self._running:
            return False
        mine = self._left.get(id(view), 0.0)
        if any(self._left.get(k, 0.0) > mine for k in self.holding if k != id(view)):
            return False
        self._slot = id(view)
        return True

    def give_way(
        self, view: object, worker: Worker[object], *, lingers: bool = True
    ) -> Callable[[], None]:
        """The checkpoint hook of `view`'s worker: stop once the worker is cancelled; wait
        while another view is shown and computing (or, if it `lingers`, wanting numbers,
        shown less than `LINGER` ago, or another view left behind goes on: the read-ahead,
        work every view needs, does not), or while `view` is shown and a view's key waits
        to be handled."""

        def hook() -> None:
            if worker.is_cancelled:
                raise Superseded
            with self._changed:
                if not self._holds(view, lingers):
                    return
                self.holding[id(view)] = self.holding.get(id(view), 0) + 1
                try:
                    while self._holds(view, lingers) and not worker.is_cancelled:
                        self._changed.wait(HOLD_POLL)
                finally:
                    self.holding[id(view)] -= 1
                    if not self.holding[id(view)]:
                        del self.holding[id(view)]
            if worker.is_cancelled:
                raise Superseded

        return hook

    def while_drawing(self) -> Callable[[], None]:
        """The checkpoint hook of background work that no view owns (the overview's
        findings): it only waits while a screen just shown is being drawn."""

        def hook() -> None:
            with self._changed:
                while self.being_drawn:
                    self._changed.wait(HOLD_POLL)

        return hook

    def is_holding(self, view: object) -> bool:
        with self._changed:
            return id(view) in self.holding


class ForegroundMixin(AppMixin):
    """Tells `foreground` which view is shown (HtaApp calls `follow_foreground` once
    mounted)."""

    foreground: Foreground

    def follow_foreground(self) -> None:
        """Event loop: also gives the loop's thread workers `WORKER_THREADS` threads.

        Told at once, inside the switch (`immediate`): posted to the app's queue instead, as
        Textual's default does, the change came 0.2-1 s after the key while the app's queue
        held a new screen's mounting, and meanwhile the view left behind counted as shown
        (its work went on) while the new one's first checkpoint waited for it."""
        self.screen_change_signal.subscribe(self, self._screen_changed, immediate=True)
        self.foreground.show(self.screen)
        pool = ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="hta-worker")
        asyncio.get_running_loop().set_default_executor(pool)

    def _screen_changed(self, screen: Screen) -> None:
        """Until its first picture is drawn, every background thread waits at its next
        checkpoint (`drawing`). A view shown without its numbers wants them from its key
        on: while its screen is still being built (0.1-0.2 s of the UI thread on a first
        visit), the work left behind already waits (its computation, once asked, takes
        over; should none be asked, the hold lapses after `QUEUED_GRACE`)."""
        self.foreground.drawing(screen, True)
        screen.call_after_refresh(self.foreground.drawing, screen, False)
        if isinstance(screen, ModalScreen):
            return
        self.foreground.show(screen)
        if getattr(screen, "shows_numbers", True) is False:
            self.foreground.wants(screen, True)
