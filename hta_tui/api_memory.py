"""The memory view from Python (part of `TraceAnalysis`): the TensorBoard plugin's memory
curve, events and statistics, and what holds memory at the peak. Every table has a leading
rank column; `ranks=None` means every rank with memory events (profile_memory=True)."""

from __future__ import annotations

from collections.abc import Iterable

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

    def get_memory_curve(
        self, ranks: list[int] | None = None, max_points: int | None = MAX_POINTS
    ) -> pl.DataFrame:
        """Allocated / reserved MB over time (ms since the profiler start) per device, as the
        plugin's step plot; LTTB-downsampled to `max_points` per device (None: every point)."""
        return memory_view.curve(*self._memory_frames(ranks), max_points=max_points)

    def get_memory_events(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Allocation / free pairs (unmatched ones kept, `status` says which), with the
        operator, module and Python stack that allocated them."""
        return memory_view.event_table(*self._memory_frames(ranks))

    def get_memory_stats(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """The plugin's memory statistics per operator and device (KB)."""
        return memory_view.stats(*self._memory_frames(ranks))

    def get_memory_peak(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """The allocations alive at each device's peak, by operator / module / stack."""
        return memory_view.live_at_peak(*self._memory_frames(ranks))

    def get_memory_device_peaks(self, ranks: list[int] | None = None) -> pl.DataFrame:
        return memory_view.peaks(*self._memory_frames(ranks))

    def get_memory_leaks(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Allocations never freed inside the trace; `growing` when several steps left some."""
        return memory_view.leaks(*self._memory_frames(ranks))

    def get_memory_step_peaks(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Peak allocated / reserved per profiler step, and its growth from the step before."""
        return memory_view.step_peaks(*self._memory_frames(ranks))
