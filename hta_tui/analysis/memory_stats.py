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

from typing import NamedTuple

import numpy as np
import polars as pl

from hta_tui.analysis import interval_arrays, shared
from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.memory_device import ts_slice
from hta_tui.analysis.memory_events import KB
from hta_tui.analysis.op_tree import id_rows, rows_at

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
    spans = _spans(nodes, (start_ns, None if end_ns is None else end_ns + 1))
    inside, per_device = _subtree(spans, _by_thread(recs))
    # the node row of each event and of each node's parent: one lookup of the nodes' ids
    row, up = _rows_of(nodes["node"], window["node"], nodes["eff_parent"])
    values = _self_and_total(nodes, window, row, per_device)
    # per device and operator name, of the op nodes: rows all zero add nothing to a sum
    sums = [pl.col(c).sum() for c in (*_SELF, *(f"t_{c}" for c in _SELF))]
    per_name = values.group_by("device", "operator").agg(sums)
    calls = _calls(nodes, up, inside > 0)
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


def _self_and_total(
    nodes: pl.DataFrame, window: pl.DataFrame, row: np.ndarray, per_device: dict[str, _Totals]
) -> pl.DataFrame:
    """device, operator and the six sums (`_SELF`, `t_*`) of every op node and device of its
    thread with some sum not zero: self sums of the window's events by the node's row, the
    subtree's from the running sums (`_subtree`). On numpy arrays indexed by node row: the
    frame of every node and device, joined to the self sums and to the op names, cost the
    table ~40 ms a rank."""
    b = window["bytes"].fill_null(0).to_numpy()  # a null adds nothing to a sum
    own = {"inc": b, "n_alloc": (b > 0).astype(np.int64), "alloc": np.where(b > 0, b, 0)}
    has_node = window["node"].is_not_null().to_numpy()
    is_op = nodes["is_op"].fill_null(False).to_numpy()
    parts = []
    for device, (present, totals) in per_device.items():
        mine = has_node & (row >= 0) & (window["device"] == device).to_numpy()
        at = row[mine]
        sums = {}
        for c in _SELF:
            sums[c] = np.zeros(nodes.height, dtype=np.int64)
            np.add.at(sums[c], at, own[c][mine].astype(np.int64))
        sums |= {f"t_{c}": totals[c] for c in _SELF}  # not `n`
        keep = present & is_op & np.logical_or.reduce([v != 0 for v in sums.values()])
        rows = np.flatnonzero(keep)
        parts.append(
            pl.DataFrame(
                {
                    "device": pl.Series([device], dtype=pl.String).gather(
                        np.zeros(rows.size, dtype=np.int64)
                    ),
                    "operator": nodes["name"].gather(rows),
                    **{c: v[rows] for c, v in sums.items()},
                }
            )
        )
    if not parts:
        return pl.DataFrame(
            schema={
                "device": pl.String(),
                "operator": pl.String(),
                **{c: pl.Int64() for c in (*_SELF, *(f"t_{c}" for c in _SELF))},
            }
        )
    return pl.concat(parts)


def _rows_of(ids: pl.Series, *asked: pl.Series) -> list[np.ndarray]:
    """The row of `ids` holding each id of each of `asked` (-1: null or none): by an array
    indexed by id where ids are distinct small integers (a tree's event idx, always), else
    by a join (a repeated id: its first row)."""
    n = ids.len()
    if n and ids.dtype.is_integer() and not ids.null_count():
        own = ids.cast(pl.Int64).to_numpy()
        if own.min() >= 0 and own.max() < 8 * n + 1024:
            table = id_rows(own)
            if (table[own] == np.arange(n)).all():  # distinct: no id's row overwritten
                return [rows_at(table, a.cast(pl.Int64).fill_null(-1).to_numpy()) for a in asked]
    table = pl.DataFrame({"__id": ids, "__row": pl.int_range(n, eager=True, dtype=pl.Int64)})
    table = table.unique("__id", keep="first", maintain_order=True)
    return [
        pl.DataFrame({"__id": a.cast(ids.dtype)})
        .join(table, on="__id", how="left", maintain_order="left")["__row"]
        .fill_null(-1)
        .to_numpy()
        for a in asked
    ]


def _by_thread(recs: pl.DataFrame) -> pl.DataFrame:
    """The events of `recs` on a thread sorted by thread (`key`) and ts, with whether each
    is attributed (`att`) and its size (a null one adds nothing): kept per `recs` frame.
    One table for the subtree sums and the calls' count of events (two tables, sorted and
    searched apart, cost twice as much)."""
    return job_cached(
        {0: recs},
        "memory_stats_by_thread",
        lambda: (
            recs.filter(pl.col("tid").is_not_null())
            .select(
                pl.col("tid").alias("key"),
                "device",
                "ts",
                pl.col("node").is_not_null().alias("att"),
                pl.col("bytes").fill_null(0),
            )
            .sort("key", "ts", maintain_order=True)
        ),
    )


