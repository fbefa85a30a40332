"""Rules on the GPU's time: gpu.util.low, launch.bound, kernel.small, tensorcore.unused."""

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
    short,
)

#: The step-time columns that are not the GPU computing: where a step's idle GPU time goes.
NOT_GPU = ("DataLoader (us)", "CPU Exec (us)", "Runtime (us)", "Communication (us)", "Other (us)")
#: What to do about the largest of them, and the finding that says more.
CAUSE = {
    "DataLoader": "feed it faster (input.dataloader)",
    "CPU Exec": "less Python between kernels: torch.compile, CUDA graphs (launch.bound)",
    "Runtime": "fewer, larger launches: fusion, CUDA graphs (launch.bound)",
    "Communication": "hide the communication behind compute (comm.exposed)",
    "Other": "find the host's other work in those gaps: syncs, logging (sync.host, the timeline)",
}


def _busiest_stream_idle(idle: pl.DataFrame, stats: pl.DataFrame, ranks: list[int]) -> pl.DataFrame:
    """Each rank's idle categories on its busiest stream (the one with the most gaps between
    kernels, so the most kernels: where the compute runs), largest first."""
    counts = stats.filter(pl.col("rank").is_in(ranks)).group_by(
        "rank", "stream", maintain_order=True
    )
    counts = counts.agg(pl.col("count").sum().alias("gaps"))
    busiest = counts.sort(
        ["rank", "gaps", "stream"], descending=[False, True, False], maintain_order=True
    )
    busiest = busiest.unique("rank", keep="first", maintain_order=True)
    return (
        idle.join(busiest.select("rank", "stream"), on=["rank", "stream"])
        .filter(pl.col("idle_time") > 0)
        .sort(["idle_time", "rank"], descending=[True, False], maintain_order=True)
        .head(6)
    )


def _util(t: Tables, th: Thresholds) -> RuleResult:
    metrics = t["gpu_metrics"].filter(pl.col("gpu_utilization_pct").is_not_null())
    steps = t[STEPS]
    if no_steps(t):
        return abstain(NO_STEPS)
    if metrics.is_empty():
        return abstain(NO_GPU)
    util = metrics.group_by("rank", maintain_order=True).agg(
        pl.col("gpu_utilization_pct").min().alias("util")
    )
    per = per_rank_steps(steps).join(util, on="rank")
    if per.is_empty():
        return abstain(NO_GPU)
    worst = per.sort(["util", "rank"], maintain_order=True).row(0, named=True)
    fired = per.filter(pl.col("util") < th.info)["rank"].to_list()
    rank = worst["rank"]
    idle_us = worst["step_us"] * (1 - worst["util"] / 100)
    mine = steps.filter(pl.col("rank") == rank)
    parts = sorted(
        ((c.removesuffix(" (us)"), mine[c].mean() or 0.0) for c in NOT_GPU),
        key=lambda kv: -kv[1],
    )
    where = ", ".join(f"{name} {fmt_us(v)}" for name, v in parts[:3] if v > 0)
    idle = _busiest_stream_idle(t["idle_time_breakdown"], t["idle_interval_stats"], fired or [rank])
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
            f"; its busiest stream ({idle['stream'][0]}) idles most in "
            f"{idle['idle_category'][0]} ({fmt_us(idle['idle_time'][0])})"
            if not idle.is_empty()
            else ""
        )
        + (f": {CAUSE[parts[0][0]]}" if parts and parts[0][1] > 0 else "")
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
    needs=(STEPS, STEP_NUMBERS, "gpu_metrics", "idle_time_breakdown", "idle_interval_stats"),
    evaluate=_util,
    trusts=("graph",),
)


def _steps_per_rank(t: Tables) -> dict[int, int]:
    per = per_rank_steps(t[STEPS])
    return dict(zip(per["rank"], per["steps"], strict=True))


def _step_us(t: Tables) -> dict[int, float]:
    per = per_rank_steps(t[STEPS])
    return dict(zip(per["rank"], per["step_us"], strict=True))


def _kernel_rows(rows: pl.DataFrame, what: str) -> pl.DataFrame:
    """kernel_view_by_op rows as evidence: the Kernels view, the kernel and its operator."""
    return rows.select(
        pl.lit("kernels").alias("view"),
        pl.lit("kernel_view_by_op").alias("table"),
        "rank",
        pl.col("name").alias("event"),
        pl.format(
            "rank {} {} ({}): {} calls, mean {} us, {} us {}",
            "rank",
            pl.col("name").str.slice(0, 48),
            pl.col("operator").fill_null("no operator"),
            "calls",
            pl.col("mean (us)").round(1),
            pl.col("total (us)").round(0).cast(pl.Int64),
            pl.lit(what),
        ).alias("label"),
    )


