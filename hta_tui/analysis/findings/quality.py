"""data.quality: flaws in the trace that make other rules' numbers wrong, so those abstain.

- unexpanded graph launches: a CUDA graph launch whose kernels the trace does not hold (the
  profiler did not expand it): kernel time, utilization and launch numbers miss them;
- mixed spans: ranks whose ProfilerSteps share no step number (files of different profiler
  windows): comparing ranks compares different moments;
- dropped events: events the parser could not use (the one-line reasons of the files);
- missing `cuda_sync` events: a GPU rank whose host synchronises (stream, event, device syncs,
  stream waits) without one `cuda_sync` event, which Kineto writes only when the profiler
  asks for them. HTA's critical path (the Critical path view) needs them for its sync edges
  and the Syncs view for the stream a sync waited on; no rule reads either: sync.host and
  memcpy.pageable read the host calls' durations, the same with or without them (tested),
  so this flaw makes no rule abstain and alone is said at info only.
"""

from __future__ import annotations

import re

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

QUALITY_ID = "data.quality"
FLAW_TEXT = {
    "graph": "CUDA graph launches without their kernels in the trace",
    "spans": "ranks from different profiler windows (no common step)",
    "dropped": "events dropped while parsing",
    "cuda_sync": "synchronising CUDA calls without their cuda_sync events",
}
#: Flaws no rule's numbers depend on: alone, they are said at info.
INFO_ONLY = frozenset({"cuda_sync"})
#: Host syncs Kineto pairs with a `cuda_sync` event (CUPTI's synchronization activity: CUDA
#: only, so a HIP call, which has no such event to ask for, is not counted).
PAIRED_SYNCS = ("stream_sync", "device_sync", "event_sync", "stream_wait_event")
SYNC_OPTION = (
    "experimental_config=torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)"
)


def missing_sync_events(syncs: pl.DataFrame) -> pl.DataFrame:
    """Ranks whose host synchronises with the GPU in CUDA calls Kineto pairs with a
    `cuda_sync` event, and not one such event: rank, calls (how many), names (the calls),
    and the first call's step, start and end (us, as in the trace)."""
    paired = (
        pl.col("sync_type").is_in(PAIRED_SYNCS)
        & pl.col("pid").is_not_null()
        & ~pl.col("call").str.starts_with("hip")
    )
    return (
        syncs.sort("rank", "start (us)", maintain_order=True)
        .group_by("rank", maintain_order=True)
        .agg(
            pl.col("sync_event").is_not_null().any().alias("has_events"),
            paired.sum().alias("calls"),
            pl.col("call").filter(paired).unique(maintain_order=True).alias("names"),
            pl.col("step").filter(paired).first(),
            pl.col("start (us)").filter(paired).first().alias("start"),
            (pl.col("start (us)") + pl.col("blocked (us)")).filter(paired).first().alias("end"),
        )
        .filter(~pl.col("has_events") & (pl.col("calls") > 0))
        .drop("has_events")
    )


def _sync_flaw(
    syncs: pl.DataFrame, origin: float
) -> tuple[list[int], list[dict[str, object]], str]:
    """The ranks, evidence rows (the first such call of each rank) and advice, or none."""
    missing = missing_sync_events(syncs)
    if missing.is_empty():
        return [], [], ""
    rows = []
    for r in missing.iter_rows(named=True):
        step = re.search(r"#(\d+)", r["step"] or "")
        names = ", ".join(r["names"][:2])
        rows.append(
            {
                "view": "syncs",
                "table": "syncs",
                "rank": r["rank"],
                "step": int(step.group(1)) if step else None,
                "event": r["names"][0],
                "start_us": r["start"] - origin,
                "end_us": r["end"] - origin,
                "label": f"rank {r['rank']}: {r['calls']} syncs ({names}), no cuda_sync event",
            }
        )
    calls = int(missing["calls"].sum())
    advice = (
        f"rank {','.join(map(str, missing['rank']))}: {calls} synchronising CUDA "
        f"call{'s' * (calls != 1)} "
        "without a cuda_sync event: the critical path misses their sync edges and the syncs "
        f"view the stream each waited on; profile with {SYNC_OPTION}"
    )
    return missing["rank"].to_list(), rows, advice


def _quality(t: Tables, th: Thresholds) -> RuleResult:
    attribution = t["kernel_attribution"]
    iterations = t["iterations"]
    meta = t.get("@meta") or {}
    if attribution.is_empty() and iterations.is_empty() and not meta:
        return abstain("nothing loaded")
    flaws: list[str] = []
    advice: list[str] = []
    ranks: list[int] = []
    rows: list[dict[str, object]] = []
    graph = attribution.filter(pl.col("graph_launches_without_kernels") > 0)
    if not graph.is_empty():
        flaws.append("graph")
        ranks += graph["rank"].to_list()
        for r in graph.iter_rows(named=True):
            n = r["graph_launches_without_kernels"]
            rows.append(
                {
                    "view": "kernels",
                    "table": "kernel_attribution",
                    "rank": r["rank"],
                    "event": "cudaGraphLaunch",
                    "label": f"rank {r['rank']}: {n} graph launches without kernels",
                }
            )
        advice.append(
            f"rank {','.join(map(str, graph['rank']))}: "
            f"{graph['graph_launches_without_kernels'].sum()}"
            " CUDA graph launches hold no kernels: profile with the graph's kernels expanded "
            "(a newer PyTorch / Kineto), or read GPU time as a lower bound"
        )
    steps = iterations.group_by("rank", maintain_order=True).agg(
        pl.col("iter").unique(maintain_order=True)
    )
    if steps.height > 1:
        common = set.intersection(*(set(s) for s in steps["iter"].to_list()))
        if not common:
            flaws.append("spans")
            ranks += steps["rank"].to_list()
            per = ", ".join(
                f"rank {r}: {min(s)}-{max(s)}"
                for r, s in sorted(zip(steps["rank"], steps["iter"].to_list(), strict=True))
            )
            advice.append(f"the ranks' ProfilerSteps do not overlap ({per}): pick one window")
    dropped = {
        r: m.get("dropped_events") for r, m in sorted(meta.items()) if m.get("dropped_events")
    }
    if dropped:
        flaws.append("dropped")
        ranks += list(dropped)
        for r, d in dropped.items():
            n = sum(d.values())
            why = ", ".join(f"{k} ({v})" for k, v in list(d.items())[:2])
            rows.append(
                {"view": "overview", "table": "files", "rank": r, "label": f"{n} dropped: {why}"}
            )
        advice.append(f"rank {','.join(map(str, dropped))} dropped events while parsing")
    syncs = t.get("syncs")
    if syncs is not None and not syncs.is_empty():
        origin = t.get("@origin_us") or 0.0
        flawed, found, said = _sync_flaw(syncs, float(origin))  # type: ignore[arg-type]
        if flawed:
            flaws.append("cuda_sync")
            ranks += flawed
            rows += found
            advice.append(said)
    every = max(len(meta), iterations["rank"].n_unique(), attribution.height)
    return RuleResult(
        value=float(len(flaws)),
        advice="; ".join(advice),
        ranks=ranks_text(ranks, every),
        evidence=evidence_frame(rows) if rows else None,
        flaws=tuple(flaws),
        cap="info" if flaws and set(flaws) <= INFO_ONLY else None,
    )


QUALITY = Rule(
    id=QUALITY_ID,
    title="Trace data the other rules cannot trust",
    metric="flaws found",
    thresholds=Thresholds(info=0, warn=0, fail=2),
    needs=("kernel_attribution", "iterations"),
    reads=("syncs",),
    evaluate=_quality,
)
