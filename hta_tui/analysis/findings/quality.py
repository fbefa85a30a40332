"""data.quality: flaws in the trace that make other rules' numbers wrong, so those abstain.

- unexpanded graph launches: a CUDA graph launch whose kernels the trace does not hold (the
  profiler did not expand it): kernel time, utilization and launch numbers miss them;
- mixed spans: ranks whose ProfilerSteps share no step number (files of different profiler
  windows): comparing ranks compares different moments;
- dropped events: events the parser could not use (the one-line reasons of the files).
"""

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

QUALITY_ID = "data.quality"
FLAW_TEXT = {
    "graph": "CUDA graph launches without their kernels in the trace",
    "spans": "ranks from different profiler windows (no common step)",
    "dropped": "events dropped while parsing",
}


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
    every = max(len(meta), iterations["rank"].n_unique(), attribution.height)
    return RuleResult(
        value=float(len(flaws)),
        advice="; ".join(advice),
        ranks=ranks_text(ranks, every),
        evidence=evidence_frame(rows) if rows else None,
        flaws=tuple(flaws),
    )


QUALITY = Rule(
    id=QUALITY_ID,
    title="Trace data the other rules cannot trust",
    metric="flaws found",
    thresholds=Thresholds(info=0, warn=0, fail=2),
    needs=("kernel_attribution", "iterations"),
    evaluate=_quality,
)
