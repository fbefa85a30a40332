"""Rules on communication between ranks: comm.exposed and rank.straggler."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis.findings.basis import NO_STEPS, STEP_NUMBERS, STEPS, column_share, no_steps
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
    per, worst, fired = column_share(steps, "Communication (us)", th.info)
    hidden = t["collectives_hidden"]
    top = (
        hidden.filter(pl.col("rank").is_in(fired or [worst["rank"]]))
        .sort("exposed (us)", descending=True, maintain_order=True)
        .head(6)
    )
    ev = top.select(
        pl.lit("overlap").alias("view"),  # the Comm/comp overlap view's collectives table
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
            top.group_by("kind", "module", maintain_order=True)
            .agg(pl.col("exposed (us)").sum())
            .sort("exposed (us)", descending=True, maintain_order=True)
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


def _straggler(t: Tables, th: Thresholds) -> RuleResult:
    scores = t["straggler_scores"].filter(pl.col("compute_time (us)").is_not_null())
    if scores.height < 2:
        ranks = "no rank" if scores.is_empty() else "one rank"
        return abstain(f"{ranks} with steps: no other rank to compare")
    median = scores["compute_time (us)"].median() or 0.0
    if median <= 0:
        return abstain("no compute time on the GPU (a CPU-only trace)")
    per = scores.with_columns(
        (100 * (pl.col("compute_time (us)") - median) / median).alias("pct")
    ).sort(["pct", "rank"], descending=[True, False], maintain_order=True)
    worst = per.row(0, named=True)
    rank = worst["rank"]
    fired = per.filter(pl.col("pct") > th.info)["rank"].to_list()
    waits = t["collective_instances"].filter(pl.col("last_rank") == rank)
    waits = waits.sort("cost_us", descending=True, maintain_order=True).head(6)
    ev = waits.select(
        pl.lit("distributed").alias("view"),
        pl.lit("collective_instances").alias("table"),
        pl.lit(rank, pl.Int64).alias("rank"),
        pl.col("step").cast(pl.Int64, strict=False),
        pl.col("kind").alias("event"),
        pl.format(
            "pg {} #{} {} step {}: rank {} last, the others waited {} us",
            pl.col("pg").cast(pl.String).fill_null("?"),
            "seq",
            "kind",
            pl.col("step").cast(pl.String).fill_null("-"),
            pl.lit(rank),
            pl.col("cost_us").round(0).cast(pl.Int64),
        ).alias("label"),
    )
    if ev.is_empty():  # it is never last: its scores are the evidence
        ev = per.filter(pl.col("rank") == rank).select(
            pl.lit("steps").alias("view"),  # Steps & stragglers
            pl.lit("straggler_scores").alias("table"),
            "rank",
            pl.lit("compute").alias("event"),
            pl.format(
                "rank {}: compute {} us per step, {}% above the median",
                "rank",
                pl.col("compute_time (us)").round(0).cast(pl.Int64),
                pl.col("pct").round(0).cast(pl.Int64),
            ).alias("label"),
        )
    where = ", ".join(
        f"{r['kind']} #{r['seq']} (step {r['step']}, {fmt_us(r['cost_us'])})"
        for r in waits.head(3).iter_rows(named=True)
    )
    advice = (
        f"rank {rank} computes {fmt_us(worst['compute_time (us)'])} per step, "
        f"{worst['pct']:.0f}% above the median rank's {fmt_us(median)}"
        + (f"; the others wait for it at {where}" if where else "")
        + ": look at that rank's GPU (clocks, thermals, another job on it) and its share "
        "of the data (uneven batches or sequence lengths)"
    )
    steps = t[STEPS]
    step_us = steps.filter(pl.col("rank") == rank)["step_time (us)"].mean()
    return RuleResult(
        value=worst["pct"],
        at_stake_us=worst["compute_time (us)"] - median,
        step_us=step_us if isinstance(step_us, float) else None,
        advice=advice,
        ranks=ranks_text(fired, per.height),
        evidence=evidence_frame(ev),
    )


STRAGGLER = Rule(
    id="rank.straggler",
    title="One rank computes slower than the others",
    metric="a rank's compute time above the median rank's (%)",
    thresholds=Thresholds(info=5, warn=10, fail=20),
    needs=(STEPS, "straggler_scores", "collective_instances"),
    evaluate=_straggler,
    trusts=("spans",),
)

RULES = [EXPOSED, STRAGGLER]
