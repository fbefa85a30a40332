"""The critical-path graph of one rank's window: HTA 0.6's edge semantics as an edge table.

Every event the path may run through has a begin and an end node (node id = 2 * row + 0/1
of the `nodes` frame); the edges, each with a weight in ns and the event it is attributed to:

- `operator`: consecutive boundaries on a CPU thread, walked in call-stack order (HTA's
  depth-first walk of the nesting), and each kernel's span. Between two top-level ops the
  edge is a `dependency` of weight 0 (the thread was idle); the end of a blocking sync call
  (`cudaStreamSynchronize`, ...) weighs 0 (the time it waited belongs to the GPU).
- the CUDA runtime lock: overlapping `cudaLaunchKernel` / `cudaMemcpyAsync` /
  `cudaHostAlloc` calls on different threads wait for one another in the order they end.
- `kernel_launch_delay`: launch -> kernel start, when the stream was empty at the launch
  (queue length 1 after it, 0 when the kernel starts) and the previous kernel had ended.
- `kernel_kernel_delay`: previous kernel's end -> this kernel's start on a stream, when
  shorter than 1.5 ms (HTA's threshold: a longer gap hides a dependency it cannot see).
- `sync_dependency`: a stream's (Stream Sync) or every stream's (Context Sync) last kernel
  -> the end of the runtime call that waited for it.

Where we go further than HTA 0.6.1 (DEVIATIONS, each tested):
- a graph launch (`cudaGraphLaunch`, `hipGraphLaunch`) launches every kernel of its
  correlation: the first on each stream gets the launch-delay rule (one queue entry per
  launch and stream), every one a weight-0 launch -> kernel edge (it cannot start before it);
- a CPU-only rank has a path (its threads); HTA asserts on the missing queue length;
- on a rank without GPU work, the collective backend ops (`gloo:all_reduce`, annotations on
  the backend's worker threads) get nodes too, so ranks can be joined there (`tables`);
- GPU-side `ProfilerStep` copies (on a stream) are not windows;
- negative weights (a child ending after its parent, clock skew) are set to 0 like HTA's,
  but counted and summed (`negative_edges`, `negative_ns`) instead of a log warning.
Not reproduced: `Stream Wait Event` / `Event Sync` GPU-GPU dependencies (they need the
cudaEventRecord correlation, which the parser does not keep); on the reference traces they
occur only in critical_path/alexnet, whose path is 99.97% CPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from hta_tui.analysis.comm_kinds import COLLECTIVE_OP
from hta_tui.analysis.critical_path.device import (
    kernel_edges,
    kernel_table,
    queue_at,
    ranks_queue_at,
    ranks_queues,
    sync_edges,
)
from hta_tui.analysis.critical_path.host import call_stack_edges, lock_edges, thread_remapped
from hta_tui.analysis.critical_path.rules import (
    BLOCKING_CALLS,
    BOUND_TYPES,
    COMM_KERNEL,
    DEP,
    EDGE_TYPES,
    GRAPH_LAUNCHES,
    HTA_LAUNCHES,
    KERNEL_GAP_LIMIT_NS,
    KK,
    LAUNCH,
    LOCK_CALLS,
    NODE_CATS,
    OP,
    SYNC,
    RowOf,
    is_comm,
    nulls,
)

__all__ = [
    "BLOCKING_CALLS",
    "BOUND_TYPES",
    "COMM_KERNEL",
    "DEP",
    "EDGE_TYPES",
    "GRAPH_LAUNCHES",
    "HTA_LAUNCHES",
    "KERNEL_GAP_LIMIT_NS",
    "KK",
    "LAUNCH",
    "LOCK_CALLS",
    "NODE_CATS",
    "OP",
    "SYNC",
    "Graph",
    "Window",
    "build_many",
    "is_comm",
    "nulls",
    "queue_at",
    "ranks_queue_at",
    "ranks_queues",
]


@dataclass
class Graph:
    """One rank's window: `nodes` (one row per event with nodes: row, idx, name, start, end,
    stream, pid, tid) and `edges` numpy columns (src, dst node ids; type; weight ns, clamped
    at 0; attributed row or -1)."""

    nodes: pl.DataFrame
    src: np.ndarray
    dst: np.ndarray
    type: np.ndarray
    weight: np.ndarray
    row: np.ndarray
    negative_edges: int = 0
    negative_ns: int = 0

    @property
    def node_ts(self) -> np.ndarray:
        """Each node's time (ns): begin nodes at even ids, end nodes at odd ids."""
        out = np.empty(2 * self.nodes.height, dtype=np.int64)
        out[0::2] = self.nodes["start"].to_numpy()
        out[1::2] = self.nodes["end"].to_numpy()
        return out


