"""Blocked time per module, operator and call site, and a one-line verdict per rank.

The table answers "which line makes the host wait": syncs that share a rank, phase, module,
operator and call site are one row, sorted by blocked time. Shares are of the rank's step
time as the step-time view shows it (`step_breakdown.used_steps`: each ProfilerStep moved to
the GPU work it launched, the plugin's trailing steps without GPU work left out; without
steps, the host ops' span), so a verdict and the step-time view never give one step two
lengths; per-step figures divide by the number of those steps.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import polars as pl

from hta_tui.analysis import step_breakdown
from hta_tui.analysis.hta_view import us
from hta_tui.analysis.per_rank import divided_as_alone, ranks_events
from hta_tui.analysis.rank_column import parts
from hta_tui.analysis.syncs import SYNC_COLUMNS, syncs

GROUP_KEYS: tuple[str, ...] = ("rank", "phase", "module", "operator", "call_site")

SUMMARY_COLUMNS: dict[str, pl.DataType] = {
    **{k: SYNC_COLUMNS[k] for k in GROUP_KEYS},
    "count": pl.UInt32(),
    "blocked (us)": pl.Float64(),
    "mean (us)": pl.Float64(),
    "max (us)": pl.Float64(),
    "per step (us)": pl.Float64(),
    "step_pctg": pl.Float64(),
    "calls": pl.String(),  # the host calls, e.g. cudaStreamSynchronize
}

VERDICT_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "syncs": pl.UInt32(),
    "blocked (us)": pl.Float64(),
    "step time (us)": pl.Float64(),
    "steps": pl.UInt32(),
    "blocked_pctg": pl.Float64(),
    "call_sites": pl.UInt32(),
    "verdict": pl.String(),
}


def step_time(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> pl.DataFrame:
    """rank, steps, step_ns: the rank's steps as the step-time view counts them, and their
    summed time (a rank without any: one step of 0 ns)."""
    schema = {"rank": pl.Int64(), "steps": pl.UInt32(), "step_ns": pl.Int64()}
    used = step_breakdown.used_steps(ranks, tb_compat=tb_compat)
    per_rank = (
        used.lazy()
        .group_by("rank")
        .agg(pl.len().alias("steps"), (pl.col("end") - pl.col("start")).sum().alias("step_ns"))
    )
    every = pl.DataFrame({"rank": sorted(ranks)}, schema={"rank": pl.Int64()})
    return (  # (one query, not four)
        every.lazy()
        .join(per_rank, on="rank", how="left")
        .select(
            "rank",
            pl.col("steps").fill_null(1),
            pl.col("step_ns").fill_null(0),
        )
        .cast(schema)
        .collect()
    )


def sync_summary(syncs: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Syncs grouped by GROUP_KEYS (SUMMARY_COLUMNS), largest blocked time first."""
    if syncs.is_empty():
        return pl.DataFrame(schema=SUMMARY_COLUMNS)
    blocked = pl.col("blocked (us)")
    out = (  # (one query, not six)
        syncs.lazy()
        .group_by(list(GROUP_KEYS))
        .agg(
            pl.len().cast(pl.UInt32).alias("count"),
            blocked.sum().alias("blocked (us)"),
            blocked.mean().alias("mean (us)"),
            blocked.max().alias("max (us)"),
            pl.col("call").unique().sort().str.join(", ").alias("calls"),
        )
        .join(steps.lazy(), on="rank", how="left")
        .with_columns(
            (pl.col("blocked (us)") / pl.col("steps")).alias("per step (us)"),
            pl.when(pl.col("step_ns") > 0)
            .then(100 * pl.col("blocked (us)") / us(pl.col("step_ns")))
            .alias("step_pctg"),
        )
    )
    return (
        out.cast(SUMMARY_COLUMNS)
        .select(list(SUMMARY_COLUMNS))
        .sort(["rank", "blocked (us)", "count"], descending=[False, True, True], nulls_last=True)
        .collect()
    )


