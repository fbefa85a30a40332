"""step.variance: steps of uneven length (p95 / p50), with the slow steps' cause."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis.findings.basis import (
    NO_STEPS,
    STEP_NUMBERS,
    STEPS,
    WINDOWS,
    no_steps,
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
)

#: Fewer steps than this have no p95 worth the name.
MIN_STEPS = 3


def _variance(t: Tables, th: Thresholds) -> RuleResult:
    if no_steps(t):
        return abstain(NO_STEPS)
    stats = t["step_time_stats"].filter(pl.col("p50 (us)") > 0)
    most = stats["steps"].max() if not stats.is_empty() else 0
    if most is None or most < MIN_STEPS:
        return abstain(f"too few steps ({most or 0}) for a p95: {MIN_STEPS} needed")
    stats = stats.filter(pl.col("steps") >= MIN_STEPS)
    per = stats.with_columns((pl.col("p95 (us)") / pl.col("p50 (us)")).alias("ratio")).sort(
        ["ratio", "rank"], descending=[True, False], maintain_order=True
    )
    worst = per.row(0, named=True)
    rank = worst["rank"]
    fired = per.filter(pl.col("ratio") > th.info)["rank"].to_list()
    outliers = t["outlier_steps"].filter(pl.col("rank").is_in(fired or [rank]))
    if outliers.is_empty():  # no step far enough out for a z-score: the slowest ones
        slow = t[STEPS].filter(pl.col("rank").is_in(fired or [rank]))
        median = slow.group_by("rank", maintain_order=True).agg(
            pl.col("step_time (us)").median().alias("med")
        )
        outliers = (
            slow.join(median, on="rank")
            .with_columns(
                (pl.col("step_time (us)") - pl.col("med")).alias("excess (us)"),
                pl.lit(None, pl.String).alias("cause"),
                pl.lit(None, pl.Float64).alias("cause_excess (us)"),
            )
            .filter(pl.col("excess (us)") > 0)
        )
    outliers = outliers.sort("excess (us)", descending=True, maintain_order=True).head(6)
    rows = with_windows(
        outliers.select("rank", "step", "excess (us)", "cause", "cause_excess (us)"), t[WINDOWS]
    )
    labels = [
        f"rank {r['rank']} step {r['step']}: +{fmt_us(r['excess (us)'])}"
        + (f", mostly {r['cause']} (+{fmt_us(r['cause_excess (us)'])})" if r["cause"] else "")
        for r in rows.iter_rows(named=True)
    ]
    ev = rows.select(
        pl.lit("step_time").alias("view"),
        pl.lit("outlier_steps").alias("table"),
        "rank",
        "step",
        pl.format("ProfilerStep#{}", "step").alias("event"),
        "start_us",
        "end_us",
    ).with_columns(pl.Series("label", labels, dtype=pl.String))
    slow_text = "; ".join(labels[:3]) or "no step stands out"
    advice = (
        f"rank {rank}'s p95 step takes {fmt_us(worst['p95 (us)'])} against a median of "
        f"{fmt_us(worst['p50 (us)'])} ({worst['ratio']:.2f}x); the slow steps: {slow_text}: "
        "the cause column says what to fix in them (DataLoader: more workers; Other / CPU "
        "Exec: host work such as logging, checkpoints or garbage collection in those steps)"
    )
    return RuleResult(
        value=worst["ratio"],
        at_stake_us=max(0.0, worst["mean (us)"] - worst["p50 (us)"]),
        step_us=worst["mean (us)"],
        advice=advice,
        ranks=ranks_text(fired, per.height),
        evidence=evidence_frame(ev),
    )


VARIANCE = Rule(
    id="step.variance",
    title="Uneven step times",
    metric="p95 / p50 step time",
    thresholds=Thresholds(info=1.1, warn=1.2, fail=1.5),
    needs=(STEPS, STEP_NUMBERS, WINDOWS, "step_time_stats", "outlier_steps"),
    evaluate=_variance,
)

RULES = [VARIANCE]
