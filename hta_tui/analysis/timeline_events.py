"""Questions about single events and ranges of the timeline: details with the stack of
enclosing ops, flows (kernel <-> launch, forward <-> backward), next/previous event, what ran
in a marked range, and which events match a search. Each reads only the rows and events it is
about."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from hta_tui.analysis.timeline_rows import Row, Timeline, innermost_at, search
from hta_tui.trace.schema import GPU_WORK_KINDS, KINDS, LAUNCH_KINDS

#: Columns shown as args when present on the event.
ARG_COLUMNS = (
    "stream",
    "device",
    "correlation",
    "external_id",
    "bytes",
    "bandwidth",
    "grid",
    "block",
    "registers",
    "shared_memory",
    "occupancy",
    "sync_kind",
    "input_dims",
    "input_type",
    "seq",
)


@dataclass(frozen=True)
class Ref:
    """An event on the timeline: its row and its position in that row."""

    row: int
    pos: int


def event_row(tl: Timeline, ref: Ref) -> dict[str, object]:
    """The event's full row of the events frame (every column)."""
    row = tl.rows[ref.row]
    frame = tl.frames[row.rank]
    return frame.row(int(row.idx[ref.pos]), named=True)


def enclosing(row: Row, pos: int) -> list[int]:
    """Positions of the events enclosing `pos` on its row, outermost first."""
    s, e = row.starts[pos], row.ends[pos]
    j = int(search(row.top_ends, s, side="right"))
    if j >= len(row.top_starts):
        return []
    lo = int(search(row.starts, row.top_starts[j], side="left"))
    cand = np.arange(lo, pos)
    inside = (row.starts[lo:pos] <= s) & (row.ends[lo:pos] >= e)
    return cand[inside].tolist()


def details(tl: Timeline, ref: Ref) -> dict[str, object]:
    """Name, kind, times (us from the origin), duration, args and stack of one event."""
    row = tl.rows[ref.row]
    ev = event_row(tl, ref)
    stack = [event_row(tl, Ref(ref.row, p))["name"] for p in enclosing(row, ref.pos)]
    launch = None
    if ev["kind"] in GPU_WORK_KINDS:
        partners = flow_partners(tl, ref)
        if partners:
            p = partners[0]
            launch = event_row(tl, p)["name"]
            prow = tl.rows[p.row]
            stack = [event_row(tl, Ref(p.row, q))["name"] for q in enclosing(prow, p.pos)]
            stack.append(launch)
    args = {c: ev[c] for c in ARG_COLUMNS if c in ev and ev[c] is not None}
    return {
        "name": ev["name"],
        "kind": ev["kind"],
        "rank": row.rank,
        "row": row.label,
        "start_us": float(row.starts[ref.pos]) / 1e3,
        "end_us": float(row.ends[ref.pos]) / 1e3,
        "dur_us": float(row.ends[ref.pos] - row.starts[ref.pos]) / 1e3,
        "args": args,
        "stack": stack,
        "launched_by": launch,
    }


def innermost_cpu(tl: Timeline, rank: int, t: float) -> Ref | None:
    """The shortest event around `t` (ns from the origin) on the rank's CPU threads."""
    best: tuple[int, Ref] | None = None
    for i, row in enumerate(tl.rows):
        if row.rank != rank or row.counter or row.key[1] != "cpu":
            continue
        pos = int(innermost_at(row, np.array([t]))[0])
        if pos >= 0:
            length = int(row.ends[pos] - row.starts[pos])
            if best is None or length < best[0]:
                best = (length, Ref(i, pos))
    return None if best is None else best[1]


def find(tl: Timeline, rank: int, idx: int) -> Ref | None:
    """The timeline position of event `idx` of a rank's events frame (None: not drawn)."""
    for i, row in enumerate(tl.rows):
        if row.rank != rank or row.counter:
            continue
        hit = np.flatnonzero(row.idx == idx)
        if len(hit):
            return Ref(i, int(hit[0]))
    return None


def flow_partners(tl: Timeline, ref: Ref) -> list[Ref]:
    """Where the event's flow leads: a kernel's launch, a launch's kernels (same
    correlation), a forward op's backward op and back (fwdbwd flows, else the autograd
    sequence number), a Stream Wait Event's awaited op on the other stream."""
    row = tl.rows[ref.row]
    frame = tl.frames[row.rank]
    ev = event_row(tl, ref)
    idx = int(row.idx[ref.pos])
    kind = ev["kind"]
    other: list[int] = []
    if kind in (*GPU_WORK_KINDS, *LAUNCH_KINDS) and ev["correlation"] is not None:
        want = LAUNCH_KINDS if kind in GPU_WORK_KINDS else GPU_WORK_KINDS
        other = (
            frame.with_row_index("_pos")
            .filter(
                (pl.col("correlation") == ev["correlation"])
                & pl.col("kind").is_in(want)
                & (pl.col("_pos") != idx)
            )["_pos"]
            .to_list()
        )
    elif kind == "cpu_op" and (other := _fwdbwd(tl, row.rank, ev)):
        pass
    elif kind == "sync" and ev.get("wait_on_stream") is not None:
        other = _waited_for(frame, ev, idx)
    elif ev["seq"] is not None:
        other = (
            frame.with_row_index("_pos")
            .filter(
                (pl.col("seq") == ev["seq"])
                & (pl.col("kind") == "cpu_op")
                & (pl.col("tid") != ev["tid"])
            )["_pos"]
            .to_list()
        )
    refs = [find(tl, row.rank, i) for i in other]
    return [r for r in refs if r is not None]


