"""The memory view from Python (part of `TraceAnalysis`): the TensorBoard plugin's memory
curve, events and statistics, and what holds memory at the peak. Every table has a leading
rank column; `ranks=None` means every rank with memory events (profile_memory=True)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl

from hta_tui.analysis import memory_view
from hta_tui.analysis.memory_curve import MAX_POINTS
from hta_tui.trace.model import TraceSet


class MemoryMethods:
    trace_set: TraceSet

    def _memory_frames(
        self, ranks: Iterable[int] | None
    ) -> tuple[dict[int, pl.DataFrame], dict[int, pl.DataFrame]]:
        events, memory = self.trace_set.frames(), self.trace_set.frames("memory")
        if ranks is not None:
            wanted = set(ranks)
            events = {r: f for r, f in events.items() if r in wanted}
        return events, memory

    def table(self, name: str, ranks: Iterable[int] | None = None, **options: Any) -> pl.DataFrame:
        raise NotImplementedError

    def get_memory_curve(
        self, ranks: list[int] | None = None, max_points: int | None = MAX_POINTS
    ) -> pl.DataFrame:
        """Allocated / reserved MB over time (ms since the profiler start) per device, as the
        plugin's step plot; LTTB-downsampled to `max_points` per device (None: every point)."""
        if max_points == MAX_POINTS:
            return self.table("memory_curve", ranks)
        return memory_view.curve(*self._memory_frames(ranks), max_points=max_points)

    def get_memory_events(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Allocation / free pairs (unmatched ones kept, `status` says which), with the
        operator, module and Python stack that allocated them."""
        return self.table("memory_events", ranks)

    def get_memory_stats(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """The plugin's memory statistics per operator and device (KB)."""
        return self.table("memory_stats", ranks)

    def get_memory_peak(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """The allocations alive at each device's peak, by operator / module / stack."""
        return self.table("memory_peak", ranks)

    def get_memory_device_peaks(self, ranks: list[int] | None = None) -> pl.DataFrame:
        return self.table("memory_device_peaks", ranks)

    def get_memory_leaks(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Allocations never freed inside the trace; `growing` when several steps left some."""
        return self.table("memory_leaks", ranks)

    def get_memory_step_peaks(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Peak per profiler step, and its growth from the step before."""
        return self.table("memory_step_peaks", ranks)
