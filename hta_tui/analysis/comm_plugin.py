"""The TensorBoard plugin's Distributed view (torch-tb-profiler 0.4.3), reproduced.

Three tables, as the plugin serves them (../shared/oracle-tb/README.md "Distributed view"):
computation / overlapping / communication / other per rank and step, data transfer vs
synchronizing time per rank and step, and communication op stats per rank and op name.
Kept apart from this project's own distributed analyses (`collectives`, `comm_ops`,
`comm_overview`) because its rules are narrow on purpose here: only `nccl:` / `gloo:`
broadcast, reduce, all_reduce, all_gather and reduce_scatter ops are collectives, a
collective's GPU part is the kernels of the op's own External id (none in newer traces, so
its "latency" is the CPU op's duration), sizes come from `Input Dims` with six known dtypes,
and the synchronizing/transfer split needs every rank to have the same collectives.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import intervals
from hta_tui.analysis.collectives import op_bytes
from hta_tui.analysis.comm_kinds import PLUGIN_DTYPE_BYTES, PLUGIN_OPS

_STEP_RE = r"^ProfilerStep#(\d+)"
_CPU_CATS = ("cpu_op", "operator", "python")
_ANCHOR_CATS = ("cpu_op", "operator", "user_annotation", "gpu_user_annotation")
_NS = 1000.0


def _cat() -> pl.Expr:
    return pl.col("cat").str.to_lowercase()


def _steps(ev: pl.DataFrame) -> pl.DataFrame:
    """step (text), start, end: ProfilerStep#N, else one step "0" over the CPU ops."""
    named = ev.filter(
        _cat().is_in(["cpu_op", "operator", "user_annotation"])
        & pl.col("name").str.starts_with("ProfilerStep#")
    ).select(
        pl.col("name").str.extract(_STEP_RE, 1).alias("step"),
        pl.col("ts").alias("start"),
        (pl.col("ts") + pl.col("dur")).alias("end"),
    )
    if not named.is_empty():
        return named.sort("start")
    cpu = ev.filter(_cat().is_in(_CPU_CATS))
    return cpu.select(
        pl.lit("0").alias("step"),
        pl.col("ts").min().alias("start"),
        (pl.col("ts") + pl.col("dur")).max().alias("end"),
    ).drop_nulls("start")