def _waited_for(frame: pl.DataFrame, ev: dict[str, object], idx: int) -> list[int]:
    """A Stream Wait Event's partners: the last GPU op of the stream it waits for that
    started before the wait ended (what it waited for), then its cudaStreamWaitEvent call."""
    pos = frame.with_row_index("_pos")
    end = int(ev["ts"]) + int(ev["dur"])  # type: ignore[call-overload]
    waited = (
        pos.filter(
            (pl.col("stream") == ev["wait_on_stream"])
            & (pl.col("device") == ev["device"])
            & pl.col("kind").is_in(GPU_WORK_KINDS)
            & (pl.col("ts") <= end)
        )
        .sort("ts")
        .tail(1)["_pos"]
        .to_list()
    )
    call = []
    if ev["correlation"] is not None:
        call = pos.filter(
            (pl.col("correlation") == ev["correlation"])
            & pl.col("kind").is_in(LAUNCH_KINDS)
            & (pl.col("_pos") != idx)
        )["_pos"].to_list()
    return waited + call


def _fwdbwd(tl: Timeline, rank: int, ev: dict[str, object]) -> list[int]:
    """Events at the other end of the fwdbwd flows that start or end on this op (a flow
    endpoint sits on its op's thread at the op's start)."""
    flows = tl.flows.get(rank)
    if flows is None or flows.is_empty():
        return []
    fb = flows.filter(pl.col("cat") == "fwdbwd")
    here = fb.filter(
        (pl.col("pid") == ev["pid"]) & (pl.col("tid") == ev["tid"]) & (pl.col("ts") == ev["ts"])
    )
    if here.is_empty():
        return []
    ends = fb.filter(
        pl.col("id").is_in(here["id"].implode()) & ~pl.col("ph").is_in(here["ph"].implode())
    )
    frame = tl.frames[rank].with_row_index("_pos").filter(pl.col("kind") == "cpu_op")
    hits = frame.join(ends.select("pid", "tid", "ts"), on=["pid", "tid", "ts"], how="semi")
    return hits["_pos"].to_list()


def next_event(row: Row, t: float, forward: bool) -> int | None:
    """The first event starting after `t` (or the last starting before it)."""
    if forward:
        i = int(search(row.starts, t, side="right"))
        return i if i < len(row) else None
    i = int(search(row.starts, t, side="left")) - 1
    return i if i >= 0 else None


def range_summary(tl: Timeline, t0: float, t1: float, rows: list[int], top: int = 5) -> dict:
    """A marked range: its duration and, over the given rows, the names that ran in it longest
    (time clipped to the range; events spanning the whole range are listed apart, as
    `around`)."""
    t0, t1 = min(t0, t1), max(t0, t1)
    parts = []
    for i in rows:
        row = tl.rows[i]
        if row.counter:
            continue
        lo, hi = row.window(t0, t1)
        if hi <= lo:
            continue
        s = np.clip(row.starts[lo:hi], t0, t1)
        e = np.clip(row.ends[lo:hi], t0, t1)
        keep = e > s
        around = (row.starts[lo:hi] <= t0) & (row.ends[lo:hi] >= t1)
        names = tl.frames[row.rank]["name"].gather(row.idx[lo:hi][keep])
        parts.append(
            pl.DataFrame({"name": names, "ns": (e - s)[keep], "around": around[keep], "row": i})
        )
    if not parts:
        return {"dur_us": (t1 - t0) / 1e3, "events": 0, "top": [], "around": []}
    df = pl.concat(parts)
    # events enclosing the whole range are its context, not what ran in it
    around = df.filter("around")["name"].unique(maintain_order=True).to_list()
    best = (
        df.filter(~pl.col("around"))
        .group_by("name")
        .agg(pl.col("ns").sum(), pl.len().alias("count"))
        .sort(["ns", "name"], descending=[True, False])
        .head(top)
    )
    return {
        "dur_us": (t1 - t0) / 1e3,
        "events": df.height,
        "around": around,
        "top": [(n, ns / 1e3, c) for n, ns, c in best.iter_rows()],
    }


def matching(tl: Timeline, pattern: str) -> dict[int, np.ndarray]:
    """Per row, a mask of the events whose name contains `pattern` (case-insensitive)."""
    out: dict[int, np.ndarray] = {}
    if not pattern:
        return out
    lit = re.escape(pattern)
    hit_idx: dict[int, np.ndarray] = {}
    for rank, frame in tl.frames.items():
        hits = frame.with_row_index("_pos").filter(pl.col("name").str.contains(f"(?i){lit}"))[
            "_pos"
        ]
        hit_idx[rank] = np.sort(hits.to_numpy())
    for i, row in enumerate(tl.rows):
        hits = hit_idx.get(row.rank)
        if row.counter or hits is None or len(hits) == 0:
            continue
        out[i] = np.isin(row.idx, hits, assume_unique=False)
    return out


