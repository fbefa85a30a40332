"""Memory events: each allocation with the free that releases it, as the TensorBoard plugin's
memory-events table (`get_memory_events`).

Per address, in time order, a free releases the allocation just before it; an allocation
followed by another allocation of the same address is forgotten (the plugin overwrites it).
Rows: the pairs in the order of their free, then the allocations never freed, then the frees
of memory allocated before the trace (one per address: the last, placed where the first was,
as the plugin's dictionaries do). Size is the free's for a pair. Times are ms since the
plugin's profiler start. `status` marks the unmatched rows.

DEVIATION: the plugin matches by address alone, across devices; we match by device and
address (a CPU and a GPU allocation can share a numeric address).
"""

from __future__ import annotations

from itertools import pairwise
from typing import NamedTuple

import numpy as np
import polars as pl

from hta_tui.analysis.memory_records import address_runs, display_op

KB = 1024.0

COLUMNS: dict[str, pl.DataType] = {
    "device": pl.String(),
    "operator": pl.String(),
    "size_kb": pl.Float64(),
    "allocation_ms": pl.Float64(),
    "release_ms": pl.Float64(),
    "duration_ms": pl.Float64(),
    "status": pl.String(),  # freed, never freed, allocated before the trace
    "addr": pl.Int64(),
    "alloc_ts": pl.Int64(),  # ns as in the file (null for a free without its allocation)
    "free_ts": pl.Int64(),
}

FREED, NOT_FREED, FREE_ONLY = "freed", "never freed", "allocated before"


def in_range(
    recs: pl.DataFrame, start_ns: int | None = None, end_ns: int | None = None
) -> pl.DataFrame:
    """The records with start <= ts <= end (the plugin's time filter, both ends included)."""
    if start_ns is not None:
        recs = recs.filter(pl.col("ts") >= start_ns)
    if end_ns is not None:
        recs = recs.filter(pl.col("ts") <= end_ns)
    return recs


def memory_events(
    recs: pl.DataFrame, origin_ns: int, start_ns: int | None = None, end_ns: int | None = None
) -> pl.DataFrame:
    """`recs` from `memory_records`; one row per allocation / free pair or unmatched event."""
    recs = in_range(recs, start_ns, end_ns).filter(pl.col("addr").is_not_null())
    if recs.is_empty():
        return pl.DataFrame(schema=COLUMNS)
    m = _matched(recs)
    # each row's event, and the event of its operator and allocation time (a pair's: its
    # allocation), by part and placement: one gather of each column
    sizes = [m.freed.size, m.kept.size, m.lone.size]
    part = np.repeat(np.arange(3, dtype=np.int8), sizes)
    order = np.concatenate([m.freed, m.kept_order, m.lone_order])
    sort = np.lexsort((order, part))
    rows = np.concatenate([m.freed, m.kept, m.lone])[sort]
    made_by = np.concatenate([m.freed_alloc, m.kept, m.lone])[sort]
    frame = pl.DataFrame(
        {
            "device": recs["device"].gather(rows),
            "addr": recs["addr"].gather(rows),
            "bytes": recs["bytes"].gather(rows),
            "ts": recs["ts"].gather(rows),
            "a_ts": recs["ts"].gather(made_by),
            "op": recs["op"].gather(made_by),
            "parent": recs["parent"].gather(made_by),
            "part": part[sort],
        }
    )
    ms = 1e6
    is_pair, kept, lone = (pl.col("part") == i for i in range(3))
    ts, a_ts = pl.col("ts"), pl.col("a_ts")
    columns = (
        "device",
        display_op().alias("operator"),
        (pl.when(kept).then(pl.col("bytes")).otherwise(-pl.col("bytes")) / KB).alias("size_kb"),
        pl.when(~lone).then((a_ts - origin_ns) / ms).alias("allocation_ms"),
        pl.when(~kept).then((ts - origin_ns) / ms).alias("release_ms"),
        pl.when(is_pair).then((ts - a_ts) / ms).alias("duration_ms"),
        pl.when(is_pair)
        .then(pl.lit(FREED))
        .when(kept)
        .then(pl.lit(NOT_FREED))
        .otherwise(pl.lit(FREE_ONLY))
        .alias("status"),
        "addr",
        pl.when(~lone).then(a_ts).alias("alloc_ts"),
        pl.when(~kept).then(ts).alias("free_ts"),
    )
    # each part on its own rows: polars divides one row by a number exactly and more rows
    # by its reciprocal, so a part of one row computed among others would round otherwise
    at = np.cumsum([0, *sizes]).tolist()
    out = pl.concat([frame.slice(a, b - a).select(columns) for a, b in pairwise(at)])
    device = recs["device"]
    if device.null_count() or device.min() != device.max():  # by device, then part and order
        out = out.sort("device", maintain_order=True)
    return out.cast(COLUMNS)  # type: ignore[arg-type]


class _Matched(NamedTuple):
    """Rows (time order) of `memory_events`' three parts, with the order each is placed in."""

    freed: np.ndarray  # a free releasing the allocation just before it at its address
    freed_alloc: np.ndarray  # that allocation
    kept: np.ndarray  # an allocation last at its address: never freed
    kept_order: np.ndarray  # the first allocation of its run after the address's last free
    lone: np.ndarray  # the last of an address's frees without their allocation
    lone_order: np.ndarray  # the first of them


def _matched(recs: pl.DataFrame) -> _Matched:
    """Each address's events (device and address, in time order) matched from one stable
    sort (`address_runs`): the windows over (device, address) this replaces (a shift,
    maxima, minima: seven in all) grouped the rank's events once each. A null size is
    neither an allocation nor a free (it ends no run of allocations, releases nothing), as
    those windows' tests made it."""
    order, same = address_runs(recs)  # same: the address of the one before
    n = order.size
    size = recs["bytes"].gather(order)
    alloc = (size > 0).fill_null(False).to_numpy()
    free = (size <= 0).fill_null(False).to_numpy()
    prev_alloc = same & np.concatenate([[False], alloc[:-1]])
    last = ~np.concatenate([same[1:], [False]])  # an address's last event
    pos = np.arange(n)
    freed = np.flatnonzero(free & prev_alloc)
    # the last free at or before each position of its address (its start - 1: none yet)
    start = np.maximum.accumulate(np.where(same, 0, pos))
    last_free = np.maximum.accumulate(np.where(free, pos, start - 1))
    # the first allocation at or after each position
    next_alloc = np.minimum.accumulate(np.where(alloc, pos, n)[::-1])[::-1]
    kept = np.flatnonzero(alloc & last)
    kept_first = next_alloc[last_free[kept] + 1]
    lone = np.flatnonzero(free & ~prev_alloc)
    group = np.cumsum(~same)[lone]  # the address of each
    first_of = np.diff(group, prepend=-1) != 0  # addresses count from 1
    last_of = np.diff(group, append=-1) != 0
    return _Matched(
        order[freed],
        order[freed - 1],
        order[kept],
        order[kept_first],
        order[lone[last_of]],
        order[lone[first_of]],
    )