def _named(rows: pl.DataFrame, n: int = 3) -> str:
    """The first `n` kernels of `rows` as advice text: kernel (operator, calls, mean)."""
    return "; ".join(
        f"{short(r['name'], 50)} from {r['operator'] or 'no operator'} "
        f"({r['calls']} calls, mean {r['mean (us)']:.1f} us)"
        for r in rows.head(n).iter_rows(named=True)
    )


def _by_kernel(k: pl.DataFrame) -> pl.DataFrame:
    """kernel_view_by_op per rank, kernel and operator (its launch geometries together)."""
    return (
        k.group_by("rank", "name", "operator", maintain_order=True)
        .agg(
            pl.col("calls").sum(),
            pl.col("total (us)").sum(),
            pl.col("op_tc_eligible").any(),
            pl.col("tc_used").all(),
        )
        .with_columns((pl.col("total (us)") / pl.col("calls")).alias("mean (us)"))
    )


def _gpu_present(t: Tables) -> bool:
    return not t["kernel_view_by_op"].is_empty()


#: launch calls (not copies or memsets)
_LAUNCH_RE = r"(?i)launch"


#: `launch_summary`'s columns: a rank's launch calls (of its `rows` kernel launches with
#: their kernel: copies and memsets too), those whose kernel ran shorter than the call, the
#: GPU time lost to them (us) and the median call (us).
LAUNCH_SUMMARY_SCHEMA = {
    "rank": pl.Int64,
    "rows": pl.UInt32,
    "launches": pl.UInt32,
    "shorter": pl.UInt32,
    "gap": pl.Float64,
    "launch_us": pl.Float64,
}


def launch_summary(launches: pl.DataFrame) -> pl.DataFrame:
    """cuda_kernel_launch_stats (a row per launch) summarised per rank: what launch.bound
    reads, a row per rank (made beside each rank's frames, so the findings never hold a
    row per launch of every rank, issue 30)."""
    if launches.is_empty():
        return pl.DataFrame(schema=LAUNCH_SUMMARY_SCHEMA)
    call = pl.col("launch").str.contains(_LAUNCH_RE)
    short_k = (pl.col("gpu_duration") < pl.col("cpu_duration")) & call
    table = launches.group_by("rank", maintain_order=True).agg(
        pl.len().alias("rows"),
        call.sum().alias("launches"),
        short_k.sum().alias("shorter"),
        (pl.col("cpu_duration") - pl.col("gpu_duration"))
        .clip(0)
        .filter(short_k)
        .sum()
        .alias("gap"),
        pl.col("cpu_duration").filter(call).median().alias("launch_us"),
    )
    return table.cast(LAUNCH_SUMMARY_SCHEMA)  # type: ignore[arg-type]


def _launch_bound(t: Tables, th: Thresholds) -> RuleResult:
    if no_steps(t):
        return abstain(NO_STEPS)
    if not _gpu_present(t):
        return abstain(NO_GPU)
    summary = t["kernel_launch_summary"]
    if summary.is_empty():
        return abstain("no kernel launch with its kernel in the trace")
    per = (
        summary.filter(pl.col("launches") > 0)
        .select("rank", "launches", "shorter", "gap", "launch_us")
        .with_columns((100 * pl.col("shorter") / pl.col("launches")).alias("pct"))
        .sort(["pct", "rank"], descending=[True, False], maintain_order=True)
    )
    if per.is_empty():
        return abstain("no kernel launch with its kernel in the trace")
    worst = per.row(0, named=True)
    rank = worst["rank"]
    steps = _steps_per_rank(t).get(rank) or 1
    fired = per.filter(pl.col("pct") > th.info)["rank"].to_list()
    kernels = _by_kernel(t["kernel_view_by_op"]).filter(
        pl.col("rank").is_in(fired or [rank]) & (pl.col("mean (us)") < worst["launch_us"])
    )
    kernels = kernels.sort(
        ["calls", "total (us)", "name"], descending=[True, True, False], maintain_order=True
    )
    advice = (
        f"on rank {rank}, {worst['pct']:.0f}% of kernels run shorter on the GPU than their "
        f"launch takes on the host (median launch {worst['launch_us']:.1f} us), so the GPU "
        f"waits for launches, up to {fmt_us(worst['gap'] / steps)} per step; the most "
        f"frequent: {_named(kernels) or 'none named'}: capture the step in a CUDA graph "
        '(torch.compile(mode="reduce-overhead") or torch.cuda.graphs), fuse the small ops '
        "(torch.compile), or give each kernel more work (a larger batch)"
    )
    return RuleResult(
        value=worst["pct"],
        at_stake_us=worst["gap"] / steps,
        step_us=_step_us(t).get(rank),
        advice=advice,
        ranks=ranks_text(fired, per.height),
        evidence=evidence_frame(_kernel_rows(kernels.head(6), "in all")),
    )


