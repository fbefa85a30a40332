"""Step times per rank beyond the plugin's average: spread, and the steps that stand out.

Jitter is the coefficient of variation (std / mean): how unsteady a rank's steps are, in a
unit that compares ranks of different speeds. An outlier is a step whose time is more than
`Z_THRESHOLD` robust z-scores (median and MAD, so the outliers do not hide themselves) above
its rank's median; each says which category it spent the extra time in.
"""

from __future__ import annotations

import polars as pl

from hta_tui.analysis import tb_roles

Z_THRESHOLD = 3.0
#: MAD -> standard deviation for normal data.
_MAD_TO_SD = 1.4826
_CATS = [f"{c} (us)" for c in tb_roles.CATEGORIES]


def step_time_stats(breakdown: pl.DataFrame) -> pl.DataFrame:
    """Per rank: steps, mean, p50, p95, max, std and jitter of `step_time (us)`."""
    t = pl.col("step_time (us)")
    return (
        breakdown.group_by("rank")
        .agg(
            pl.len().alias("steps"),
            t.mean().alias("mean (us)"),
            t.quantile(0.5, "linear").alias("p50 (us)"),
            t.quantile(0.95, "linear").alias("p95 (us)"),
            t.max().alias("max (us)"),
            t.std().fill_null(0.0).alias("std (us)"),
        )
        .with_columns((pl.col("std (us)") / pl.col("mean (us)")).fill_nan(0.0).alias("jitter"))
        .sort("rank")
    )


def outlier_steps(breakdown: pl.DataFrame, z_threshold: float = Z_THRESHOLD) -> pl.DataFrame:
    """Steps far slower than their rank's median, with the category that grew the most over
    the rank's median of that category (`cause`) and by how much, and every category's
    change (`+Kernel (us)` ...: this step minus the rank's median step of that category)."""
    t = pl.col("step_time (us)")
    median = t.median().over("rank")
    mad = (t - median).abs().median().over("rank") * _MAD_TO_SD
    excess = [(pl.col(c) - pl.col(c).median().over("rank")).alias(c) for c in _CATS]
    scored = breakdown.with_columns(
        ((t - median) / mad).alias("z"), (t - median).alias("excess (us)"), *excess
    ).filter(pl.col("z").is_finite() & (pl.col("z") > z_threshold))
    if scored.is_empty():
        return pl.DataFrame(
            schema={
                "rank": pl.Int64,
                "step": pl.Int64,
                "step_time (us)": pl.Float64,
                "z": pl.Float64,
                "excess (us)": pl.Float64,
                "cause": pl.String,
                "cause_excess (us)": pl.Float64,
                **{f"+{c}": pl.Float64 for c in _CATS},
            }
        )
    top = pl.concat_list(_CATS).list.arg_max()
    names = dict(enumerate(tb_roles.CATEGORIES))
    return scored.select(
        "rank",
        "step",
        "step_time (us)",
        "z",
        "excess (us)",
        top.replace_strict(names, return_dtype=pl.String).alias("cause"),
        pl.max_horizontal(_CATS).alias("cause_excess (us)"),
        *(pl.col(c).alias(f"+{c}") for c in _CATS),
    ).sort("rank", "z", descending=[False, True])


def step_time_average(breakdown: pl.DataFrame) -> pl.DataFrame:
    """Per rank, the plugin's Overview row "Average Step Time": the mean step and each
    category's mean (us) and share of the mean step (%, the plugin's `extra`), as the step-time
    view's bars show them."""
    means = [pl.col(c).mean().alias(c) for c in ["step_time (us)", *_CATS]]
    table = breakdown.group_by("rank").agg(pl.len().cast(pl.UInt32).alias("steps"), *means)
    shares = [
        (100 * pl.col(c) / pl.col("step_time (us)")).fill_nan(None).alias(f"{c[:-5]} (%)")
        for c in _CATS
    ]
    return table.with_columns(shares).sort("rank")