#: The graph's key in the batch's tables (`build_many`): one rank's window.
G = "_g"
NODE_COLUMNS = ("row", "idx", "name", "start", "end", "stream", "pid", "tid")


@dataclass(frozen=True)
class Window:
    """One graph to build: a rank's window [w0, w1] (ns); `extra`: the rank's collective
    backend ops get nodes (a CPU-only rank, DEVIATION)."""

    rank: int
    w0: int
    w1: int
    extra: bool = False


def build_many(
    every: pl.DataFrame,
    windows: list[Window],
    queue: pl.DataFrame,
    data_loading: str | None = None,
    *,
    graph_kernels: bool = True,
) -> list[Callable[[], tuple[Graph, np.ndarray]]]:
    """Each window's graph, from the prepared events of its ranks one after another with a
    leading `rank` (`per_rank.tagged`) and their queue lengths (`ranks_queues`): the window
    (HTA's clip), the nodes, the kernels and the threads made in one query set over every
    window at once (`G` in every key; a tiny rank's graph alone cost ~20 queries a step),
    then the edges of small graphs in numpy over the batch's arrays at once (a graph at a
    time cost ~0.3 ms of numpy calls a tiny step), those of big ones graph by graph when
    asked (a checkpoint between two: a view left behind stops after the graph it is in).
    One maker per window: what fails inside the batch is made again graph by graph, so it
    costs only its window (the caller says which); each makes the graph and each edge's
    bound type."""
    cpu, gpu, nodes = _clip(every, windows, data_loading, graph_kernels=graph_kernels)
    threads = thread_remapped(cpu, G)
    kernels, syncs = kernel_table(gpu, queue, G)
    tables = (nodes, threads, kernels, syncs)
    if len(windows) == 1:  # (its tables are its graph's)
        return [functools.partial(_first, data_loading, *tables)]
    if nodes.height <= AT_ONCE_NODES:
        try:
            made = _graphs(*tables, len(windows), data_loading)
            return [functools.partial(_made, m) for m in made]
        except Exception:
            pass  # (graph by graph: what fails costs only its window)
    pieces = [_by_graph(t) for t in tables]
    return [
        functools.partial(_alone, data_loading, *(p(i) for p in pieces))
        for i in range(len(windows))
    ]


#: A batch's graphs are made at once up to this many nodes (tiny ranks' steps: ~20 each).
AT_ONCE_NODES = 200_000


def _made(graph: tuple[Graph, np.ndarray]) -> tuple[Graph, np.ndarray]:
    return graph


def _alone(data_loading: str | None, *tables: pl.DataFrame) -> tuple[Graph, np.ndarray]:
    """One window's graph from its slices of the batch's tables (a batch of one)."""
    return _first(data_loading, *(t.with_columns(pl.lit(0, pl.Int64).alias(G)) for t in tables))


def _first(data_loading: str | None, *tables: pl.DataFrame) -> tuple[Graph, np.ndarray]:
    """The graph of tables of one window (`G` 0)."""
    return _graphs(*tables, 1, data_loading)[0]


def _by_graph(table: pl.DataFrame) -> Callable[[int], pl.DataFrame]:
    """Graph number -> its rows of a batch table (without `G`), in the table's order."""
    mine = table.partition_by(G, as_dict=True, include_key=False, maintain_order=True)
    empty = pl.DataFrame([c for c in table.clear().get_columns() if c.name != G])
    return lambda i: mine.get((i,), empty)


def _inside(narrow: pl.LazyFrame, wins: pl.DataFrame) -> pl.DataFrame:
    """`_clip`'s host events (`_pos`) starting inside their rank's window of `wins` (a
    window a rank), with the window's columns. One window (a rank's part: one rank) by a
    filter on its bounds, where the join on the rank hashed every host event (~4 ms a
    100 MB rank); the rows the join keeps, in the events' order (`_clip` sorts them)."""
    if wins.height == 1:
        w = wins.row(0, named=True)
        inside = (pl.col("rank") == w["rank"]) & pl.col("start").is_between(w["_w0"], w["_w1"])
        window = (pl.lit(w[c], wins.schema[c]).alias(c) for c in wins.columns if c != "rank")
        return narrow.filter(inside).select("_pos", *window).collect()
    return (
        narrow.join(wins.lazy(), on="rank")
        .filter(pl.col("start").is_between(pl.col("_w0"), pl.col("_w1")))
        .drop("rank", "start")
        .collect()
    )