LAUNCH = Rule(
    id="launch.bound",
    title="The GPU waits for kernel launches",
    metric="kernels shorter than their launch call (% of launches)",
    thresholds=Thresholds(info=25, warn=50, fail=75),
    needs=(STEPS, STEP_NUMBERS, "kernel_launch_summary", "kernel_view_by_op"),
    evaluate=_launch_bound,
    trusts=("graph",),
)

#: A kernel shorter than this (us) is small (the issue's 10 us).
SMALL_US = 10.0


def _small(t: Tables, th: Thresholds) -> RuleResult:
    if no_steps(t):
        return abstain(NO_STEPS)
    if not _gpu_present(t):
        return abstain(NO_GPU)
    k = _by_kernel(t["kernel_view_by_op"])
    small = pl.col("mean (us)") < SMALL_US
    per = (
        k.group_by("rank", maintain_order=True)
        .agg(
            pl.col("total (us)").sum().alias("all_us"),
            pl.col("total (us)").filter(small).sum().alias("small_us"),
        )
        .with_columns((100 * pl.col("small_us") / pl.col("all_us")).alias("pct"))
        .sort(["pct", "rank"], descending=[True, False], maintain_order=True)
    )
    worst = per.row(0, named=True)
    rank = worst["rank"]
    steps = _steps_per_rank(t).get(rank) or 1
    fired = per.filter(pl.col("pct") > th.info)["rank"].to_list()
    rows = k.filter(pl.col("rank").is_in(fired or [rank]) & small)
    rows = rows.sort(["total (us)", "name"], descending=[True, False], maintain_order=True)
    advice = (
        f"on rank {rank}, kernels under {SMALL_US:.0f} us take {worst['pct']:.0f}% of kernel "
        f"time ({fmt_us(worst['small_us'] / steps)} per step); the largest: {_named(rows)}: "
        "fuse them (torch.compile, fused optimizers: foreach=True / fused=True, fused "
        "LayerNorm / GELU), or batch the work they do"
    )
    return RuleResult(
        value=worst["pct"],
        at_stake_us=worst["small_us"] / steps,
        step_us=_step_us(t).get(rank),
        advice=advice,
        ranks=ranks_text(fired, per.height),
        evidence=evidence_frame(_kernel_rows(rows.head(6), "in all")),
    )


SMALL = Rule(
    id="kernel.small",
    title="Many tiny kernels",
    metric=f"kernel time in kernels under {SMALL_US:.0f} us (%)",
    thresholds=Thresholds(info=10, warn=20, fail=40),
    needs=(STEPS, STEP_NUMBERS, "kernel_view_by_op"),
    evaluate=_small,
    trusts=("graph",),
)


def _tensor_cores(t: Tables, th: Thresholds) -> RuleResult:
    if no_steps(t):
        return abstain(NO_STEPS)
    if not _gpu_present(t):
        return abstain(NO_GPU)
    k = _by_kernel(t["kernel_view_by_op"])
    missed = pl.col("op_tc_eligible") & ~pl.col("tc_used")
    per = (
        k.group_by("rank", maintain_order=True)
        .agg(
            pl.col("total (us)").sum().alias("all_us"),
            pl.col("total (us)").filter(missed).sum().alias("missed_us"),
        )
        .with_columns((100 * pl.col("missed_us") / pl.col("all_us")).alias("pct"))
        .sort(["pct", "rank"], descending=[True, False], maintain_order=True)
    )
    worst = per.row(0, named=True)
    rank = worst["rank"]
    steps = _steps_per_rank(t).get(rank) or 1
    fired = per.filter(pl.col("pct") > th.info)["rank"].to_list()
    rows = k.filter(pl.col("rank").is_in(fired or [rank]) & missed)
    rows = rows.sort(["total (us)", "name"], descending=[True, False], maintain_order=True)
    advice = (
        f"on rank {rank}, {worst['pct']:.0f}% of kernel time "
        f"({fmt_us(worst['missed_us'] / steps)} per step) is in operators that could use "
        f"tensor (matrix) cores but did not: {_named(rows)}: allow TF32 "
        "(torch.backends.cuda.matmul.allow_tf32 = True, torch.set_float32_matmul_precision"
        '("high")) or run them in bf16 / fp16 (torch.autocast)'
    )
    return RuleResult(
        value=worst["pct"],
        at_stake_us=worst["missed_us"] / steps,
        step_us=_step_us(t).get(rank),
        advice=advice,
        ranks=ranks_text(fired, per.height),
        evidence=evidence_frame(_kernel_rows(rows.head(6), "without tensor cores")),
    )


TENSOR_CORES = Rule(
    id="tensorcore.unused",
    title="Matrix math without tensor cores",
    metric="kernel time in ops that skipped tensor cores (%)",
    thresholds=Thresholds(info=5, warn=10, fail=30),
    needs=(STEPS, STEP_NUMBERS, "kernel_view_by_op"),
    evaluate=_tensor_cores,
    trusts=("graph",),
)

RULES = [UTIL, LAUNCH, SMALL, TENSOR_CORES]
