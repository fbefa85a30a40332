"""Rules on device memory: memory.peak (close to the device's size) and memory.growth (a
per-step peak that keeps growing). Neither costs step time: time at stake is 0; they rank
below the time findings of their severity."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis.findings.model import (
    Rule,
    RuleResult,
    Tables,
    Thresholds,
    abstain,
    evidence_frame,
    ranks_text,
)

NO_MEMORY = "no memory events (profile with profile_memory=True)"
#: Fewer steps than this make no trend.
MIN_STEPS = 3


def _size(mb: float) -> str:
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB"


def _holders(t: Tables, ranks: list[int], table: str, size: str, n: int = 3) -> str:
    rows = (
        t[table]
        .filter(pl.col("rank").is_in(ranks))
        .sort(size, descending=True, maintain_order=True)
        .head(n)
    )
    return ", ".join(
        f"{r['operator'] or 'no operator'}"
        + (f" in {r['module']}" if r.get("module") else "")
        + f" ({r[size]:.0f} MB)"
        for r in rows.iter_rows(named=True)
    )


def _memory_rows(t: Tables, ranks: list[int], table: str, size: str, what: str) -> pl.DataFrame:
    rows = (
        t[table]
        .filter(pl.col("rank").is_in(ranks))
        .sort(size, descending=True, maintain_order=True)
        .head(6)
    )
    return evidence_frame(
        rows.select(
            pl.lit("memory").alias("view"),
            pl.lit(table).alias("table"),
            "rank",
            pl.col("operator").alias("event"),
            pl.format(
                "rank {} {}: {}{} {} {} MB",
                "rank",
                "device",
                pl.col("operator").fill_null("no operator"),
                pl.when(pl.col("module").is_not_null())
                .then(pl.lit(" in ") + pl.col("module"))
                .otherwise(pl.lit("")),
                pl.lit(what),
                pl.col(size).round(1),
            ).alias("label"),
        )
    )


def _peak(t: Tables, th: Thresholds) -> RuleResult:
    peaks = t["memory_device_peaks"]
    if peaks.is_empty():
        return abstain(NO_MEMORY)
    devices = t["gpu_devices"]
    if "memory_gb" in devices.columns:
        devices = devices.filter(pl.col("memory_gb").is_not_null())
    if devices.is_empty() or "memory_gb" not in devices.columns:
        return abstain("the device's memory size is unknown (no deviceProperties in the trace)")
    cap = devices.group_by("rank", maintain_order=True).agg(
        (pl.col("memory_gb").max() * 1024).alias("cap_mb")
    )
    per = (
        peaks.join(cap, on="rank")
        .with_columns((100 * pl.col("peak_allocated_mb") / pl.col("cap_mb")).alias("pct"))
        .sort(["pct", "rank"], descending=[True, False], maintain_order=True)
    )
    if per.is_empty():
        return abstain("no memory events on a device of known size")
    worst = per.row(0, named=True)
    fired = per.filter(pl.col("pct") > th.info)["rank"].unique(maintain_order=True).to_list()
    shown = fired or [worst["rank"]]
    advice = (
        f"rank {worst['rank']}'s {worst['device']} peaks at {worst['peak_allocated_mb']:.0f} MB "
        f"allocated of {_size(worst['cap_mb'])} ({worst['pct']:.0f}%); alive at the "
        f"peak: {_holders(t, shown, 'memory_peak', 'live_mb')}: checkpoint activations "
        "(torch.utils.checkpoint), a smaller micro-batch with gradient accumulation, bf16, "
        "or shard optimizer state (FSDP / ZeRO)"
    )
    return RuleResult(
        value=worst["pct"],
        advice=advice,
        ranks=ranks_text(fired, per["rank"].n_unique()),
        evidence=_memory_rows(t, shown, "memory_peak", "live_mb", "alive at the peak:"),
    )


PEAK = Rule(
    id="memory.peak",
    title="Device memory nearly full",
    metric="peak allocated memory (% of the device's)",
    thresholds=Thresholds(info=75, warn=90, fail=97),
    needs=("memory_device_peaks", "gpu_devices", "memory_peak"),
    evaluate=_peak,
)


def _growth(t: Tables, th: Thresholds) -> RuleResult:
    steps = t["memory_step_peaks"].filter(pl.col("step").is_not_null())
    if steps.is_empty():
        return abstain(NO_MEMORY + ", or no steps")
    n = steps.group_by("rank", "device", maintain_order=True).agg(pl.len().alias("n"))["n"].max()
    if n is None or n < MIN_STEPS:
        return abstain(f"too few steps ({n or 0}) to call a trend: {MIN_STEPS} needed")
    per = (
        steps.sort("step", maintain_order=True)
        .group_by("rank", "device", maintain_order=True)
        .agg(
            pl.col("peak_allocated_mb").first().alias("first_mb"),
            pl.col("peak_allocated_mb").last().alias("last_mb"),
            pl.col("step").first().alias("first_step"),
            pl.col("step").last().alias("last_step"),
            (pl.col("growth_mb").drop_nulls() > 0).all().alias("always"),
            pl.col("growth_mb").drop_nulls().mean().alias("per_step_mb"),
        )
        .filter(pl.col("first_mb") > 0)
        .with_columns(
            pl.when(pl.col("always"))
            .then(100 * pl.col("per_step_mb") / pl.col("first_mb"))
            .otherwise(0.0)
            .alias("pct")
        )
        .sort(["pct", "rank"], descending=[True, False], maintain_order=True)
    )
    if per.is_empty():
        return abstain(NO_MEMORY)
    worst = per.row(0, named=True)
    fired = per.filter(pl.col("pct") > th.info)["rank"].unique(maintain_order=True).to_list()
    shown = fired or [worst["rank"]]
    leaks = t["memory_leaks"].filter(pl.col("growing"))
    kept = (
        _holders({"memory_leaks": leaks}, shown, "memory_leaks", "never_freed_mb")
        or "no allocation left unfreed"
    )
    advice = (
        f"rank {worst['rank']}'s {worst['device']} peak grows {worst['per_step_mb']:.1f} MB "
        f"every step ({worst['first_mb']:.0f} MB at step {worst['first_step']}, "
        f"{worst['last_mb']:.0f} MB at step {worst['last_step']}); never freed: {kept}: "
        "something keeps tensors across steps (a list of losses or outputs kept without "
        ".item() / .detach(), a growing cache); it ends in an out-of-memory error"
    )
    return RuleResult(
        value=worst["pct"],
        advice=advice,
        ranks=ranks_text(fired, per["rank"].n_unique()),
        evidence=_memory_rows(
            {"memory_leaks": leaks}, shown, "memory_leaks", "never_freed_mb", "never freed:"
        ),
    )


GROWTH = Rule(
    id="memory.growth",
    title="Memory that grows every step",
    metric="per-step peak growth (% of the first step's peak, per step)",
    thresholds=Thresholds(info=0.5, warn=2, fail=10),
    needs=("memory_step_peaks", "memory_leaks"),
    evaluate=_growth,
)

RULES = [PEAK, GROWTH]
