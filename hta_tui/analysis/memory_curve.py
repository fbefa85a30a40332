"""The memory curve per device: total allocated and reserved after every memory event, as the
TensorBoard plugin's memory curve (`get_memory_curve`), and its peak.

Points are (ms since the plugin's profiler start, allocated MB, reserved MB), MB = 1024**2 B,
from each event's `Total Allocated` / `Total Reserved` (events without an address or without
both totals are left out, as the plugin does). For a step plot each point is preceded by a copy
holding the previous values at its time; a curve longer than 10240 points is then reduced by
the plugin's Largest-Triangle-Three-Buckets (`lttb`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

MB = 1024.0 * 1024.0
#: the plugin's cap on points per device
MAX_POINTS = 10240

COLUMNS: dict[str, pl.DataType] = {
    "device": pl.String(),
    "time_ms": pl.Float64(),
    "allocated_mb": pl.Float64(),
    "reserved_mb": pl.Float64(),
}

PEAK_COLUMNS: dict[str, pl.DataType] = {
    "device": pl.String(),
    "peak_allocated_mb": pl.Float64(),
    "peak_time_ms": pl.Float64(),
    "peak_reserved_mb": pl.Float64(),
    "events": pl.Int64(),
}


def curve_points(recs: pl.DataFrame, origin_ns: int) -> pl.DataFrame:
    """One point per usable memory event, per device, in time order (not yet a step plot)."""
    return recs.filter(
        pl.col("addr").is_not_null()
        & pl.col("total_allocated").is_not_null()
        & pl.col("total_reserved").is_not_null()
        & ~pl.col("total_allocated").is_nan()
        & ~pl.col("total_reserved").is_nan()
    ).select(
        "device",
        ((pl.col("ts") - origin_ns) / 1e6).alias("time_ms"),
        (pl.col("total_allocated") / MB).alias("allocated_mb"),
        (pl.col("total_reserved") / MB).alias("reserved_mb"),
    )


def step_plot(points: pl.DataFrame) -> pl.DataFrame:
    """Before every point but a device's first, a point at its time with the previous values."""
    held = points.with_columns(
        pl.col(c).shift(1).over("device") for c in ("allocated_mb", "reserved_mb")
    ).with_row_index("__i")
    own = points.with_row_index("__i")
    both = pl.concat(
        [
            held.filter(pl.col("allocated_mb").is_not_null()).with_columns(pl.lit(0).alias("__k")),
            own.with_columns(pl.lit(1).alias("__k")),
        ]
    )
    return both.sort("__i", "__k").drop("__i", "__k")


def memory_curve(
    recs: pl.DataFrame, origin_ns: int, max_points: int | None = MAX_POINTS
) -> pl.DataFrame:
    """The plugin's curve rows per device: step plot, then LTTB to `max_points` (None: all)."""
    curve = step_plot(curve_points(recs, origin_ns))
    if max_points is None or curve.is_empty():
        return curve.cast(COLUMNS)  # type: ignore[arg-type]
    parts = [lttb(part, max_points) for part in curve.partition_by("device", maintain_order=True)]
    return pl.concat(parts).sort("device", maintain_order=True).cast(COLUMNS)  # type: ignore[arg-type]


def lttb(curve: pl.DataFrame, n_out: int) -> pl.DataFrame:
    """The plugin's `lttb_sample` on one device's (time, allocated, reserved) rows: the first
    and last points, and from each of n_out - 2 equal bins of the rest the point making the
    largest triangle with the point kept before it and the mean of the next bin (on time and
    allocated). One numpy step per bin, vectorised within it."""
    n = curve.height
    if n_out >= n or n_out < 3:
        return curve
    data = curve.select("time_ms", "allocated_mb", "reserved_mb").to_numpy()
    bins = np.array_split(np.arange(1, n - 1), n_out - 2)
    bounds = [(b[0], b[-1] + 1) for b in bins]
    means = [data[lo:hi].mean(axis=0) for lo, hi in bounds[1:]] + [data[n - 1]]
    keep = np.empty(n_out, dtype=np.int64)
    keep[0], keep[-1] = 0, n - 1
    a = data[0]
    for i, (lo, hi) in enumerate(bounds):
        c = means[i]
        bs = data[lo:hi]
        areas = 0.5 * np.abs((a[0] - c[0]) * (bs[:, 1] - a[1]) - (a[0] - bs[:, 0]) * (c[1] - a[1]))
        best = lo + int(np.argmax(areas))
        keep[i + 1] = best
        a = data[best]
    device = curve["device"][0]
    out = pl.DataFrame(data[keep], schema=["time_ms", "allocated_mb", "reserved_mb"], orient="row")
    return out.select(pl.lit(device).alias("device"), pl.all())


def memory_peaks(recs: pl.DataFrame, origin_ns: int) -> pl.DataFrame:
    """Per device: the plugin's peak (largest total allocated), when it was first reached and
    the reserved memory then."""
    points = curve_points(recs, origin_ns)
    return (
        points.group_by("device", maintain_order=True)
        .agg(
            pl.col("allocated_mb").max().alias("peak_allocated_mb"),
            pl.col("time_ms").get(pl.col("allocated_mb").arg_max()).alias("peak_time_ms"),
            pl.col("reserved_mb").get(pl.col("allocated_mb").arg_max()).alias("peak_reserved_mb"),
            pl.len().cast(pl.Int64).alias("events"),
        )
        .sort("device")
        .cast(PEAK_COLUMNS)  # type: ignore[arg-type]
    )
