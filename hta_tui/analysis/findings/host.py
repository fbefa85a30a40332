"""Rules on the host feeding the GPU: input.dataloader, sync.host, memcpy.pageable."""

from __future__ import annotations

from typing import Any

import polars as pl

from hta_tui.analysis.findings.basis import (
    NO_STEPS,
    STEP_NUMBERS,
    STEPS,
    WINDOWS,
    column_share,
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
    short,
)


def _dataloader_ops(annotations: pl.DataFrame) -> list[str]:
    """The trace's DataLoader ranges (`enumerate(DataLoader)#...`, the plugin's DataLoader
    category), longest first."""
    if annotations.is_empty():
        return []
    found = (
        annotations.filter(pl.col("name").str.contains("DataLoader"))
        .group_by("name", maintain_order=True)
        .agg(pl.col("sum (us)").sum())
        .sort("sum (us)", descending=True, maintain_order=True)
    )
    return found["name"].to_list()


def _dataloader(t: Tables, th: Thresholds) -> RuleResult:
    steps = t[STEPS]
    if no_steps(t):
        return abstain(NO_STEPS)
    per, worst, fired = column_share(steps, "DataLoader (us)", th.info)
    names = _dataloader_ops(t["user_annotation_breakdown"])
    op = short(names[0]) if names else "the DataLoader"
    slow = (
        steps.filter(pl.col("rank").is_in(fired or [worst["rank"]]))
        .sort("DataLoader (us)", descending=True, maintain_order=True)
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
    needs=(STEPS, STEP_NUMBERS, WINDOWS, "user_annotation_breakdown"),
    evaluate=_dataloader,
)


#: Sync types that are copies (memcpy.pageable's), the others are sync.host's.
COPY_TYPES = ("memcpy", "pageable_copy")
#: The host blocked less than this per step is not worth a warning (the issue's 1 ms).
SYNC_FLOOR_US = 1000.0
NO_GPU_SYNC = "no GPU to wait for (a CPU-only trace)"


def _sync_rows(t: Tables, copies: bool) -> tuple[pl.DataFrame, pl.DataFrame] | str:
    """(blocking syncs of the kind asked, with their step number and job-clock times; per
    rank: steps, step time, blocked) or why the rule abstains."""
    verdict = t["sync_verdict"]
    if no_steps(t) or verdict.is_empty():
        return NO_STEPS
    if verdict["verdict"].str.contains("CPU-only").all():
        return NO_GPU_SYNC
    kind = pl.col("sync_type").is_in(COPY_TYPES)
    origin = float(t.get("@origin_us") or 0.0)  # type: ignore[arg-type]
    syncs = t["syncs"].filter(
        pl.col("blocks_host") & (pl.col("blocked (us)") > 0) & (kind if copies else ~kind)
    )
    syncs = syncs.filter(pl.col("step").is_not_null())  # shares of the steps' time
    syncs = syncs.with_columns(
        pl.col("step").str.extract(r"#(\d+)").cast(pl.Int64).alias("step_n"),
        (pl.col("start (us)") - origin).alias("start_us"),
        (pl.col("start (us)") + pl.col("blocked (us)") - origin).alias("end_us"),
    )
    blocked = syncs.group_by("rank", maintain_order=True).agg(
        pl.col("blocked (us)").sum().alias("blocked"), pl.len().alias("calls")
    )
    per = (
        verdict.select("rank", "steps", pl.col("step time (us)").alias("total_us"))
        .join(blocked, on="rank", how="left")
        .with_columns(pl.col("blocked").fill_null(0.0), pl.col("calls").fill_null(0))
        .with_columns(
            (100 * pl.col("blocked") / pl.col("total_us")).alias("pct"),
            (pl.col("blocked") / pl.col("steps")).alias("per_step"),
            (pl.col("total_us") / pl.col("steps")).alias("step_us"),
        )
        .sort(["pct", "rank"], descending=[True, False], maintain_order=True)
    )
    return syncs, per


def _blocked(
    t: Tables, th: Thresholds, copies: bool
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any], list[int]] | str:
    """`_sync_rows`, with the worst rank's row and the ranks blocked past `th.info` (what
    sync.host and memcpy.pageable both start from), or why there is nothing to measure."""
    made = _sync_rows(t, copies)
    if isinstance(made, str):
        return made
    syncs, per = made
    fired = per.filter((pl.col("pct") > th.info) & (pl.col("blocked") > 0))["rank"].to_list()
    return syncs, per, per.row(0, named=True), fired


