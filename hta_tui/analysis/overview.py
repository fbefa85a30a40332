"""The overview: what each file is and how busy each rank's GPU was.

Shared by the overview screen and `report`, so the two always agree.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hta_tui.analysis import intervals, kernel_owners, piece_summary
from hta_tui.analysis.hta_view import gpu_events, profiler_step_names, rank_view
from hta_tui.analysis.temporal import rank_times, temporal_from_ns
from hta_tui.trace.model import FileEntry, RankData, TraceSet, hold_kept_memos
from hta_tui.trace.schema import GPU_WORK_KINDS
from hta_tui.trace.stream import PieceSummaries

FILE_COLUMNS: dict[str, pl.DataType] = {
    "path": pl.String(),
    "rank": pl.Int64(),
    "span": pl.String(),
    # the file whose numbers its rank shows (of its spans, or against a conflicting file)
    "shown": pl.Boolean(),
    # the profiler handler's worker name and timestamp, as the file name gives them
    "worker": pl.String(),
    "timestamp": pl.String(),
    # a loaded file that says the rank of another process's file: why it is not shown
    "conflict": pl.String(),
    "status": pl.String(),
    "error": pl.String(),
    "events": pl.Int64(),
    "kernels": pl.Int64(),
    "gpu_busy_us": pl.Float64(),
    "duration_us": pl.Float64(),
    "seconds": pl.Float64(),
    "cached": pl.Boolean(),
    # events the parser could not use, by reason (`ts is not a number`, ...): numbers that
    # rest on a partial file say so
    "dropped_events": pl.List(pl.Struct({"reason": pl.String(), "count": pl.Int64()})),
    # GPU ops that start before an earlier op of their stream ended: a timeline that keeps
    # one lane per stream (Perfetto) drops or hides them; the app's timeline packs them
    "overlapping_on_stream": pl.Int64(),
}


def gpu_busy_ns(events: pl.DataFrame) -> int:
    """Time any stream ran a kernel, memcpy or memset (the union, so overlap counts once)."""
    gpu = events.filter(pl.col("kind").is_in(GPU_WORK_KINDS)).select(
        pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur")).alias("end")
    )
    return intervals.union_length(gpu)


#: Bump when what `rank_summary` computes changes: old memos are then ignored.
SUMMARY_VERSION = 2
_SUMMARY_SCHEMA = {
    "overlapping": pl.Int64(),
    "gpu_busy": pl.Int64(),
    "has_gpu": pl.Boolean(),
    "idle": pl.Int64(),
    "compute": pl.Int64(),
    "non_compute": pl.Int64(),
    "kernel": pl.Int64(),
}


def rank_summary(events: pl.DataFrame, *, step_filter: bool, hta_compat: bool) -> pl.DataFrame:
    """One row of per-rank overview numbers in ns: GPU busy time and HTA's temporal split.

    HTA's step filter depends on other ranks only through "are there >= 2 ProfilerStep names
    in the whole job" (`step_filter`); everything else is this rank's own events, so the row
    can be computed, and cached, per file.
    """
    names = profiler_step_names({0: events}) if step_filter else set()
    view = rank_view(events, names, hta_compat=hta_compat, columns=(), step_filter=step_filter)
    return summary_row(events, gpu_events(view))


def summary_row(work: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """`rank_summary`'s row from the rank's events (`kind`, `stream`, `ts`, `dur`: only its
    GPU work counts, kernels, memcpy and memset, so a file parsed in pieces gives just
    those) and the GPU events of its HTA view (`start`, `end`, `kernel_type`)."""
    times = rank_times(gpu)
    idle, compute, non_compute, kernel = times if times is not None else (None,) * 4
    row = {
        "overlapping": kernel_owners.overlapping_on_stream(work),
        "gpu_busy": gpu_busy_ns(work),
        "has_gpu": times is not None,
        "idle": idle,
        "compute": compute,
        "non_compute": non_compute,
        "kernel": kernel,
    }
    return pl.DataFrame([row], schema=_SUMMARY_SCHEMA)


#: The events' columns `rank_summary` reads (a very large rank reads only these).
SUMMARY_COLUMNS = (
    *("idx", "ts", "dur", "name", "cat", "kind", "pid", "tid", "stream", "correlation"),
    *("external_id", "bytes", "bandwidth", "input_dims"),
)


def _memo_key(step_filter: bool, hta_compat: bool) -> str:
    mode = "compat" if hta_compat else "exact"
    return f"overview-v{SUMMARY_VERSION}-{mode}-{'steps' if step_filter else 'nosteps'}"


def summary(data: RankData, *, step_filter: bool, hta_compat: bool = False) -> dict:
    row = data.memo(
        _memo_key(step_filter, hta_compat),
        lambda: rank_summary(
            data.columns(SUMMARY_COLUMNS), step_filter=step_filter, hta_compat=hta_compat
        ),
    )
    return row.row(0, named=True)


def precompute(
    entry: Path, meta: dict, frames: dict[str, pl.DataFrame] | None = None
) -> dict[str, pl.DataFrame]:
    """Run in the parser worker right after a file is stored (`load_files(after_parse=...)`):
    the overview row, assuming this rank's own steps decide HTA's filter - true unless ranks
    disagree, in which case the app recomputes it. `frames`: the parsed frames, if at hand.
    Returns the memos computed, which travel back with the load's result."""
    data = RankData(entry, meta, _frames=dict(frames or {}))
    summary(data, step_filter=len(meta.get("step_names", ())) >= 2)
    return data.memos()


