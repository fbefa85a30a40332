"""Time per user annotation (`record_function` ranges), on the CPU or on the GPU.

Like HTA's `get_gpu_user_annotation_breakdown(use_gpu_annotation=...)`, one row per rank and
annotation name over HTA's view of the rank (so the last, incomplete ProfilerStep is left out
when there are several). Differences, each on purpose:

* HTA's columns (`sum (us)`, `max (us)`, `min (us)`, `stddev`, `mean (us)`) mean what they
  mean in HTA; `union (us)` adds the union of the name's ranges, where an annotation nested in
  one of the same name (recursive `record_function`, or one range per thread at the same
  time) is not counted twice, and `count`.
* ProfilerStep#N ranges are left out: they are the steps, not user annotations (HTA lists
  them with the others). `step_pctg` is the share of the rank's step time, the summed
  durations of its ProfilerSteps in the view; null without steps.
* Nothing is folded into "other" (HTA keeps the names that make `duration_ratio` of the time).

CPU annotations are the `user_annotation` events, GPU ones the `gpu_user_annotation` ranges on
the streams. Empty (with the columns) when the job has none.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import intervals
from hta_tui.analysis.hta_view import hta_view, profiler_step_names, us

COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "name": pl.String(),
    "count": pl.Int64(),
    "sum (us)": pl.Float64(),
    "max (us)": pl.Float64(),
    "min (us)": pl.Float64(),
    "stddev": pl.Float64(),
    "mean (us)": pl.Float64(),
    "union (us)": pl.Float64(),
    "step_pctg": pl.Float64(),
}

_STEP_RE = r"^ProfilerStep\s*#\s*\d+"


def user_annotation_breakdown(
    ranks: Mapping[int, pl.DataFrame], *, gpu: bool = False, hta_compat: bool = False
) -> pl.DataFrame:
    """Per rank and annotation name: count, HTA's sum / max / min / stddev / mean of the
    durations (us; stddev 0 for one range, as HTA's), the union of the ranges and its
    percentage of the rank's step time. Sorted by rank, then sum (descending), then name."""
    kind = "gpu_annotation" if gpu else "annotation"
    # The step regex once, on the job's few ProfilerStep names (compiling it per query costs
    # more than matching): every step name of a view is among them.
    names = pl.Series("name", sorted(profiler_step_names(ranks)), dtype=pl.String)
    steps = names.filter(names.str.contains(_STEP_RE))
    is_step = pl.col("name").is_in(steps.implode())
    queries = []
    views = hta_view(ranks, hta_compat=hta_compat, columns=())
    found = _annotated_at_once(views, kind, steps)
    for rank, view in views.items():
        if not (found[rank] if rank in found else _annotated(view, kind, steps)):
            continue  # (its query's rows would be none)
        # The cheap kind test first: the step regex then runs on a few rows, not every event.
        rows = view.filter(pl.col("kind").is_in(("annotation", kind)))
        step_time = int(rows.filter((pl.col("kind") == "annotation") & is_step)["dur"].sum())
        ann = rows.lazy().filter((pl.col("kind") == kind) & pl.col("name").is_not_null() & ~is_step)
        stats = ann.group_by("name").agg(
            pl.len().alias("count"),
            us(pl.col("dur").sum()).alias("sum (us)"),
            us(pl.col("dur").max()).alias("max (us)"),
            us(pl.col("dur").min()).alias("min (us)"),
            us(pl.col("dur")).std().fill_null(0.0).alias("stddev"),
            us(pl.col("dur").mean()).alias("mean (us)"),
        )
        total = (
            intervals.merged(ann, by="name")
            .group_by("name")
            .agg((pl.col("end") - pl.col("start")).sum().alias("covered"))
        )
        share = (100 * pl.col("covered") / step_time) if step_time > 0 else pl.lit(None)
        queries.append(
            stats.join(total, on="name").select(
                pl.lit(rank, pl.Int64).alias("rank"),
                "name",
                "count",
                "sum (us)",
                "max (us)",
                "min (us)",
                "stddev",
                "mean (us)",
                us(pl.col("covered")).alias("union (us)"),
                share.cast(pl.Float64).alias("step_pctg"),
            )
        )
    frames = [f for f in pl.collect_all(queries) if not f.is_empty()]
    if not frames:
        return pl.DataFrame(schema=COLUMNS)
    return (
        pl.concat(frames)
        .cast(COLUMNS)
        .sort(["rank", "sum (us)", "name"], descending=[False, True, False])
    )


def _annotated_at_once(
    views: Mapping[int, pl.DataFrame], kind: str, steps: pl.Series
) -> dict[int, bool]:
    """rank -> `_annotated` of its view, for a batch's views in one query a schema (three
    a tiny rank alone); empty outside a batch, a rank left out is asked alone."""
    from hta_tui.analysis.per_rank import batching, tagged_views  # (numpy: not on the client)

    if len(views) < 2 or not batching():
        return {}
    out: dict[int, bool] = {}
    for members, table in tagged_views(views, ("kind", "name")):
        name = pl.col("name")
        named = (pl.col("kind") == kind) & name.is_not_null() & ~name.is_in(steps.implode())
        try:
            ranks = set(table.filter(named)["rank"].to_list())
        except pl.exceptions.PolarsError:
            continue
        out |= {r: r in ranks for r in members}
    return out


def _annotated(view: pl.DataFrame, kind: str, steps: pl.Series) -> bool:
    """Has the view a named `kind` row that is not a step? Series operations, not a query:
    a tiny rank of a report's batch has none (its ProfilerSteps only) and its three
    queries cost ~1.2 ms of CPU for an empty table."""
    mask = view["kind"] == kind
    if not mask.any():
        return False
    names = view["name"].filter(mask).drop_nulls()
    return bool(names.len()) and not names.is_in(steps.implode()).all()
