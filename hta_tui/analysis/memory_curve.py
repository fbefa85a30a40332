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

from hta_tui.analysis.memory_records import runs

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
    """Before every point but a device's first, a point at its time with the previous values
    (of its device): rows gathered (a shift over the devices, a frame twice the curve's
    and its sort cost ~4 ms a rank of 40k points)."""
    order, same = runs(points, ("device",))
    prev = np.full(points.height, -1, dtype=np.int64)
    prev[order[same]] = order[np.flatnonzero(same) - 1]
    held = prev >= 0
    at = np.arange(points.height, dtype=np.int64)
    own_at = at + np.cumsum(held)  # each point's row: after the held points up to it
    rows = np.empty(points.height + int(held.sum()), dtype=np.int64)
    values = rows.copy()
    rows[own_at] = values[own_at] = at
    rows[own_at[held] - 1] = at[held]  # a held point: its own time, the previous values
    values[own_at[held] - 1] = prev[held]
    return pl.DataFrame(
        [
            points["device"].gather(rows),
            points["time_ms"].gather(rows),
            *(points[c].gather(values) for c in ("allocated_mb", "reserved_mb")),
        ]
    )


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
    allocated). Each bin depends on the point kept in the one before, so this is a loop:
    over the bins' points in plain Python when bins are small (a numpy call per bin costs
    more than a few points: 0.2 s a rank on a real trace of 80k points), vectorised within
    each bin when they are large; the same arithmetic either way, so the same points."""
    n = curve.height
    if n_out >= n or n_out < 3:
        return curve
    data = curve.select("time_ms", "allocated_mb", "reserved_mb").to_numpy()
    bins = n_out - 2
    size, extra = divmod(n - 2, bins)  # np.array_split: the first `extra` bins hold one more
    lo = 1 + np.arange(bins) * size + np.minimum(np.arange(bins), extra)
    hi = lo + size + (np.arange(bins) < extra)
    # each bin's mean (the bins are contiguous: sums between starts, added in order as
    # `mean` adds them), the last bin's "next" being the last point
    means = np.add.reduceat(data[: n - 1, :2], lo[1:], axis=0) / (hi - lo)[1:, None]
    c0 = [*means[:, 0].tolist(), float(data[n - 1, 0])]
    c1 = [*means[:, 1].tolist(), float(data[n - 1, 1])]
    keep = np.empty(n_out, dtype=np.int64)
    keep[0], keep[-1] = 0, n - 1
    if size <= _SMALL_BIN:
        keep[1:-1] = _lttb_small(data, lo.tolist(), hi.tolist(), c0, c1)
    else:
        keep[1:-1] = _lttb_large(data, lo.tolist(), hi.tolist(), c0, c1)
    device = curve["device"][0]
    out = pl.DataFrame(data[keep], schema=["time_ms", "allocated_mb", "reserved_mb"], orient="row")
    return out.select(pl.lit(device).alias("device"), pl.all())


#: Points per bin up to which `lttb` loops over them in Python.
_SMALL_BIN = 32


def _lttb_small(
    data: np.ndarray, lo: list[int], hi: list[int], c0: list[float], c1: list[float]
) -> list[int]:
    xs, ys = data[:, 0].tolist(), data[:, 1].tolist()
    a0, a1 = xs[0], ys[0]
    kept = []
    for i in range(len(lo)):
        d0, d1 = a0 - c0[i], c1[i] - a1
        best, best_area = lo[i], -1.0
        for j in range(lo[i], hi[i]):
            area = abs(d0 * (ys[j] - a1) - (a0 - xs[j]) * d1)
            if area > best_area:
                best, best_area = j, area
        kept.append(best)
        a0, a1 = xs[best], ys[best]
    return kept


def _lttb_large(
    data: np.ndarray, lo: list[int], hi: list[int], c0: list[float], c1: list[float]
) -> list[int]:
    x, y = data[:, 0], data[:, 1]
    a0, a1 = float(x[0]), float(y[0])
    kept = []
    for i in range(len(lo)):
        areas = np.abs(
            (a0 - c0[i]) * (y[lo[i] : hi[i]] - a1) - (a0 - x[lo[i] : hi[i]]) * (c1[i] - a1)
        )
        best = lo[i] + int(np.argmax(areas))
        kept.append(best)
        a0, a1 = float(x[best]), float(y[best])
    return kept


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
