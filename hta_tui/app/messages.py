"""Messages workers post to the app. Workers never touch widgets or the TraceSet: they post one
of these, and the app applies it on its own thread.

Every message carries the generation it was made for, so the app can drop results that arrive
after the state they describe has moved on (a thread worker cannot be killed, so an old load can
still post late).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    import polars as pl

    from hta_tui.trace.discover import TraceFile
    from hta_tui.trace.load import LoadResult


class FilesFound(Message):
    """Trace candidates were listed (`full`: a whole-folder scan) or stat'ed again (a change)."""

    def __init__(self, files: list[TraceFile], generation: int, *, full: bool) -> None:
        super().__init__()
        self.files = files
        self.generation = generation
        self.full = full


class FileLoaded(Message):
    """One file finished loading (whatever its status). `generation` is the app's scan number."""

    def __init__(self, result: LoadResult, generation: int) -> None:
        super().__init__()
        self.result = result
        self.generation = generation


class FileGone(Message):
    """A file reported as changed had vanished by the time it was stat'ed."""

    def __init__(self, path: Path, generation: int) -> None:
        super().__init__()
        self.path = path
        self.generation = generation


class FilesChanged(Message):
    """A batch of changes from the watcher (`hta_tui.trace.watch.Change`s)."""

    def __init__(self, changes: list[Any]) -> None:
        super().__init__()
        self.changes = changes


class WatchState(Message):
    """The watcher started ("watching" / "polling") or stopped ("off", with the reason)."""

    def __init__(self, state: str, reason: str | None = None) -> None:
        super().__init__()
        self.state = state
        self.reason = reason


class OverviewReady(Message):
    """Tables of the overview screen, computed in a worker from the TraceSet at `generation`:
    `overview.file_table` and `overview.temporal_table`'s frames, and `data`, the display rows
    made from them (`screens.overview.OverviewData`)."""

    def __init__(
        self, files: pl.DataFrame, temporal: pl.DataFrame, generation: int, data: Any = None
    ) -> None:
        super().__init__()
        self.files = files
        self.temporal = temporal
        self.generation = generation
        self.data = data
