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

import numpy as np
import polars as pl

from hta_tui.analysis import collectives, interval_arrays, intervals
from hta_tui.analysis.comm_kinds import COLLECTIVE_OP, NCCL_KERNEL
from hta_tui.analysis.comm_plugin import (
    _OVERLAP_SCHEMA,
    _STEP_RE,
    DATA_LOADER,
    breakdown_of,
    breakdown_query,
    is_python_cat,
    spans,
    steps_of,
    with_means,
)
from hta_tui.analysis.per_rank import batching, divided_as_alone, ranks_events

_US = 1000.0
#: CPU ops that belong to a collective rather than to computation.
_COMM_CPU = COLLECTIVE_OP + r"|^c10d::|^record_param_comms$|^ProfilerStep#"


def comm_comp_per_rank(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """rank, step ("all" = per-step mean), computation, overlapping, communication, other (us)."""
    if len(ranks) > 1:
        return _ranks_comm_comp(ranks)
    # the calls' extents only: each rank's own, before the matching across ranks (the same
    # rows; the matched table cost its window functions on a rank's part for nothing)
    calls = collectives.ranks_calls(ranks)
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


# --- every rank at once -------------------------------------------------------------------
# A tiny rank's rows alone cost ~36 polars queries; over a batch of ranks the same rows come
# from a few queries over every rank's events with a `rank` column (`per_rank.ranks_events`):
# the unions merged per rank in one query, each step's covered time by binary search on the
# rank's slice (numpy, no query); integer nanoseconds until the microseconds, divided in
# one query a rank (`breakdown_of`, collected together), as each rank alone divides them.


def _ranks_steps(events: pl.DataFrame) -> pl.DataFrame:
    """`steps_of` of every rank (rank, step, start, end), in rank and start order."""
    profiler = pl.col("name").str.starts_with("ProfilerStep#") & pl.col("kind").is_in(
        ["annotation", "cpu_op"]
    )
    named = (
        events.lazy()
        .filter(profiler)
        .select(
            "rank",
            pl.col("name").str.extract(_STEP_RE, 1).alias("step"),
            pl.col("ts").alias("start"),
            (pl.col("ts") + pl.col("dur")).alias("end"),
        )
        .sort("rank", "start", maintain_order=True)
        .collect()
    )
    cpu = pl.col("kind").is_in(["cpu_op", "python"]) & (
        (pl.col("kind") != "python") | is_python_cat()
    )
    unnamed = (
        events.lazy()
        .filter(cpu & ~pl.col("rank").is_in(named["rank"].unique().implode()))
        .group_by("rank")
        .agg(
            pl.lit("0").alias("step"),
            pl.col("ts").min().alias("start"),
            (pl.col("ts") + pl.col("dur")).max().alias("end"),
        )
        .drop_nulls("start")
        .collect()
    )
    both = pl.concat([named, unnamed.cast(named.schema)])  # type: ignore[arg-type]
    return both.sort("rank", maintain_order=True)


def _ranks_comp(events: pl.DataFrame) -> pl.DataFrame:
    """rank, start, end of each rank's computation: its kernels but NCCL's, or (none) its
    CPU ops but a collective's or the data loader's (patterns tried on distinct names)."""
    rows = (
        events.lazy()
        .filter(pl.col("kind").is_in(["kernel", "cpu_op"]))
        .select("rank", "kind", "name", "ts", "dur")
        .collect()
    )
    names = rows.select("kind", "name").unique()
    comm = pl.col("name").str.contains(NCCL_KERNEL)
    cpu_comm = pl.col("name").str.contains(_COMM_CPU) | pl.col("name").str.contains(DATA_LOADER)
    kept = names.filter(
        pl.when(pl.col("kind") == "kernel").then(~comm).otherwise(~cpu_comm).fill_null(False)
    ).with_columns(pl.lit(True).alias("__kept"))
    rows = rows.join(kept, on=["kind", "name"], how="left", maintain_order="left").filter(
        pl.col("__kept").fill_null(False)
    )
    with_kernels = rows.filter(pl.col("kind") == "kernel")["rank"].unique().implode()
    own = (pl.col("kind") == "kernel") | ~pl.col("rank").is_in(with_kernels)
    return rows.filter(own).select(
        "rank", pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur")).alias("end")
    )


def _ranks_comm_comp(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """`comm_comp_per_rank` of several ranks, made over them at once."""
    events = ranks_events(ranks)
    if not events.width:
        return pl.DataFrame(schema=_OVERLAP_SCHEMA)
    steps = _ranks_steps(events)
    if steps.is_empty():
        return pl.DataFrame(schema=_OVERLAP_SCHEMA)
    comp = _ranks_comp(events)
    comm = (
        collectives.calls(ranks)
        .lazy()
        .select(pl.col("rank").cast(pl.Int64), pl.col("ts").alias("start"), pl.col("end"))
    )
    comp_m, comm_m = pl.collect_all(
        [intervals.merged(comp, by="rank"), intervals.merged(comm, by="rank")]
    )
    union_m = intervals.merged(
        pl.concat([comp_m, comm_m], how="vertical_relaxed"), by="rank"
    ).collect()
    step_ranks = steps["rank"].to_numpy()
    lo, hi = steps["start"].to_numpy(), steps["end"].to_numpy()
    covered = {}
    for name, merged in (("comp", comp_m), ("comm", comm_m), ("union", union_m)):
        covered[name] = _covered_by_rank(merged, step_ranks, lo, hi)
    per_row = steps.with_columns(
        (pl.col("end") - pl.col("start")).alias("total"),
        *(pl.Series(n, c) for n, c in covered.items()),
    )
    # each rank's covered time per step name (steps of one name add up), joined back
    parts = per_row.group_by("rank", "step", maintain_order=True).agg(
        pl.col("comp").sum(), pl.col("comm").sum(), pl.col("union").sum()
    )
    t = per_row.drop("comp", "comm", "union").join(
        parts, on=["rank", "step"], how="left", maintain_order="left"
    )
    per_step = _breakdown_at_once(t) if batching() else None
    if per_step is None:
        # the divisions rank by rank, in one collect: polars divides a column by a number
        # as its length says (`per_rank.divided_as_alone`)
        by_rank = t.partition_by("rank", as_dict=True, maintain_order=True)
        queries = [
            breakdown_of(rank, part.drop("rank", "start", "end").lazy())
            for (rank,), part in by_rank.items()
        ]
        per_step = pl.concat(pl.collect_all(queries))
    values = ["computation", "overlapping", "communication", "other"]
    means = per_step.group_by("rank", maintain_order=True).agg(
        pl.lit("all").alias("step"), *((pl.col(c).sum() / pl.len()).alias(c) for c in values)
    )
    return pl.concat([per_step, means]).sort("rank", maintain_order=True)


def _breakdown_at_once(t: pl.DataFrame) -> pl.DataFrame | None:
    """`breakdown_of` of every rank of a batch's table (ranks in order) in one query: each
    rank's divisions as on its own table (`divided_as_alone`: a rank of one step divides
    exactly, a longer one by the reciprocal, on the analyses' in-memory engine), the rank
    column flagged sorted as a literal's (the means below sum each rank's slice, as they
    sum its own chunk). None when the ranks are not in order (rank by rank then)."""
    ranks = t["rank"]
    if ranks.null_count() or not ranks.dtype.is_integer():
        return None
    values = ranks.to_numpy()
    if values.size and (np.diff(values) < 0).any():
        return None
    alone = pl.len().over("rank") == 1
    ov = pl.col("comp") + pl.col("comm") - pl.col("union")
    parts = {
        "computation": pl.col("comp") - pl.col("ov"),
        "overlapping": pl.col("ov"),
        "communication": pl.col("comm") - pl.col("ov"),
        "other": pl.col("total") + pl.col("ov") - pl.col("comp") - pl.col("comm"),
    }
    out = (
        t.drop("start", "end")
        .lazy()
        .fill_null(0)
        .with_columns(ov.alias("ov"))
        .select(
            pl.col("rank").cast(pl.Int64),
            "step",
            *(divided_as_alone(e, _US, alone).alias(n) for n, e in parts.items()),
        )
        .collect()
    )
    return out.with_columns(out["rank"].set_sorted())


def _covered_by_rank(
    merged: pl.DataFrame, step_ranks: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Each step's covered time by its rank's merged intervals (`intervals.covered_within`
    on the rank's slices: rows of both in rank order), every rank in one pass over their
    times laid one rank after another (`interval_arrays.laid_out`; a rank at a time when
    that would overflow)."""
    if merged.is_empty():
        return np.zeros(len(lo), dtype=np.int64)
    ranks = merged["rank"].to_numpy()
    starts, ends = merged["start"].to_numpy(), merged["end"].to_numpy()
    laid = interval_arrays.laid_out([ranks, ranks, step_ranks, step_ranks], [starts, ends, lo, hi])
    if laid is not None:
        mine = pl.DataFrame([pl.Series("start", laid[0]), pl.Series("end", laid[1])])
        return intervals.covered_within(mine, pl.Series(laid[2]), pl.Series(laid[3])).to_numpy()
    out = np.zeros(len(lo), dtype=np.int64)
    for rank in np.unique(step_ranks):
        a, b = np.searchsorted(step_ranks, rank, "left"), np.searchsorted(step_ranks, rank, "right")
        i, j = np.searchsorted(ranks, rank, "left"), np.searchsorted(ranks, rank, "right")
        if i == j:
            continue
        mine = merged[i:j, ["start", "end"]]
        covered = intervals.covered_within(mine, pl.Series(lo[a:b]), pl.Series(hi[a:b]))
        out[a:b] = covered.to_numpy()
    return out


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
