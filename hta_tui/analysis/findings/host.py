"""Rules on the host feeding the GPU: input.dataloader (and, later, sync and copy rules)."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis.findings.basis import (
    NO_STEPS,
    STEP_NUMBERS,
    STEPS,
    WINDOWS,
    no_steps,
    per_rank_steps,
    with_windows,
)
from hta_tui.analysis.findings.model import (
    Rule,
    RuleResult,
    Tables,
    Thresholds,
    abstain,
    evidence_frame,
    fmt_us,
    ranks_text,
    short,
)


def _dataloader_ops(ops: pl.DataFrame) -> list[str]:
    """The trace's DataLoader operators (the plugin counts `enumerate(DataLoader)...`), by
    host time."""
    if ops.is_empty() or "name" not in ops.columns:
        return []
    found = (
        ops.filter(pl.col("name").str.contains("DataLoader"))
        .group_by("name")
        .agg(pl.col("host_total_duration (us)").sum())
        .sort("host_total_duration (us)", descending=True)
    )
    return found["name"].to_list()


def _dataloader(t: Tables, th: Thresholds) -> RuleResult:
    steps = t[STEPS]
    if no_steps(t):
        return abstain(NO_STEPS)
    load = steps.group_by("rank").agg(pl.col("DataLoader (us)").sum().alias("load_us"))
    per = (
        per_rank_steps(steps)
        .join(load, on="rank")
        .with_columns(
            (100 * pl.col("load_us") / pl.col("total_us")).alias("pct"),
            (pl.col("load_us") / pl.col("steps")).alias("per_step"),
        )
    )
    worst = per.sort(["pct", "rank"], descending=[True, False]).row(0, named=True)
    fired = per.filter(pl.col("pct") > th.info)["rank"].to_list()
    names = _dataloader_ops(t["operator_stats"])
    op = short(names[0]) if names else "the DataLoader"
    slow = (
        steps.filter(pl.col("rank").is_in(fired or [worst["rank"]]))
        .sort("DataLoader (us)", descending=True)
        .head(6)
    )
    rows = with_windows(
        slow.select("rank", "step", "DataLoader (us)", "step_time (us)"), t[WINDOWS]
    )
    ev = rows.select(
        pl.lit("step_time").alias("view"),
        pl.lit(STEPS).alias("table"),
        "rank",
        "step",
        pl.lit(names[0] if names else "DataLoader").alias("event"),
        "start_us",
        "end_us",
        pl.format(
            "rank {} step {}: DataLoader {} us of {} us",
            "rank",
            "step",
            pl.col("DataLoader (us)").round(0).cast(pl.Int64),
            pl.col("step_time (us)").round(0).cast(pl.Int64),
        ).alias("label"),
    )
    worst_step = slow.row(0, named=True) if not slow.is_empty() else None
    advice = (
        f"rank {worst['rank']} waits {fmt_us(worst['per_step'])} per step in {op} "
        f"({worst['pct']:.0f}% of its {fmt_us(worst['step_us'])} step"
        + (
            f"; step {worst_step['step']} waits {fmt_us(worst_step['DataLoader (us)'])}"
            if worst_step
            else ""
        )
        + "): raise the DataLoader's num_workers, set pin_memory=True and persistent_workers,"
        " raise prefetch_factor, or move the transforms out of the loop"
    )
    return RuleResult(
        value=worst["pct"],
        at_stake_us=worst["per_step"],
        step_us=worst["step_us"],
        advice=advice,
        ranks=ranks_text(fired, per.height),
        evidence=evidence_frame(ev),
    )


DATALOADER = Rule(
    id="input.dataloader",
    title="The step waits for its input (DataLoader)",
    metric="DataLoader share of step time (%)",
    thresholds=Thresholds(info=2, warn=5, fail=15),
    needs=(STEPS, STEP_NUMBERS, WINDOWS, "operator_stats"),
    evaluate=_dataloader,
)

RULES = [DATALOADER]