def from_pieces(
    entry: Path, meta: dict, parts: list[piece_summary.Part]
) -> dict[str, pl.DataFrame]:
    """`precompute` of a file parsed in pieces, from its pieces' parts (`piece_summary`):
    the same memo, without reading the rank's events back."""
    data = RankData(entry, meta)
    step_filter = len(meta.get("step_names", ())) >= 2
    data.memo(
        _memo_key(step_filter, False),
        lambda: summary_row(*piece_summary.overview_inputs(parts, step_filter=step_filter)),
    )
    return data.memos()


precompute.in_pieces = PieceSummaries(piece_summary.overview_part, from_pieces)  # type: ignore[attr-defined]


def _root(ts: TraceSet) -> Path:
    """What the files' paths are shown relative to (a stat: asked once per table)."""
    return ts.root if ts.root.is_dir() else ts.root.parent


def _relative(ts: TraceSet, entry: FileEntry, root: Path | None = None) -> str:
    root = root if root is not None else _root(ts)
    try:
        return entry.path.relative_to(root).as_posix()
    except ValueError:
        return str(entry.path)


def file_row(
    ts: TraceSet, entry: FileEntry, *, step_filter: bool | None = None, root: Path | None = None
) -> dict[str, object]:
    """One file's row. `step_filter`: HTA's job-wide step rule, and `root` (`_root`), when
    the caller knows them (a table of every file asks the set once, not once per file)."""
    meta = entry.meta
    data = entry.data
    busy = overlapping = None
    if data is not None:
        if step_filter is None:
            step_filter = _step_filter(ts)
        row = summary(data, step_filter=step_filter)
        busy = row["gpu_busy"] / 1000
        overlapping = row["overlapping"]
    start, end = meta.get("min_ts"), meta.get("max_end")
    rank = entry.rank
    sel = ts.selected(rank) if rank is not None else None
    several = rank is not None and ts.files_of(rank) > 1
    return {
        "path": _relative(ts, entry, root),
        "rank": rank,
        "span": entry.file.span_hint if several else "",
        "shown": sel is not None and sel.path == entry.path,
        "worker": entry.file.worker,
        "timestamp": entry.file.stamp,
        "conflict": entry.conflict or None,
        "status": entry.status,
        "error": entry.error,
        "events": meta.get("n_events"),
        "kernels": meta.get("n_kernels"),
        "gpu_busy_us": busy,
        "duration_us": (end - start) / 1000 if start is not None and end is not None else None,
        "seconds": round(entry.seconds, 3),
        "cached": entry.cached,
        "dropped_events": [
            {"reason": str(k), "count": int(v)}
            for k, v in (meta.get("dropped_events") or {}).items()
        ],
        "overlapping_on_stream": overlapping,
    }


