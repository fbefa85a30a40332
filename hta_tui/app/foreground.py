"""The view on screen first (issue 27, point 4): when another view is shown, the work of the
one left behind is cancelled, so it stops at its next checkpoint (analysis/checkpoint.py:
between the registry's tables, ranks and shared intermediates) instead of taking a core from
the view the user is looking at. A modal on top (help, a picker) leaves the view under it
shown: its work goes on. Coming back to a view computes it again, from the intermediates
kept per frame (`hta_view.job_cached`), so little is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from textual.screen import ModalScreen, Screen
from textual.worker import Worker

from hta_tui.app.mixin import AppMixin


class Superseded(Exception):
    """Raised at a checkpoint of work for a view no longer shown (its worker cancelled)."""


def give_way(worker: Worker[object]) -> Callable[[], None]:
    """The checkpoint hook of a view's worker: stop once the worker is cancelled (the view
    was left, or its parameters changed and a newer worker took over)."""

    def hook() -> None:
        if worker.is_cancelled:
            raise Superseded

    return hook


@runtime_checkable
class LeavesWork(Protocol):
    """A screen whose work stops when another view is shown (AnalysisScreen)."""

    def leave_behind(self) -> None: ...


class ForegroundMixin(AppMixin):
    """Follows which view is shown (HtaApp calls `follow_foreground` once mounted)."""

    #: the view shown last (a modal on top does not count)
    foreground: Screen | None = None

    def follow_foreground(self) -> None:
        self.screen_change_signal.subscribe(self, self._screen_changed)

    def _screen_changed(self, screen: Screen) -> None:
        if isinstance(screen, ModalScreen):
            return
        before, self.foreground = self.foreground, screen
        if before is not None and before is not screen and isinstance(before, LeavesWork):
            before.leave_behind()
