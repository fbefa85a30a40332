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
    device = curve["device"]
    if not device.null_count() and device.min() == device.max():  # one device: no partition
        return lttb(curve, max_points).cast(COLUMNS)  # type: ignore[arg-type]
    parts = [lttb(part, max_points) for part in curve.partition_by("device", maintain_order=True)]
    return pl.concat(parts).sort("device", maintain_order=True).cast(COLUMNS)  # type: ignore[arg-type]


def lttb(curve: pl.DataFrame, n_out: int) -> pl.DataFrame:
    """The plugin's `lttb_sample` on one device's (time, allocated, reserved) rows: the first
    and last points, and from each of n_out - 2 equal bins of the rest the point making the
    largest triangle with the point kept before it and the mean of the next bin (on time and
    allocated). Each bin depends on the point kept in the one before, so this is a loop:
    over the bins' points in plain Python when bins are small (a numpy call per bin costs
    more than a few points: 0.2 s a rank on a real trace of 80k points; most bins' points
    guessed at once beforehand, `_guessed`), vectorised within each bin when they are
    large; the same arithmetic either way, so the same points."""
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
        guess = _guessed(data, lo, hi, np.array(c0), np.array(c1))
        keep[1:-1] = _lttb_small(data, lo.tolist(), hi.tolist(), c0, c1, guess)
    else:
        keep[1:-1] = _lttb_large(data, lo.tolist(), hi.tolist(), c0, c1)
    device = curve["device"][0]
    out = pl.DataFrame(data[keep], schema=["time_ms", "allocated_mb", "reserved_mb"], orient="row")
    return out.select(pl.lit(device).alias("device"), pl.all())


#: Points per bin up to which `lttb` loops over them in Python.
_SMALL_BIN = 32


#: Passes of `_guessed` over every bin.
_GUESSES = 3


def _guessed(
    data: np.ndarray, lo: np.ndarray, hi: np.ndarray, c0: np.ndarray, c1: np.ndarray
) -> tuple[list[int], list[int]] | None:
    """Per bin, a guess of the point kept before it and the bin's point were that the one:
    from passes over every bin at once, each after the points the pass before kept (the
    first: after each bin's first point). `_lttb_small` takes a bin's guessed point where
    the point it kept before is the guessed one (most bins, ~80% of a real curve's), so it
    loops over the other bins' points only. The loop's arithmetic on the same values in
    numpy (its doubles are Python's) and the first largest area (`argmax`, the loop's
    strict `>`): the same points. None where a value is not finite (a NaN compares
    otherwise)."""
    if not (np.isfinite(data[:, :2]).all() and np.isfinite(c0).all() and np.isfinite(c1).all()):
        return None
    x, y = data[:, 0], data[:, 1]
    at = lo[:, None] + np.arange(int((hi - lo).max()))  # (bins, the widest bin's points)
    pad = at >= hi[:, None]
    at[pad] = 0
    xs, ys = x[at], y[at]
    c0, c1 = c0[:, None], c1[:, None]
    found, before = lo, lo
    for _ in range(_GUESSES):
        before = np.concatenate([[0], found[:-1]])
        a0, a1 = x[before][:, None], y[before][:, None]
        areas = np.abs((a0 - c0) * (ys - a1) - (a0 - xs) * (c1 - a1))
        areas[pad] = -1.0  # below any area
        found = lo + areas.argmax(axis=1)
    return before.tolist(), found.tolist()


def _lttb_small(
    data: np.ndarray,
    lo: list[int],
    hi: list[int],
    c0: list[float],
    c1: list[float],
    guess: tuple[list[int], list[int]] | None = None,
) -> list[int]:
    xs, ys = data[:, 0].tolist(), data[:, 1].tolist()
    before, found = guess or ([-1] * len(lo), [])
    kept = []
    a = 0  # the point kept before the bin
    for i in range(len(lo)):
        if before[i] == a:  # guessed right: the bin's point found
            a = found[i]
            kept.append(a)
            continue
        a0, a1 = xs[a], ys[a]
        d0, d1 = a0 - c0[i], c1[i] - a1
        best, best_area = lo[i], -1.0
        for j in range(lo[i], hi[i]):
            area = abs(d0 * (ys[j] - a1) - (a0 - xs[j]) * d1)
            if area > best_area:
                best, best_area = j, area
        kept.append(best)
        a = best
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
