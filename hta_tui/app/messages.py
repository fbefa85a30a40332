"""Messages the app's workers post to it. Workers never touch widgets or the TraceSet: they
post one of these, and the app applies it on its own thread. The session's changes come as
`loading.SessionReady`.

Every message carries the generation it was made for, so the app can drop results that arrive
after the state they describe has moved on (a thread worker cannot be killed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    import polars as pl


class OverviewReady(Message):
    """Tables of the overview screen, computed in a worker from the TraceSet at `generation`:
    `overview.file_table` and `overview.temporal_table`'s frames, and `data`, the display rows
    made from them (`screens.overview.OverviewData`); `key`, the app's overview key it was
    computed for (several can share a generation)."""

    def __init__(
        self,
        files: pl.DataFrame,
        temporal: pl.DataFrame,
        generation: int,
        data: Any = None,
        key: tuple[Any, ...] | None = None,
    ) -> None:
        super().__init__()
        self.files = files
        self.temporal = temporal
        self.generation = generation
        self.data = data
        self.key = key

    def can_replace(self, message: Message) -> bool:
        """A newer overview waiting in the queue makes an older one pointless."""
        return isinstance(message, OverviewReady) and message.generation <= self.generation