class _Spans(NamedTuple):
    """The nodes' threads and [start, end) clipped to the window, as numpy arrays, with the
    node rows sorted by thread (`by_key`) and each thread's run in it."""

    key: np.ndarray
    start: np.ndarray
    end: np.ndarray
    by_key: np.ndarray
    runs: dict[object, tuple[int, int]]


def _spans(nodes: pl.DataFrame, clip: tuple[int | None, int | None]) -> _Spans:
    lo_clip, hi_clip = clip
    starts, ends = pl.col("start"), pl.col("end")
    if lo_clip is not None:
        starts = pl.max_horizontal(starts, pl.lit(lo_clip))
    if hi_clip is not None:
        ends = pl.min_horizontal(ends, pl.lit(hi_clip))
    spans = nodes.select("key", starts.alias("start"), pl.max_horizontal(starts, ends).alias("end"))
    key = spans["key"].to_numpy()
    by_key = np.argsort(key, kind="stable")
    ordered = key[by_key]
    first, last = interval_arrays.run_bounds(ordered)
    runs = {
        k: (a, b)
        for k, a, b in zip(ordered[first].tolist(), first.tolist(), last.tolist(), strict=True)
    }
    return _Spans(key, spans["start"].to_numpy(), spans["end"].to_numpy(), by_key, runs)


#: Per device: which nodes' threads have attributed events of it, and each node's sums
_Totals = tuple[np.ndarray, dict[str, np.ndarray]]


def _subtree(spans: _Spans, table: pl.DataFrame) -> tuple[np.ndarray, dict[str, _Totals]]:
    """Each node's count of events (attributed or not) with start <= ts < end on its thread,
    [start, end) clipped, and per device of the attributed ones `_Totals`: the sums
    (`_SELF`) of those of that device. Binary searches of the nodes' ends in each thread's
    times (a handful of threads), once for every device: running sums of each device's
    values (zero elsewhere) read at both ends."""
    n = spans.key.size
    inside = np.zeros(n, dtype=np.int64)
    key = table["key"].to_numpy()
    ts = table["ts"].to_numpy()
    first, last = interval_arrays.run_bounds(key)
    att = table["att"].to_numpy()
    devices = table["device"].filter(table["att"]).unique().sort().drop_nulls().to_list()
    b = table["bytes"].to_numpy()
    own = {"inc": b, "n_alloc": (b > 0).astype(np.int64), "alloc": np.where(b > 0, b, 0)}
    mine_of = {d: att & (table["device"] == d).fill_null(False).to_numpy() for d in devices}
    cums = {d: {c: np.cumsum(np.where(m, own[c], 0)) for c in _SELF} for d, m in mine_of.items()}
    out = {
        d: (np.zeros(n, dtype=bool), {c: np.zeros(n, dtype=np.int64) for c in _SELF})
        for d in devices
    }
    for k, a, z in zip(key[first].tolist(), first.tolist(), last.tolist(), strict=True):
        run = spans.runs.get(k)
        if run is None:
            continue
        mine = spans.by_key[run[0] : run[1]]
        lo = a + np.searchsorted(ts[a:z], spans.start[mine], "left")
        hi = a + np.searchsorted(ts[a:z], spans.end[mine], "left")
        inside[mine] = hi - lo
        for d in devices:
            if not mine_of[d][a:z].any():
                continue
            present, totals = out[d]
            present[mine] = True
            for c in _SELF:
                totals[c][mine] = _before(cums[d][c], hi) - _before(cums[d][c], lo)
    return inside, {d: v for d, v in out.items() if v[0].any()}


def _before(cum: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The running sum just before rows `at` (0 before the first row)."""
    return np.where(at > 0, cum[np.maximum(at - 1, 0)], 0)


def _calls(nodes: pl.DataFrame, up: np.ndarray, processed: np.ndarray) -> pl.DataFrame:
    """Per operator name, the calls the plugin counts (see the module doc): `up`, each
    node's parent's row; a frame is `processed` when some event of its thread lies inside
    it."""
    processed = np.append(processed, False)  # the last: no node
    top = nodes["eff_parent"].is_null().to_numpy()
    reached = nodes["is_op"].fill_null(False).to_numpy() & (top | processed[up])
    return (
        nodes["name"]
        .filter(pl.Series(reached))
        .to_frame("operator")
        .group_by("operator")
        .agg(pl.len().cast(pl.Int64).alias("calls"))
    )
