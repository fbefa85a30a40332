"""Collectives per process group, stream, step and layer, and how much of each computation
hides: what FSDP's all-gathers and reduce-scatters cost, and where they serialise.

Every NCCL kernel is taken with its launch's module and step (`kernel_owners`) and its
collective args (`Collective name`, `Process Group Name`, by External id, as `collectives`
reads them). Its hidden time is the part that runs while a computation kernel (any kernel
that is not NCCL's) runs on the rank: the union of those, measured by one as-of join
(`exposed_comm.covered_before`). `collectives_hidden` sums calls, time, hidden and exposed
time per rank, process group, stream, kind, step and module (the layer).

FSDP prefetches the next layer's all-gather while a reduce-scatter runs; when both run on
one stream they serialise (the reduce-scatter waits behind the all-gather, or the other way
round) and the prefetch stops hiding. `collective_streams` gives per rank and stream the
collective kinds on it and flags a stream that carries both all-gathers and reduce-scatters.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import intervals
from hta_tui.analysis.comm_kinds import NCCL_KERNEL, kind_of
from hta_tui.analysis.exposed_comm import covered_before
from hta_tui.analysis.hta_view import job_cached, us
from hta_tui.analysis.kernel_owners import kernel_owners
from hta_tui.analysis.per_rank import tagged

HIDDEN_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "pg": pl.String(),  # process group name ("0" when the trace does not say)
    "stream": pl.Int64(),
    "kind": pl.String(),  # all_gather, reduce_scatter, all_reduce...
    "step": pl.Int64(),  # ProfilerStep#N around the launch; null outside steps
    "module": pl.String(),  # innermost nn.Module around the launch (the layer)
    "calls": pl.UInt32(),
    "time (us)": pl.Float64(),
    "hidden (us)": pl.Float64(),  # while a computation kernel ran
    "exposed (us)": pl.Float64(),
    "hidden_pct": pl.Float64(),
}

STREAM_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "stream": pl.Int64(),
    "kinds": pl.String(),  # the collective kinds on the stream, ", "-joined
    "calls": pl.UInt32(),
    "time (us)": pl.Float64(),
    "exposed (us)": pl.Float64(),
    "serialised": pl.Boolean(),  # all-gathers and reduce-scatters share this stream
    "verdict": pl.String(),
}

_STEP_RE = r"^ProfilerStep\s*#\s*(\d+)"


def _collectives(ranks: Mapping[int, pl.DataFrame], owners: pl.DataFrame) -> pl.DataFrame:
    """The ranks' NCCL kernels (`owners`: their kernels, `rank` first): rank, pg, stream,
    kind, step, module, start, end."""
    names = owners.select(pl.col("name").unique())
    nccl = names.filter(pl.col("name").str.contains(NCCL_KERNEL))["name"]
    comm = owners.filter(pl.col("name").is_in(nccl.implode()))
    if comm.is_empty():
        return pl.DataFrame()
    events = tagged([(r, ev) for r, ev in sorted(ranks.items())])
    ext = events.select("rank", "idx", "external_id")
    args = (
        events.lazy()
        .filter(pl.col("coll_name").is_not_null() & pl.col("external_id").is_not_null())
        .group_by("rank", "external_id")
        .agg(pl.col("coll_name").drop_nulls().first(), pl.col("pg_name").drop_nulls().first())
        .collect()
    )
    return (
        comm.join(ext, on=["rank", "idx"], how="left", maintain_order="left")
        .join(args, on=["rank", "external_id"], how="left", maintain_order="left")
        .select(
            "rank",
            pl.col("pg_name").cast(pl.String).fill_null("0").alias("pg"),
            "stream",
            kind_of(pl.col("coll_name").fill_null(pl.col("name"))).alias("kind"),
            pl.col("step").str.extract(_STEP_RE, 1).cast(pl.Int64).alias("step"),
            "module",
            pl.col("ts").alias("start"),
            (pl.col("ts") + pl.col("dur")).alias("end"),
        )
    )


def _compute_union(owners: pl.DataFrame) -> pl.LazyFrame:
    """Per rank, the disjoint intervals where a kernel other than NCCL's runs."""
    comp = owners.filter(~pl.col("name").str.contains(NCCL_KERNEL).fill_null(False)).select(
        "rank", pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur")).alias("end")
    )
    return intervals.merged(comp, by="rank").sort("rank", "start")


