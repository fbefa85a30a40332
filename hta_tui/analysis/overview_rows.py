"""The overview's file table kept up to date per changed file: a row is made again only when
what it shows changed (its file's version, status, rank, span or conflict, its loaded data,
or the job's step filter), so a file landing among 1,000 makes one row, not 1,000.

`update_file_table(ts, kept)` gives what `overview.file_table(ts)` gives, in the same order,
and the rows to keep for the next call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from hta_tui.analysis import overview
from hta_tui.trace.model import FileEntry, TraceSet


@dataclass(frozen=True)
class KeptRows:
    """Rows of the last table by path, each with what it was made from (`_signature`)."""

    step_filter: bool | None = None
    rows: dict[Path, tuple[tuple[Any, ...], dict[str, object]]] = field(default_factory=dict)


def _signature(ts: TraceSet, entry: FileEntry) -> tuple[Any, ...]:
    """Everything `overview.file_row` reads of the set for this entry besides the step filter.
    The RankData's identity stands for its meta and memos (a reload makes a new one)."""
    rank = entry.rank
    shown = several = False
    if rank is not None:
        selected = ts.selected(rank)
        shown = selected is not None and selected.path == entry.path
        several = len(ts.spans(rank)) + len(ts.conflicts(rank)) > 1
    return (
        entry.file.key,
        entry.status,
        entry.error,
        entry.seconds,
        entry.cached,
        rank,
        entry.conflict,
        shown,
        several,
        id(entry.data) if entry.data is not None else None,
    )


def _order(entry: FileEntry) -> tuple[Any, ...]:
    return (entry.rank is None, entry.rank if entry.rank is not None else 0, bool(entry.conflict))


def update_file_table(ts: TraceSet, kept: KeptRows | None) -> tuple[pl.DataFrame, KeptRows]:
    """`overview.file_table(ts)`, making rows again only for the files whose row changed."""
    names: set[str] = set()
    for data in ts.loaded().values():
        names.update(data.meta.get("step_names", ()))
    step_filter = len(names) >= 2  # HTA's filter, as overview's rows apply it
    if kept is None or kept.step_filter != step_filter:
        kept = KeptRows(step_filter)  # every GPU busy time changes with the filter
    rows: dict[Path, tuple[tuple[Any, ...], dict[str, object]]] = {}
    for entry in sorted(ts.files().values(), key=lambda e: (*_order(e), str(e.path))):
        signature = _signature(ts, entry)
        old = kept.rows.get(entry.path)
        row = old[1] if old is not None and old[0] == signature else overview.file_row(ts, entry)
        rows[entry.path] = (signature, row)
    table = pl.DataFrame([row for _, row in rows.values()], schema=overview.FILE_COLUMNS)
    return table, KeptRows(step_filter, rows)
