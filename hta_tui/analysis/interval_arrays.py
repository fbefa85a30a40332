"""Unions of [start, end) intervals held as numpy arrays, and their length inside windows.

The polars versions (`intervals`) sort with a general sort; events come nearly in time order
(file order), which numpy's stable sort (a run-merging sort) finishes in a few linear passes:
10-15x faster than a polars sort of the same column. The conventions are `intervals`': touching
intervals merge, a union's end is its members' max end.
"""

from __future__ import annotations

import numpy as np

Array = np.ndarray


def run_bounds(ordered: Array) -> tuple[Array, Array]:
    """Where each run of equal values of `ordered` (sorted, or grouped) starts, and where it
    ends (the next one's start; the size for the last): none for no value."""
    first = np.flatnonzero(np.concatenate([[ordered.size > 0], ordered[1:] != ordered[:-1]]))
    return first, np.append(first[1:], ordered.size)[: first.size]


def union(starts: Array, ends: Array, *, ordered: bool = False) -> tuple[Array, Array]:
    """The disjoint union (starts, ends), sorted; `ordered` when `starts` is sorted already."""
    if starts.size == 0:
        return starts, ends
    if not ordered:
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    new = np.empty(starts.size, dtype=bool)
    new[0] = True
    np.greater(starts[1:], np.maximum.accumulate(ends)[:-1], out=new[1:])
    first = np.flatnonzero(new)
    # a group's own max end (not the running one: HTA's rounding makes intervals that end
    # before they start, and such a group keeps its own end as in `intervals.merged`)
    return starts[first], np.maximum.reduceat(ends, first)


def unions_by(group: Array, starts: Array, ends: Array) -> tuple[Array, Array, Array] | None:
    """`union` of each group's intervals at once, rows by group then start (each group's
    own `union(ordered=True)`, to the bit): (group, starts, ends) of every group's union,
    groups in order. Each group's running max end is one pass over the groups shifted
    apart; None when that shift would overflow (a span of centuries)."""
    if starts.size == 0:
        return group, starts, ends
    lo = int(min(starts.min(), ends.min()))
    span = int(max(starts.max(), ends.max())) - lo + 1
    gid = np.concatenate([[0], np.cumsum(group[1:] != group[:-1])])
    if span * (int(gid[-1]) + 1) >= 2**62:
        return None
    shift = gid * span
    running = np.maximum.accumulate(shift + (ends - lo)) - shift + lo
    new = np.empty(starts.size, dtype=bool)
    new[0] = True
    np.greater(starts[1:], running[:-1], out=new[1:])
    new[1:] |= gid[1:] != gid[:-1]
    first = np.flatnonzero(new)
    return group[first], starts[first], np.maximum.reduceat(ends, first)


def add(a: tuple[Array, Array], b: tuple[Array, Array]) -> tuple[Array, Array]:
    """The union of two unions (each sorted and disjoint): two runs, merged in linear time.
    One of them empty: the other as it is (a union's own union is itself, to the bit)."""
    if not b[0].size:
        return a
    if not a[0].size:
        return b
    return union(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def length(u: tuple[Array, Array]) -> int:
    """Total length of a union."""
    return int((u[1] - u[0]).sum())


def covered(u: tuple[Array, Array], lo: Array, hi: Array) -> Array:
    """Length of the union `u` inside each window [lo, hi) (vectorised over the windows)."""
    starts, ends = u
    if starts.size == 0:
        return np.zeros(lo.size, dtype=np.int64)
    prefix = np.concatenate([[0], np.cumsum(ends - starts)])
    first = np.searchsorted(ends, lo, side="right")  # the first interval ending after lo
    stop = np.searchsorted(starts, hi, side="left")  # past the last one starting before hi
    stop = np.maximum(stop, first)
    total = prefix[stop] - prefix[first]
    some = stop > first
    head = np.where(some, np.maximum(lo - starts[np.minimum(first, starts.size - 1)], 0), 0)
    tail = np.where(some, np.maximum(ends[np.maximum(stop - 1, 0)] - hi, 0), 0)
    return total - head - tail


#: Past this many ns, several clocks laid one after another (`laid_out`) could overflow int64.
MAX_LAYOUT = 2**62


def laid_out(keys: list[Array], times: list[Array]) -> list[Array] | None:
    """`times` (arrays of ns; `keys`, of the same shapes: each time's clock, e.g. its rank)
    with each clock laid after the one before (in key order): its times from its earliest
    to its latest land after every earlier clock's, so intervals of two clocks never merge
    nor overlap and one pass of `union` / `covered` over every clock's gives each its own
    (integers: exactly). None when the layout would pass `MAX_LAYOUT` (a broken file's
    clock decades off: each clock on its own then)."""
    key, every = np.concatenate(keys), np.concatenate(times)
    clocks, at = np.unique(key, return_inverse=True)
    lows, highs = (
        np.full(clocks.size, np.iinfo(np.int64).max),
        np.full(clocks.size, np.iinfo(np.int64).min),
    )
    np.minimum.at(lows, at, every)
    np.maximum.at(highs, at, every)
    if (highs.astype(np.float64) - lows + 1).sum() > MAX_LAYOUT:  # (floats: no overflow)
        return None
    spans = highs - lows + 1
    offsets = np.concatenate([[0], np.cumsum(spans[:-1])]).astype(np.int64) - lows
    return [t + offsets[np.searchsorted(clocks, k)] for k, t in zip(keys, times, strict=True)]


def sweep(unions: list[tuple[Array, Array]], *, zero_length: bool = False) -> tuple[Array, Array]:
    """(mask, length) of each stretch between consecutive edges where some union is active
    (bit i = `unions[i]`), as `intervals.label_sweep` before its group-by. Edges at one
    instant are taken in concatenation order (per union, starts then ends), so with
    `zero_length` the states in between are stretches of length 0, as HTA's sweep has them.
    """
    times = [part for u in unions for part in u]
    if not times:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    deltas = [
        np.full(part.size, sign << i, dtype=np.int64)
        for i, u in enumerate(unions)
        for sign, part in ((1, u[0]), (-1, u[1]))
    ]
    t = np.concatenate(times)
    order = np.argsort(t, kind="stable")
    t = t[order]
    mask = np.cumsum(np.concatenate(deltas)[order])[:-1]
    length = np.diff(t)
    keep = (mask > 0) & (length >= 0 if zero_length else length > 0)
    return mask[keep], length[keep]


def spread(
    starts: Array, ends: Array, first: int, size: int, n: int, last: int
) -> tuple[Array, Array, Array]:
    """Each [start, end) against each of `n` buckets of `size` from `first` it touches (the
    last runs to `last`): (row index, bucket index, ns inside the bucket), a row of each
    pair; a row ending at a bucket's start touches none. Bucket numbers are arithmetic."""
    rows = np.flatnonzero((ends > first) & (starts < last))
    s, e = starts[rows], ends[rows]
    lo_b = np.clip((s - first) // size, 0, n - 1)
    counts = np.maximum(np.clip((e - 1 - first) // size, 0, n - 1) + 1 - lo_b, 0)
    offsets = np.cumsum(counts) - counts
    step = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(offsets, counts)
    bucket = np.repeat(lo_b, counts) + step
    rows, s, e = np.repeat(rows, counts), np.repeat(s, counts), np.repeat(e, counts)
    lo = first + bucket * size
    hi = np.where(bucket == n - 1, last, lo + size)
    return rows, bucket, np.maximum(np.minimum(e, hi) - np.maximum(s, lo), 0)