def _hidden(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Every NCCL kernel with `__dur` and `__hidden` (ns): every rank's at once (`rank` in
    every key), once per job (both tables read it)."""
    return job_cached(ranks, "collectives_hidden", lambda: _hidden_of(ranks))


def _hidden_of(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    owners = tagged([(r, kernel_owners(ev)) for r, ev in sorted(ranks.items())])
    if owners.is_empty():
        return pl.DataFrame()
    owners = owners.filter(pl.col("kind") == "kernel")
    comm = _collectives(ranks, owners)
    if comm.is_empty():
        return pl.DataFrame()
    comp = _compute_union(owners)
    lazy = covered_before(comm.lazy(), comp, "start", "__cs")
    lazy = covered_before(lazy, comp, "end", "__ce")
    return lazy.with_columns(
        (pl.col("end") - pl.col("start")).alias("__dur"),
        (pl.col("__ce") - pl.col("__cs")).alias("__hidden"),
    ).collect()


def collectives_hidden(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Per rank, process group, stream, kind, step and module (`HIDDEN_COLUMNS`): calls,
    time, the part computation hides and the exposed rest; most exposed first."""
    kernels = _hidden(ranks)
    if kernels.is_empty():
        return pl.DataFrame(schema=HIDDEN_COLUMNS)
    keys = ["rank", "pg", "stream", "kind", "step", "module"]
    return (
        kernels.group_by(keys)
        .agg(
            pl.len().alias("calls"),
            us(pl.col("__dur").sum()).alias("time (us)"),
            us(pl.col("__hidden").sum()).alias("hidden (us)"),
        )
        .with_columns(
            (pl.col("time (us)") - pl.col("hidden (us)")).alias("exposed (us)"),
            pl.when(pl.col("time (us)") > 0)
            .then(100 * pl.col("hidden (us)") / pl.col("time (us)"))
            .alias("hidden_pct"),
        )
        .cast(HIDDEN_COLUMNS)
        .select(list(HIDDEN_COLUMNS))
        .sort(
            ["rank", "exposed (us)", "pg", "stream", "kind", "step", "module"],
            descending=[False, True, False, False, False, False, False],
            nulls_last=True,
        )
    )


def collective_streams(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Per rank and stream (`STREAM_COLUMNS`): the collective kinds on it, their calls, time
    and exposed time, and whether all-gathers and reduce-scatters serialise on it."""
    kernels = _hidden(ranks)
    if kernels.is_empty():
        return pl.DataFrame(schema=STREAM_COLUMNS)
    kinds = pl.col("kind").unique().sort()
    both = kinds.is_in(["all_gather", "reduce_scatter"]).sum() == 2
    table = kernels.group_by("rank", "stream").agg(
        kinds.str.join(", ").alias("kinds"),
        pl.len().alias("calls"),
        us(pl.col("__dur").sum()).alias("time (us)"),
        us((pl.col("__dur") - pl.col("__hidden")).sum()).alias("exposed (us)"),
        both.alias("serialised"),
    )
    verdict = (
        pl.when("serialised")
        .then(
            pl.format(
                "all-gathers and reduce-scatters serialise on stream {}: one waits behind "
                "the other; give them a stream each",
                pl.col("stream"),
            )
        )
        .otherwise(pl.format("{} on its own stream", pl.col("kinds")))
    )
    return (
        table.with_columns(verdict.alias("verdict"))
        .cast(STREAM_COLUMNS)
        .select(list(STREAM_COLUMNS))
        .sort("rank", "stream")
    )
