"""One timeline row and the timeline: sorted numpy starts, ends, kind codes and event
positions per thread or stream, the outermost intervals with a running busy sum, a
level-of-detail summary, and the binary searches over them. `timeline_rows` builds the rows
of events, `timeline_counters` the counter tracks; both start from this module (so neither
imports the other back).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from hta_tui.trace.schema import KINDS

#: Buckets of the level-of-detail summary per row (over the whole trace span).
LOD_BUCKETS = 8192
#: Midpoints sampled per bucket to find its dominant kind.
LOD_SAMPLES = 4
#: How far back (events) the innermost-event search walks from a gap before giving up.
WALK_BACK = 8

GPU_ROW_KINDS = ("kernel", "memcpy", "memset", "sync")
#: Not drawn: the profiler's own span covers the whole trace; GPU annotations overlap kernels.
SKIPPED_KINDS = ("trace_span", "gpu_annotation")
NONE = 255  # kind code of "nothing here"


@dataclass
class Lod:
    """Per bucket of `width` ns from 0: busy ns, dominant kind code, events starting."""

    width: float
    busy: np.ndarray  # float32
    kind: np.ndarray  # uint8 (NONE where idle)
    count: np.ndarray  # uint32


@dataclass
class Row:
    """One lane of the timeline. `key` = (rank, "cpu"|"gpu", pid or device, tid or stream);
    a device's utilisation track is lane -1, its memory -2, a stream's queue length
    -1000 - stream (`timeline_counters`); a stream's overlapping kernels go to extra lanes,
    stream + k * LANE_STRIDE (`timeline_rows.stream_of` gives the stream back)."""

    key: tuple[int, str, int, int]
    label: str
    starts: np.ndarray  # int64, sorted (ties: longer first, so parents precede children)
    ends: np.ndarray  # int64
    kinds: np.ndarray  # uint8 codes into KINDS
    idx: np.ndarray  # uint32: position in the rank's events frame (-1: derived, no event)
    top_starts: np.ndarray  # outermost intervals (disjoint), sorted
    top_ends: np.ndarray
    top_cum: np.ndarray  # int64, busy ns before each outermost interval
    lod: Lod | None = None
    counter: bool = False  # a counter track (drawn as a level, not as blocks)
    #: a level counter: each interval's value as a fraction of `scale` (busy time is
    #: weighted by it, so a cell shows the counter's mean over the cell)
    level: np.ndarray | None = None
    scale: float = 1.0

    @property
    def rank(self) -> int:
        return self.key[0]

    @property
    def group(self) -> tuple[int, str, int]:
        return self.key[:3]

    def __len__(self) -> int:
        return len(self.starts)

    def window(self, t0: float, t1: float) -> tuple[int, int]:
        """Positions [lo, hi) of the events that start before t1 and may end after t0."""
        hi = int(search(self.starts, t1, side="left"))
        # outermost intervals are disjoint: the first ending after t0 bounds every event
        j = int(search(self.top_ends, t0, side="right"))
        lo = (
            hi
            if j >= len(self.top_starts)
            else int(search(self.starts, self.top_starts[j], "left"))
        )
        return min(lo, hi), hi


@dataclass
class Timeline:
    """Every row of a job, grouped by rank and device/process, on one time axis."""

    rows: list[Row]
    origin_ns: int
    span_ns: int
    frames: dict[int, pl.DataFrame] = field(repr=False, default_factory=dict)
    group_labels: dict[tuple[int, str, int], str] = field(default_factory=dict)
    flows: dict[int, pl.DataFrame] = field(repr=False, default_factory=dict)
    #: each rank's first event, memory events included (ns as in the file)
    rank_starts: dict[int, int] = field(default_factory=dict)
    #: ranks whose rows are not made yet (`timeline_rows.build_timeline`'s `first_rows`:
    #: the rows on screen first); a later call given this timeline makes them
    pending: tuple[int, ...] = ()

    def row_of(self, key: tuple[int, str, int, int]) -> int | None:
        return next((i for i, r in enumerate(self.rows) if r.key == key), None)

    @property
    def nbytes(self) -> int:
        """Memory the rows hold (the view's own cost, beyond the loaded frames)."""
        total = 0
        for r in self.rows:
            arrays = [r.starts, r.ends, r.kinds, r.idx, r.top_starts, r.top_ends, r.top_cum]
            if r.level is not None:
                arrays.append(r.level)
            if r.lod is not None:
                arrays += [r.lod.busy, r.lod.kind, r.lod.count]
            seen: set[int] = set()
            for a in arrays:
                if id(a) not in seen and a.base is None:
                    total += a.nbytes
                    seen.add(id(a))
        return total


def search(sorted_ns: np.ndarray, t: object, side: str = "left") -> np.ndarray:
    """`np.searchsorted` of float times in integer ns. Given floats, numpy would convert the
    whole int64 array to float64 on every call (O(events), 1 ms per million); rounding the
    few queries instead gives the same positions: a <= t iff a <= floor(t), a < t iff
    a < ceil(t) for integers a."""
    q = np.asarray(t, dtype=np.float64)
    q = np.floor(q) if side == "right" else np.ceil(q)
    q = q.astype(np.int64)
    return np.searchsorted(sorted_ns, q, side=side)  # type: ignore[call-overload]


def _top_level(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Mask of outermost events: those starting at or after every earlier event's end."""
    if len(starts) == 0:
        return np.zeros(0, dtype=bool)
    prev_max = np.maximum.accumulate(ends)
    top = np.empty(len(starts), dtype=bool)
    top[0] = True
    top[1:] = starts[1:] >= prev_max[:-1]
    return top


def make_row(
    key: tuple[int, str, int, int],
    label: str,
    starts: np.ndarray,
    ends: np.ndarray,
    kinds: np.ndarray,
    idx: np.ndarray,
    *,
    span_ns: int,
    counter: bool = False,
    level: np.ndarray | None = None,
    scale: float = 1.0,
) -> Row:
    """A row from arrays already sorted by (start, -duration); with `level`, disjoint
    intervals of a counter's values (fractions of `scale`)."""
    top = _top_level(starts, ends) if level is None else np.ones(len(starts), dtype=bool)
    if top.all():
        ts, te = starts, ends
    else:
        # an outermost interval reaches as far as anything it encloses
        ts = starts[top]
        te = np.maximum.reduceat(ends, np.flatnonzero(top)) if len(ts) else ends[:0]
    weight = te - ts if level is None else (te - ts) * level
    cum = np.zeros(len(ts), dtype=weight.dtype)
    if len(ts) > 1:
        cum[1:] = np.cumsum(weight)[:-1]
    row = Row(
        key, label, starts, ends, kinds, idx, ts, te, cum, counter=counter, level=level, scale=scale
    )
    row.lod = build_lod(row, span_ns)
    return row


def busy_before(row: Row, t: np.ndarray) -> np.ndarray:
    """Busy ns of the row in [0, t) for every t (exact: outermost intervals are disjoint)."""
    i = search(row.top_starts, t, side="right")
    if len(row.top_starts) == 0:
        return np.zeros(len(t), dtype=np.float64)
    j = np.maximum(i - 1, 0)
    inside = np.minimum(np.maximum(t - row.top_starts[j], 0), row.top_ends[j] - row.top_starts[j])
    if row.level is not None:
        inside = inside * row.level[j]
    return np.where(i > 0, row.top_cum[j] + inside, 0).astype(np.float64)


def innermost_at(row: Row, t: np.ndarray) -> np.ndarray:
    """Position of the innermost event covering each t, -1 where none (vectorised over t).

    The latest-starting event that still covers t is the innermost one for nested events; in a
    gap between siblings the parent is found by walking back a few events, then by the
    outermost interval."""
    n = len(row.starts)
    out = np.full(len(t), -1, dtype=np.int64)
    if n == 0:
        return out
    # only points inside an outermost interval have an event (the rest are idle)
    i = search(row.top_starts, t, side="right") - 1
    ii = np.maximum(i, 0)
    todo = (i >= 0) & (row.top_ends[ii] > t)
    if not todo.any():
        return out
    k = search(row.starts, t, side="right") - 1
    for step in range(WALK_BACK):
        kk = np.minimum(np.maximum(k - step, 0), n - 1)
        hit = todo & (row.ends[kk] > t)
        out[hit] = kk[hit]
        todo &= ~hit
        if not todo.any():
            return out
    # deeper than the walk: the outermost interval's first event
    first = search(row.starts, row.top_starts[ii], side="left")
    out[todo] = first[todo]
    return out


def build_lod(row: Row, span_ns: int) -> Lod:
    """Busy time, dominant kind and event count per bucket, once per row (the worker's job)."""
    # a row of few events needs few buckets (its memory stays in proportion)
    buckets = int(min(max(len(row), 64), LOD_BUCKETS))
    width = max(span_ns, 1) / buckets
    edges = np.arange(buckets + 1, dtype=np.float64) * width
    busy = np.diff(busy_before(row, edges)).astype(np.float32)
    count = np.diff(search(row.starts, edges, side="left")).astype(np.uint32)
    samples = (np.arange(buckets * LOD_SAMPLES, dtype=np.float64) + 0.5) * (width / LOD_SAMPLES)
    at = innermost_at(row, samples)
    codes = np.where(at >= 0, row.kinds[np.maximum(at, 0)], NONE)
    kind = _mode(codes.reshape(buckets, LOD_SAMPLES))
    # busy, but between the samples: what covers the bucket's start, else what starts in it
    missed = np.flatnonzero((kind == NONE) & (busy > 0))
    if len(missed):
        cover = innermost_at(row, edges[missed])
        first = np.minimum(search(row.starts, edges[missed], side="left"), len(row) - 1)
        kind[missed] = row.kinds[np.where(cover >= 0, cover, first)]
    kind[busy <= 0] = NONE
    return Lod(width, busy, kind, count)


def _mode(codes: np.ndarray) -> np.ndarray:
    """Most frequent non-NONE code of each row of a small (n, s) uint8 matrix."""
    nk = len(KINDS) + 1
    flat = np.where(codes == NONE, len(KINDS), codes).astype(np.int64)
    rows = np.repeat(np.arange(codes.shape[0]), codes.shape[1])
    votes = np.bincount(rows * nk + flat.ravel(), minlength=codes.shape[0] * nk)
    votes = votes.reshape(codes.shape[0], nk)
    votes[:, len(KINDS)] = 0
    best = votes.argmax(axis=1).astype(np.uint8)
    best[votes.max(axis=1) == 0] = NONE
    return best
