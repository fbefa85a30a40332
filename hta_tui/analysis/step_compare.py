"""Ranks side by side, step by step: which rank is slowest in each profiler step.

Light reshaping of `steps.iterations` (rank, iter, ts, dur, end) for a per-step comparison.
"""

from __future__ import annotations

import polars as pl

COLUMNS: dict[str, pl.DataType] = {
    "iter": pl.Int64(),
    "ranks": pl.Int64(),
    "fastest (us)": pl.Float64(),
    "median (us)": pl.Float64(),
    "slowest (us)": pl.Float64(),
    "slowest_rank": pl.Int64(),
    "spread_pctg": pl.Float64(),
}


def step_spread(iters: pl.DataFrame) -> pl.DataFrame:
    """Per step of `steps.iterations` output: how many ranks ran it, the fastest, median and
    slowest duration, the slowest rank (the lowest rank number on a tie) and the spread
    (slowest over fastest, minus 1, in percent; null when the fastest is 0). Sorted by step.
    Steps without a number (iter -1) are left out."""
    df = iters.filter(pl.col("iter") >= 0)
    if df.is_empty():
        return pl.DataFrame(schema=COLUMNS)
    slowest = (
        df.sort(["iter", "dur", "rank"], descending=[False, True, False])
        .group_by("iter", maintain_order=True)
        .agg(pl.col("rank").first().alias("slowest_rank"))
    )
    stats = df.group_by("iter").agg(
        pl.len().alias("ranks"),
        pl.col("dur").min().alias("fastest (us)"),
        pl.col("dur").median().alias("median (us)"),
        pl.col("dur").max().alias("slowest (us)"),
    )
    return (
        stats.join(slowest, on="iter")
        .with_columns(
            pl.when(pl.col("fastest (us)") > 0)
            .then(100 * (pl.col("slowest (us)") / pl.col("fastest (us)") - 1))
            .alias("spread_pctg")
        )
        .sort("iter")
        .cast(COLUMNS)
        .select(list(COLUMNS))
    )


def step_durations(iters: pl.DataFrame, step: int) -> pl.DataFrame:
    """rank, dur of one step, by rank (the bars of the per-step chart)."""
    return iters.filter(pl.col("iter") == step).select("rank", "dur").sort("rank")
