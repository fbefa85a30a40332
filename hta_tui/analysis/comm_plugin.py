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

from collections.abc import Mapping, Sequence

import polars as pl

from hta_tui.analysis import intervals
from hta_tui.analysis.collectives import op_bytes
from hta_tui.analysis.comm_kinds import PLUGIN_DTYPE_BYTES, PLUGIN_OPS

_STEP_RE = r"^ProfilerStep#(\d+)"
_NS = 1000.0


def _rows(ev: pl.DataFrame, *cats: str, columns: Sequence[str] | None = None) -> pl.DataFrame:
    """The rows of the plugin's categories (lower-cased `cat`), by the kinds they normalise to
    (an Enum compare, where lower-casing every row's text took a third of this module's
    time). Kinds are the categories exactly, except `python` (also python_function, which the
    plugin leaves out: told apart by its text) and `kernel` (also other accelerators'
    `*_kernel` categories, which the plugin never sees: counted, a deliberate difference).
    `columns`: only those (the filter reads the few it needs, not every row's 38 columns)."""
    kinds = {
        "cpu_op": "cpu_op",
        "operator": "cpu_op",
        "user_annotation": "annotation",
        "gpu_user_annotation": "gpu_annotation",
        "kernel": "kernel",
        "python": "python",
    }
    picked = ev.lazy().filter(pl.col("kind").is_in(sorted({kinds[c] for c in cats})))
    if "python" not in cats:
        return (picked if columns is None else picked.select(columns)).collect()
    # the text of `cat` read on the python rows only, once they are picked (the regex over
    # every row's `cat` was ~2 ms a 100 MB rank)
    read = (
        None if columns is None else [*columns, *(c for c in ("kind", "cat") if c not in columns)]
    )
    rows = (picked if read is None else picked.select(read)).collect()
    if (rows["kind"] == "python").any():
        rows = rows.filter((pl.col("kind") != "python") | is_python_cat())
    return rows if columns is None else rows.select(columns)


def is_python_cat() -> pl.Expr:
    """`cat` is "python" in any case (the plugin lower-cases it): a case-blind match, where
    lower-casing every row's text first cost ~4x more (only ASCII letters fold to these)."""
    return pl.col("cat").str.contains("(?i)^python$")


_CPU = ("cpu_op", "operator", "python")
_STEP_CATS = ("cpu_op", "operator", "user_annotation")
_ANCHOR = ("cpu_op", "operator", "user_annotation", "gpu_user_annotation")


def steps_of(ev: pl.DataFrame) -> pl.DataFrame:
    """step (text), start, end: ProfilerStep#N, else one step "0" over the CPU ops."""
    named = (_rows(ev.filter(pl.col("name").str.starts_with("ProfilerStep#")), *_STEP_CATS)).select(
        pl.col("name").str.extract(_STEP_RE, 1).alias("step"),
        pl.col("ts").alias("start"),
        (pl.col("ts") + pl.col("dur")).alias("end"),
    )
    if not named.is_empty():
        return named.sort("start")
    cpu = _rows(ev, *_CPU, columns=("ts", "dur"))
    return cpu.select(
        pl.lit("0").alias("step"),
        pl.col("ts").min().alias("start"),
        (pl.col("ts") + pl.col("dur")).max().alias("end"),
    ).drop_nulls("start")


