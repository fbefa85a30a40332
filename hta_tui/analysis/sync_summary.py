"""Blocked time per module, operator and call site, and a one-line verdict per rank.

The table answers "which line makes the host wait": syncs that share a rank, phase, module,
operator and call site are one row, sorted by blocked time. Shares are of the rank's step
time: the summed durations of its ProfilerStep#N ranges, or, without steps, the span of its
CPU events; per-step figures divide by the number of steps (1 without steps).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis.hta_view import us
from hta_tui.analysis.syncs import SYNC_COLUMNS, syncs

GROUP_KEYS: tuple[str, ...] = ("rank", "phase", "module", "operator", "call_site")
_STEP_RE = r"^ProfilerStep\s*#\s*\d+$"

SUMMARY_COLUMNS: dict[str, pl.DataType] = {
    **{k: SYNC_COLUMNS[k] for k in GROUP_KEYS},
    "count": pl.UInt32(),
    "blocked (us)": pl.Float64(),
    "mean (us)": pl.Float64(),
    "max (us)": pl.Float64(),
    "per step (us)": pl.Float64(),
    "step_pctg": pl.Float64(),
    "calls": pl.String(),  # the host calls, e.g. cudaStreamSynchronize
}

VERDICT_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "syncs": pl.UInt32(),
    "blocked (us)": pl.Float64(),
    "step time (us)": pl.Float64(),
    "steps": pl.UInt32(),
    "blocked_pctg": pl.Float64(),
    "call_sites": pl.UInt32(),
    "verdict": pl.String(),
}


def step_time(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """rank, steps, step_ns: the rank's ProfilerStep time (or CPU span) and step count."""
    cpu = pl.col("kind").is_in(("cpu_op", "annotation", "runtime"))
    # The regex on the few names the cheap prefix test lets through; one pass per rank.
    maybe = cpu & pl.col("name").str.starts_with("ProfilerStep")
    is_step = pl.col("name").filter(maybe).str.contains(_STEP_RE)
    rows = [
        events.lazy().select(
            pl.lit(rank, pl.Int64).alias("rank"),
            pl.col("name").filter(maybe).filter(is_step).n_unique().cast(pl.UInt32).alias("steps"),
            pl.col("dur").filter(maybe).filter(is_step).sum().alias("in_steps"),
            (
                (pl.col("ts") + pl.col("dur")).filter(cpu).max() - pl.col("ts").filter(cpu).min()
            ).alias("span"),
        )
        for rank, events in ranks.items()
    ]
    schema = {"rank": pl.Int64(), "steps": pl.UInt32(), "step_ns": pl.Int64()}
    if not rows:
        return pl.DataFrame(schema=schema)
    return (
        pl.concat(pl.collect_all(rows))
        .select(
            "rank",
            pl.max_horizontal("steps", pl.lit(1, pl.UInt32)).alias("steps"),
            pl.when(pl.col("steps") > 0)
            .then(pl.col("in_steps"))
            .otherwise(pl.col("span"))
            .fill_null(0)
            .alias("step_ns"),
        )
        .cast(schema)
    )


def sync_summary(syncs: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Syncs grouped by GROUP_KEYS (SUMMARY_COLUMNS), largest blocked time first."""
    if syncs.is_empty():
        return pl.DataFrame(schema=SUMMARY_COLUMNS)
    blocked = pl.col("blocked (us)")
    out = (
        syncs.group_by(list(GROUP_KEYS))
        .agg(
            pl.len().cast(pl.UInt32).alias("count"),
            blocked.sum().alias("blocked (us)"),
            blocked.mean().alias("mean (us)"),
            blocked.max().alias("max (us)"),
            pl.col("call").unique().sort().str.join(", ").alias("calls"),
        )
        .join(steps, on="rank", how="left")
        .with_columns(
            (pl.col("blocked (us)") / pl.col("steps")).alias("per step (us)"),
            pl.when(pl.col("step_ns") > 0)
            .then(100 * pl.col("blocked (us)") / us(pl.col("step_ns")))
            .alias("step_pctg"),
        )
    )
    return (
        out.cast(SUMMARY_COLUMNS)
        .select(list(SUMMARY_COLUMNS))
        .sort(["rank", "blocked (us)", "count"], descending=[False, True, True], nulls_last=True)
    )


def sync_verdict(summary: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """One line per rank: the share of step time the host spent blocked, in how many call
    sites, and the largest of them."""
    if steps.is_empty():
        return pl.DataFrame(schema=VERDICT_COLUMNS)
    blocking = summary.filter(pl.col("blocked (us)") > 0)
    per_rank = blocking.group_by("rank").agg(
        pl.col("count").sum().alias("syncs"),
        pl.col("blocked (us)").sum(),
        pl.len().cast(pl.UInt32).alias("call_sites"),
        pl.col("operator").first().alias("top_op"),
        pl.coalesce("call_site", "module").first().alias("top_where"),
        pl.col("phase").first().alias("top_phase"),
    )
    rows = steps.join(per_rank, on="rank", how="left").with_columns(
        pl.col("syncs").fill_null(0),
        pl.col("blocked (us)").fill_null(0.0),
        pl.col("call_sites").fill_null(0),
        us(pl.col("step_ns")).alias("step time (us)"),
    )
    pct = pl.when(pl.col("step_ns") > 0).then(
        100 * pl.col("blocked (us)") / pl.col("step time (us)")
    )
    rows = rows.with_columns(pct.alias("blocked_pctg"))
    where = pl.coalesce("top_where", pl.lit("an unknown call site"))
    verdict = (
        pl.when(pl.col("call_sites") == 0)
        .then(pl.lit("the host never waited for the GPU"))
        .otherwise(
            pl.format(
                "{}% of step time is the host waiting in {} call site{}; the largest: {} in {}, {}",
                pl.col("blocked_pctg").fill_null(0).round(1),
                pl.col("call_sites"),
                pl.when(pl.col("call_sites") == 1).then(pl.lit("")).otherwise(pl.lit("s")),
                pl.coalesce("top_op", pl.lit("no operator")),
                where,
                pl.col("top_phase"),
            )
        )
    )
    return (
        rows.with_columns(verdict.alias("verdict"))
        .cast(VERDICT_COLUMNS)
        .select(list(VERDICT_COLUMNS))
        .sort("rank")
    )


def sync_tables(
    ranks: Mapping[int, pl.DataFrame], flows: Mapping[int, pl.DataFrame] | None = None
) -> dict[str, pl.DataFrame]:
    """The report's three tables: syncs, sync_summary, sync_verdict."""
    table = syncs(ranks, flows)
    steps = step_time(ranks)
    summary = sync_summary(table, steps)
    return {
        "syncs": table,
        "sync_summary": summary,
        "sync_verdict": sync_verdict(summary, steps),
    }
