"""The timeline's rows: one per CPU thread and per GPU stream of every rank, as sorted numpy
arrays so a window is found by binary search, plus a level-of-detail summary for zoomed-out
views and a GPU-utilisation counter track per device.

Times are ns relative to the common origin (`TraceSet.origin_ns`), so ranks line up. A row keeps
only what drawing needs (starts, ends, kind code, position in the events frame); everything
else is read from the events frame when the user asks about one event.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from hta_tui.analysis import lanes
from hta_tui.analysis.checkpoint import checkpoint
from hta_tui.analysis.timeline_counters import memory_rows, queue_rows
from hta_tui.analysis.timeline_row import (  # noqa: F401  (the timeline's API, from here too)
    GPU_ROW_KINDS,
    NONE,
    SKIPPED_KINDS,
    Row,
    Timeline,
    busy_before,
    innermost_at,
    make_row,
    search,
)
from hta_tui.trace.schema import GPU_WORK_KINDS, KINDS

#: a stream's extra lanes (kernels that overlap, `lanes`): key lane = stream + k * LANE_STRIDE
LANE_STRIDE = 2**40


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
        events.lazy()  # lazy: the filter copies the seven columns read, not all of them
        .with_row_index("_pos")
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
        .collect()
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
    on_device: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for (on_gpu, group, lane), part in lanes.partition_by(
        ["gpu", "group", "lane"], as_dict=True, maintain_order=False
    ).items():
        side = "gpu" if on_gpu else "cpu"
        label = _gpu_label(lane) if on_gpu else names.get((group, lane), f"thread {lane}")
        start, end = part["start"].to_numpy(), part["end"].to_numpy()
        order = by_start(start, end)  # by start; parents (longer) first on ties
        start, end = start[order], end[order]
        kinds, idx = part["kind"].to_numpy()[order], part["idx"].to_numpy()[order]
        sub = _stream_lanes(start, end, kinds) if on_gpu else np.zeros(len(start), np.uint8)
        if on_gpu:
            on_device.setdefault(int(group), []).append((start, end))
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
    util = KINDS.index("kernel")
    for group, streams in sorted(on_device.items()):
        s, e = _union(
            np.concatenate([a for a, _ in streams]), np.concatenate([b for _, b in streams])
        )
        rows.append(
            make_row(
                (rank, "gpu", group, -1),
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


def by_start(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """`np.lexsort((-end, start))`: by start, the longer first on equal starts (parents
    before their children), equal ones in file order. A lane's events come nearly sorted
    by start, which a stable argsort takes in one pass (20x lexsort's two sorts on 260k
    Python frames); only where equal starts are not already longest first does it sort
    both keys."""
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    if ((s[1:] == s[:-1]) & (e[1:] > e[:-1])).any():
        return np.lexsort((-end, start))
    return order


def _union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint union of intervals (ends no earlier than starts), sorted by start: a
    device's streams merged (`intervals.merge_intervals` on arrays the rows already hold)."""
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    if len(start) == 0:
        return start, end
    new = np.empty(len(start), dtype=bool)
    new[0] = True
    new[1:] = start[1:] > np.maximum.accumulate(end)[:-1]
    firsts = np.flatnonzero(new)
    return start[firsts], np.maximum.reduceat(end, firsts)


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
    allocated per device (`timeline_counters`)."""
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
    *,
    first_rows: int | None = None,
    made: Timeline | None = None,
) -> Timeline:
    """The whole job's timeline; `origin_ns` defaults to the earliest event of all ranks.

    In two parts, so the rows on screen are drawn before the others are made (issue 27):
    `first_rows` makes ranks in order until that many lines of the view are filled (rows and
    their groups' headings) and leaves the other ranks' rows out (`Timeline.pending`); given
    that timeline back as `made`, only its pending ranks are made and its rows kept. Origin,
    span and each rank's rows are those of the whole timeline either way (the span is every
    rank's), so the two parts make the same timeline as one call."""
    bounds = [
        (f["ts"].min(), (f["ts"] + f["dur"]).max()) for f in frames.values() if not f.is_empty()
    ]
    if origin_ns is None:
        origin_ns = min((int(b[0]) for b in bounds if b[0] is not None), default=0)
    end = max((int(b[1]) for b in bounds if b[1] is not None), default=origin_ns)
    span = max(end - origin_ns, 1)
    kept = made_rows(made, frames, origin_ns)
    rows: list[Row] = []
    labels: dict[tuple[int, str, int], str] = {}
    pending: list[int] = []
    for rank in sorted(frames):
        if first_rows is not None and len(rows) + len(labels) >= first_rows:
            pending.append(rank)  # off screen: made by a later call (`made`)
            continue
        own = kept.get(rank)
        if own is None:
            checkpoint()  # each rank's rows are a piece a view left behind gives way after
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
    return Timeline(
        rows, origin_ns, span, dict(frames), labels, dict(flows or {}), starts, tuple(pending)
    )


def made_rows(
    made: Timeline | None, frames: dict[int, pl.DataFrame], origin_ns: int
) -> dict[int, list[Row]]:
    """The rows `made` made of each rank (none of its pending ranks'), when it was made from
    these very frames on this origin (so on this span too: every rank's); else none, and
    every rank is made again."""
    if made is None or made.origin_ns != origin_ns or made.frames.keys() != frames.keys():
        return {}
    if any(made.frames[r] is not f for r, f in frames.items()):
        return {}
    out: dict[int, list[Row]] = {r: [] for r in frames if r not in made.pending}
    for row in made.rows:
        if row.rank in out:
            out[row.rank].append(row)
    return out


def _first_ts(events: pl.DataFrame, memory: pl.DataFrame | None) -> int | None:
    """A rank's first event, memory events included (the memory tables' origin)."""
    firsts = [f["ts"].min() for f in (events, memory) if f is not None and not f.is_empty()]
    values = [int(v) for v in firsts if v is not None]  # type: ignore[arg-type]
    return min(values) if values else None


def lane_table(
    tl: Timeline, start_ns: float | None = None, end_ns: float | None = None
) -> pl.DataFrame:
    """The timeline's rows as a table (the registry's `timeline_rows`): each row's rank,
    side, process or device, thread or stream, label, and over the window [start_ns, end_ns)
    (ns from the origin; None: the whole trace) the events starting in it and the busy time
    of its outermost events. One entry per row, not per event: the events stay in the
    rows' arrays, which a view slices per key."""
    t0 = 0.0 if start_ns is None else float(start_ns)
    t1 = float(tl.span_ns) if end_ns is None else float(end_ns)
    bounds = np.array([t0, max(t0, t1)])
    events, busy = [], []
    for row in tl.rows:  # rows, not events: a few per thread and stream
        lo, hi = search(row.starts, bounds)
        events.append(int(hi - lo))
        before = busy_before(row, bounds)
        busy.append(float(before[1] - before[0]) / 1e6)
    return pl.DataFrame(
        {
            "rank": [r.key[0] for r in tl.rows],
            "side": [r.key[1] for r in tl.rows],
            "group": [r.key[2] for r in tl.rows],
            "lane": [r.key[3] for r in tl.rows],
            "label": [r.label for r in tl.rows],
            "counter": [r.counter for r in tl.rows],
            "events": events,
            "busy_ms": busy,
        },
        schema={
            "rank": pl.Int64,
            "side": pl.String,
            "group": pl.Int64,
            "lane": pl.Int64,
            "label": pl.String,
            "counter": pl.Boolean,
            "events": pl.Int64,
            "busy_ms": pl.Float64,
        },
    )


def lane_keys() -> list[pl.Expr]:
    """What makes an event's row (`_lanes`'s gpu, group and lane of each drawn event), as
    expressions whose distinct values over a rank list its threads and streams."""
    on_gpu = pl.col("stream").is_not_null() & pl.col("kind").is_in(GPU_ROW_KINDS)
    cpu = pl.col("stream").is_null() & ~pl.col("kind").is_in(GPU_ROW_KINDS)
    drawn = ~pl.col("kind").is_in(SKIPPED_KINDS) & (on_gpu | cpu) & (pl.col("dur") >= 0)
    group = (
        pl.when(on_gpu)
        .then(pl.coalesce("device", "pid", pl.lit(0)))
        .otherwise(pl.coalesce("pid", pl.lit(0)))
    )
    lane = pl.when(on_gpu).then(pl.col("stream")).otherwise(pl.coalesce("tid", pl.lit(0)))
    return [drawn.alias("drawn"), on_gpu.alias("gpu"), group.alias("group"), lane.alias("lane")]


def with_every_row(
    tl: Timeline,
    keys: dict[int, pl.DataFrame],
    threads: dict[int, pl.DataFrame] | None = None,
    end_ns: int | None = None,
) -> Timeline:
    """`tl` drawn from a part of some ranks' events, with an empty row for each of their
    threads and streams that has no event in that part (`keys`: the distinct `lane_keys` of
    each such rank's every event) and its span reaching `end_ns` (the ranks' last end, ns as
    in the file): every row of the whole timeline is listed, and the view pans to its end."""
    have = {(r.key[0], r.key[1], r.key[2], stream_of(r.key)) for r in tl.rows}
    span = tl.span_ns if end_ns is None else max(tl.span_ns, end_ns - tl.origin_ns)
    empty = np.zeros(0, dtype=np.int64)
    rows = list(tl.rows)
    labels = dict(tl.group_labels)
    for rank, frame in keys.items():
        names = _thread_names((threads or {}).get(rank))
        drawn = frame.filter(pl.col("drawn")).select("gpu", "group", "lane").unique()
        for on_gpu, group, lane in drawn.iter_rows():
            side = "gpu" if on_gpu else "cpu"
            if (rank, side, int(group), int(lane)) in have:
                continue
            label = _gpu_label(lane) if on_gpu else names.get((group, lane), f"thread {lane}")
            kinds = np.zeros(0, dtype=np.uint8)
            key = (rank, side, int(group), int(lane))
            rows.append(Row(key, label, empty, empty, kinds, empty, empty, empty, empty))
            labels.setdefault(
                rows[-1].group, f"rank {rank} · {'CPU pid' if side == 'cpu' else 'GPU'} {group}"
            )
    rows.sort(key=lambda r: (r.key[0], *_order(r)))
    return replace(tl, rows=rows, span_ns=span, group_labels=labels)
