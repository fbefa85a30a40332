"""The overview: what each file is and how busy each rank's GPU was.

Shared by the overview screen and `report`, so the two always agree.
"""

from __future__ import annotations

import polars as pl

from hta_tui.analysis import intervals
from hta_tui.analysis.temporal import temporal_breakdown
from hta_tui.trace.model import FileEntry, TraceSet
from hta_tui.trace.schema import GPU_WORK_KINDS

FILE_COLUMNS: dict[str, pl.DataType] = {
    "path": pl.String(),
    "rank": pl.Int64(),
    "span": pl.String(),
    "selected": pl.Boolean(),
    "status": pl.String(),
    "error": pl.String(),
    "events": pl.Int64(),
    "kernels": pl.Int64(),
    "gpu_busy_us": pl.Float64(),
    "duration_us": pl.Float64(),
    "seconds": pl.Float64(),
    "cached": pl.Boolean(),
}


def gpu_busy_ns(events: pl.DataFrame) -> int:
    """Time any stream ran a kernel, memcpy or memset (the union, so overlap counts once)."""
    gpu = events.filter(pl.col("kind").is_in(GPU_WORK_KINDS)).select(
        pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur")).alias("end")
    )
    return intervals.union_length(gpu)


def _relative(ts: TraceSet, entry: FileEntry) -> str:
    root = ts.root if ts.root.is_dir() else ts.root.parent
    try:
        return entry.path.relative_to(root).as_posix()
    except ValueError:
        return str(entry.path)


def file_row(ts: TraceSet, entry: FileEntry) -> dict[str, object]:
    meta = entry.meta
    data = entry.data
    busy = gpu_busy_ns(data.events) / 1000 if data is not None and meta.get("n_kernels") else None
    if data is not None and busy is None:
        busy = 0.0
    start, end = meta.get("min_ts"), meta.get("max_end")
    selected = entry.rank is not None and (sel := ts.selected(entry.rank)) is not None
    return {
        "path": _relative(ts, entry),
        "rank": entry.rank,
        "span": entry.file.span_hint if len(ts.spans(entry.rank)) > 1 else "",
        "selected": bool(selected and sel.path == entry.path),
        "status": entry.status,
        "error": entry.error,
        "events": meta.get("n_events"),
        "kernels": meta.get("n_kernels"),
        "gpu_busy_us": busy,
        "duration_us": (end - start) / 1000 if start is not None and end is not None else None,
        "seconds": round(entry.seconds, 3),
        "cached": entry.cached,
    }


def file_table(ts: TraceSet) -> pl.DataFrame:
    """One row per file: rank, span, status and error, size of the trace, GPU busy time."""
    entries = sorted(
        ts.entries.values(),
        key=lambda e: (e.rank is None, e.rank if e.rank is not None else 0, str(e.path)),
    )
    rows = [file_row(ts, e) for e in entries]
    return pl.DataFrame(rows, schema=FILE_COLUMNS)


def temporal_table(ts: TraceSet, *, hta_compat: bool = False) -> pl.DataFrame:
    """HTA's temporal breakdown over the selected span of every loaded rank."""
    return temporal_breakdown(ts.frames(), hta_compat=hta_compat)