def sync_verdict(
    summary: pl.DataFrame, steps: pl.DataFrame, cpu_only: Collection[int] = ()
) -> pl.DataFrame:
    """One line per rank: the share of step time the host spent blocked, in how many call
    sites, and the largest of them; a rank in `cpu_only` ran nothing on a GPU, so it had
    none to wait for (not "never waited": other views call it a CPU-only trace)."""
    if steps.is_empty():
        return pl.DataFrame(schema=VERDICT_COLUMNS)
    blocking = summary.filter(pl.col("blocked (us)") > 0)
    per_rank = blocking.group_by("rank").agg(
        pl.col("count").sum().alias("syncs"),
        pl.col("blocked (us)").sum(),
        pl.len().cast(pl.UInt32).alias("call_sites"),
        pl.col("operator").first().alias("top_op"),
        pl.coalesce("call_site", "module").first().alias("top_where"),
        pl.col("phase").first().alias("top_phase"),
    )
    rows = steps.join(per_rank, on="rank", how="left").with_columns(
        pl.col("syncs").fill_null(0),
        pl.col("blocked (us)").fill_null(0.0),
        pl.col("call_sites").fill_null(0),
        # one row a rank: divided as the rank's one-row table alone (exactly)
        divided_as_alone(pl.col("step_ns"), 1000.0, pl.lit(True)).alias("step time (us)"),
    )
    pct = pl.when(pl.col("step_ns") > 0).then(
        100 * pl.col("blocked (us)") / pl.col("step time (us)")
    )
    rows = rows.with_columns(pct.alias("blocked_pctg"))
    where = pl.coalesce("top_where", pl.lit("an unknown call site"))
    verdict = (
        pl.when((pl.col("call_sites") == 0) & pl.col("rank").is_in(list(cpu_only)))
        .then(pl.lit("no GPU to wait for (a CPU-only trace)"))
        .when(pl.col("call_sites") == 0)
        .then(pl.lit("the host never waited for the GPU"))
        .otherwise(
            pl.format(
                "{}% of step time is the host waiting in {} call site{}; the largest: {} in {}, {}",
                pl.col("blocked_pctg").fill_null(0).round(1),
                pl.col("call_sites"),
                pl.when(pl.col("call_sites") == 1).then(pl.lit("")).otherwise(pl.lit("s")),
                pl.coalesce("top_op", pl.lit("no operator")),
                where,
                pl.col("top_phase"),
            )
        )
    )
    return (
        rows.with_columns(verdict.alias("verdict"))
        .cast(VERDICT_COLUMNS)
        .select(list(VERDICT_COLUMNS))
        .sort("rank")
    )


def sync_tables(
    ranks: Mapping[int, pl.DataFrame],
    flows: Mapping[int, pl.DataFrame] | None = None,
    *,
    tb_compat: bool = False,
) -> dict[str, pl.DataFrame]:
    """The report's three tables: syncs, sync_summary, sync_verdict (`tb_compat`: shares of
    the steps the step-time view shows in that mode)."""
    table = syncs(ranks, flows)
    steps = step_time(ranks, tb_compat=tb_compat)
    # Each rank's summary from its rows alone: polars divides a one-row column and a longer
    # one differently in the last bit, so over several ranks at once (a batch of tiny
    # ranks, the app's every rank) each rank still gets its figures made alone. Only the
    # ranks with a sync have a summary (most tiny ranks have none).
    by_rank = table.partition_by("rank", as_dict=True) if table.height else {}
    # (a batch's steps, rank after rank: cut as slices, no query a rank)
    steps_of = parts(steps, "rank", keep=True) if by_rank else {}
    summaries = [
        sync_summary(by_rank[key], steps_of.get(key, steps.clear())) for key in sorted(by_rank)
    ]
    summary = _joined(summaries, SUMMARY_COLUMNS)
    return {
        "syncs": table,
        "sync_summary": summary,
        "sync_verdict": sync_verdict(summary, steps, cpu_only_ranks(ranks)),
    }


def _joined(frames: list[pl.DataFrame], schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """The ranks' tables one after another (the columns when none has a row)."""
    full = [f for f in frames if f.height]
    return pl.concat(full) if full else pl.DataFrame(schema=dict(schema))


def cpu_only_ranks(ranks: Mapping[int, pl.DataFrame]) -> list[int]:
    """Ranks with no event on a GPU stream (several ranks: one query over every rank's
    events, not one a rank)."""
    if len(ranks) < 2:
        return [r for r, f in ranks.items() if f.select(pl.col("stream").is_null().all()).item()]
    on_gpu = ranks_events(ranks).lazy().filter(pl.col("stream").is_not_null()).select("rank")
    some = set(on_gpu.unique().collect()["rank"].to_list())
    return [r for r in ranks if r not in some]
