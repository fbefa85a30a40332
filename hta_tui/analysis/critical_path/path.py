"""The critical path of one rank's step: build the graph, take its longest path, say what
bounds each edge on it, and re-run it with some edges scaled ("what if")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from hta_tui.analysis.critical_path import graph as g
from hta_tui.analysis.critical_path import longest
from hta_tui.analysis.critical_path.longest import CycleError
from hta_tui.analysis.hta_view import with_times
from hta_tui.analysis.rank_column import tagged

NS_PER_US = 1000


@dataclass
class RankPath:
    """One rank's window, its graph, the path (edge ids) and each edge's bound type."""

    rank: int
    window: tuple[int, int]
    graph: g.Graph
    order: np.ndarray
    path: np.ndarray
    length_ns: int
    bound: np.ndarray  # per edge: index into BOUND_NAMES


#: Bound types by index; the last, "", is the weight-0 dependencies'.
BOUND_NAMES: tuple[str, ...] = (*g.BOUND_TYPES, "")


def prepared(events: pl.DataFrame, *, hta_compat: bool = False) -> pl.DataFrame:
    """Events with `start` / `end` / `dur` on HTA's timeline (its rounding with hta_compat)."""
    return with_times(events, hta_compat=hta_compat)


def windows(
    events: pl.DataFrame, annotation: str, instance_id: int | tuple[int, int] | None
) -> tuple[int, int] | None:
    """HTA's window: from the first to the last chosen instance of the CPU-side events whose
    name contains `annotation` (in time order; "" = the whole trace); None when absent."""
    if events.is_empty():
        return None
    if annotation == "":
        return int(events["start"].min()), int(events["end"].max())  # type: ignore[arg-type]
    first, last = (
        (0, 0)
        if instance_id is None
        else (instance_id if isinstance(instance_id, tuple) else (instance_id, instance_id))
    )
    ann = (
        events.filter(
            pl.col("stream").is_null() & pl.col("name").str.contains(annotation, literal=True)
        )
        .sort("start", "idx")
        .slice(first, max(last - first + 1, 0))
    )
    if ann.is_empty():
        return None
    return int(ann["start"].min()), int(ann["end"].max())  # type: ignore[arg-type]


def solve(
    graph: g.Graph, weight: np.ndarray | None = None, order: np.ndarray | None = None
) -> tuple[int, np.ndarray, np.ndarray]:
    """(length, path edges, topological order) of a graph, with its weights or others."""
    n = 2 * graph.nodes.height
    w = graph.weight if weight is None else weight
    if order is None:
        return longest.solve(n, graph.src, graph.dst, w)
    length, path = longest.longest_path(n, graph.src, graph.dst, w, order)
    return length, path, order


def rank_path(
    events: pl.DataFrame,
    rank: int,
    window: tuple[int, int],
    *,
    hta_launches: bool = False,
    data_loading: str | None = None,
    queue: pl.DataFrame | None = None,
) -> RankPath:
    """One rank's critical path in a window of prepared events. CycleError when the
    dependencies loop (then there is no path). `queue`: the rank's `graph.queue_at`, when
    several windows of one rank share it. (`graph.build_many` of one window: the report's
    ranks and steps are made at once, `tables.rank_paths`.)"""
    if queue is None:
        queue = g.queue_at(events, hta_launches=hta_launches)
    cpu_only = not hta_launches and events.filter(pl.col("stream").is_not_null()).is_empty()
    make = g.build_many(
        tagged([(rank, events)]),
        [g.Window(rank, *window, extra=cpu_only)],
        tagged([(rank, queue)]),
        data_loading,
        graph_kernels=not hta_launches,
    )
    return path_of(rank, window, make[0], data_loading)


def path_of(
    rank: int,
    window: tuple[int, int],
    make: Callable[[], tuple[g.Graph, np.ndarray]],
    data_loading: str | None = None,
) -> RankPath:
    """The path of one graph of `graph.build_many` (its maker, which says each edge's bound
    type too). CycleError when the dependencies loop."""
    graph, bound = make()
    length, path, order = solve(graph)
    return RankPath(rank, window, graph, order, path, length, bound)


def breakdown(rp: RankPath, weight: np.ndarray | None = None) -> dict[str, int]:
    """ns on the path per bound type."""
    w = (rp.graph.weight if weight is None else weight)[rp.path]
    sums = np.bincount(rp.bound[rp.path], weights=w, minlength=len(BOUND_NAMES))
    return {name: int(np.rint(sums[i])) for i, name in enumerate(BOUND_NAMES) if name}


