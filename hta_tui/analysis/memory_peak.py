"""Beyond the plugin: what holds the memory at each device's peak, what is never freed, and
how each step's peak moves.

- live at the peak: the allocations made at or before the moment a device first reaches its
  largest total allocated and not freed before it, grouped by the operator (as the plugin
  names it), nn.Module and Python frames that made them, largest first, with how long they
  live (freed ones) and how many are never freed inside the trace. Memory allocated before
  the trace (freed inside it or not: the latter has no event at all) is a row of its own,
  `(allocated before the trace)`: the peak's total allocated less what the trace's own
  allocations hold then, so the shares add up to the peak.
- leak candidates: allocations never freed inside the trace, by the same groups; `steps` is
  the number of profiler steps that left some behind, and a group is `growing` when two or
  more did (memory a step allocates and never gives back accumulates until an OOM).
- step peaks: per profiler step (ProfilerStep#N) and device, the largest total allocated and
  reserved inside the step, and the change from the step before: a rank whose step peak grows
  is the one that runs out of memory first.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.memory_curve import MB
from hta_tui.analysis.memory_events import FREE_ONLY, NOT_FREED

BEFORE_TRACE = "(allocated before the trace)"
GROUP = ("operator", "module", "stack")

PEAK_COLUMNS: dict[str, pl.DataType] = {
    "device": pl.String(),
    "operator": pl.String(),
    "module": pl.String(),
    "stack": pl.String(),
    "live_mb": pl.Float64(),
    "share_of_peak_pct": pl.Float64(),
    "allocations": pl.Int64(),
    "never_freed": pl.Int64(),
    "first_alloc_ms": pl.Float64(),
    "last_alloc_ms": pl.Float64(),
    "mean_lifetime_ms": pl.Float64(),
    "peak_time_ms": pl.Float64(),
}

LEAK_COLUMNS: dict[str, pl.DataType] = {
    "device": pl.String(),
    "operator": pl.String(),
    "module": pl.String(),
    "stack": pl.String(),
    "never_freed": pl.Int64(),
    "never_freed_mb": pl.Float64(),
    "steps": pl.Int64(),
    "growing": pl.Boolean(),
    "first_alloc_ms": pl.Float64(),
    "last_alloc_ms": pl.Float64(),
}

STEP_COLUMNS: dict[str, pl.DataType] = {
    "device": pl.String(),
    "step": pl.Int64(),
    "peak_allocated_mb": pl.Float64(),
    "peak_reserved_mb": pl.Float64(),
    "growth_mb": pl.Float64(),
}


def with_context(table: pl.DataFrame, context: pl.DataFrame, recs: pl.DataFrame) -> pl.DataFrame:
    """Memory-event rows (`memory_events`, with alloc_ts) joined to their allocation's module
    and stack; rows without an allocation get none."""
    keys = recs.select("device", "addr", pl.col("ts").alias("alloc_ts"), "seq", "bytes")
    keys = keys.filter(pl.col("bytes") > 0).drop("bytes")
    keys = keys.unique(["device", "addr", "alloc_ts"], keep="first")  # the first, not any
    ctx = keys.join(context, on="seq", how="left").drop("seq")
    return table.join(ctx, on=["device", "addr", "alloc_ts"], how="left", maintain_order="left")


def live_at_peak(table: pl.DataFrame, peaks: pl.DataFrame, origin_ns: int) -> pl.DataFrame:
    """`table`: memory events with context (`with_context`); `peaks`: `memory_peaks`."""
    if table.is_empty() or peaks.is_empty():
        return pl.DataFrame(schema=PEAK_COLUMNS)
    return group_live(alive_at_peak(table, peaks, origin_ns), peaks)


def alive_at_peak(table: pl.DataFrame, peaks: pl.DataFrame, origin_ns: int) -> pl.DataFrame:
    """The rows of `table` (memory events) alive at their device's peak, with the peak's
    columns: a few thousand of a million, so their context can be found afterwards."""
    at = peaks.select(
        "device",
        "peak_allocated_mb",
        "peak_time_ms",
        (pl.col("peak_time_ms") * 1e6 + origin_ns).round(0).cast(pl.Int64).alias("peak_ns"),
    )
    rows = table.join(at, on="device").with_columns(
        pl.when(pl.col("status") == FREE_ONLY)
        .then(pl.lit(BEFORE_TRACE))
        .otherwise(pl.col("operator"))
        .alias("operator")
    )
    born = pl.col("alloc_ts").is_null() | (pl.col("alloc_ts") <= pl.col("peak_ns"))
    alive = pl.col("free_ts").is_null() | (pl.col("free_ts") > pl.col("peak_ns"))
    return rows.filter(born & alive)


def group_live(live: pl.DataFrame, peaks: pl.DataFrame | None = None) -> pl.DataFrame:
    """`alive_at_peak` rows with their context, grouped (largest first), and per device of
    `peaks` the memory allocated before the trace (`_before_trace`)."""
    grouped = (
        live.group_by("device", *GROUP)
        .agg(
            (pl.col("size_kb").sum() / 1024.0).alias("live_mb"),
            pl.col("peak_allocated_mb").first(),
            pl.len().cast(pl.Int64).alias("allocations"),
            (pl.col("status") == NOT_FREED).sum().cast(pl.Int64).alias("never_freed"),
            pl.col("allocation_ms").min().alias("first_alloc_ms"),
            pl.col("allocation_ms").max().alias("last_alloc_ms"),
            pl.col("duration_ms").mean().alias("mean_lifetime_ms"),
            pl.col("peak_time_ms").first(),
        )
        .with_columns(pl.col("device").cast(pl.String))
    )
    if peaks is not None:
        grouped = _before_trace(grouped, peaks)
    return (
        grouped.with_columns(
            (100.0 * pl.col("live_mb") / pl.col("peak_allocated_mb")).alias("share_of_peak_pct")
        )
        # The whole group key breaks ties: the row order never depends on the group-by's.
        .sort(
            ["device", "live_mb", *GROUP],
            descending=[False, True, *[False] * len(GROUP)],
            nulls_last=True,
        )
        .select(list(PEAK_COLUMNS))
        .cast(PEAK_COLUMNS)  # type: ignore[arg-type]
    )


def _before_trace(grouped: pl.DataFrame, peaks: pl.DataFrame) -> pl.DataFrame:
    """The `(allocated before the trace)` row of each device: its peak less the live memory
    the trace's own allocations hold (memory allocated before the trace and never freed in it
    has no event; that freed in it, after the peak, is part of it). Its counts are those of
    the frees seen."""
    ours = grouped.filter(pl.col("operator") != BEFORE_TRACE)
    known = ours.group_by("device").agg(pl.col("live_mb").sum().alias("known_mb"))
    seen = grouped.filter(pl.col("operator") == BEFORE_TRACE).drop(
        "live_mb", "peak_allocated_mb", "peak_time_ms", *GROUP
    )
    rows = (
        peaks.select(pl.col("device").cast(pl.String), "peak_allocated_mb", "peak_time_ms")
        .unique("device", keep="first")
        .join(known, on="device", how="left")
        .join(seen, on="device", how="left")
        .with_columns(
            pl.lit(BEFORE_TRACE).alias("operator"),
            pl.lit(None, pl.String).alias("module"),
            pl.lit(None, pl.String).alias("stack"),
            (pl.col("peak_allocated_mb") - pl.col("known_mb").fill_null(0.0))
            .clip(lower_bound=0.0)
            .alias("live_mb"),
            pl.col("allocations").fill_null(0),
            pl.col("never_freed").fill_null(0),
        )
        .filter(pl.col("live_mb") > 0)
        .select(grouped.columns)
    )
    return pl.concat([ours, rows.cast(grouped.schema)])  # type: ignore[arg-type]


def step_spans(events: pl.DataFrame) -> pl.DataFrame:
    """step (the N of ProfilerStep#N), start, end of one file's profiler steps."""
    return (
        events.lazy()
        .filter(pl.col("name").str.starts_with("ProfilerStep#"))
        .select(
            pl.col("name")
            .str.strip_prefix("ProfilerStep#")
            .str.to_integer(strict=False)
            .alias("step"),
            pl.col("ts").alias("start"),
            (pl.col("ts") + pl.col("dur")).alias("end"),
        )
        .drop_nulls("step")
        .group_by("step")
        .agg(pl.col("start").min(), pl.col("end").max())
        .sort("start")
        .collect()
    )


def kept_step_spans(events: pl.DataFrame) -> pl.DataFrame:
    """`step_spans`, made once per events frame: the leak candidates, the step peaks and
    the memory view's windows read them."""
    return job_cached({0: events}, "memory_step_spans", lambda: step_spans(events))


def _step_of(frame: pl.DataFrame, at: str, spans: pl.DataFrame) -> pl.DataFrame:
    """`frame` with the step whose [start, end) holds column `at` (null outside every step):
    the last step starting at or before it (`spans` sorted by start), by binary search (an
    as-of join sorted the frame by `at` and back)."""
    if spans.is_empty():
        return frame.with_columns(pl.lit(None, pl.Int64).alias("step"))
    t = frame[at]
    ts = t.fill_null(0).to_numpy()
    i = np.searchsorted(spans["start"].to_numpy(), ts, "right") - 1
    end = spans["end"].to_numpy()[np.maximum(i, 0)]
    outside = (i < 0) | ~(ts < end) | t.is_null().to_numpy()  # a null end: outside too
    step = spans["step"].gather(np.maximum(i, 0)).set(pl.Series(outside), None)  # type: ignore[arg-type]
    return frame.with_columns(step.alias("step"))


def leak_candidates(table: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """`table`: memory events with context; the never-freed allocations by group."""
    kept = table.filter(pl.col("status") == NOT_FREED)
    if kept.is_empty():
        return pl.DataFrame(schema=LEAK_COLUMNS)
    kept = _step_of(kept, "alloc_ts", kept_step_spans(events))
    return (
        kept.group_by("device", *GROUP)
        .agg(
            pl.len().cast(pl.Int64).alias("never_freed"),
            (pl.col("size_kb").sum() / 1024.0).alias("never_freed_mb"),
            pl.col("step").drop_nulls().n_unique().cast(pl.Int64).alias("steps"),
            pl.col("allocation_ms").min().alias("first_alloc_ms"),
            pl.col("allocation_ms").max().alias("last_alloc_ms"),
        )
        .with_columns((pl.col("steps") >= 2).alias("growing"))
        .sort(
            ["device", "steps", "never_freed_mb", *GROUP],
            descending=[False, True, True, False, False, False],
            nulls_last=True,
        )
        .select(list(LEAK_COLUMNS))
        .cast(LEAK_COLUMNS)  # type: ignore[arg-type]
    )


def step_peaks(recs: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Per device and profiler step, the peak inside the step and its change from the last."""
    spans = kept_step_spans(events)
    points = recs.filter(pl.col("total_allocated").is_not_null())
    if spans.is_empty() or points.is_empty():
        return pl.DataFrame(schema=STEP_COLUMNS)
    inside = _step_of(points, "ts", spans).drop_nulls("step")
    return (
        inside.group_by("device", "step")
        .agg(
            (pl.col("total_allocated").max() / MB).alias("peak_allocated_mb"),
            (pl.col("total_reserved").max() / MB).alias("peak_reserved_mb"),
        )
        .sort("device", "step")
        .with_columns(pl.col("peak_allocated_mb").diff().over("device").alias("growth_mb"))
        .cast(STEP_COLUMNS)  # type: ignore[arg-type]
    )