def _clip(
    every: pl.DataFrame, windows: list[Window], data_loading: str | None, *, graph_kernels: bool
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """HTA's window of every graph: CPU events starting in [w0, w1] with a duration, GPU
    events whose launch does (without `graph_kernels`, HTA's limit, not the ops of a graph
    launch), each in its events' order; and the nodes: each graph's CPU ops / runtime /
    driver (+ data loading, + the collective ops of `extra`) then its GPU work, numbered."""
    wins = pl.DataFrame(
        {
            G: range(len(windows)),
            "rank": [w.rank for w in windows],
            "_w0": [w.w0 for w in windows],
            "_w1": [w.w1 for w in windows],
            "_extra": [w.extra for w in windows],
        },
        schema={
            G: pl.Int64,
            "rank": pl.Int64,
            "_w0": pl.Int64,
            "_w1": pl.Int64,
            "_extra": pl.Boolean,
        },
    )
    ev = every.with_row_index("_pos")
    host = ev.lazy().filter(pl.col("stream").is_null() & (pl.col("dur") > 0))
    # a rank's i-th windows of every rank at a time: an event joined to one window of its
    # rank, never to all of them at once (every step of 8 x 100 MB ranks: the CPU events
    # times the steps)
    nth, seen = [], dict.fromkeys((w.rank for w in windows), 0)
    for w in windows:
        nth.append(seen[w.rank])
        seen[w.rank] += 1
    # (each event's window found on the columns that find it, then its rows gathered: the
    # join of every column before the filter copied every host event, ~70 ms a 100 MB rank)
    narrow = host.select("rank", "_pos", "start")
    found = [
        _inside(narrow, wins.filter(pl.Series(nth) == i))
        for i in range(max(seen.values(), default=0))
    ]
    if found:
        picked = pl.concat(found).sort(G, "_pos")
        cpu = pl.concat([ev[picked["_pos"]], picked.drop("_pos")], how="horizontal")
    else:
        cpu = host.join(wins.lazy(), on="rank").collect()
    launches = cpu.filter(
        pl.col("kind").is_in(("runtime", "driver")) & pl.col("correlation").is_not_null()
    ).select(
        G,
        "rank",
        "correlation",
        pl.col("idx").alias("launch_idx"),
        pl.col("name").alias("launch_name"),
        pl.col("start").alias("launch_start"),
    )
    launches = launches.unique([G, "correlation"], keep="first")
    if not graph_kernels:
        launches = launches.filter(~pl.col("launch_name").is_in(GRAPH_LAUNCHES))
    # (in the events' order: a join's own order varies with polars' threads, and the nodes'
    # numbering with it: the path across ranks' graph tables differed between two runs)
    gpu = (
        ev.filter(
            pl.col("stream").is_not_null()
            & pl.col("kind").is_in(("kernel", "memcpy", "memset", "sync"))
        )
        .join(launches, on=["rank", "correlation"], how="inner")
        .sort(G, "_pos")
    )
    node_cpu = pl.col("cat").is_in(NODE_CATS)
    if data_loading:
        node_cpu = node_cpu | pl.col("name").str.contains(data_loading)
    node_cpu = node_cpu | (pl.col("_extra") & pl.col("name").str.contains(COLLECTIVE_OP))
    cols = [G, *NODE_COLUMNS[1:]]
    nodes = (
        pl.concat(
            [cpu.filter(node_cpu).select(cols), gpu.filter(pl.col("kind") != "sync").select(cols)]
        )
        .sort(G, maintain_order=True)
        .select(
            G,
            pl.int_range(pl.len(), dtype=pl.UInt32).over(G).alias("row"),
            *NODE_COLUMNS[1:],
            is_comm(pl.col("name")).alias("_comm"),
        )
    )
    return cpu, gpu, nodes


def _graphs(
    nodes: pl.DataFrame,
    threads: pl.DataFrame,
    kernels: pl.DataFrame,
    syncs: pl.DataFrame,
    count: int,
    data_loading: str | None = None,
) -> list[tuple[Graph, np.ndarray]]:
    """The `count` graphs of a batch's tables (the nodes graph after graph, numbered
    within each), every graph's edges made at once over the batch's node ids (each node's
    graph part of every key), then cut graph by graph in the order each graph alone makes
    them (the order its longest path's ties follow); and each edge's bound type."""
    graph = nodes.get_column(G).to_numpy().astype(np.int64)
    sizes = np.bincount(graph, minlength=count)
    first = np.concatenate([[0], np.cumsum(sizes)])
    ts = np.empty(2 * nodes.height, dtype=np.int64)
    ts[0::2] = nodes["start"].to_numpy()
    ts[1::2] = nodes["end"].to_numpy()
    row_of_idx = RowOf(nodes["idx"].to_numpy(), np.arange(nodes.height), graph)
    parts: list[dict] = []

    # --- the runtime lock, across threads
    lock, is_lock = lock_edges(nodes, ts, graph)
    parts += lock

    # --- call stacks, thread by thread (the backward thread walked as the forward one)
    parts += call_stack_edges(threads, nodes, ts, row_of_idx, is_lock, G)

    # --- kernels, launches, kernel gaps, then each graph's syncs
    parts += kernel_edges(kernels, ts, row_of_idx, G)
    if not syncs.is_empty():
        mine = _by_graph(kernels)
        for (i,), s in syncs.partition_by(G, as_dict=True, maintain_order=True).items():
            ask = functools.partial(_rows_in, row_of_idx, i)
            parts += sync_edges(mine(i), s, ts, ask)  # type: ignore[arg-type]

    cat = {
        k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, np.int64)
        for k in ("src", "dst", "type", "weight", "row")
    }
    src = cat["src"].astype(np.int64)
    of = graph[src // 2]
    order = np.argsort(of, kind="stable")  # (each graph's edges in the order alone makes)
    bounds = np.concatenate([[0], np.cumsum(np.bincount(of, minlength=count))]).tolist()
    src, dst = src[order], cat["dst"].astype(np.int64)[order]
    typ, row = cat["type"].astype(np.int8)[order], cat["row"].astype(np.int64)[order]
    w = cat["weight"].astype(np.int64)[order]
    bound = _bounds(nodes, row, typ, data_loading)
    mine_nodes = _by_graph(nodes.select(G, *NODE_COLUMNS))
    out = []
    for i in range(count):
        a, b = bounds[i], bounds[i + 1]
        base = int(first[i])
        wi = w[a:b]
        neg = wi < 0
        ri = row[a:b]
        graph_i = Graph(
            nodes=mine_nodes(i),
            src=src[a:b] - 2 * base,
            dst=dst[a:b] - 2 * base,
            type=typ[a:b],
            weight=np.where(neg, 0, wi),
            row=np.where(ri >= 0, ri - base, ri),
            negative_edges=int(neg.sum()),
            negative_ns=int(-wi[neg].sum()),
        )
        out.append((graph_i, bound[a:b]))
    return out


def _bounds(
    nodes: pl.DataFrame, row: np.ndarray, typ: np.ndarray, data_loading: str | None
) -> np.ndarray:
    """Each edge's bound type (HTA's `bound_by`, an index into `path.BOUND_NAMES`), every
    graph's at once (`row`: the batch's node rows): by edge type, else by the attributed
    event: on the CPU `cpu_bound` (or `data_loading` by name), a communication kernel
    `gpu_communication_bound`, any other GPU op `gpu_compute_bound`."""
    on_gpu = ~nulls(nodes["stream"])
    comm = nodes.get_column("_comm").to_numpy()
    loading = (
        nodes["name"].fill_null("").str.contains(data_loading).to_numpy()
        if data_loading
        else np.zeros(nodes.height, dtype=bool)
    )
    has = row >= 0
    r = np.maximum(row, 0)
    ev_kind = np.where(
        has & on_gpu[r],
        np.where(comm[r], 2, 1),
        np.where(has & loading[r], 5, 0),
    )
    return np.select(
        [typ == KK, typ == LAUNCH, (typ == DEP) | (typ == SYNC)],
        [4, 3, 6],
        ev_kind,
    ).astype(np.int8)


def _rows_in(row_of_idx: RowOf, graph: int, idx: np.ndarray) -> np.ndarray:
    """`row_of_idx` of one graph's events."""
    return row_of_idx(idx, np.full(np.asarray(idx).size, graph, dtype=np.int64))
