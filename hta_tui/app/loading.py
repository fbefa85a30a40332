"""The session, mixed into HtaApp: the app's files are a `session.LiveSession`'s (the same
one the report and the Python API open), and the app only turns its changes into one reactive
value (`HtaApp.data`) that the status bars, the overview and every screen watch.

    session threads (scan, load, reload, watch, recheck) -> wake() -> SessionReady, posted
    from the session's thread and coalesced (`can_replace`): a flood of files is one message
    -> _on_session_ready (UI thread): session.apply_pending() -> one Change per side ->
    notices shown, `data` set once -> watchers (status bars, overview, the visible screen).

Handlers are found by name (`_on_session_ready`), as Textual's `@on` registers only on
classes built by its own metaclass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from time import monotonic
from typing import Any

from textual.message import Message

from hta_tui.app.mixin import AppMixin
from hta_tui.session import MAIN, Change, LiveSession


@dataclass
class SessionReady(Message):
    """The session queued changes for `apply_pending`. One waiting message stands for any
    number of them: a later one replaces it (toolong's `can_replace` pattern)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SessionReady)


@dataclass(frozen=True)
class DataState:
    """The one reactive value screens watch: each side's TraceSet generation, whether a side
    is still being listed, and the main side's watcher. Equal values mean nothing changed."""

    generations: tuple[int, ...] = ()
    scanning: bool = False
    watch: str = "off"


#: The session's queue is applied at most this often (seconds). Each apply reassigns ranks
#: (work in the number of files), so 1,000 files landing one by one would cost 1,000 of them
#: on the UI thread; a wake-up within this time of the last apply waits for one timer.
APPLY_INTERVAL = 0.2
#: Loaded files applied per turn (applying a file and grouping its rank cost ~20-40 us of
#: the UI thread, more on a busy machine): the rest follow a turn later, so keys and drawing
#: run in between.
APPLY_MAX = 500


class LoadingMixin(AppMixin):
    """The loading half of HtaApp; `session`, `data` and `watcher_state` are HtaApp's."""

    session: LiveSession
    data: DataState
    watcher_state: str
    _last_apply: float = float("-inf")
    _apply_timer: Any = None

    def scanning(self, side: str = MAIN) -> bool:
        """Is a full scan of that side's folder ("main" or "test") still listing files?"""
        state = self.session.sides.get(side)
        return state is not None and state.scanning

    @property
    def scan_generation(self) -> int:
        """Bumps on every full scan of the main side; results of an older scan are dropped."""
        return self.session.sides[MAIN].scan

    def action_reload(self) -> None:
        """Discover the folder (both sides' when comparing) again and load everything (cache
        hits are instant)."""
        self.session.scan()
        self._set_data()

    def select_span(self, rank: int, path: Path) -> None:
        """Show `path` for `rank` on every screen (`enter` on the overview's file)."""
        self.session.select_span(rank, path)
        self._set_data()

    def _wake(self) -> None:
        """Any thread: the session has something to apply."""
        self.post_message(SessionReady())

    def _on_session_ready(self, _msg: SessionReady) -> None:
        wait = self._last_apply + APPLY_INTERVAL - monotonic()
        if wait <= 0:
            self._apply_session()
        elif self._apply_timer is None:  # one deferred apply takes whatever lands meanwhile
            self._apply_timer = self.set_timer(wait, self._apply_session)

    def _apply_session(self) -> None:
        self._apply_timer = None
        self._last_apply = monotonic()
        self.session.apply_pending(APPLY_MAX)  # listeners: _session_changed, once per side
        for side in self.session.sides.values():
            side.trace_set.update_ranks()  # this turn's files' ranks, not many turns' at once
        self._set_data()
        if self.session.pending() and self._apply_timer is None:  # what is left: next turn
            self._apply_timer = self.set_timer(0.01, self._apply_session)

    def _session_changed(self, change: Change) -> None:
        for notice in change.notices:
            self.notify(notice.text, severity=notice.severity, timeout=10)  # type: ignore[arg-type]
        if change.side == MAIN:
            self.watcher_state = change.watch

    def _set_data(self) -> None:
        sides = self.session.sides.values()
        self.data = DataState(
            generations=tuple(s.trace_set.generation for s in sides),
            scanning=any(s.scanning for s in sides),
            watch=self.watcher_state,
        )
