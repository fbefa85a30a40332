"""The memory view over loaded ranks: each memory table of one file, for every rank, with a
leading rank column. The per-file memory records (operator attribution) are built once per
memory frame and shared by every table (`shared`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import polars as pl

from hta_tui.analysis import (
    memory_curve,
    memory_device,
    memory_events,
    memory_peak,
    memory_stats,
    shared,
)
from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.memory_records import start_ns

Ranks = Mapping[int, pl.DataFrame]


class FileMemory:
    """One file's memory events with their operators, origin and (lazily) Python context.
    Times count from `origin_ns`: by default the file's first event (the plugin's profiler
    start); the app gives the trace's start, the timeline's origin."""

    def __init__(
        self, events: pl.DataFrame, memory: pl.DataFrame, origin_ns: int | None = None
    ) -> None:
        self.events = events
        self.memory = memory
        self.origin_ns = origin_ns if origin_ns is not None else start_ns(events, memory) or 0
        self.recs = shared.memory_records(events, memory)

    def plain_table(self) -> pl.DataFrame:
        """The whole file's memory-events table (plugin order), without module and stack."""
        return job_cached(
            {0: self.memory},
            "memory_plain_table",
            lambda: memory_events.memory_events(self.recs, self.origin_ns),
            self.origin_ns,
        )

    def peaks(self) -> pl.DataFrame:
        """The devices' peaks (`memory_curve.memory_peaks`), kept: the peaks' table and what
        is alive at them read them."""
        return job_cached(
            {0: self.memory},
            "memory_peaks",
            lambda: memory_curve.memory_peaks(self.recs, self.origin_ns),
            self.origin_ns,
        )

    def table(self, start_ns: int | None = None, end_ns: int | None = None) -> pl.DataFrame:
        """The memory-events table (plugin order) with each allocation's module and stack;
        the whole file's is kept."""
        if start_ns is None and end_ns is None:
            return job_cached(
                {0: self.memory},
                "memory_table",
                lambda: self._with_context(self.plain_table()),
                self.origin_ns,
            )
        rows = memory_events.memory_events(self.recs, self.origin_ns, start_ns, end_ns)
        return self._with_context(rows)

    def _with_context(self, rows: pl.DataFrame) -> pl.DataFrame:
        ctx = shared.allocation_context(self.events, self.memory)  # allocations only
        return memory_peak.with_context(rows, ctx, self.recs)

    def live(self, table: pl.DataFrame, peaks: pl.DataFrame) -> pl.DataFrame:
        """What is alive at each peak of `peaks`, of `table` (`plain_table` rows), by
        operator, module and stack: the rank's allocation context (`shared`: found for the
        live rows only it costs as much, the frames' nesting being most of it), shared with
        the events table and the leak candidates."""
        if peaks.is_empty():
            return pl.DataFrame(schema=memory_peak.PEAK_COLUMNS)
        alive = memory_peak.alive_at_peak(table, peaks, self.origin_ns)
        keys = alive.select("device", "addr", pl.col("alloc_ts").alias("ts")).drop_nulls()
        recs = self.recs.filter(pl.col("bytes") > 0).join(
            keys.unique(), on=["device", "addr", "ts"], how="semi"
        )
        ctx = shared.allocation_context(self.events, self.memory)
        rows = memory_peak.with_context(alive, ctx, recs)
        return memory_peak.group_live(rows, peaks)


def ranks_with_memory(events: Ranks, memory: Ranks) -> list[int]:
    return [r for r in sorted(memory) if r in events and not memory[r].is_empty()]


def files(events: Ranks, memory: Ranks) -> dict[int, FileMemory]:
    """Ranks with memory events."""
    return {r: FileMemory(events[r], memory[r]) for r in ranks_with_memory(events, memory)}


def _per_rank(
    events: Ranks,
    memory: Ranks,
    one: Callable[[FileMemory], pl.DataFrame],
    schema: Mapping[str, pl.DataType],
) -> pl.DataFrame:
    frames = [
        one(f).select(pl.lit(r, pl.Int64).alias("rank"), pl.all())
        for r, f in files(events, memory).items()
    ]
    frames = [f for f in frames if not f.is_empty()]
    if frames:
        return pl.concat(frames, how="diagonal_relaxed")
    return pl.DataFrame(schema={"rank": pl.Int64(), **schema})


def curve(
    events: Ranks, memory: Ranks, max_points: int | None = memory_curve.MAX_POINTS
) -> pl.DataFrame:
    """The plugin's memory curve rows (step plot, LTTB to `max_points`), per rank and device."""
    return _per_rank(
        events,
        memory,
        lambda f: memory_curve.memory_curve(f.recs, f.origin_ns, max_points),
        memory_curve.COLUMNS,
    )


def peaks(events: Ranks, memory: Ranks) -> pl.DataFrame:
    return _per_rank(
        events,
        memory,
        lambda f: f.peaks(),
        memory_curve.PEAK_COLUMNS,
    )


def event_table(events: Ranks, memory: Ranks) -> pl.DataFrame:
    return _per_rank(
        events,
        memory,
        lambda f: f.table(),
        {**memory_events.COLUMNS, "module": pl.String(), "stack": pl.String()},
    )


def stats(events: Ranks, memory: Ranks) -> pl.DataFrame:
    return _per_rank(
        events, memory, lambda f: memory_stats.memory_stats(f.events, f.recs), memory_stats.COLUMNS
    )


def live_at_peak(events: Ranks, memory: Ranks) -> pl.DataFrame:
    def one(f: FileMemory) -> pl.DataFrame:
        return f.live(f.plain_table(), f.peaks())

    return _per_rank(events, memory, one, memory_peak.PEAK_COLUMNS)


def leaks(events: Ranks, memory: Ranks) -> pl.DataFrame:
    return _per_rank(
        events,
        memory,
        lambda f: memory_peak.leak_candidates(f.table(), f.events),
        memory_peak.LEAK_COLUMNS,
    )


def step_peaks(events: Ranks, memory: Ranks) -> pl.DataFrame:
    return _per_rank(
        events, memory, lambda f: memory_peak.step_peaks(f.recs, f.events), memory_peak.STEP_COLUMNS
    )


NO_CURVE_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "device": pl.String(),
    "memory_events": pl.UInt32(),
    "reason": pl.String(),
}


def no_curve(events: Ranks, memory: Ranks) -> pl.DataFrame:
    """rank, device, memory_events, reason: the devices that have memory events but no
    curve, peak or step peaks (their events carry no `Total Allocated`: PyTorch's 2021
    format), so the report says why those tables are empty, as the memory view does."""
    frames = []
    for r, f in files(events, memory).items():
        recs = memory_device.sorted_records(f.memory)
        frames.append(
            recs.group_by("device")
            .agg(
                pl.len().cast(pl.UInt32).alias("memory_events"),
                pl.col("total_allocated").is_null().all().alias("no_totals"),
            )
            .filter("no_totals")
            .select(pl.lit(r, pl.Int64).alias("rank"), "device", "memory_events")
        )
    frames = [f for f in frames if not f.is_empty()]
    if not frames:
        return pl.DataFrame(schema=NO_CURVE_COLUMNS)
    return (
        pl.concat(frames)
        .with_columns(pl.lit(memory_device.NO_TOTALS).alias("reason"))
        .sort("rank", "device")
        .cast(NO_CURVE_COLUMNS)  # type: ignore[arg-type]
    )
