"""Self time of CPU events: an event's duration minus that of the events directly nested in
it on the same thread. A diff of inclusive times counts a slow kernel launch in the launch,
in its aten op, in the module and in the ProfilerStep, each a row of its own; self times
add up to the thread's busy time once.

Nesting comes from time alone, per (pid, tid): the depth of an event is the number of events
open when it starts (an interval sweep: +1 at each start, -1 at each end; on a tie ends come
first, but an instant's own end after its start, and a longer event starts first), and its
parent is the latest event one level up that started before it (an as-of join). GPU events
(on a stream) do not nest: their self time is their duration.
"""

from __future__ import annotations

import polars as pl

_THREAD = ("pid", "tid")


def with_self_dur(view: pl.DataFrame, on_cpu: pl.Expr) -> pl.DataFrame:
    """`view` (rows with idx, pid, tid, start, end, dur in ns) with `self_dur` (ns): `dur`
    minus the durations of the direct children on the thread for rows where `on_cpu`; `dur`
    elsewhere. Never negative (partly overlapping events, which do not nest, are clipped)."""
    cpu = view.filter(on_cpu).select("idx", *_THREAD, "start", "end")
    if cpu.is_empty():
        return view.with_columns(pl.col("dur").alias("self_dur"))
    # the sweep: starts and ends of every event in time order per thread
    bounds = pl.concat(
        [
            cpu.select(
                "idx",
                *_THREAD,
                pl.col("start").alias("t"),
                pl.lit(1).alias("kind"),
                (-pl.col("end")).alias("tie"),
                pl.lit(1).alias("delta"),
            ),
            cpu.select(
                "idx",
                *_THREAD,
                pl.col("end").alias("t"),
                # ends before starts on a tie, but an instant's end after its own start
                pl.when(pl.col("end") > pl.col("start")).then(0).otherwise(2).alias("kind"),
                pl.lit(0, pl.Int64).alias("tie"),
                pl.lit(-1).alias("delta"),
            ),
        ]
    ).sort([*_THREAD, "t", "kind", "tie", "idx"])
    depth = (
        bounds.with_columns((pl.col("delta").cum_sum().over(_THREAD) - 1).alias("depth"))
        .filter(pl.col("kind") == 1)
        .select("idx", "depth")
    )
    nodes = cpu.join(depth, on="idx").sort("start")
    parents = nodes.select(
        *_THREAD,
        (pl.col("depth") + 1).alias("depth"),
        pl.col("start").alias("p_start"),
        pl.col("idx").alias("parent"),
    ).sort("p_start")
    children = (
        nodes.filter(pl.col("depth") > 0)
        .join_asof(
            parents,
            left_on="start",
            right_on="p_start",
            by=[*_THREAD, "depth"],
            check_sortedness=False,  # both sorted by time above; `by` hides it from polars
        )
        .filter(pl.col("parent").is_not_null())
        .group_by("parent")
        .agg((pl.col("end") - pl.col("start")).sum().alias("_children"))
    )
    return (
        view.join(children, left_on="idx", right_on="parent", how="left", maintain_order="left")
        .with_columns(
            (pl.col("dur") - pl.col("_children").fill_null(0)).clip(lower_bound=0).alias("self_dur")
        )
        .drop("_children")
    )