def marked(tl: Timeline, marks: Mapping[int, Sequence[int]]) -> dict[int, np.ndarray]:
    """Per row, a mask of the events whose trace idx is in `marks[rank]` (the critical
    path's events, say), in the same form as `matching`."""
    out: dict[int, np.ndarray] = {}
    pos: dict[int, np.ndarray] = {}
    for rank, idx in marks.items():
        frame = tl.frames.get(rank)
        if frame is None or not idx:
            continue
        hits = frame.with_row_index("_pos").filter(
            pl.col("idx").cast(pl.Int64).is_in(pl.Series(list(idx), dtype=pl.Int64).implode())
        )["_pos"]
        pos[rank] = np.sort(hits.to_numpy())
    for i, row in enumerate(tl.rows):
        hits = pos.get(row.rank)
        if row.counter or hits is None or len(hits) == 0:
            continue
        mask = np.isin(row.idx, hits)
        if mask.any():
            out[i] = mask
    return out


def kind_name(code: int) -> str:
    return KINDS[code] if code < len(KINDS) else ""


def base_ns(tl: Timeline, rank: int, base: str) -> int:
    """The absolute time (ns, as in the file) a table's times are measured from: "job" (the
    common origin), "gpu" (the first GPU kernel/copy of all ranks), "rank_gpu" (that rank's
    first one), "rank" (that rank's first event, memory events included: the TensorBoard
    plugin's profiler start, the memory tables' origin), "abs" (0: times as written)."""
    if base == "abs":
        return 0
    if base == "job":
        return tl.origin_ns
    if base == "rank":
        return tl.rank_starts.get(rank, tl.origin_ns)
    gpu = pl.col("kind").is_in(GPU_WORK_KINDS) & pl.col("stream").is_not_null()
    frames = [tl.frames[rank]] if base == "rank_gpu" and rank in tl.frames else tl.frames.values()
    firsts = [f.filter(gpu)["ts"].min() for f in frames]
    firsts = [int(v) for v in firsts if v is not None]  # type: ignore[arg-type]
    return min(firsts) if firsts else tl.origin_ns


@dataclass(frozen=True)
class Place:
    """Where a table's moment is on the timeline: the event (if one was named and found),
    the row to put the cursor on, and the range to show (ns from the origin)."""

    ref: Ref | None
    row: int | None
    t0: float
    t1: float


def resolve(
    tl: Timeline,
    rank: int,
    t: float,
    *,
    base: str = "abs",
    dur: float = 0.0,
    name: str | None = None,
    correlation: int | None = None,
    stream: int | None = None,
    name_at_end: bool = False,
    side: str | None = None,
) -> Place:
    """A moment named by a table row -> the event and range to show. A correlation pins a GPU
    event; a name picks the drawn event of that name (on that stream) nearest to the time,
    so tables measuring from another origin still land on the right instance. Without
    either, `side="cpu"` picks the innermost CPU event around the time (a memory event's
    operator)."""
    start = base_ns(tl, rank, base) + t  # absolute
    frame = tl.frames.get(rank)
    ref = None
    if frame is not None and (correlation is not None or name is not None):
        cand = frame.with_row_index("_pos")
        if correlation is not None:
            cand = cand.filter(
                (pl.col("correlation") == correlation) & pl.col("kind").is_in(GPU_WORK_KINDS)
            )
        else:
            cand = cand.filter(pl.col("name") == name)
            if stream is not None:
                cand = cand.filter(pl.col("stream") == stream)
        want = start + (dur if name_at_end else 0)
        # a few nearest: an undrawn namesake (a GPU-side ProfilerStep) gives way
        for pos in cand.sort((pl.col("ts") - int(want)).abs()).head(4)["_pos"].to_list():
            ref = find(tl, rank, pos)
            if ref is not None:
                break
    elif side == "cpu":
        ref = innermost_cpu(tl, rank, start - tl.origin_ns)
    rel = start - tl.origin_ns
    if ref is not None:
        r = tl.rows[ref.row]
        s, e = float(r.starts[ref.pos]), float(r.ends[ref.pos])
        t0, t1 = (s - dur, e) if name_at_end else (s, max(e, s + dur))
        if side == "cpu":  # the moment inside its operator: both in view
            t0, t1 = min(s, rel), max(e, rel + dur)
        return Place(ref, ref.row, t0, t1)
    rows = [i for i, r in enumerate(tl.rows) if r.rank == rank and not r.counter]
    if stream is not None:
        rows = [i for i in rows if tl.rows[i].key[1] == "gpu" and tl.rows[i].key[3] == stream]
    else:
        want = "cpu" if side == "cpu" else "gpu"
        rows = [i for i in rows if tl.rows[i].key[1] == want] or rows
    return Place(None, rows[0] if rows else None, rel, rel + dur)
