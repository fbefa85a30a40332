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

from dataclasses import dataclass

import numpy as np
import polars as pl

from hta_tui.analysis.critical_path.device import kernel_edges, queue_at, ranks_queue_at
from hta_tui.analysis.critical_path.host import call_stack_edges, lock_edges
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
    "build",
    "clip",
    "is_comm",
    "queue_at",
    "ranks_queue_at",
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


def clip(
    events: pl.DataFrame, w0: int, w1: int, *, graph_kernels: bool = True
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """HTA's window: CPU events starting in [w0, w1] with a duration, and GPU events whose
    launch does. Events carry `start` / `end` (ns). Without `graph_kernels` (HTA's limit)
    the ops of a graph launch are left out."""
    cpu = events.filter(
        pl.col("stream").is_null() & pl.col("start").is_between(w0, w1) & (pl.col("dur") > 0)
    )
    launches = cpu.filter(
        pl.col("kind").is_in(("runtime", "driver")) & pl.col("correlation").is_not_null()
    ).select(
        "correlation",
        pl.col("idx").alias("launch_idx"),
        pl.col("name").alias("launch_name"),
        pl.col("start").alias("launch_start"),
    )
    launches = launches.unique("correlation", keep="first")
    if not graph_kernels:
        launches = launches.filter(~pl.col("launch_name").is_in(GRAPH_LAUNCHES))
    gpu = events.filter(
        pl.col("stream").is_not_null()
        & pl.col("kind").is_in(("kernel", "memcpy", "memset", "sync"))
    ).join(launches, on="correlation", how="inner")
    return cpu, gpu


def build(
    events: pl.DataFrame,
    w0: int,
    w1: int,
    *,
    queue: pl.DataFrame,
    data_loading: str | None = None,
    graph_kernels: bool = True,
    extra_nodes: str | None = None,
) -> Graph:
    """The graph of one rank between w0 and w1 (ns, `start` timeline). `events` has `start`,
    `end`, `dur` (ns); `queue` the queue length at each launch and GPU op (`queue_at`)."""
    cpu, gpu = clip(events, w0, w1, graph_kernels=graph_kernels)
    # --- nodes: CPU ops / runtime / driver (+ data loading), GPU work
    node_cpu = pl.col("cat").is_in(NODE_CATS)
    if data_loading:
        node_cpu = node_cpu | pl.col("name").str.contains(data_loading)
    if extra_nodes:
        node_cpu = node_cpu | pl.col("name").str.contains(extra_nodes)
    cols = ["idx", "name", "start", "end", "stream", "pid", "tid"]
    work = gpu.filter(pl.col("kind") != "sync")
    nodes = pl.concat(
        [
            cpu.filter(node_cpu).select(cols),
            work.select(cols),
        ]
    ).with_row_index("row")
    n = nodes.height
    ts = np.empty(2 * n, dtype=np.int64)
    ts[0::2] = nodes["start"].to_numpy()
    ts[1::2] = nodes["end"].to_numpy()
    row_of_idx = RowOf(nodes["idx"].to_numpy(), nodes["row"].to_numpy())
    parts: list[dict] = []

    # --- the runtime lock, across threads
    lock, is_lock = lock_edges(nodes, ts)
    parts += lock

    # --- call stacks, thread by thread (the backward thread walked as the forward one)
    parts += call_stack_edges(cpu, nodes, ts, row_of_idx, is_lock)

    # --- kernels, launches, kernel gaps and syncs
    parts += kernel_edges(gpu, nodes, ts, row_of_idx, queue)

    cat = {
        k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, np.int64)
        for k in ("src", "dst", "type", "weight", "row")
    }
    w = cat["weight"].astype(np.int64)
    neg = w < 0
    return Graph(
        nodes=nodes,
        src=cat["src"].astype(np.int64),
        dst=cat["dst"].astype(np.int64),
        type=cat["type"].astype(np.int8),
        weight=np.where(neg, 0, w),
        row=cat["row"].astype(np.int64),
        negative_edges=int(neg.sum()),
        negative_ns=int(-w[neg].sum()),
    )
