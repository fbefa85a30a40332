"""Communication op statistics per rank and kind, and who holds the others back.

Both read the matched calls of `collectives.calls`. Bandwidth uses the transfer time (the
part of a call after every rank arrived), so waiting for a late rank does not pass for a slow
link: algorithm bandwidth = bytes / transfer time, bus bandwidth = that x NCCL's factor for
the kind among the group's ranks (`comm_kinds.bus_factor`).

A straggler, here, is the rank that arrives last at a collective instance; what its lateness
cost is the sum of how long after every other rank it arrived in that instance (`late_by`).
The ranking adds that up per rank and names its costliest instance, so it explains itself.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import collectives
from hta_tui.analysis.comm_kinds import bus_factor

_US = 1000.0


def comm_ops_stats(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """rank, kind, calls, total/mean bytes, total/mean latency, wait and transfer (us),
    algorithm and bus bandwidth (GB/s; null without sizes)."""
    return comm_ops_stats_of(collectives.calls(ranks))


def comm_ops_stats_of(calls: pl.DataFrame) -> pl.DataFrame:
    """`comm_ops_stats` from the matched calls (`collectives.calls`)."""
    n = pl.coalesce("group_size", "ranks_in_instance")
    return (
        calls.with_columns((pl.col("end") - pl.col("ts")).alias("latency"), n.alias("n"))
        .group_by("rank", "kind")
        .agg(
            pl.len().cast(pl.Int64).alias("calls"),
            pl.col("bytes").sum().alias("total_bytes"),
            pl.col("bytes").mean().alias("mean_bytes"),
            (pl.col("latency").sum() / _US).alias("total_latency_us"),
            (pl.col("latency").mean() / _US).alias("mean_latency_us"),
            (pl.col("wait").sum() / _US).alias("wait_us"),
            (pl.col("transfer").sum() / _US).alias("transfer_us"),
            pl.col("n").max(),
            pl.col("bytes").is_not_null().any().alias("sized"),
        )
        .with_columns(
            pl.when(pl.col("sized") & (pl.col("transfer_us") > 0))
            .then(pl.col("total_bytes") / pl.col("transfer_us") / 1e3)
            .alias("algbw_GBps")
        )
        .with_columns(
            (pl.col("algbw_GBps") * bus_factor(pl.col("kind"), pl.col("n"))).alias("busbw_GBps"),
            pl.when(pl.col("sized")).then(pl.col("total_bytes")).alias("total_bytes"),
        )
        .drop("n", "sized")
        .sort("rank", "kind")
    )


def collective_instances(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """One row per collective instance (process group, sequence): kind, step, ranks seen, the
    last rank, how late it was after the first (us) and what its lateness cost the others
    (sum of how long after them it arrived, us), the longest transfer (us) and the size."""
    return collective_instances_of(collectives.calls(ranks))


def collective_instances_of(calls: pl.DataFrame) -> pl.DataFrame:
    """`collective_instances` from the matched calls (`collectives.calls`)."""
    return (
        calls.group_by("pg", "seq")
        .agg(
            pl.col("kind").first(),
            pl.col("step").sort_by("arrival").last(),
            pl.len().cast(pl.Int64).alias("ranks"),
            pl.col("last_rank").first(),
            ((pl.col("arrival").max() - pl.col("arrival").min()) / _US).alias("spread_us"),
            (pl.col("late_by").sum() / _US).alias("cost_us"),
            (pl.col("transfer").max() / _US).alias("transfer_us"),
            pl.col("bytes").max(),
        )
        .sort("pg", "seq")
    )


def collective_last_calls(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Per collective instance (pg, seq): the call of the rank that arrived last, the moment
    everyone could go on: last_ts (ns, as in the file), last_dur (ns), last_name (the
    event's name). Where a table of instances opens the timeline."""
    return collective_last_calls_of(collectives.calls(ranks))


def collective_last_calls_of(calls: pl.DataFrame) -> pl.DataFrame:
    """`collective_last_calls` from the matched calls (`collectives.calls`)."""
    return (
        calls.filter(pl.col("rank") == pl.col("last_rank"))
        .select(
            "pg",
            "seq",
            pl.col("ts").alias("last_ts"),
            (pl.col("end") - pl.col("ts")).alias("last_dur"),
            pl.col("name").alias("last_name"),
        )
        .unique(["pg", "seq"], keep="first", maintain_order=True)
    )


def collective_stragglers(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Per rank that arrived last anywhere: how often, what it cost the others in total (us
    and % of all waiting), its costliest instance, and one sentence saying so; costliest
    first."""
    return collective_stragglers_of(collective_instances(ranks))


def collective_stragglers_of(instances: pl.DataFrame) -> pl.DataFrame:
    """`collective_stragglers` from `collective_instances`' table."""
    # alone, or all arriving at once, nobody waits: no one to blame
    inst = instances.filter((pl.col("ranks") > 1) & (pl.col("cost_us") > 0))
    all_wait = inst["cost_us"].sum() if not inst.is_empty() else 0.0
    worst = pl.col("cost_us").arg_max()
    table = (
        inst.group_by("last_rank")
        .agg(
            pl.len().cast(pl.Int64).alias("times_last"),
            pl.col("cost_us").sum().alias("cost_us"),
            pl.col("kind").get(worst).alias("worst_kind"),
            pl.col("pg").get(worst).alias("worst_pg"),
            pl.col("seq").get(worst).alias("worst_seq"),
            pl.col("step").get(worst).alias("worst_step"),
            pl.col("cost_us").max().alias("worst_cost_us"),
        )
        .rename({"last_rank": "rank"})
        .with_columns(
            (100 * pl.col("cost_us") / all_wait if all_wait else pl.lit(None, pl.Float64)).alias(
                "share_pctg"
            ),
            pl.lit(inst.height, pl.Int64).alias("instances"),
        )
        .sort("cost_us", "rank", descending=[True, False])
    )
    return table.with_columns(_explain().alias("why"))


def _explain() -> pl.Expr:
    ms = (pl.col("cost_us") / 1000).round(2).cast(pl.String)
    worst_ms = (pl.col("worst_cost_us") / 1000).round(2).cast(pl.String)
    step = pl.when(pl.col("worst_step").is_not_null()).then(
        pl.format(" in step {}", pl.col("worst_step"))
    )
    return pl.format(
        "rank {} arrived last at {} of {} collectives; the others waited {} ms for it; "
        "worst: {} #{} of group {}{}, {} ms",
        "rank",
        "times_last",
        "instances",
        ms,
        "worst_kind",
        "worst_seq",
        "worst_pg",
        step.fill_null(""),
        worst_ms,
    )
