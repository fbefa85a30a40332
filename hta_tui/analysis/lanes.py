"""Kernels of one stream that overlap, packed into lanes so none is hidden or dropped.

A stream runs its kernels one after another, but traces show kernels of one stream that
overlap: graph kernels, ROCm's concurrent dispatch, clock skew of a few ns. A row that nests
them by time hides part of one under the other (and Perfetto drops a slice that is not
properly nested in the one before it). `pack` gives each event a lane so that the events of
a lane never overlap: lane 0 holds most of them, the overlapping ones go to further lanes.

Vectorised passes, no loop over events: each pass takes, of the events not yet placed, every
other event of each run of overlapping ones (a chain of overlaps alternates between two
lanes), keeps those that start after every earlier taken one ends, and places them in the
next lane. Every pass places at least the first remaining event, so `MAX_LANES` passes
bound the work; what is left then shares the last lane (drawn nested, as before).
"""

from __future__ import annotations

import numpy as np

#: lanes per stream at most (beyond it events share the last one, nested)
MAX_LANES = 8


def _runs_alternate(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Mask of every other event of each run of overlapping events (the first of a run in)."""
    n = len(starts)
    if n == 0:
        return np.zeros(0, dtype=bool)
    prev_max = np.maximum.accumulate(ends)
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = starts[1:] >= prev_max[:-1]
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(n), 0))
    return (np.arange(n) - run_start) % 2 == 0


def _disjoint(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Mask of the events that start at or after every earlier event's end."""
    n = len(starts)
    keep = np.ones(n, dtype=bool)
    if n > 1:
        keep[1:] = starts[1:] >= np.maximum.accumulate(ends)[:-1]
    return keep


def pack(starts: np.ndarray, ends: np.ndarray, max_lanes: int = MAX_LANES) -> np.ndarray:
    """Lane (uint8) of each event, events sorted by start (longer first on ties)."""
    lane = np.full(len(starts), max_lanes - 1, dtype=np.uint8)
    if len(starts) == 0 or _disjoint(starts, ends).all():
        lane[:] = 0
        return lane
    left = np.arange(len(starts))
    for k in range(max_lanes - 1):
        if len(left) == 0:
            break
        s, e = starts[left], ends[left]
        cand = np.flatnonzero(_runs_alternate(s, e))
        taken = cand[_disjoint(s[cand], e[cand])]
        lane[left[taken]] = k
        rest = np.ones(len(left), dtype=bool)
        rest[taken] = False
        left = left[rest]
    return lane


def overlapping(starts: np.ndarray, ends: np.ndarray) -> int:
    """How many events (sorted by start, longer first) start before an earlier one ended:
    those a row that nests by time would hide, and Perfetto may drop."""
    return int((~_disjoint(starts, ends)).sum())
