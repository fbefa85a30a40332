"""Rules on communication between ranks: comm.exposed (and rank.straggler)."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis.findings.basis import NO_STEPS, STEP_NUMBERS, STEPS, no_steps, per_rank_steps
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

NO_GPU = "no GPU kernels (a CPU-only trace)"


def _exposed(t: Tables, th: Thresholds) -> RuleResult:
    steps = t[STEPS]
    if no_steps(t):
        return abstain(NO_STEPS)
    if steps["Kernel (us)"].sum() <= 0:
        return abstain(NO_GPU)
    comm = steps.group_by("rank").agg(pl.col("Communication (us)").sum().alias("comm_us"))
    per = (
        per_rank_steps(steps)
        .join(comm, on="rank")
        .with_columns(
            (100 * pl.col("comm_us") / pl.col("total_us")).alias("pct"),
            (pl.col("comm_us") / pl.col("steps")).alias("per_step"),
        )
    )
    worst = per.sort(["pct", "rank"], descending=[True, False]).row(0, named=True)
    fired = per.filter(pl.col("pct") > th.info)["rank"].to_list()
    hidden = t["collectives_hidden"]
    top = (
        hidden.filter(pl.col("rank").is_in(fired or [worst["rank"]]))
        .sort("exposed (us)", descending=True)
        .head(6)
    )
    ev = top.select(
        pl.lit("distributed").alias("view"),
        pl.lit("collectives_hidden").alias("table"),
        "rank",
        "step",
        pl.col("kind").alias("event"),
        pl.format(
            "rank {} {} pg {} stream {} step {}{}: {} us exposed of {} us",
            "rank",
            "kind",
            pl.col("pg").fill_null("?"),
            "stream",
            pl.col("step").cast(pl.String).fill_null("-"),
            pl.when(pl.col("module").is_not_null())
            .then(pl.lit(" in ") + pl.col("module"))
            .otherwise(pl.lit("")),
            pl.col("exposed (us)").round(0).cast(pl.Int64),
            pl.col("time (us)").round(0).cast(pl.Int64),
        ).alias("label"),
    )
    if top.is_empty():
        where = "no collective of the distributed view is exposed"
    else:
        kinds = (
            top.group_by("kind", "module")
            .agg(pl.col("exposed (us)").sum())
            .sort("exposed (us)", descending=True)
            .head(2)
        )
        where = ", ".join(
            f"{k['kind']}"
            + (f" in {k['module']}" if k["module"] else "")
            + f" ({fmt_us(k['exposed (us)'])} exposed)"
            for k in kinds.iter_rows(named=True)
        )
    advice = (
        f"rank {worst['rank']} waits {fmt_us(worst['per_step'])} per step on communication no "
        f"kernel hides ({worst['pct']:.0f}% of its step); the most exposed: {where}: overlap it "
        "with compute (DDP bucket_cap_mb, FSDP prefetch, gradient accumulation with no_sync), "
        "or send less (bf16 gradients, compression)"
    )
    return RuleResult(
        value=worst["pct"],
        at_stake_us=worst["per_step"],
        step_us=worst["step_us"],
        advice=advice,
        ranks=ranks_text(fired, per.height),
        evidence=evidence_frame(ev),
    )


EXPOSED = Rule(
    id="comm.exposed",
    title="Communication not hidden behind compute",
    metric="exposed communication share of step time (%)",
    thresholds=Thresholds(info=5, warn=10, fail=20),
    needs=(STEPS, STEP_NUMBERS, "collectives_hidden"),
    evaluate=_exposed,
)

RULES = [EXPOSED]
