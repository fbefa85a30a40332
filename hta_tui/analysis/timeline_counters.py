"""Counter tracks of the timeline beyond GPU utilisation, as level rows (a value held between
consecutive points): memory allocated per device, from the memory frame (`[memory]` events),
and the launch-queue length per stream, from `queue.queue_length_series`."""

from __future__ import annotations

import numpy as np
import polars as pl

from hta_tui.analysis.queue import queue_length_series
from hta_tui.analysis.timeline_row import Row, make_row
from hta_tui.trace.schema import KINDS

#: the lane of a device's memory track (its utilisation track is -1)
MEMORY_LANE = -2


def level_row(
    key: tuple[int, str, int, int],
    label: str,
    ts: np.ndarray,
    value: np.ndarray,
    kind: str,
    span_ns: int,
    *,
    drop_zeros: bool = False,
) -> Row | None:
    """A counter's step function (`value` from each of `ts`, ns from the origin, to the
    next) as a level row scaled to its peak; None when it never rises above 0. With
    `drop_zeros`, spans at 0 are left out (they add nothing to a cell's mean)."""
    peak = float(value.max()) if len(value) else 0.0
    if peak <= 0:
        return None
    ends = np.append(ts[1:], max(span_ns, int(ts[-1]) + 1))
    if drop_zeros:
        keep = value > 0
        ts, ends, value = ts[keep], ends[keep], value[keep]
    return make_row(
        key,
        label,
        ts,
        ends,
        np.full(len(ts), KINDS.index(kind), dtype=np.uint8),
        np.full(len(ts), -1, dtype=np.int64),
        span_ns=span_ns,
        counter=True,
        level=(value / peak).astype(np.float64),
        scale=peak,
    )


def memory_rows(rank: int, memory: pl.DataFrame, origin_ns: int, span_ns: int) -> list[Row]:
    """One row per GPU device: allocated bytes over time (`total_allocated` as written, else
    the running sum of the events' sizes), as a fraction of the device's peak."""
    if memory.is_empty():
        return []
    gpu = memory.filter(pl.col("device_id").is_not_null() & (pl.col("device_id") >= 0))
    if gpu.is_empty():
        return []
    points = (
        gpu.sort("ts", maintain_order=True)
        .with_columns(
            value=pl.coalesce("total_allocated", pl.col("bytes").cum_sum().over("device_id"))
        )
        .group_by(["device_id", "ts"], maintain_order=True)
        .agg(pl.col("value").last())
    )
    rows = []
    for (device,), part in points.group_by(["device_id"], maintain_order=True):
        ts = part["ts"].to_numpy() - origin_ns
        value = part["value"].cast(pl.Float64).fill_null(0).to_numpy()
        key = (rank, "gpu", int(device), MEMORY_LANE)
        if (row := level_row(key, "mem alloc", ts, value, "memcpy", span_ns)) is not None:
            rows.append(row)
    return rows


#: a stream's queue-length track is lane QUEUE_LANE - stream (below every other counter)
QUEUE_LANE = -1000


def queue_rows(
    rank: int, events: pl.DataFrame, origin_ns: int, span_ns: int, devices: dict[int, int]
) -> list[Row]:
    """One row per stream that had launches: HTA's queue length (kernels launched and not
    started yet, `queue.queue_length_series`) as a fraction of the stream's maximum.
    `devices`: stream -> device of its timeline row."""
    series = queue_length_series({rank: events})
    rows = []
    for (stream,), part in series.group_by(["stream"], maintain_order=True):
        ts, value = _last_at_each_time(part)
        ts = ts - origin_ns
        device = devices.get(int(stream), int(part["pid"][0] or 0))
        key = (rank, "gpu", device, QUEUE_LANE - int(stream))
        row = level_row(key, f"queue {stream}", ts, value, "runtime", span_ns, drop_zeros=True)
        if row is not None:
            rows.append(row)
    return rows


def _last_at_each_time(part: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """A stream's series (sorted by time) -> each time once, with the queue length after its
    last change then. The last row of each run of equal times, in numpy (a group-by per
    stream was a third of the counter rows' time)."""
    if part["ts"].null_count():  # (none in a parsed trace: the group-by keeps its meaning)
        points = part.group_by("ts", maintain_order=True).agg(pl.col("queue_length").last())
        return points["ts"].to_numpy(), points["queue_length"].to_numpy().astype(np.float64)
    ts, value = part["ts"].to_numpy(), part["queue_length"].to_numpy()
    last = np.ones(len(ts), dtype=bool)
    last[:-1] = ts[1:] != ts[:-1]
    return ts[last], value[last].astype(np.float64)
