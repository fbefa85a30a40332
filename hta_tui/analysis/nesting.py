"""How [start, end) ranges on threads nest, on numpy arrays: each one's depth, parent and
last descendant, for ranges sorted by thread, start, longer first (a pre-order).

The depth of a range is the number of ranges of its thread open when it starts: those before
it in that order that end after it starts. Counted as "ranges before it" minus "ranges that
closed by its start" (a binary search in the thread's sorted ends), no sweep over the edges:
at one instant ends close before starts open, and a zero-length range closes right after it
opens. Its parent is the last range before it one level up (a binary search in the ranges
sorted by thread and depth); its subtree the run after it that starts before it ends.
"""

from __future__ import annotations

import itertools

import numpy as np

Array = np.ndarray


def thread_bounds(thread: Array) -> Array:
    """Where each thread's run starts in `thread` (sorted), and its length at the end."""
    n = thread.size
    new = np.flatnonzero(np.concatenate([[True], thread[1:] != thread[:-1]])) if n else []
    return np.concatenate([np.asarray(new, dtype=np.int64), [n]])


def depths(thread: Array, start: Array, end: Array) -> Array:
    """Ranges open on the thread when each one starts (ends no earlier than starts)."""
    n = start.size
    bounds = thread_bounds(thread)
    closed = np.empty(n, dtype=np.int64)  # of the thread's ranges, those ended by my start
    first = np.empty(n, dtype=np.int64)
    for a, b in itertools.pairwise(bounds.tolist()):
        ends = np.sort(end[a:b], kind="stable")  # nearly in order: a few linear passes
        closed[a:b] = np.searchsorted(ends, start[a:b], side="right")
        first[a:b] = a
    # ... less those from me on that end by my start: zero-length ones starting with me
    zero = end == start
    from_me = 0
    if zero.any():
        zero = zero.astype(np.int64)
        same = np.concatenate([[True], (thread[1:] != thread[:-1]) | (start[1:] != start[:-1])])
        group_end = np.concatenate([np.flatnonzero(same)[1:], [n]]) - 1  # last of each run
        cum = np.cumsum(zero)
        from_me = cum[group_end[np.cumsum(same) - 1]] - cum + zero
    return np.arange(n, dtype=np.int64) - first - (closed - from_me)


def parents(thread: Array, depth: Array) -> Array:
    """Each range's parent (its index; -1 for none): the last one before it on its thread
    one level up. Level by level: the ranges of a level (in order, from one radix sort of
    the depths) searched in those of the level above."""
    n = depth.size
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return parent
    bounds = thread_bounds(thread)
    thread_first = np.repeat(bounds[:-1], np.diff(bounds))
    small = depth.astype(np.uint16) if depth.max() < 2**16 else depth
    order = np.argsort(small, kind="stable")  # by depth, then index
    level_end = np.cumsum(np.bincount(depth))
    for d in range(1, level_end.size):
        above = order[level_end[d - 2] if d > 1 else 0 : level_end[d - 1]]
        here = order[level_end[d - 1] : level_end[d]]
        at = np.searchsorted(above, here) - 1
        cand = above[np.maximum(at, 0)]
        ok = (at >= 0) & (cand >= thread_first[here])
        parent[here[ok]] = cand[ok]
    return parent


def last_descendants(thread: Array, start: Array, end: Array) -> Array:
    """Index of each range's last descendant (itself when none): the last of its thread's
    ranges starting before it ends."""
    bounds = thread_bounds(thread)
    out = np.empty(start.size, dtype=np.int64)
    for a, b in itertools.pairwise(bounds.tolist()):
        out[a:b] = np.searchsorted(start[a:b], end[a:b], side="left") + a - 1
    return np.maximum(out, np.arange(start.size, dtype=np.int64))


def packed_thread_time(thread: Array, time: Array) -> Array | None:
    """One int64 per range ordering as (thread, time) do: the thread's rank in bits 45 and
    up, the time since the earliest below; None where that does not fit (times spanning
    2^45 ns, 9.7 h, or 2^17 threads and more)."""
    if time.size == 0:
        return np.zeros(0, dtype=np.int64)
    lo, hi = int(time.min()), int(time.max())
    if hi - lo >= 1 << 45:
        return None
    t0, t1 = int(thread.min()), int(thread.max())
    if t1 - t0 < 1 << 17:
        rank = thread.astype(np.int64) - t0
    else:
        distinct, rank = np.unique(thread, return_inverse=True)
        if distinct.size >= 1 << 17:
            return None
    return rank.astype(np.int64) * (1 << 45) + (time.astype(np.int64) - lo)


def sort_packed(key: Array, *ties: Array) -> Array:
    """`np.lexsort((*reversed(ties), key))`: a stable sort on `key` (ranges in file order are
    nearly in order already: a few linear passes), then the runs of equal `key` alone sorted
    on the ties too (a lexsort of every range on four keys cost 10x as much)."""
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    tied = ordered[1:] == ordered[:-1]
    if ties and tied.any():
        at = np.flatnonzero(np.concatenate([[False], tied]) | np.concatenate([tied, [False]]))
        sub = order[at]
        order[at] = sub[np.lexsort((*(t[sub] for t in reversed(ties)), key[sub]))]
    return order
