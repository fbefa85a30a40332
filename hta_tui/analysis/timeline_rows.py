"""The timeline's rows: one per CPU thread and per GPU stream of every rank, as sorted numpy
arrays so a window is found by binary search, plus a level-of-detail summary for zoomed-out
views and a GPU-utilisation counter track per device.

Times are ns relative to the common origin (`TraceSet.origin_ns`), so ranks line up. A row keeps
only what drawing needs (starts, ends, kind code, position in the events frame); everything
else is read from the events frame when the user asks about one event.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from hta_tui.analysis import lanes
from hta_tui.analysis.intervals import merge_intervals
from hta_tui.trace.schema import GPU_WORK_KINDS, KINDS

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
#: a stream's extra lanes (kernels that overlap, `lanes`): key lane = stream + k * LANE_STRIDE
LANE_STRIDE = 2**40


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
    stream + k * LANE_STRIDE (`stream_of` gives the stream back)."""

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


def _thread_names(threads: pl.DataFrame | None) -> dict[tuple[int, int], str]:
    if threads is None or threads.is_empty():
        return {}
    named = threads.filter(pl.col("key") == "thread_name").drop_nulls(["pid", "tid"])
    # Kineto writes "thread 123 (pt_main_thread)": the name in brackets is what tells rows apart
    # (whatever it holds, line breaks too)
    short = pl.col("value").str.extract(r"(?s)\((.+)\)\s*$").fill_null(pl.col("value"))
    return {(p, t): v for p, t, v in named.select("pid", "tid", short).iter_rows()}


def _lanes(events: pl.DataFrame, origin_ns: int) -> pl.DataFrame:
    """Drawable events with their lane: (gpu, group, lane, rel start, rel end, kind, idx),
    in file order (each lane is sorted on its own: one multi-key sort of millions of rows
    costs seconds)."""
    on_gpu = pl.col("stream").is_not_null() & pl.col("kind").is_in(GPU_ROW_KINDS)
    cpu = pl.col("stream").is_null() & ~pl.col("kind").is_in(GPU_ROW_KINDS)
    return (
        events.with_row_index("_pos")
        .filter(~pl.col("kind").is_in(SKIPPED_KINDS) & (on_gpu | cpu) & (pl.col("dur") >= 0))
        .select(
            gpu=on_gpu,
            group=pl.when(on_gpu)
            .then(pl.coalesce("device", "pid", pl.lit(0)))
            .otherwise(pl.coalesce("pid", pl.lit(0))),
            lane=pl.when(on_gpu).then(pl.col("stream")).otherwise(pl.coalesce("tid", pl.lit(0))),
            start=pl.col("ts") - origin_ns,
            end=pl.col("ts") + pl.col("dur") - origin_ns,
            kind=pl.col("kind").to_physical().cast(pl.UInt8),
            idx=pl.col("_pos"),
        )
    )


#: The stream Kineto writes on device-wide syncs (`Context Sync`...): -1 as an unsigned 32 bits.
NO_STREAM = (-1, 2**32 - 1)


def _gpu_label(lane: int) -> str:
    """A GPU lane's name: its stream, or what runs on no stream (device-wide syncs)."""
    return "device syncs (no stream)" if lane in NO_STREAM else f"stream {lane}"


def rank_rows(
    rank: int,
    events: pl.DataFrame,
    origin_ns: int,
    span_ns: int,
    threads: pl.DataFrame | None = None,
) -> list[Row]:
    """The rows of one rank: CPU threads first (by pid, tid), then GPU streams, then one
    utilisation track per GPU device (the union of its streams)."""
    lanes = _lanes(events, origin_ns)
    names = _thread_names(threads)
    rows: list[Row] = []
    for (on_gpu, group, lane), part in lanes.partition_by(
        ["gpu", "group", "lane"], as_dict=True, maintain_order=False
    ).items():
        side = "gpu" if on_gpu else "cpu"
        label = _gpu_label(lane) if on_gpu else names.get((group, lane), f"thread {lane}")
        start, end = part["start"].to_numpy(), part["end"].to_numpy()
        order = np.lexsort((-end, start))  # by start; parents (longer) first on ties
        start, end = start[order], end[order]
        kinds, idx = part["kind"].to_numpy()[order], part["idx"].to_numpy()[order]
        sub = _stream_lanes(start, end, kinds) if on_gpu else np.zeros(len(start), np.uint8)
        for k in np.unique(sub) if len(sub) else [0]:
            mine = sub == k
            rows.append(
                make_row(
                    (rank, side, int(group), int(lane) + int(k) * LANE_STRIDE),
                    label if k == 0 else f"{label} ({k + 1})",
                    start[mine],
                    end[mine],
                    kinds[mine],
                    idx[mine],
                    span_ns=span_ns,
                )
            )
    gpu = lanes.filter("gpu")
    if not gpu.is_empty():
        union = merge_intervals(gpu, "start", "end", by="group").sort("group", "start")
        util = KINDS.index("kernel")
        for (group,), part in union.group_by(["group"], maintain_order=True):
            s, e = part["start"].to_numpy(), part["end"].to_numpy()
            rows.append(
                make_row(
                    (rank, "gpu", int(group), -1),
                    "GPU util",
                    s,
                    e,
                    np.full(len(s), util, dtype=np.uint8),
                    np.full(len(s), -1, dtype=np.int64),
                    span_ns=span_ns,
                    counter=True,
                )
            )
    rows.sort(key=_order)
    return rows


