"""Memory statistics per operator, as the TensorBoard plugin's memory table
(`MemorySnapshot.get_memory_statistics`).

Per device and operator name, summed over the operator's calls:
- self size increase / allocation count / allocation size: the events (frees too, for the
  increase) whose innermost enclosing operator is that call;
- size increase / allocation count / allocation size: the same over the call and everything
  inside it on its thread (events in a module or step frame inside it count; events whose
  innermost frame is not an operator count nowhere);
- calls: the plugin counts a call only when it sits at the top of its thread or directly
  inside a frame that holds some memory event, and counts it on every device row.
A row is shown when any of the six sums is not zero. Sizes in KB (1024 B).
"""

from __future__ import annotations

import polars as pl

from hta_tui.analysis.memory_events import KB, in_range
from hta_tui.analysis.memory_records import effective_tree, tree_nodes

COLUMNS: dict[str, pl.DataType] = {
    "device": pl.String(),
    "operator": pl.String(),
    "calls": pl.Int64(),
    "size_increase_kb": pl.Float64(),
    "self_size_increase_kb": pl.Float64(),
    "allocation_count": pl.Int64(),
    "self_allocation_count": pl.Int64(),
    "allocation_size_kb": pl.Float64(),
    "self_allocation_size_kb": pl.Float64(),
}

_SELF = ("inc", "n_alloc", "alloc")


def memory_stats(
    events: pl.DataFrame,
    recs: pl.DataFrame,
    start_ns: int | None = None,
    end_ns: int | None = None,
) -> pl.DataFrame:
    """`recs` from `memory_records` of the same file as `events`."""
    recs = in_range(recs, start_ns, end_ns)
    if recs.is_empty():
        return pl.DataFrame(schema=COLUMNS)
    tree = effective_tree(tree_nodes(events))
    if start_ns is not None:
        tree = tree.filter(pl.col("end") >= start_ns)
    if end_ns is not None:
        tree = tree.filter(pl.col("start") <= end_ns)
    nodes = tree.filter(pl.col("eff") == pl.col("node"))  # merged children count as their parent
    b = pl.col("bytes")
    attributed = recs.filter(pl.col("node").is_not_null()).select(
        "node",
        "device",
        pl.col("tid").alias("key"),
        "ts",
        b.alias("inc"),
        (b > 0).cast(pl.Int64).alias("n_alloc"),
        pl.when(b > 0).then(b).otherwise(0).alias("alloc"),
    )
    self_sums = attributed.group_by("node", "device").agg(pl.col(c).sum() for c in _SELF)
    totals = _subtree_sums(nodes, attributed)
    per_node = totals.join(self_sums, on=["node", "device"], how="left").fill_null(0)
    ops = nodes.filter(pl.col("is_op")).select("node", pl.col("name").alias("operator"))
    per_name = (
        per_node.join(ops, on="node")
        .group_by("device", "operator")
        .agg(pl.col(c).sum() for c in (*_SELF, *(f"t_{c}" for c in _SELF)))
    )
    calls = _calls(nodes, recs)
    return (
        per_name.filter(pl.any_horizontal(pl.col(c) != 0 for c in per_name.columns[2:]))
        .join(calls, on="operator", how="left")
        .select(
            "device",
            "operator",
            pl.col("calls").fill_null(0),
            (pl.col("t_inc") / KB).alias("size_increase_kb"),
            (pl.col("inc") / KB).alias("self_size_increase_kb"),
            pl.col("t_n_alloc").alias("allocation_count"),
            pl.col("n_alloc").alias("self_allocation_count"),
            (pl.col("t_alloc") / KB).alias("allocation_size_kb"),
            (pl.col("alloc") / KB).alias("self_allocation_size_kb"),
        )
        .sort("device", "operator")
        .cast(COLUMNS)  # type: ignore[arg-type]
    )


def _subtree_sums(nodes: pl.DataFrame, attributed: pl.DataFrame) -> pl.DataFrame:
    """Per node and device, the sums of the attributed events with start <= ts < end on the
    node's thread: prefix sums over each thread's events, read at both ends by as-of joins."""
    devices = attributed.select("device").unique()
    cum = (
        attributed.sort("key", "device", "ts")
        .with_columns(pl.col(c).cum_sum().over("key", "device").alias(f"c_{c}") for c in _SELF)
        .select("key", "device", "ts", *(f"c_{c}" for c in _SELF))
    )
    spans = nodes.select("node", "key", "start", "end").join(devices, how="cross")

    def before(at: str) -> pl.DataFrame:
        return (
            spans.sort(at)
            .join_asof(
                cum,
                left_on=at,
                right_on="ts",
                by=["key", "device"],
                strategy="backward",
                allow_exact_matches=False,
                check_sortedness=False,
            )
            .select("node", "device", *(pl.col(f"c_{c}").fill_null(0) for c in _SELF))
        )

    lo, hi = before("start"), before("end")
    return hi.join(lo, on=["node", "device"], suffix="_lo").select(
        "node",
        "device",
        *((pl.col(f"c_{c}") - pl.col(f"c_{c}_lo")).alias(f"t_{c}") for c in _SELF),
    )


def _calls(nodes: pl.DataFrame, recs: pl.DataFrame) -> pl.DataFrame:
    """Per operator name, the calls the plugin counts (see the module doc)."""
    # a frame is "processed" when some event of its thread lies inside it
    any_rec = recs.select(pl.col("tid").alias("key"), "ts", pl.lit(1).alias("one"))
    counted = _subtree_sums(
        nodes.select("node", "key", "start", "end"),
        any_rec.select(
            "key", pl.lit("").alias("device"), "ts", *(pl.col("one").alias(c) for c in _SELF)
        ),
    ).filter(pl.col("t_inc") > 0)
    processed = counted["node"].implode()
    reached = nodes.filter(
        pl.col("is_op") & (pl.col("eff_parent").is_null() | pl.col("eff_parent").is_in(processed))
    )
    return reached.group_by(pl.col("name").alias("operator")).agg(
        pl.len().cast(pl.Int64).alias("calls")
    )