def edges_table(rp: RankPath, *, path_only: bool = True) -> pl.DataFrame:
    """The path's edges in path order: type, weight, the attributed event and its bound."""
    ids = rp.path if path_only else np.arange(rp.graph.src.size)
    nodes = rp.graph.nodes
    row = rp.graph.row[ids]
    ev = nodes.select("idx", "name", "stream", "pid", "tid")[np.maximum(row, 0).tolist()]
    ts = rp.graph.node_ts
    node_idx = nodes["idx"].to_numpy().astype(np.int64)
    miss = pl.Series(row < 0)
    return (
        pl.DataFrame(
            {
                "rank": pl.Series([rp.rank] * ids.size, dtype=pl.Int64),
                "order": pl.Series(np.arange(ids.size), dtype=pl.Int64),
                "type": pl.Series(
                    [g.EDGE_TYPES[t] for t in rp.graph.type[ids].tolist()], dtype=pl.String
                ),
                "start_ns": ts[rp.graph.src[ids]],
                "end_ns": ts[rp.graph.dst[ids]],
                # the events whose begin/end nodes the edge joins (HTA's events on the path)
                "from_idx": node_idx[rp.graph.src[ids] // 2],
                "to_idx": node_idx[rp.graph.dst[ids] // 2],
                "duration": rp.graph.weight[ids] / NS_PER_US,
                "bound_by": pl.Series(
                    [BOUND_NAMES[b] for b in rp.bound[ids].tolist()], dtype=pl.String
                ),
            }
        )
        .with_columns(
            ev["idx"].cast(pl.Int64).alias("event_idx"),
            ev["name"].alias("s_name"),
            ev["stream"],
            ev["pid"],
            ev["tid"],
        )
        .with_columns(
            *(
                pl.when(miss).then(None).otherwise(pl.col(c)).alias(c)
                for c in ("event_idx", "s_name", "stream", "pid", "tid")
            )
        )
    )


_EDGE_PARTS = ("instance_id", "rank", "order", "type", "start_ns", "end_ns", "from_idx")
_EDGE_PARTS += ("to_idx", "duration", "bound_by", "at")


def edges_tables(paths: list[tuple[int, RankPath]]) -> pl.DataFrame:
    """`edges_table` of each (instance id, path), one after another with a leading
    `instance_id`: made at once (`edges_table` per path cost ~3 queries, a tiny rank's
    step); per path when the paths' nodes disagree in a column's type."""
    cols = ("idx", "name", "stream", "pid", "tid")
    if len({_dtypes(rp.graph.nodes, cols) for _, rp in paths}) != 1:
        return pl.concat(
            [
                edges_table(rp).select(pl.lit(i, pl.Int64).alias("instance_id"), pl.all())
                for i, rp in paths
            ]
        )
    parts: dict[str, list[np.ndarray]] = {k: [] for k in _EDGE_PARTS}
    offset = 0
    for i, rp in paths:
        gr, ids = rp.graph, rp.path
        ts = gr.node_ts
        node_idx = gr.nodes["idx"].to_numpy().astype(np.int64)
        src, dst, row = gr.src[ids], gr.dst[ids], gr.row[ids]
        parts["instance_id"].append(np.full(ids.size, i, dtype=np.int64))
        parts["rank"].append(np.full(ids.size, rp.rank, dtype=np.int64))
        parts["order"].append(np.arange(ids.size, dtype=np.int64))
        parts["type"].append(gr.type[ids])
        parts["start_ns"].append(ts[src])
        parts["end_ns"].append(ts[dst])
        parts["from_idx"].append(node_idx[src // 2])
        parts["to_idx"].append(node_idx[dst // 2])
        parts["duration"].append(gr.weight[ids] / NS_PER_US)
        parts["bound_by"].append(rp.bound[ids])
        parts["at"].append(np.where(row < 0, -1, row + offset))
        offset += gr.nodes.height
    cat = {k: np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for k, v in parts.items()}
    nodes = pl.concat([pl.DataFrame([rp.graph.nodes[c] for c in cols]) for _, rp in paths])
    at = cat.pop("at")
    ev = nodes[np.maximum(at, 0).tolist()]
    miss = pl.Series(at < 0)
    return pl.DataFrame(
        {
            **{k: cat[k] for k in ("instance_id", "rank", "order")},
            "type": pl.Series(
                np.array(g.EDGE_TYPES, dtype=object)[cat["type"].astype(np.int64)],
                dtype=pl.String,
            ),
            **{k: cat[k] for k in ("start_ns", "end_ns", "from_idx", "to_idx", "duration")},
            "bound_by": pl.Series(
                np.array(BOUND_NAMES, dtype=object)[cat["bound_by"].astype(np.int64)],
                dtype=pl.String,
            ),
            "event_idx": ev["idx"],
            "s_name": ev["name"],
            "stream": ev["stream"],
            "pid": ev["pid"],
            "tid": ev["tid"],
        }
    ).with_columns(
        pl.when(miss).then(None).otherwise(pl.col("event_idx").cast(pl.Int64)).alias("event_idx"),
        *(
            pl.when(miss).then(None).otherwise(pl.col(c)).alias(c)
            for c in ("s_name", "stream", "pid", "tid")
        ),
    )


def _dtypes(frame: pl.DataFrame, columns: tuple[str, ...]) -> tuple[pl.DataType, ...]:
    """The types of a frame's `columns` (its `schema` is ~4 us a call, each path's nodes')."""
    types = dict(zip(frame.columns, frame.dtypes, strict=True))
    return tuple(types[c] for c in columns)


#: What-if categories: a bound type, scaled by a factor.
WHAT_IF_TYPES = g.BOUND_TYPES


def what_if(
    rp: RankPath,
    scale: Mapping[str, float] | None = None,
    events: Mapping[int, float] | None = None,
) -> tuple[int, RankPath]:
    """The path again with edge weights scaled along today's dependencies: a bound type by
    a factor (`{"gpu_compute_bound": 0.5}` = GPU compute 2x faster; 0 removes it), or one
    event (its trace `idx`) by a factor. Returns the new length (ns) and the new path."""
    w = rp.graph.weight.astype(np.float64)
    factor = np.ones(len(BOUND_NAMES))
    for name, k in (scale or {}).items():
        if name not in BOUND_NAMES[:-1]:
            raise ValueError(f"unknown bound type {name!r} (one of: {', '.join(g.BOUND_TYPES)})")
        factor[BOUND_NAMES.index(name)] = k
    w = w * factor[rp.bound]
    if events:
        idx = rp.graph.nodes["idx"].to_numpy().astype(np.int64)
        ev = np.where(rp.graph.row >= 0, idx[np.maximum(rp.graph.row, 0)], -1)
        for i, k in events.items():
            w = np.where(ev == i, w * k, w)
    w_int = np.round(w).astype(np.int64)
    length, path, _ = solve(rp.graph, w_int, rp.order)
    new = RankPath(
        rp.rank,
        rp.window,
        g.Graph(rp.graph.nodes, rp.graph.src, rp.graph.dst, rp.graph.type, w_int, rp.graph.row),
        rp.order,
        path,
        length,
        rp.bound,
    )
    return length, new


#: The what-if questions asked of every path: (label, bound type, factor).
SCENARIOS: tuple[tuple[str, str, float], ...] = (
    ("GPU compute were 2x faster", "gpu_compute_bound", 0.5),
    ("communication were 2x faster", "gpu_communication_bound", 0.5),
    ("the CPU were 2x faster", "cpu_bound", 0.5),
    ("kernel launches cost nothing", "gpu_kernel_launch_overhead", 0.0),
    ("data loading cost nothing", "data_loading", 0.0),
)


def sentence(before_ns: int, after_ns: int, what: str) -> str:
    """ "step time 212.000 ms -> est. 171.000 ms if ..., keeping today's dependencies"."""
    return (
        f"step time {before_ns / 1e6:.3f} ms -> est. {after_ns / 1e6:.3f} ms "
        f"if {what}, keeping today's dependencies"
    )


def what_ifs_of(paths: Sequence[RankPath]) -> list[list[tuple[str, int, str]]]:
    """The standard questions whose bound type is on each path: (label, new length ns,
    sentence), the largest saving first; each question answered for every path that asks it at once
    (`longest.longest_lengths`: `what_if`'s length, without a graph and a path a question)."""
    asked: list[dict[str, int]] = [{} for _ in paths]
    bounds = [breakdown(rp) for rp in paths]
    for label, bound, k in SCENARIOS:
        mine = [i for i, b in enumerate(bounds) if b.get(bound, 0) > 0]
        if not mine:
            continue
        factor = np.ones(len(BOUND_NAMES))
        factor[BOUND_NAMES.index(bound)] = k
        graphs = [paths[i] for i in mine]
        sizes = np.array([2 * rp.graph.nodes.height for rp in graphs], dtype=np.int64)
        firsts = np.r_[0, np.cumsum(sizes)[:-1]]
        edges = [rp.graph.src.size for rp in graphs]
        at = np.repeat(firsts, edges)
        weight = np.concatenate(
            [rp.graph.weight.astype(np.float64) * factor[rp.bound] for rp in graphs]
        )
        lengths = longest.longest_lengths(
            int(sizes.sum()),
            np.concatenate([rp.graph.src for rp in graphs]) + at,
            np.concatenate([rp.graph.dst for rp in graphs]) + at,
            np.round(weight).astype(np.int64),
            np.concatenate([rp.order + f for rp, f in zip(graphs, firsts.tolist(), strict=True)]),
            firsts,
        )
        for i, new in zip(mine, lengths.tolist(), strict=True):
            asked[i][label] = new
    return [
        sorted(
            ((label, new, sentence(rp.length_ns, new, label)) for label, new in mine.items()),
            key=lambda x: x[1],
        )
        for rp, mine in zip(paths, asked, strict=True)
    ]


__all__ = [
    "CycleError",
    "RankPath",
    "breakdown",
    "edges_table",
    "path_of",
    "rank_path",
    "what_if",
    "windows",
]