def _order(r: Row) -> tuple[bool, int, int, int]:
    """CPU processes first, then devices; in a device its counters (lanes < 0), streams,
    each stream's extra lanes right after it."""
    lane = r.key[3]
    if lane < 0:
        return (r.key[1] != "cpu", r.key[2], lane, 0)
    return (r.key[1] != "cpu", r.key[2], lane % LANE_STRIDE, lane // LANE_STRIDE)


def stream_of(key: tuple[int, str, int, int]) -> int:
    """The stream (or thread) of a row's key, whichever of its lanes the row is."""
    return key[3] % LANE_STRIDE if key[3] >= 0 else key[3]


_WORK_CODES = np.array([KINDS.index(k) for k in GPU_WORK_KINDS], dtype=np.uint8)


def _stream_lanes(start: np.ndarray, end: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """A stream's lane per event: its kernels, memcpys and memsets packed so that none
    overlaps another in a lane (`lanes.pack`); syncs stay in the first lane."""
    sub = np.zeros(len(start), dtype=np.uint8)
    work = np.isin(kinds, _WORK_CODES)
    if work.any():
        sub[work] = lanes.pack(start[work], end[work])
    return sub


def counter_rows(
    rank: int,
    events: pl.DataFrame,
    own: list[Row],
    origin_ns: int,
    span_ns: int,
    memory: dict[int, pl.DataFrame] | None,
) -> list[Row]:
    """The rank's counter tracks beyond GPU utilisation: queue length per stream, memory
    allocated per device (`timeline_counters`, which builds rows with this module)."""
    from hta_tui.analysis.timeline_counters import memory_rows, queue_rows

    devices = {r.key[3]: r.key[2] for r in own if r.key[1] == "gpu" and 0 <= r.key[3] < LANE_STRIDE}
    extra = queue_rows(rank, events, origin_ns, span_ns, devices)
    mem = (memory or {}).get(rank)
    if mem is not None:
        extra += memory_rows(rank, mem, origin_ns, span_ns)
    return extra


def build_timeline(
    frames: dict[int, pl.DataFrame],
    origin_ns: int | None = None,
    threads: dict[int, pl.DataFrame] | None = None,
    flows: dict[int, pl.DataFrame] | None = None,
    memory: dict[int, pl.DataFrame] | None = None,
) -> Timeline:
    """The whole job's timeline; `origin_ns` defaults to the earliest event of all ranks."""
    bounds = [
        (f["ts"].min(), (f["ts"] + f["dur"]).max()) for f in frames.values() if not f.is_empty()
    ]
    if origin_ns is None:
        origin_ns = min((int(b[0]) for b in bounds if b[0] is not None), default=0)
    end = max((int(b[1]) for b in bounds if b[1] is not None), default=origin_ns)
    span = max(end - origin_ns, 1)
    rows: list[Row] = []
    labels: dict[tuple[int, str, int], str] = {}
    for rank in sorted(frames):
        own = rank_rows(rank, frames[rank], origin_ns, span, (threads or {}).get(rank))
        own = sorted(
            [*own, *counter_rows(rank, frames[rank], own, origin_ns, span, memory)], key=_order
        )
        for row in own:
            rows.append(row)
            side = "CPU pid" if row.key[1] == "cpu" else "GPU"
            labels.setdefault(row.group, f"rank {rank} · {side} {row.key[2]}")
    starts = {
        r: t for r, f in frames.items() if (t := _first_ts(f, (memory or {}).get(r))) is not None
    }
    return Timeline(rows, origin_ns, span, dict(frames), labels, dict(flows or {}), starts)


def _first_ts(events: pl.DataFrame, memory: pl.DataFrame | None) -> int | None:
    """A rank's first event, memory events included (the memory tables' origin)."""
    firsts = [f["ts"].min() for f in (events, memory) if f is not None and not f.is_empty()]
    values = [int(v) for v in firsts if v is not None]  # type: ignore[arg-type]
    return min(values) if values else None
