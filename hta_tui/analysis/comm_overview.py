"""Per rank and step: computation, overlapping, communication and other time, and the wait
vs transfer split of communication, with every collective this project recognises.

The formulas are the TensorBoard plugin's Distributed view (`comm_plugin`); what counts as
communication is not. The plugin knows five `nccl:`/`gloo:` op names and takes a
collective's GPU part from kernels of the op's own External id, which newer traces never
have, so it times the CPU-side op instead. Here communication is every collective call of
`collectives.calls` (NCCL kernels on GPU ranks, backend ops on CPU ranks) and computation
every other kernel (or, on a rank without kernels, every CPU op that is not part of a
collective). The wait / transfer split is per call: its wait for the last rank, the rest.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import collectives
from hta_tui.analysis.comm_kinds import COLLECTIVE_OP, NCCL_KERNEL
from hta_tui.analysis.comm_plugin import (
    DATA_LOADER,
    breakdown_query,
    spans,
    steps_of,
    with_means,
)

_US = 1000.0
#: CPU ops that belong to a collective rather than to computation.
_COMM_CPU = COLLECTIVE_OP + r"|^c10d::|^record_param_comms$|^ProfilerStep#"


def comm_comp_per_rank(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """rank, step ("all" = per-step mean), computation, overlapping, communication, other (us)."""
    calls = collectives.calls(ranks)
    queries = []
    for rank, ev in sorted(ranks.items()):
        steps = steps_of(ev)
        if steps.is_empty():
            queries.append(None)
            continue
        comm = calls.filter(pl.col("rank") == rank).select(
            pl.col("ts").alias("start"), pl.col("end")
        )
        kernels = _without(ev, "kernel", NCCL_KERNEL)
        if kernels.is_empty():
            kernels = _without(ev, "cpu_op", _COMM_CPU, DATA_LOADER)
        queries.append(breakdown_query(rank, steps, spans(kernels), comm))
    return with_means(queries, truncate=False)


def _without(ev: pl.DataFrame, kind: str, *patterns: str) -> pl.DataFrame:
    """ts, dur of the rank's events of `kind` whose names match none of `patterns` (the
    patterns tried on the distinct names only)."""
    rows = ev.lazy().filter(pl.col("kind") == kind).select("name", "ts", "dur").collect()
    names = rows.select(pl.col("name").unique())
    for pattern in patterns:
        names = names.filter(~pl.col("name").str.contains(pattern))
    return rows.filter(pl.col("name").is_in(names["name"].implode())).select("ts", "dur")


def wait_transfer_per_step(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """rank, step (null outside steps; "all" = per-step mean), transfer, synchronizing (us):
    the sums of the rank's calls' transfer and wait times."""
    return wait_transfer_of(collectives.calls(ranks))


def wait_transfer_of(calls: pl.DataFrame) -> pl.DataFrame:
    """`wait_transfer_per_step` from the matched calls (`collectives.calls`)."""
    per_step = (
        calls.group_by("rank", "step")
        .agg(
            (pl.col("transfer").sum() / _US).alias("transfer"),
            (pl.col("wait").sum() / _US).alias("synchronizing"),
        )
        .with_columns(pl.col("step").cast(pl.String))
        .sort("rank", "step", nulls_last=True)
    )
    means = per_step.group_by("rank").agg(
        pl.lit("all").alias("step"),
        pl.col("transfer").mean(),
        pl.col("synchronizing").mean(),
    )
    return pl.concat([per_step, means]).sort("rank", maintain_order=True)
