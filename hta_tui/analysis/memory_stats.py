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

import numpy as np
import polars as pl

from hta_tui.analysis import shared
from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.memory_device import ts_slice
from hta_tui.analysis.memory_events import KB

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
    """`recs` from `memory_records` of the same file as `events` (or its rows of one device),
    in time order. The tree and the prefix sums over `recs` are kept per frame, so a time
    window (start <= ts <= end) costs binary searches, not another pass over every event."""
    window = ts_slice(recs, start_ns, end_ns)
    if window.is_empty():
        return pl.DataFrame(schema=COLUMNS)
    tree = shared.operator_tree(events)  # the one memory attribution started from
    if start_ns is not None:
        tree = tree.filter(pl.col("end") >= start_ns)
    if end_ns is not None:
        tree = tree.filter(pl.col("start") <= end_ns)
    nodes = tree.filter(pl.col("eff") == pl.col("node"))  # merged children count as their parent
    # the window as a half-open clip of each node's [start, end): ts is integer ns
    clip = (start_ns, None if end_ns is None else end_ns + 1)
    b = pl.col("bytes")
    attributed = window.filter(pl.col("node").is_not_null()).select(
        "node",
        "device",
        b.alias("inc"),
        (b > 0).cast(pl.Int64).alias("n_alloc"),
        pl.when(b > 0).then(b).otherwise(0).alias("alloc"),
    )
    self_sums = attributed.group_by("node", "device").agg(pl.col(c).sum() for c in _SELF)
    totals = _subtree_sums(nodes, _attributed_by_thread(recs), clip)
    per_node = totals.join(self_sums, on=["node", "device"], how="left").fill_null(0)
    ops = nodes.filter(pl.col("is_op")).select("node", pl.col("name").alias("operator"))
    per_name = (
        per_node.join(ops, on="node")
        .group_by("device", "operator")
        .agg(pl.col(c).sum() for c in (*_SELF, *(f"t_{c}" for c in _SELF)))
    )
    calls = _calls(nodes, _any_by_thread(recs), clip)
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


def _attributed_by_thread(recs: pl.DataFrame) -> pl.DataFrame:
    """The attributed events of `recs` sorted by thread (`key`), device and ts, with running
    sums (`c_*`): the prefix sums, kept per `recs` frame."""
    b = pl.col("bytes")
    return job_cached(
        {0: recs},
        "memory_stats_attributed",
        lambda: _running(
            recs.filter(pl.col("node").is_not_null())
            .select(
                pl.col("tid").alias("key"),
                "device",
                "ts",
                b.alias("inc"),
                (b > 0).cast(pl.Int64).alias("n_alloc"),
                pl.when(b > 0).then(b).otherwise(0).alias("alloc"),
            )
            .sort("key", "device", "ts", maintain_order=True)
        ),
    )


def _any_by_thread(recs: pl.DataFrame) -> pl.DataFrame:
    """Every event of `recs` (attributed or not) as a count, sorted by thread and ts."""
    return job_cached(
        {0: recs},
        "memory_stats_any",
        lambda: _running(
            recs.select(
                pl.col("tid").alias("key"),
                pl.lit("").alias("device"),
                "ts",
                *(pl.lit(1, pl.Int64).alias(c) for c in _SELF),
            ).sort("key", "ts", maintain_order=True)
        ),
    )


def _running(values: pl.DataFrame) -> pl.DataFrame:
    """`values` with the running sum of each value (over every row: a group's sums are
    differences inside its rows) and each (key, device) group's first row and length."""
    return (
        values.with_row_index("__row")
        .with_columns(
            *(pl.col(c).cum_sum().alias(f"c_{c}") for c in _SELF),
            pl.col("__row").first().over("key", "device").alias("first"),
            pl.len().over("key", "device").alias("n"),
        )
        .drop("__row")
    )


def _subtree_sums(
    nodes: pl.DataFrame, values: pl.DataFrame, clip: tuple[int | None, int | None]
) -> pl.DataFrame:
    """Per node and device, the sums of `values` (`_running`) with start <= ts < end on the
    node's thread, [start, end) clipped to `clip`: running sums read at both ends by binary
    search, per thread and device (a handful of groups)."""
    lo_clip, hi_clip = clip
    starts, ends = pl.col("start"), pl.col("end")
    if lo_clip is not None:
        starts = pl.max_horizontal(starts, pl.lit(lo_clip))
    if hi_clip is not None:
        ends = pl.min_horizontal(ends, pl.lit(hi_clip))
    spans = nodes.select(
        "node", "key", starts.alias("start"), pl.max_horizontal(starts, ends).alias("end")
    )
    groups = values.select("key", "device", "first", "n").unique(maintain_order=True)
    ts = values["ts"].to_numpy()
    cums = {c: values[f"c_{c}"].to_numpy() for c in _SELF}
    by_key = {k[0]: part for k, part in spans.partition_by("key", as_dict=True).items()}
    parts = []
    for key, device, first, n in groups.iter_rows():
        mine = by_key.get(key)
        if mine is None:
            continue
        span_ts = ts[first : first + n]
        lo = first + np.searchsorted(span_ts, mine["start"].to_numpy(), "left")
        hi = first + np.searchsorted(span_ts, mine["end"].to_numpy(), "left")
        parts.append(
            pl.DataFrame(
                {
                    "node": mine["node"],
                    "device": [device] * mine.height,
                    **{f"t_{c}": _before(cums[c], hi) - _before(cums[c], lo) for c in _SELF},
                }
            )
        )
    if not parts:
        return pl.DataFrame(
            schema={
                "node": nodes.schema["node"],
                "device": pl.String(),
                **{f"t_{c}": pl.Int64() for c in _SELF},
            }
        )
    return pl.concat(parts)


def _before(cum: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The running sum just before rows `at` (0 before the first row)."""
    return np.where(at > 0, cum[np.maximum(at - 1, 0)], 0)


def _calls(
    nodes: pl.DataFrame, every: pl.DataFrame, clip: tuple[int | None, int | None]
) -> pl.DataFrame:
    """Per operator name, the calls the plugin counts (see the module doc)."""
    # a frame is "processed" when some event of its thread lies inside it
    counted = _subtree_sums(nodes.select("node", "key", "start", "end"), every, clip)
    processed = counted.filter(pl.col("t_inc") > 0)["node"].implode()
    reached = nodes.filter(
        pl.col("is_op") & (pl.col("eff_parent").is_null() | pl.col("eff_parent").is_in(processed))
    )
    return reached.group_by(pl.col("name").alias("operator")).agg(
        pl.len().cast(pl.Int64).alias("calls")
    )
