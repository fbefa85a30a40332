"""Rules on the GPU's time: gpu.util.low (and launch.bound, kernel.small, tensorcore.unused)."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis.findings.basis import NO_STEPS, STEP_NUMBERS, STEPS, no_steps, per_rank_steps
from hta_tui.analysis.findings.comm import NO_GPU
from hta_tui.analysis.findings.model import (
    Rule,
    RuleResult,
    Tables,
    Thresholds,
    abstain,
    evidence_frame,
    fmt_us,
    ranks_text,
)

#: The step-time columns that are not the GPU computing: where a step's idle GPU time goes.
NOT_GPU = ("DataLoader (us)", "CPU Exec (us)", "Runtime (us)", "Communication (us)", "Other (us)")


def _util(t: Tables, th: Thresholds) -> RuleResult:
    metrics = t["gpu_metrics"].filter(pl.col("gpu_utilization_pct").is_not_null())
    steps = t[STEPS]
    if no_steps(t):
        return abstain(NO_STEPS)
    if metrics.is_empty():
        return abstain(NO_GPU)
    util = metrics.group_by("rank").agg(pl.col("gpu_utilization_pct").min().alias("util"))
    per = per_rank_steps(steps).join(util, on="rank")
    if per.is_empty():
        return abstain(NO_GPU)
    worst = per.sort(["util", "rank"]).row(0, named=True)
    fired = per.filter(pl.col("util") < th.info)["rank"].to_list()
    rank = worst["rank"]
    idle_us = worst["step_us"] * (1 - worst["util"] / 100)
    mine = steps.filter(pl.col("rank") == rank)
    parts = sorted(
        ((c.removesuffix(" (us)"), mine[c].mean() or 0.0) for c in NOT_GPU),
        key=lambda kv: -kv[1],
    )
    where = ", ".join(f"{name} {fmt_us(v)}" for name, v in parts[:3] if v > 0)
    idle = t["idle_time_breakdown"].filter(pl.col("rank").is_in(fired or [rank]))
    idle = idle.sort("idle_time", descending=True).head(6)
    ev = idle.select(
        pl.lit("idle").alias("view"),
        pl.lit("idle_time_breakdown").alias("table"),
        "rank",
        pl.col("idle_category").alias("event"),
        pl.format(
            "rank {} stream {}: {} idle {} us ({}% of its idle)",
            "rank",
            "stream",
            "idle_category",
            pl.col("idle_time").round(0).cast(pl.Int64),
            (100 * pl.col("idle_time_ratio")).round(0).cast(pl.Int64),
        ).alias("label"),
    )
    advice = (
        f"rank {rank}'s GPU is busy {worst['util']:.0f}% of its {fmt_us(worst['step_us'])} step; "
        f"per step the rest goes to {where or 'nothing the step breakdown names'}"
        + (
            f"; its streams idle most in {idle['idle_category'][0]} on stream {idle['stream'][0]}"
            if not idle.is_empty()
            else ""
        )
        + ": the findings on those causes (input.dataloader, launch.bound, sync.host,"
        " comm.exposed) say what to change"
    )
    return RuleResult(
        value=worst["util"],
        at_stake_us=idle_us,
        step_us=worst["step_us"],
        advice=advice,
        ranks=ranks_text(fired, per.height),
        evidence=evidence_frame(ev),
    )


UTIL = Rule(
    id="gpu.util.low",
    title="The GPU sits idle much of the step",
    metric="GPU utilization (% of step time busy)",
    thresholds=Thresholds(info=70, warn=50, fail=30, lower_is_worse=True),
    needs=(STEPS, STEP_NUMBERS, "gpu_metrics", "idle_time_breakdown"),
    evaluate=_util,
    trusts=("graph",),
)

RULES = [UTIL]