def _spans(ev: pl.DataFrame) -> pl.DataFrame:
    return ev.select(pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur")).alias("end"))


def _anchors(ev: pl.DataFrame, *, every: bool = False) -> pl.DataFrame:
    """The plugin's collectives: name, start, end, bytes, external_id. It keeps them in a dict
    by External id, so the last one wins (a GPU-side `nccl:` annotation replaces the CPU-side
    one of the same call); its step breakdown sees `every` one."""
    ops = ev.lazy().filter(_cat().is_in(_ANCHOR_CATS) & pl.col("name").is_in(PLUGIN_OPS))
    if not every:
        ops = ops.sort("idx").unique("external_id", keep="last", maintain_order=True)
    return (
        op_bytes(ops, PLUGIN_DTYPE_BYTES)
        .select(
            "name",
            "external_id",
            pl.col("ts").alias("start"),
            (pl.col("ts") + pl.col("dur")).alias("end"),
            pl.col("op_bytes").fill_null(0).alias("bytes"),
        )
        .sort("start", pl.col("end"), descending=[False, True])
        .with_row_index("node")
        .collect()
    )


def _ranges(ev: pl.DataFrame, anchors: pl.DataFrame) -> pl.DataFrame:
    """Each collective's ranges (its own, then its kernels'), numbered j per node."""
    kernels = ev.filter(_cat() == "kernel").select(
        "external_id", pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur")).alias("end")
    )
    linked = anchors.select("node", "external_id").join(kernels, on="external_id")
    own = anchors.select("node", "start", "end")
    return (
        pl.concat([own, linked.drop("external_id")])
        .sort("node", "start", pl.col("end"), descending=[False, False, True])
        .with_columns(pl.int_range(pl.len()).over("node").alias("j"))
    )


def _clipped(ranges: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Ranges cut to each step they meet: step, start, end."""
    return (
        ranges.select("start", "end")
        .join(steps.rename({"start": "s0", "end": "s1"}), how="cross")
        .select(
            "step",
            pl.max_horizontal("start", "s0").alias("start"),
            pl.min_horizontal("end", "s1").alias("end"),
        )
        .filter(pl.col("end") > pl.col("start"))
    )


def _per_step(ranges: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    covered = intervals.covered_length(_clipped(ranges, steps), by="step")
    return steps.select("step").join(covered, on="step", how="left").fill_null(0)


def overlap(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """rank, step ("all" = per-step mean, truncated like the plugin), computation, overlapping,
    communication, other (us): the plugin's `distributed_overlap`."""
    rows = []
    for rank, ev in sorted(ranks.items()):
        steps = _steps(ev)
        anchors = _anchors(ev, every=True)
        if steps.is_empty():
            continue
        linked = pl.col("external_id").is_in(anchors["external_id"].implode()).fill_null(False)
        kernels = ev.filter(_cat() == "kernel")
        comm = pl.concat([anchors.select("start", "end"), _spans(kernels.filter(linked))])
        cpu = ev.filter(
            _cat().is_in(_CPU_CATS)
            & ~pl.col("name").str.starts_with("ProfilerStep#")
            & ~pl.col("name").is_in(PLUGIN_OPS)
            & ~pl.col("name").str.contains(r"^enumerate\(DataLoader\)#.*\.__next__$")
            & ~pl.col("name").str.starts_with("enumerate(DataPipe)#")
        )
        compute_kernels = kernels.filter(~linked)
        comp = _spans(compute_kernels if not compute_kernels.is_empty() else cpu)
        c = _per_step(comp, steps).rename({"covered": "comp"})
        m = _per_step(comm, steps).rename({"covered": "comm"})
        both = _per_step(pl.concat([comp, comm]), steps).rename({"covered": "union"})
        t = (
            steps.with_columns((pl.col("end") - pl.col("start")).alias("total"))
            .join(c, on="step")
            .join(m, on="step")
            .join(both, on="step")
            .with_columns((pl.col("comp") + pl.col("comm") - pl.col("union")).alias("ov"))
            .select(
                pl.lit(rank, pl.Int64).alias("rank"),
                "step",
                ((pl.col("comp") - pl.col("ov")) / _NS).alias("computation"),
                (pl.col("ov") / _NS).alias("overlapping"),
                ((pl.col("comm") - pl.col("ov")) / _NS).alias("communication"),
                ((pl.col("total") + pl.col("ov") - pl.col("comp") - pl.col("comm")) / _NS).alias(
                    "other"
                ),
            )
        )
        rows.append(t)
        rows.append(_mean_row(t))
    return pl.concat(rows) if rows else pl.DataFrame(schema=_OVERLAP_SCHEMA)


_OVERLAP_SCHEMA = {
    "rank": pl.Int64(),
    "step": pl.String(),
    "computation": pl.Float64(),
    "overlapping": pl.Float64(),
    "communication": pl.Float64(),
    "other": pl.Float64(),
}


def _mean_row(per_step: pl.DataFrame) -> pl.DataFrame:
    """The plugin's "all" row: each column's sum over the steps / steps, truncated."""
    values = [c for c in per_step.columns if c not in ("rank", "step")]
    return per_step.group_by("rank").agg(
        pl.lit("all").alias("step"),
        *((pl.col(c).sum() / pl.len()).cast(pl.Int64).cast(pl.Float64) for c in values),
    )


def _nodes(ranks: Mapping[int, pl.DataFrame]) -> dict[int, tuple[pl.DataFrame, pl.DataFrame]]:
    """Per rank: its collectives (with step) and their ranges."""
    out = {}
    for rank, ev in ranks.items():
        anchors = _anchors(ev)
        steps = _steps(ev)
        inside = anchors.join_where(
            steps.rename({"start": "s0", "end": "s1"}),
            pl.col("start") >= pl.col("s0"),
            pl.col("end") <= pl.col("s1"),
        ).select("node", "step")
        anchors = anchors.join(inside, on="node", how="left")
        out[rank] = (anchors, _ranges(ev, anchors))
    return out


def _real_ranges(nodes: dict[int, tuple[pl.DataFrame, pl.DataFrame]]) -> pl.DataFrame | None:
    """The plugin's data-transfer ranges: for the i-th collective's j-th range, the shortest
    duration over ranks, placed at the end of each rank's range. None when ranks differ in
    collectives or ranges per collective (the plugin then shows no Distributed view)."""
    counts = {len(a) for a, _ in nodes.values()}
    if len(counts) != 1 or 0 in counts:
        return None
    every = pl.concat(
        [r.with_columns(pl.lit(rank, pl.Int64).alias("rank")) for rank, (_, r) in nodes.items()]
    )
    shapes = (
        every.group_by("rank", "node")
        .agg(pl.len())
        .group_by("node")
        .agg(pl.col("len").n_unique().alias("k"))
    )
    if shapes["k"].max() != 1:
        return None
    shortest = (pl.col("end") - pl.col("start")).min().over("node", "j")
    return every.with_columns((pl.col("end") - shortest).alias("real_start"))


def waittime(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """rank, step (null outside every step, "all"), transfer, synchronizing (us): the plugin's
    `distributed_waittime`."""
    schema = {
        "rank": pl.Int64(),
        "step": pl.String(),
        "transfer": pl.Float64(),
        "synchronizing": pl.Float64(),
    }
    nodes = _nodes(ranks)
    real = _real_ranges(nodes) if nodes else None
    if real is None:
        return pl.DataFrame(schema=schema)
    rows = []
    for rank, (anchors, _) in sorted(nodes.items()):
        mine = real.filter(pl.col("rank") == rank).join(anchors.select("node", "step"), on="node")
        total = intervals.covered_length(mine, by="step").rename({"covered": "total"})
        transfer = intervals.covered_length(mine, "real_start", "end", by="step").rename(
            {"covered": "transfer"}
        )
        t = total.join(transfer, on="step", how="left", nulls_equal=True).select(
            pl.lit(rank, pl.Int64).alias("rank"),
            "step",
            (pl.col("transfer") / _NS).alias("transfer"),
            ((pl.col("total") - pl.col("transfer")) / _NS).alias("synchronizing"),
        )
        rows.append(t)
        rows.append(_mean_row(t))
    return pl.concat(rows).cast(schema)  # type: ignore[arg-type]


def comm_ops(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """rank, name, calls, total/avg size (bytes), total/avg latency and data transfer time (us):
    the plugin's `distributed_commops`."""
    nodes = _nodes(ranks)
    real = _real_ranges(nodes) if nodes else None
    rows = []
    for rank, (anchors, ranges) in sorted(nodes.items()):
        if anchors.is_empty():
            continue
        named = ranges.join(anchors.select("node", "name"), on="node")
        latency = intervals.covered_length(named, by="name").rename({"covered": "latency"})
        stats = anchors.group_by("name").agg(pl.len().alias("calls"), pl.col("bytes").sum())
        t = stats.join(latency, on="name")
        if real is not None:
            mine = real.filter(pl.col("rank") == rank).join(
                anchors.select("node", "name"), on="node"
            )
            tr = intervals.covered_length(mine, "real_start", "end", by="name")
            t = t.join(tr.rename({"covered": "transfer"}), on="name", how="left")
        else:
            t = t.with_columns(pl.lit(None, pl.Int64).alias("transfer"))
        rows.append(
            t.select(
                pl.lit(rank, pl.Int64).alias("rank"),
                "name",
                pl.col("calls").cast(pl.Int64),
                pl.col("bytes").alias("total_size"),
                (pl.col("bytes") / pl.col("calls")).round().alias("avg_size"),
                (pl.col("latency") / _NS).alias("total_latency"),
                (pl.col("latency") / _NS / pl.col("calls")).round().alias("avg_latency"),
                (pl.col("transfer") / _NS).alias("transfer"),
                (pl.col("transfer") / _NS / pl.col("calls")).round().alias("avg_transfer"),
            )
        )
    return pl.concat(rows) if rows else pl.DataFrame()
