"""The step-time breakdown per file, kept in the cache entry like the overview's numbers, so the
overview can answer "where does my step time go" on a warm open without reading a frame.

The plugin's breakdown of a rank depends on that rank's events only, so each file's is
computed once (in the parser worker, `precompute`, when the app loads it) and the job's is
their concatenation: equal to `step_breakdown.step_time_breakdown(ts.frames())`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl

from hta_tui.analysis import hta_view, overview, piece_summary, step_breakdown
from hta_tui.trace.load import HitSummaries
from hta_tui.trace.model import RankData, TraceSet
from hta_tui.trace.stream import PieceSummaries

#: Bump when what the breakdown computes changes: old memos are then ignored.
VERSION = 1
_KEY = f"step-breakdown-v{VERSION}"


def rank_steps(data: RankData, *, tb_compat: bool = False) -> pl.DataFrame:
    """One file's used steps, broken down (step_breakdown.COLUMNS without `rank`), by this
    project's rules or (`tb_compat`, the app's `X`) the plugin's own: the parser worker
    computes the first; the other is made from the frames when first asked, and kept."""
    key = f"{_KEY}-tb" if tb_compat else _KEY
    return data.memo(
        key,
        lambda: step_breakdown.rank_breakdown(data.columns(STEP_COLUMNS), tb_compat=tb_compat),
    )


#: The events' columns `step_breakdown.rank_breakdown` reads.
STEP_COLUMNS = ("ts", "dur", "kind", "cat", "name", "correlation", "external_id")


def step_table(ts: TraceSet, *, tb_compat: bool = False) -> pl.DataFrame:
    """Every loaded rank's steps, broken down, from the per-file memos."""
    parts = [
        rank_steps(data, tb_compat=tb_compat).select(pl.lit(rank, pl.Int64).alias("rank"), pl.all())
        for rank, data in sorted(ts.loaded().items())
    ]
    parts = [p for p in parts if not p.is_empty()]
    if not parts:
        return pl.DataFrame(schema=step_breakdown.COLUMNS)
    return pl.concat(parts, how="diagonal_relaxed").select(list(step_breakdown.COLUMNS))


def precompute(
    entry: Path, meta: dict, frames: dict[str, pl.DataFrame] | None = None
) -> dict[str, pl.DataFrame]:
    """The app's `after_parse`: the overview's numbers and the step breakdown, while the
    parser worker still holds the frames; returned too, so the app need not read them back."""
    memos = overview.precompute(entry, meta, frames)
    data = RankData(entry, meta, _frames=dict(frames or {}))
    try:
        rank_steps(data)
    except Exception:  # the file still loads; the overview computes it again and says why
        logging.getLogger("hta_tui").exception("step breakdown of %s failed", entry)
    return {**memos, **data.memos()}


def from_pieces(
    entry: Path, meta: dict, parts: list[piece_summary.Part]
) -> dict[str, pl.DataFrame]:
    """`precompute` of a file parsed in pieces, from its pieces' parts (`piece_summary`):
    the same memos, without reading the rank's events back."""
    memos = overview.from_pieces(entry, meta, parts)
    data = RankData(entry, meta)
    try:
        data.memo(_KEY, lambda: piece_summary.breakdown(parts))
    except Exception:  # as `precompute`: the file still loads, the overview says why
        logging.getLogger("hta_tui").exception("step breakdown of %s failed", entry)
    return {**memos, **data.memos()}


precompute.in_pieces = PieceSummaries(piece_summary.summary_part, from_pieces)  # type: ignore[attr-defined]


def lacks_breakdown(entry: Path) -> bool:
    """A cache entry without the step breakdown (`report` made it: its parse makes only the
    overview's summary)."""
    return not RankData(entry, {}).has_memo(_KEY)


def of_hits(hits: list[tuple[Path, dict]]) -> list[dict[str, pl.DataFrame] | None]:
    """`precompute` of cache entries that lack the breakdown (`lacks_breakdown`), a batch
    at once where the app parses (its load pool): the breakdowns made over the batch's
    ranks together (`step_breakdown.step_time_breakdown` in `hta_view.views_at_once`: a
    tiny rank's alone costs ~25 queries), each kept in its entry and returned with the
    overview's summary, so the app's overview reads neither back. Made on the app's side
    one file at a time, 1,000 report-filled files cost its open ~10 s of CPU."""
    datas = [RankData(entry, meta, _memos=_summary(entry, meta)) for entry, meta in hits]
    try:
        made = _breakdowns(datas)
    except Exception:  # each rank makes its own below, and says what is wrong with it
        logging.getLogger("hta_tui").warning("step breakdowns of a batch failed", exc_info=True)
        made = {}
    for i, data in enumerate(datas):
        try:
            if i in made:
                data.memo(_KEY, lambda table=made[i]: table)
            else:
                rank_steps(data)
        except Exception:  # as `precompute`: the file still loads, the overview says why
            logging.getLogger("hta_tui").exception("step breakdown of %s failed", data.entry)
    return [data.memos() for data in datas]


def _summary(entry: Path, meta: dict) -> dict[str, pl.DataFrame]:
    """The overview's summary of a hit (read from its entry, made if missing); a failure
    costs only it (the overview makes it again when it asks, and says why)."""
    try:
        return overview.precompute(entry, meta)
    except Exception:
        logging.getLogger("hta_tui").exception("overview summary of %s failed", entry)
        return {}


def _breakdowns(datas: list[RankData]) -> dict[int, pl.DataFrame]:
    """`rank_steps` of each rank lacking it (by its index in `datas`), made at once."""
    ranks = {i: d.columns(STEP_COLUMNS) for i, d in enumerate(datas) if not d.has_memo(_KEY)}
    if len(ranks) < 2:
        return {}
    with hta_view.views_at_once():
        table = step_breakdown.step_time_breakdown(ranks)
    parts = table.partition_by("rank", as_dict=True, include_key=False)
    empty = pl.DataFrame(schema={c: t for c, t in step_breakdown.COLUMNS.items() if c != "rank"})
    return {i: parts.get((i,), empty) for i in ranks}


precompute.for_hits = HitSummaries(lacks_breakdown, of_hits)  # type: ignore[attr-defined]