def file_table(ts: TraceSet) -> pl.DataFrame:
    """One row per file: rank, span, status and error, size of the trace, GPU busy time; a
    rank's conflicting files after its spans. Linear in the files: the set's rank index
    answers each row, the step rule is asked once."""
    entries = sorted(
        ts.files().values(),
        key=lambda e: (
            e.rank is None,
            e.rank if e.rank is not None else 0,
            bool(e.conflict),
            str(e.path),
        ),
    )
    step_filter, root = _step_filter(ts), _root(ts)
    rows = [file_row(ts, e, step_filter=step_filter, root=root) for e in entries]
    return pl.DataFrame(rows, schema=FILE_COLUMNS)


def _step_filter(ts: TraceSet) -> bool:
    """HTA filters by ProfilerStep when the job has at least two distinct step names."""
    return len(ts.step_names()) >= 2


def summaries_decide(ts: TraceSet, *, hta_compat: bool = False) -> bool:
    """Should `temporal_table` answer the temporal breakdown (not the analysis rank by rank,
    on workers)? When every rank's summary is at hand it reads no frame; when a rank's own
    steps would choose another ProfilerStep filter than the job's, only it (recomputing that
    rank's summary) gives the job's numbers. Otherwise a summary missing (`--hta-compat`'s,
    which the parser does not make, or a `derived/` gone) costs this process every rank's
    columns, where the rank-wise analysis costs a worker one rank's at a time."""
    job = _step_filter(ts)
    loaded = ts.loaded().values()
    if any((len(d.meta.get("step_names", ())) >= 2) != job for d in loaded):
        return True
    return all(d.has_memo(_memo_key(job, hta_compat)) for d in loaded)


def temporal_table(
    ts: TraceSet, *, hta_compat: bool = False, every_step: bool = False
) -> pl.DataFrame:
    """HTA's temporal breakdown over the selected span of every loaded rank, from the per-file
    summaries (computed once, kept in the cache): equal to `temporal_breakdown(ts.frames())`
    without reading any frame on a warm open. `every_step`: HTA's ProfilerStep filter off, so
    its left-out last step counts (the app's `H`, as `scope.every_step_frames`)."""
    step_filter = _step_filter(ts) and not every_step
    rows = []
    for rank, data in ts.loaded().items():
        row = summary(data, step_filter=step_filter, hta_compat=hta_compat)
        if row["has_gpu"]:
            rows.append({"rank": rank, **row})
    return temporal_from_ns(pl.DataFrame(rows, schema={"rank": pl.Int64(), **_SUMMARY_SCHEMA}))


def _summarised(ts: TraceSet) -> list[RankData]:
    """The files with frames, each with the summary its files table row reads."""
    entries = sorted(ts.files().values(), key=lambda e: str(e.path))
    return [e.data for e in entries if e.data is not None]


def summaries_id(ts: TraceSet) -> str:
    """What `summaries_frame(ts)` depends on: the summary's kind and every file's entry."""
    names = "\n".join(d.entry.name for d in _summarised(ts))
    return f"{_memo_key(_step_filter(ts), False)}|{names}"


def summaries_frame(ts: TraceSet) -> pl.DataFrame | None:
    """Every file's overview summary (`summary`'s, made where missing; the files table and
    the temporal breakdown read it), a row each: one table a job keeps and reads back at
    once (`hold_summaries`), not a file per rank (1,000 reads were ~0.5 s of a warm
    report). None when the rows do not make one table."""
    step_filter = _step_filter(ts)
    key = _memo_key(step_filter, False)

    def made(data: RankData) -> pl.DataFrame:
        return data.memo(
            key,
            lambda: rank_summary(
                data.columns(SUMMARY_COLUMNS), step_filter=step_filter, hta_compat=False
            ),
        )

    datas = _summarised(ts)
    if not datas:
        return None
    hold_kept_memos(datas, key)  # (read at once: 10,000 files one by one were 3 s of CPU)
    try:
        return pl.concat([made(d) for d in datas], how="vertical")
    except pl.exceptions.PolarsError:
        return None


def hold_summaries(ts: TraceSet, table: pl.DataFrame) -> None:
    """Each file's row of `summaries_frame(ts)` held as its summary (none read again); a
    table of other rows than the files' is left."""
    datas = _summarised(ts)
    if table.height != len(datas) or table.schema != pl.Schema(_SUMMARY_SCHEMA):
        return
    key = _memo_key(_step_filter(ts), False)
    for i, data in enumerate(datas):
        data.hold_memo(key, table.slice(i, 1))
