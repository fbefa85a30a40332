"""The loading indicator of a view computing its numbers: Textual's, drawn 4 times a second.

Textual's redraws itself 16 times a second (`auto_refresh`), each frame a compositor update of
the whole body it covers: 50-95 ms of the UI thread's CPU a second at 120 x 40, taken from
building the next screen and drawing the numbers while a view computes (issue 27: every
view within 1 s right after visiting every other view). At 4 frames a second its dots still
move; the UI thread's cost falls to a quarter.
"""

from __future__ import annotations

from textual.events import Mount
from textual.widgets import LoadingIndicator

#: Seconds between two frames (Textual's own: 1/16).
FRAME = 0.25


class SlowLoadingIndicator(LoadingIndicator):
    """Textual's loading indicator, redrawn every `FRAME` seconds."""

    def on_mount(self, event: Mount) -> None:
        self.auto_refresh = FRAME
        # Textual calls each class's mount handler, this one first: its own would set its rate
        # (the dots' phase is the clock's, the same without it)
        event.prevent_default()
