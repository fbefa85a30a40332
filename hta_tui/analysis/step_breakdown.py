"""Where each step's wall time goes: the TensorBoard plugin's Overview breakdown.

Each instant of a step is given to the first role running then, in priority order Kernel >
Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec; what no role covers is
Other. So the parts add up to the step's (device-adjusted) duration, as in the plugin's
`OverallParser`. One sweep over every role's merged intervals and the step edges replaces the
plugin's per-role interval subtraction; steps are joined to the sweep's segments by range.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import intervals, tb_roles, tb_steps
from hta_tui.analysis.hta_view import us
from hta_tui.analysis.per_rank import each_rank

_US = " (us)"


def _columns() -> dict[str, pl.DataType]:
    cols: dict[str, pl.DataType] = {"rank": pl.Int64(), "step": pl.Int64()}
    cols["step_time (us)"] = pl.Float64()
    cols.update({c + _US: pl.Float64() for c in tb_roles.CATEGORIES})
    return cols


COLUMNS = _columns()


def _segments(roles: pl.DataFrame, steps: pl.DataFrame) -> pl.LazyFrame:
    """The timeline cut at every role and step edge: `t`, `next`, `cat` (first role running,
    or Other)."""
    edges = []
    for i in range(len(tb_roles.ROLES)):
        merged = intervals.merged(roles.lazy().filter(pl.col("role") == i))
        edges.append(merged.select(pl.col("start").alias("t"), pl.lit(1 << i).alias("d")))
        edges.append(merged.select(pl.col("end").alias("t"), pl.lit(-(1 << i)).alias("d")))
    for col in ("start", "end"):
        edges.append(steps.lazy().select(pl.col(col).alias("t"), pl.lit(0).alias("d")))
    mask = pl.col("d").cum_sum()
    lowest = (mask & -mask).cast(pl.Float64).log(2).round(0).cast(pl.Int8)
    other = len(tb_roles.ROLES)
    return (
        pl.concat(edges, how="vertical_relaxed")
        .sort("t")
        .select(
            "t",
            pl.col("t").shift(-1).alias("next"),
            pl.when(mask > 0).then(lowest).otherwise(other).alias("cat"),
        )
        .filter(pl.col("next") > pl.col("t"))
    )


def rank_breakdown(events: pl.DataFrame, *, tb_compat: bool = False) -> pl.DataFrame:
    """One row per used step of one rank (no `rank` column): step, step_time and each
    category, in us."""
    steps = tb_steps.profiler_steps(events, tb_compat=tb_compat)
    steps = steps.filter("used").with_row_index("i")
    cols = [c for c in COLUMNS if c != "rank"]
    if steps.is_empty():
        return pl.DataFrame(schema={c: COLUMNS[c] for c in cols})
    roles = tb_roles.role_of(events, tb_compat=tb_compat)
    segments = _segments(roles, steps.select("start", "end"))
    bounds = steps.lazy().select("i", "start", "end")
    disjoint = steps.select((pl.col("start") >= pl.col("end").shift(1)).all()).item()
    if disjoint:  # each segment in at most one step: an as-of join (a range join is 100x slower)
        inside = segments.join_asof(
            bounds.sort("start"), left_on="t", right_on="start", check_sortedness=False
        ).filter(pl.col("next") <= pl.col("end"))
    else:  # overlapping steps (the plugin's duplicate GPU-side step): every pair
        inside = segments.join_where(
            bounds, pl.col("t") >= pl.col("start"), pl.col("next") <= pl.col("end")
        )
    parts = (
        inside.group_by("i", "cat").agg((pl.col("next") - pl.col("t")).sum().alias("len")).collect()
    )
    names = dict(enumerate(c + _US for c in tb_roles.CATEGORIES))
    wide = parts.with_columns(pl.col("cat").replace_strict(names, return_dtype=pl.String)).pivot(
        on="cat", index="i", values="len"
    )
    table = steps.select("i", "step", (pl.col("end") - pl.col("start")).alias("step_time (us)"))
    table = table.join(wide, on="i", how="left")
    return table.select(
        "step",
        us(pl.col("step_time (us)")),
        *(
            us(pl.col(n)).fill_null(0.0).alias(n) if n in table.columns else pl.lit(0.0).alias(n)
            for n in names.values()
        ),
    )


def step_time_breakdown(
    ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False
) -> pl.DataFrame:
    """Every rank's used steps, broken down (COLUMNS)."""
    return each_rank(ranks, lambda ev: rank_breakdown(ev, tb_compat=tb_compat), COLUMNS)


def step_selection(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> pl.DataFrame:
    """Every rank's steps, used or not and why, times in us relative to the file."""
    return each_rank(
        ranks,
        lambda ev: tb_steps.profiler_steps(ev, tb_compat=tb_compat).select(
            "step",
            us(pl.col("end") - pl.col("start")).alias("step_time (us)"),
            us(pl.col("start") - pl.col("host_start")).alias("start_moved (us)"),
            us(pl.col("end") - pl.col("host_end")).alias("end_moved (us)"),
            "gpu_ops",
            "used",
            "reason",
        ),
    )
