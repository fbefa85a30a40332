"""One row of the timeline at one zoom, as terminal cells: what each cell shows, computed with
binary searches and the level-of-detail summary only (work grows with the width, never with
the number of events in the trace).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hta_tui.analysis.timeline_rows import NONE, Row, busy_before, innermost_at, search
from hta_tui.trace.schema import KINDS

#: Below this many LOD buckets per cell, the cell's kind comes from the event at its middle.
LOD_MIN_BUCKETS = 4


@dataclass
class Cells:
    """Per cell: busy fraction, kind code (NONE: idle), whether its left and right edges are
    inside an event, the innermost event at its middle (-1: none), events starting in it."""

    busy: np.ndarray
    kind: np.ndarray
    left_in: np.ndarray
    right_in: np.ndarray
    event: np.ndarray
    count: np.ndarray


def row_cells(row: Row, t0: float, t1: float, width: int) -> Cells:
    """`width` cells covering [t0, t1) (ns from the origin)."""
    step = (t1 - t0) / max(width, 1)
    edges = t0 + np.arange(width + 1, dtype=np.float64) * step
    busy = np.diff(busy_before(row, edges)) / max(step, 1e-9)
    count = np.diff(search(row.starts, edges, side="left"))
    mids = edges[:-1] + step / 2
    event = innermost_at(row, mids)
    lod = row.lod
    if lod is not None and step >= LOD_MIN_BUCKETS * lod.width:
        kind = _lod_kind(row, edges)
    elif not len(row):  # a row listed with no event in the part read (a large rank's)
        kind = np.full(width, NONE, dtype=np.uint8)
    else:
        kind = np.where(event >= 0, row.kinds[np.maximum(event, 0)], NONE).astype(np.uint8)
        # a cell busy somewhere but not at its middle takes the kind of what starts in it
        missing = (kind == NONE) & (busy > 0)
        if missing.any():
            first = np.minimum(search(row.starts, edges[:-1], side="left"), len(row) - 1)
            kind[missing] = row.kinds[first[missing]]
    kind = np.where(busy > 0, kind, NONE).astype(np.uint8)
    eps = min(step * 1e-3, 0.5)
    inside = _covered(row, np.concatenate((edges[:-1] + eps, edges[1:] - eps)))
    left_in, right_in = inside[:width], inside[width:]
    return Cells(np.minimum(np.maximum(busy, 0.0), 1.0), kind, left_in, right_in, event, count)


def _covered(row: Row, t: np.ndarray) -> np.ndarray:
    i = search(row.top_starts, t, side="right") - 1
    ii = np.maximum(i, 0)
    if len(row.top_starts) == 0:
        return np.zeros(len(t), dtype=bool)
    return (i >= 0) & (row.top_ends[ii] > t)


def _lod_kind(row: Row, edges: np.ndarray) -> np.ndarray:
    """Dominant kind of each cell from its buckets, weighted by their busy time."""
    lod = row.lod
    assert lod is not None
    nb = len(lod.busy)
    b = np.minimum(np.maximum((edges / lod.width).astype(np.int64), 0), nb)
    width = len(edges) - 1
    lo, hi = b[:-1], np.maximum(b[1:], b[:-1] + 1)
    first, last = int(lo[0]), int(min(hi[-1], nb))
    out = np.full(width, NONE, dtype=np.uint8)
    if first >= last:
        return out
    seg = slice(first, last)
    cell = np.searchsorted(lo, np.arange(first, last), side="right") - 1
    kinds = lod.kind[seg]
    weight = lod.busy[seg]
    ok = kinds != NONE
    nk = len(KINDS)
    flat = cell[ok] * nk + kinds[ok].astype(np.int64)
    votes = np.bincount(flat, weights=weight[ok], minlength=width * nk).reshape(width, nk)
    best = votes.argmax(axis=1).astype(np.uint8)
    best[votes.max(axis=1) <= 0] = NONE
    return best


def runs(event: np.ndarray, min_length: int = 1) -> list[tuple[int, int, int]]:
    """(first cell, length, event position) of each run of at least `min_length` cells
    showing one event."""
    if len(event) == 0:
        return []
    change = np.flatnonzero(np.diff(event)) + 1
    starts = np.concatenate(([0], change))
    lengths = np.diff(np.concatenate((starts, [len(event)])))
    ids = event[starts]
    keep = (ids >= 0) & (lengths >= min_length)
    return list(zip(starts[keep].tolist(), lengths[keep].tolist(), ids[keep].tolist(), strict=True))
