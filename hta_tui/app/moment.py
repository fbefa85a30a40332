"""A moment a table row names, for `t` (open the timeline there).

A screen says once, per table, which columns hold the rank, the time and the event
(`MomentColumns`, given to `FrameTable(moment=...)`); the table turns its cursor row into a
`Moment` and the timeline resolves it (`analysis.timeline_events.resolve`). Tables measure
time from different origins (the job's first event, the rank's first kernel, the first
kernel of all ranks, or as written in the file): `base` says which, and an event name or a
correlation id pins the exact event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: ns per unit of a time column
UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


@dataclass(frozen=True)
class Moment:
    """Where to go: rank, time (ns from `base`), duration (ns), the event's name or
    correlation, its stream, and whether the named event ends the range (an idle gap is
    followed by the kernel it delays)."""

    rank: int
    t: float
    base: str = "abs"  # "abs" (as in the file), "job", "rank_gpu", "gpu"
    dur: float = 0.0
    name: str | None = None
    correlation: int | None = None
    stream: int | None = None
    name_at_end: bool = False
    side: str | None = None  # "cpu": no event named, the innermost CPU event around t


@dataclass(frozen=True)
class MomentColumns:
    """Which columns of a table name a moment (see the module docstring)."""

    t: str | None  # None: the name alone pins the event (a step of a rank)
    unit: str = "us"
    base: str = "job"
    rank: str = "rank"
    dur: str | None = None
    dur_unit: str | None = None  # default: `unit`
    name: str | None = None
    name_format: str = "{}"  # e.g. "ProfilerStep#{}" for a step number column
    name_value: str | None = None  # a fixed name (the kernel a detail screen shows)
    correlation: str | None = None
    stream: str | None = None
    name_at_end: bool = False
    side: str | None = None

    def moment(self, row: dict[str, Any]) -> Moment | None:
        """The moment of a table row; None when the row lacks its rank, or its time and
        correlation and name."""
        rank = row.get(self.rank)
        t = row.get(self.t) if self.t else None
        corr = row.get(self.correlation) if self.correlation else None
        name = self.name_value
        if self.name and row.get(self.name) is not None:
            name = self.name_format.format(row[self.name])
        if rank is None or (t is None and corr is None and (self.t or name is None)):
            return None  # a correlation alone pins the event (tables may hide the time)
        dur = row.get(self.dur) if self.dur else None
        stream = row.get(self.stream) if self.stream else None
        return Moment(
            rank=int(rank),
            t=float(t or 0) * UNITS[self.unit],
            base=self.base,
            dur=float(dur or 0) * UNITS[self.dur_unit or self.unit],
            name=name,
            correlation=None if corr is None else int(corr),
            stream=None if stream is None else int(stream),
            name_at_end=self.name_at_end,
            side=self.side,
        )