def _where(r: dict[str, object]) -> str:
    """A sync's place as the sync finder gives it: call site, module, operator, and in
    backward the forward op that made it."""
    parts = [str(r["call"])]
    if r.get("operator"):
        parts.append(f"in {r['operator']}")
    if r.get("call_site"):
        parts.append(f"at {r['call_site']}")
    elif r.get("module"):
        parts.append(f"in module {r['module']}")
    if r.get("forward_op"):
        parts.append(f"(backward of {r['forward_op']})")
    return " ".join(parts)


def _sync_evidence(syncs: pl.DataFrame) -> pl.DataFrame:
    top = syncs.sort("blocked (us)", descending=True, maintain_order=True).head(6)
    labels = [
        f"rank {r['rank']} step {r['step_n'] if r['step_n'] is not None else '-'}: "
        f"{_where(r)} blocked {r['blocked (us)']:.0f} us"
        for r in top.iter_rows(named=True)
    ]
    return evidence_frame(
        top.select(
            pl.lit("syncs").alias("view"),
            pl.lit("syncs").alias("table"),
            "rank",
            pl.col("step_n").alias("step"),
            pl.col("call").alias("event"),
            "start_us",
            "end_us",
        ).with_columns(pl.Series("label", labels, dtype=pl.String))
    )


def _top_places(syncs: pl.DataFrame, rank: int, n: int = 2) -> str:
    keys = ["call", "operator", "call_site", "module", "forward_op"]
    places = (
        syncs.filter(pl.col("rank") == rank)
        .group_by(keys, maintain_order=True)
        .agg(pl.col("blocked (us)").sum(), pl.len().alias("n"))
        .sort("blocked (us)", descending=True, maintain_order=True)
        .head(n)
    )
    return "; ".join(
        f"{_where(r)}: {fmt_us(r['blocked (us)'])} in {r['n']} calls"
        for r in places.iter_rows(named=True)
    )


def _sync_host(t: Tables, th: Thresholds) -> RuleResult:
    made = _blocked(t, th, copies=False)
    if isinstance(made, str):
        return abstain(made)
    syncs, per, worst, fired = made
    rank = worst["rank"]
    advice = (
        f"rank {rank}'s host waits for the GPU {fmt_us(worst['per_step'])} per step "
        f"({worst['pct']:.1f}% of its step): {_top_places(syncs, rank) or 'no call named'}: "
        "take the sync out of the step (no .item(), .cpu(), print or Python if on a GPU "
        "tensor there; log every N steps; keep values on the GPU), or let the GPU run "
        "ahead (non_blocking copies, torch.cuda.Event without synchronize)"
    )
    return RuleResult(
        value=worst["pct"],
        at_stake_us=worst["per_step"],
        step_us=worst["step_us"],
        advice=advice,
        ranks=ranks_text(fired, per.height),
        evidence=_sync_evidence(syncs.filter(pl.col("rank").is_in(fired or [rank]))),
        cap=None if worst["per_step"] >= SYNC_FLOOR_US else "info",
    )


SYNC_HOST = Rule(
    id="sync.host",
    title="The host blocks waiting for the GPU",
    metric="host blocked in syncs (% of step time)",
    thresholds=Thresholds(info=1, warn=2, fail=10),
    needs=(STEPS, STEP_NUMBERS, "syncs", "sync_verdict"),
    evaluate=_sync_host,
)


def _pageable(t: Tables, th: Thresholds) -> RuleResult:
    made = _blocked(t, th, copies=True)
    if isinstance(made, str):
        return abstain(made)
    syncs, per, worst, fired = made
    rank = worst["rank"]
    steps = worst["steps"] or 1
    advice = (
        f"on rank {rank}, {worst['calls'] / steps:.0f} host-device copies per step are "
        f"synchronous or into pageable memory and block the host {fmt_us(worst['per_step'])} "
        f"per step ({worst['pct']:.1f}% of its step): "
        f"{_top_places(syncs, rank) or 'no call named'}: copy through pinned memory "
        "(DataLoader pin_memory=True, tensor.pin_memory()) with non_blocking=True, and read "
        "results back a step later or less often"
    )
    return RuleResult(
        value=worst["pct"],
        at_stake_us=worst["per_step"],
        step_us=worst["step_us"],
        advice=advice,
        ranks=ranks_text(fired, per.height),
        evidence=_sync_evidence(syncs.filter(pl.col("rank").is_in(fired or [rank]))),
    )


PAGEABLE = Rule(
    id="memcpy.pageable",
    title="Copies that block the host (pageable or synchronous)",
    metric="host blocked in copies inside steps (% of step time)",
    thresholds=Thresholds(info=0.5, warn=2, fail=10),
    needs=(STEPS, STEP_NUMBERS, "syncs", "sync_verdict"),
    evaluate=_pageable,
)

RULES = [DATALOADER, SYNC_HOST, PAGEABLE]
