"""What several rules measure against: each rank's mean step time and its steps' windows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

#: The step table the rules share (the Step-time view's numbers, the plugin's steps).
STEPS = "step_time_breakdown"
#: Every ProfilerStep number: without one, "per step" means nothing and the rules abstain.
STEP_NUMBERS = "profiler_steps"
NO_STEPS = "no steps (no ProfilerStep annotation)"
#: Step windows on the job's clock (us from the job's first event): evidence opens them.
WINDOWS = "iterations"


def per_rank_steps(steps: pl.DataFrame) -> pl.DataFrame:
    """rank, steps, step_us (mean step time), total_us, from the step-time table."""
    return (
        steps.group_by("rank", maintain_order=True)
        .agg(
            pl.len().alias("steps"),
            pl.col("step_time (us)").mean().alias("step_us"),
            pl.col("step_time (us)").sum().alias("total_us"),
        )
        .sort("rank", maintain_order=True)
    )


def column_share(
    steps: pl.DataFrame, column: str, info: float
) -> tuple[pl.DataFrame, dict[str, Any], list[int]]:
    """Each rank's share of its step time in `column` of the step-time table (`pct`, and
    `per_step` in us), the worst rank's row (ties: the smallest rank) and the ranks past
    `info`: what the rules on one category of the step (communication, DataLoader) share."""
    part = steps.group_by("rank", maintain_order=True).agg(pl.col(column).sum().alias("part_us"))
    per = (
        per_rank_steps(steps)
        .join(part, on="rank")
        .with_columns(
            (100 * pl.col("part_us") / pl.col("total_us")).alias("pct"),
            (pl.col("part_us") / pl.col("steps")).alias("per_step"),
        )
    )
    worst = per.sort(["pct", "rank"], descending=[True, False], maintain_order=True).row(
        0, named=True
    )
    return per, worst, per.filter(pl.col("pct") > info)["rank"].to_list()


def windows(iterations: pl.DataFrame) -> pl.DataFrame:
    """rank, step, start_us, end_us of every step (for evidence rows)."""
    return iterations.select(
        "rank",
        pl.col("iter").alias("step"),
        pl.col("ts").alias("start_us"),
        pl.col("end").alias("end_us"),
    )


def with_windows(rows: pl.DataFrame, iterations: pl.DataFrame) -> pl.DataFrame:
    """`rows` (rank, step) with their step's window, null where the step has none."""
    win = windows(iterations).unique(["rank", "step"], maintain_order=True)
    return rows.drop("start_us", "end_us", strict=False).join(win, on=["rank", "step"], how="left")


def no_steps(t: Mapping[str, pl.DataFrame]) -> bool:
    """No ProfilerStep anywhere (the step table then holds the whole trace as one step)."""
    return t[STEP_NUMBERS].is_empty() or t[STEPS].is_empty()