def spans(ev: pl.DataFrame) -> pl.DataFrame:
    return ev.select(pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur")).alias("end"))


def _anchors(ev: pl.DataFrame, *, every: bool = False) -> pl.DataFrame:
    """The plugin's collectives: name, start, end, bytes, external_id. It keeps them in a dict
    by External id, so the last one wins (a GPU-side `nccl:` annotation replaces the CPU-side
    one of the same call); its step breakdown sees `every` one."""
    ops = _rows(ev.filter(pl.col("name").is_in(PLUGIN_OPS)), *_ANCHOR).lazy()
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
    kernels = _rows(ev, "kernel", columns=("external_id", "ts", "dur")).select(
        "external_id", pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur")).alias("end")
    )
    linked = anchors.select("node", "external_id").join(kernels, on="external_id")
    own = anchors.select("node", "start", "end")
    return (
        pl.concat([own, linked.drop("external_id")])
        .sort("node", "start", pl.col("end"), descending=[False, False, True])
        .with_columns(pl.int_range(pl.len()).over("node").alias("j"))
    )


def covered_per_step(
    spans: pl.DataFrame | pl.LazyFrame, steps: pl.DataFrame, *, merged: bool = False
) -> pl.DataFrame:
    """step, covered: the length of the union of `spans` inside each step (merged first, so
    the pieces inside a step are disjoint and simply add up). `merged`: `spans` is a
    `merge_intervals` answer already; its starts strictly increasing, it is its own merge (a
    merge again sorted and grouped it to the same rows), else merged again."""
    done = merged and isinstance(spans, pl.DataFrame) and _increasing(spans["start"])
    union = spans if done else intervals.merge_intervals(spans)
    covered = intervals.covered_within(union, steps["start"], steps["end"])
    return (
        steps.select("step")
        .with_columns(covered)
        .group_by("step", maintain_order=True)
        .agg(pl.col("covered").sum())
    )


def _increasing(values: pl.Series) -> bool:
    """Strictly increasing, no null (an empty series is)."""
    if values.null_count():
        return False
    return bool((values.diff().drop_nulls() > 0).all())


def _overlap_query(rank: int, ev: pl.DataFrame) -> pl.LazyFrame | None:
    """The plugin's spans: communication = its collectives and the kernels of their External
    ids; computation = every other kernel, or (no kernel) every CPU op."""
    steps = steps_of(ev)
    if steps.is_empty():
        return None
    anchors = _anchors(ev, every=True)
    linked = pl.col("external_id").is_in(anchors["external_id"].implode()).fill_null(False)
    kernels = _rows(ev, "kernel", columns=("external_id", "ts", "dur"))
    comm = pl.concat([anchors.select("start", "end"), spans(kernels.filter(linked))])
    compute_kernels = kernels.filter(~linked)
    if compute_kernels.is_empty():
        compute_kernels = _rows(ev, *_CPU, columns=("name", "ts", "dur")).filter(
            ~pl.col("name").str.starts_with("ProfilerStep#")
            & ~pl.col("name").is_in(PLUGIN_OPS)
            & ~pl.col("name").str.contains(DATA_LOADER)
        )
    return breakdown_query(rank, steps, spans(compute_kernels), comm)


#: The plugin's DataLoader ops (its own category, neither computation nor communication).
DATA_LOADER = r"^enumerate\(DataLoader\)#.*\.__next__$|^enumerate\(DataPipe\)#"


def breakdown_query(
    rank: int, steps: pl.DataFrame, comp: pl.DataFrame, comm: pl.DataFrame
) -> pl.LazyFrame:
    """Per step: computation - overlap, overlap, communication - overlap, other (us), from
    the computation and communication spans (start, end; any overlaps among them)."""
    # Each side merged once; their union from the two merged sets (far fewer rows).
    comp, comm = (intervals.merge_intervals(x.select("start", "end")) for x in (comp, comm))
    parts = {
        "comp": covered_per_step(comp, steps, merged=True),
        "comm": covered_per_step(comm, steps, merged=True),
        "union": covered_per_step(pl.concat([comp, comm]), steps),
    }
    t = steps.lazy().with_columns((pl.col("end") - pl.col("start")).alias("total"))
    for name, part in parts.items():
        t = t.join(
            part.lazy().rename({"covered": name}), on="step", how="left", maintain_order="left"
        )
    return breakdown_of(rank, t)


def breakdown_of(rank: int, covered: pl.LazyFrame) -> pl.LazyFrame:
    """`breakdown_query`'s rows from each step's total and covered times (step, total,
    comp, comm, union: ns, null as 0). (Its divisions' last bit depends on how polars
    splits the frame among its threads: a rank's table is divided in a query of its own.)"""
    ov = pl.col("comp") + pl.col("comm") - pl.col("union")
    return (
        covered.fill_null(0)
        .with_columns(ov.alias("ov"))
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


def overlap(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """rank, step ("all" = per-step mean, truncated like the plugin), computation, overlapping,
    communication, other (us): the plugin's `distributed_overlap`."""
    queries = [_overlap_query(rank, ev) for rank, ev in sorted(ranks.items())]
    return with_means(queries)


def with_means(queries: list[pl.LazyFrame | None], *, truncate: bool = True) -> pl.DataFrame:
    """Every rank's per-step rows, each rank followed by its "all" row (truncated to whole
    microseconds like the plugin's, unless `truncate` is off)."""
    tables = pl.collect_all([q for q in queries if q is not None])
    rows = [part for t in tables for part in (t, mean_row(t, truncate=truncate))]
    return pl.concat(rows) if rows else pl.DataFrame(schema=_OVERLAP_SCHEMA)


_OVERLAP_SCHEMA = {
    "rank": pl.Int64(),
    "step": pl.String(),
    "computation": pl.Float64(),
    "overlapping": pl.Float64(),
    "communication": pl.Float64(),
    "other": pl.Float64(),
}


def mean_row(per_step: pl.DataFrame, *, truncate: bool = True) -> pl.DataFrame:
    """The plugin's "all" row: each column's sum over the steps / steps, truncated."""
    values = [c for c in per_step.columns if c not in ("rank", "step")]
    mean = [pl.col(c).sum() / pl.len() for c in values]
    if truncate:
        mean = [m.cast(pl.Int64).cast(pl.Float64) for m in mean]
    return per_step.group_by("rank").agg(
        pl.lit("all").alias("step"), *(m.alias(c) for m, c in zip(mean, values, strict=True))
    )


Nodes = dict[int, tuple[pl.DataFrame, pl.DataFrame]]


def _nodes(ranks: Mapping[int, pl.DataFrame]) -> Nodes:
    """Per rank: its collectives (with step) and their ranges."""
    out = {}
    for rank, ev in ranks.items():
        anchors = _anchors(ev)
        steps = steps_of(ev)
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
    return waittime_of(_nodes(ranks))


def nodes(ranks: Mapping[int, pl.DataFrame]) -> Nodes:
    """Per rank: its collectives (node, name, external_id, start, end, bytes, step) and
    their ranges (node, start, end, j): what `waittime_of` compares across ranks."""
    return _nodes(ranks)


def waittime_of(nodes: Nodes) -> pl.DataFrame:
    """`waittime` from every rank's `nodes`."""
    schema = {
        "rank": pl.Int64(),
        "step": pl.String(),
        "transfer": pl.Float64(),
        "synchronizing": pl.Float64(),
    }
    real = _real_ranges(nodes) if nodes else None
    if real is None:
        return pl.DataFrame(schema=schema)
    rows = []
    # split by rank once: one filter per rank would be quadratic in the ranks
    by_rank = real.partition_by("rank", as_dict=True, maintain_order=True)
    for rank, (anchors, _) in sorted(nodes.items()):
        mine = by_rank.get((rank,), real.clear()).join(anchors.select("node", "step"), on="node")
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
        rows.append(mean_row(t))
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
