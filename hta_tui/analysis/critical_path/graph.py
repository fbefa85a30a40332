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

#: HTA's CUDA_RUNTIME_EVENTS: calls that hold the CUDA runtime lock.
LOCK_CALLS: tuple[str, ...] = ("cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync")
#: HTA's BLOCKING_SYNC_CALLS: host time inside them is waiting, weight 0.
BLOCKING_CALLS: tuple[str, ...] = (
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventQuery",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpyAsync",
)
#: HTA 0.6.1's runtime launch names (`get_runtime_launch_events_mask`).
HTA_LAUNCHES: tuple[str, ...] = (
    "cudaMemsetAsync",
    "cudaMemcpyAsync",
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "runFunction - job_prep_and_submit_for_execution",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipMemsetAsync",
    "hipMemcpyAsync",
    "hipMemcpyWithStream",
)
GRAPH_LAUNCHES: tuple[str, ...] = ("cudaGraphLaunch", "hipGraphLaunch")
#: HTA's KERNEL_KERNEL_DELAY_THRESHOLD_US, in ns.
KERNEL_GAP_LIMIT_NS = 1_500_000
#: HTA's node categories on the CPU (`get_operator_or_cuda_runtime_mask`).
NODE_CATS: tuple[str, ...] = ("cpu_op", "cuda_runtime", "cuda_driver")
#: HTA's CommunicateKernelGroupingPattern (on the shortened name: a leading "void " dropped).
COMM_KERNEL = r"^(void )?(nccl|hip|hccl)|ncclKernel"

EDGE_TYPES: tuple[str, ...] = (
    "critical_path_operator",
    "critical_path_dependency",
    "critical_path_kernel_launch_delay",
    "critical_path_kernel_kernel_delay",
    "critical_path_sync_dependency",
)
OP, DEP, LAUNCH, KK, SYNC = range(5)

BOUND_TYPES: tuple[str, ...] = (
    "cpu_bound",
    "gpu_compute_bound",
    "gpu_communication_bound",
    "gpu_kernel_launch_overhead",
    "gpu_kernel_kernel_overhead",
    "data_loading",
)


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


def _edges(src: np.ndarray, dst: np.ndarray, typ: int, ts: np.ndarray, row: np.ndarray) -> dict:
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    w = ts[dst] - ts[src] if typ not in (DEP, SYNC) else np.zeros(src.size, dtype=np.int64)
    return {
        "src": src,
        "dst": dst,
        "type": np.full(src.size, typ, dtype=np.int8),
        "weight": w,
        "row": np.asarray(row, dtype=np.int64),
    }


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


def _bracket_match(is_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tokens of one nested sequence (+1 start, -1 end): the start each end closes (index
    into the tokens) and each token's depth before it. An end pops whatever is on top of the
    stack (HTA's call stack), so only the token order matters."""
    step = np.where(is_start, 1, -1)
    depth_after = np.cumsum(step)
    depth_before = depth_after - step
    level = np.where(is_start, depth_after, depth_before)
    order = np.lexsort((np.arange(level.size), level))
    # within a level tokens alternate start, end: pair neighbours
    match = np.full(level.size, -1, dtype=np.int64)
    lv = level[order]
    st = is_start[order]
    pair = (~st[1:]) & st[:-1] & (lv[1:] == lv[:-1])
    ends = order[1:][pair]
    match[ends] = order[:-1][pair]
    return match, depth_before


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
    row_of_idx = dict(zip(nodes["idx"].to_list(), nodes["row"].to_list(), strict=True))
    parts: list[dict] = []

    # --- the runtime lock, across threads, in (time, idx) order of its calls' boundaries
    names = nodes["name"].to_numpy()
    is_lock = np.isin(names, LOCK_CALLS) & nodes["stream"].is_null().to_numpy()
    lock_rows = np.flatnonzero(is_lock)
    if lock_rows.size:
        lnode = np.concatenate([2 * lock_rows, 2 * lock_rows + 1])
        lidx = nodes["idx"].to_numpy()[lnode // 2]
        order = np.lexsort((lidx, ts[lnode]))
        seq = lnode[order]
        start = seq % 2 == 0
        # each start is closed by the next end in the sequence
        end_pos = np.flatnonzero(~start)
        nxt = np.searchsorted(end_pos, np.arange(seq.size))
        s = np.flatnonzero(start & (nxt < end_pos.size))
        closing = seq[end_pos[nxt[s]]]
        same = closing // 2 == seq[s] // 2
        parts.append(_edges(seq[s][same], closing[same], OP, ts, seq[s][same] // 2))
        parts.append(_edges(seq[s][~same], closing[~same], DEP, ts, np.full((~same).sum(), -1)))
        e = np.flatnonzero(~start[1:] & ~start[:-1]) + 1
        parts.append(_edges(seq[e - 1], seq[e], DEP, ts, np.full(e.size, -1)))

    # --- call stacks, thread by thread (the backward thread walked as the forward one)
    parts += _call_stack_edges(cpu, nodes, ts, row_of_idx, is_lock)

    # --- kernels, launches, kernel gaps and syncs
    parts += _kernel_edges(gpu, nodes, ts, row_of_idx, queue)

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


def _thread_remap(cpu: pl.DataFrame) -> pl.Expr:
    """HTA merges the backward thread into the forward one when exactly one thread has ops or
    annotations named "...forward..." and exactly one "...autograd..." and they differ."""
    marked = cpu.filter(pl.col("cat").is_in(("cpu_op", "user_annotation")))

    def only(word: str) -> int | None:
        tids = marked.filter(pl.col("name").str.contains(word, literal=True))["tid"].unique()
        return int(tids[0]) if tids.len() == 1 and tids[0] is not None else None

    fwd, bwd = only("forward"), only("autograd")
    if fwd is not None and bwd is not None and fwd != bwd:
        return pl.when(pl.col("tid") == bwd).then(fwd).otherwise(pl.col("tid"))
    return pl.col("tid")


def _call_stack_edges(
    cpu: pl.DataFrame,
    nodes: pl.DataFrame,
    ts: np.ndarray,
    row_of_idx: dict[int, int],
    is_lock: np.ndarray,
) -> list[dict]:
    if cpu.is_empty():
        return []
    t = cpu.select(
        "idx", "start", "end", "dur", "pid", _thread_remap(cpu).alias("tid")
    ).with_columns(pl.col("pid").fill_null(-1), pl.col("tid").fill_null(-1))
    m = t.height
    # tokens: starts then ends, sorted like HTA's compare_events within each thread
    idx = np.tile(t["idx"].to_numpy().astype(np.int64), 2)
    dur = np.tile(t["dur"].to_numpy(), 2)
    time = np.concatenate([t["start"].to_numpy(), t["end"].to_numpy()])
    is_start = np.arange(2 * m) < m
    pid = np.tile(t["pid"].to_numpy(), 2)
    tid = np.tile(t["tid"].to_numpy(), 2)
    k2 = np.where(is_start, -dur, dur)
    k3 = np.where(is_start, idx, -idx)
    order = np.lexsort((k3, k2, is_start, time, tid, pid))
    idx, is_start, pid, tid = idx[order], is_start[order], pid[order], tid[order]
    thread_change = np.concatenate([[True], (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])])
    thread_no = np.cumsum(thread_change)
    # bracket matching per thread: offset each thread's depth by a large level
    match = np.full(idx.size, -1, dtype=np.int64)
    bounds = np.concatenate([np.flatnonzero(thread_change), [idx.size]])
    depth_before = np.zeros(idx.size, dtype=np.int64)
    parent_tok = np.full(idx.size, -1, dtype=np.int64)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        mt, db = _bracket_match(is_start[a:b])
        match[a:b] = np.where(mt >= 0, mt + a, -1)
        depth_before[a:b] = db
        parent_tok[a:b] = _parents(is_start[a:b], db) + np.where(
            _parents(is_start[a:b], db) >= 0, a, 0
        )
    event = np.where(is_start, idx, np.where(match >= 0, idx[np.maximum(match, 0)], -1))
    ev_parent_tok = np.where(
        is_start, parent_tok, np.where(match >= 0, parent_tok[np.maximum(match, 0)], -1)
    )
    ev_parent = np.where(ev_parent_tok >= 0, idx[np.maximum(ev_parent_tok, 0)], -1)
    # keep tokens of events with nodes
    row_arr = (
        np.array([row_of_idx.get(int(i), -1) for i in event.tolist()], dtype=np.int64)
        if event.size
        else event
    )
    keep = row_arr >= 0
    row_k = row_arr[keep]
    start_k = is_start[keep]
    thread_k = thread_no[keep]
    parent_k = ev_parent[keep]
    node = 2 * row_k + (~start_k)
    op_depth_before = np.zeros(node.size, dtype=np.int64)
    if node.size:
        step = np.where(start_k, 1, -1)
        cum = np.cumsum(step)
        first = np.concatenate([[True], thread_k[1:] != thread_k[:-1]])
        base = np.maximum.accumulate(np.where(first, np.arange(node.size), 0))
        cum_before = cum - step
        op_depth_before = cum_before - np.where(base > 0, cum[np.maximum(base - 1, 0)], 0)
    if node.size < 2:
        return []
    a, b = np.arange(node.size - 1), np.arange(1, node.size)
    same_thread = thread_k[a] == thread_k[b]
    lock_a, lock_b = is_lock[row_k[a]], is_lock[row_k[b]]
    shares = lock_a & lock_b & (start_k[a] | ~start_k[b])
    ok = same_thread & ~shares
    a, b = a[ok], b[ok]
    to_start = start_k[b]
    dep = to_start & (op_depth_before[b] == 0)
    # attribution: (start, *) -> src; (end, end) -> dest; (end, start) -> parent of src
    parent_row = np.array(
        [row_of_idx.get(int(i), -1) for i in parent_k[a].tolist()], dtype=np.int64
    )
    attributed = np.where(start_k[a], row_k[a], np.where(~start_k[b], row_k[b], parent_row))
    out = [
        _edges(node[a][dep], node[b][dep], DEP, ts, np.full(dep.sum(), -1)),
        _edges(node[a][~dep], node[b][~dep], OP, ts, attributed[~dep]),
    ]
    # blocking calls: the edge into their end weighs 0
    blocking = np.isin(nodes["name"].to_numpy(), BLOCKING_CALLS)
    e = out[1]
    zero = (e["dst"] % 2 == 1) & blocking[e["dst"] // 2]
    e["weight"] = np.where(zero, 0, e["weight"])
    return out


def _parents(is_start: np.ndarray, depth_before: np.ndarray) -> np.ndarray:
    """Each start token's enclosing start token (-1 at top level): the last start before it
    one level up."""
    n = is_start.size
    out = np.full(n, -1, dtype=np.int64)
    starts = np.flatnonzero(is_start)
    if starts.size == 0:
        return out
    d = depth_before[starts]
    for level in range(1, int(d.max()) + 1):
        here = starts[d == level]
        above = starts[d == level - 1]
        at = np.searchsorted(above, here) - 1
        ok = at >= 0
        out[here[ok]] = above[at[ok]]
    return out


def _kernel_edges(
    gpu: pl.DataFrame,
    nodes: pl.DataFrame,
    ts: np.ndarray,
    row_of_idx: dict[int, int],
    queue: pl.DataFrame,
) -> list[dict]:
    if gpu.is_empty():
        return []
    g = (
        gpu.join(queue, on="idx", how="left")
        .with_columns(
            pl.col("name").is_in(("Stream Sync", "Context Sync")).alias("_sync_ok"),
            pl.when(pl.col("kind") == "sync")
            .then(pl.col("end"))
            .otherwise(pl.col("start"))
            .alias("_sort"),
        )
        .filter((pl.col("kind") != "sync") | pl.col("_sync_ok"))
        .sort("_sort", "idx")
    )
    out: list[dict] = []
    k = g.filter(pl.col("kind") != "sync")
    krow = np.array([row_of_idx[int(i)] for i in k["idx"].to_list()], dtype=np.int64)
    out.append(_edges(2 * krow, 2 * krow + 1, OP, ts, krow))
    # previous kernel on the stream
    k = k.with_columns(pl.Series("row", krow)).with_columns(
        pl.col("row").shift(1).over("stream").alias("prev_row"),
        pl.col("end").shift(1).over("stream").alias("prev_end"),
    )
    launch_row = np.array(
        [row_of_idx.get(int(i), -1) for i in k["launch_idx"].to_list()], dtype=np.int64
    )
    q_rt = k["queue_runtime"].fill_null(-1).to_numpy()
    q_k = k["queue_kernel"].fill_null(-1).to_numpy()
    prev_row = k["prev_row"].fill_null(-1).to_numpy().astype(np.int64)
    prev_end = k["prev_end"].to_numpy()
    lstart = k["launch_start"].to_numpy()
    kstart = k["start"].to_numpy()
    has_prev = prev_row >= 0
    launch = (
        (q_rt == 1)
        & (q_k == 0)
        & (~has_prev | (np.nan_to_num(prev_end, nan=0) < lstart))
        & (launch_row >= 0)
    )
    kk = ~launch & has_prev & (kstart - np.nan_to_num(prev_end, nan=0) < KERNEL_GAP_LIMIT_NS)
    out.append(
        _edges(2 * launch_row[launch], 2 * krow[launch], LAUNCH, ts, np.full(launch.sum(), -1))
    )
    out.append(_edges(2 * prev_row[kk] + 1, 2 * krow[kk], KK, ts, prev_row[kk]))
    graph = k["launch_name"].is_in(GRAPH_LAUNCHES).to_numpy() & (launch_row >= 0) & ~launch
    if graph.any():
        e = _edges(2 * launch_row[graph], 2 * krow[graph], LAUNCH, ts, np.full(graph.sum(), -1))
        e["weight"] = np.zeros(graph.sum(), dtype=np.int64)
        out.append(e)
    # syncs: the last kernel (by start, before the sync ends) -> the waiting call's end
    s = g.filter(pl.col("kind") == "sync")
    if not s.is_empty():
        kt = k.select("stream", "start", "row").sort("stream", "start")
        for name, stream, end, launch_idx in s.select(
            "name", "stream", "end", "launch_idx"
        ).iter_rows():
            dst_row = row_of_idx.get(int(launch_idx), -1)
            if dst_row < 0:
                continue
            if name == "Stream Sync":
                cands = kt.filter((pl.col("stream") == stream) & (pl.col("start") <= end))
            else:
                cands = kt.filter(pl.col("start") <= end)
            last = cands.group_by("stream").agg(pl.col("row").last())["row"].to_numpy()
            if last.size:
                out.append(
                    _edges(
                        2 * last + 1,
                        np.full(last.size, 2 * dst_row + 1),
                        SYNC,
                        ts,
                        np.full(last.size, -1),
                    )
                )
    return out


def queue_at(events: pl.DataFrame, *, hta_launches: bool = True) -> pl.DataFrame:
    """Launch-queue length per stream after each launch's +1 (`queue_runtime`, on the GPU
    op's row) and after each GPU op's -1 (`queue_kernel`), over the whole rank (HTA's
    `_get_queue_length_time_series_for_rank`). A graph launch counts once per stream: its
    first op there (DEVIATION, see module)."""
    names = HTA_LAUNCHES + (() if hta_launches else GRAPH_LAUNCHES)
    launches = events.filter(
        pl.col("stream").is_null()
        & pl.col("kind").is_in(("runtime", "driver"))
        & pl.col("name").is_in(names)
        & pl.col("correlation").is_not_null()
    ).select("correlation", pl.col("start").alias("launch_start"))
    launches = launches.unique("correlation", keep="first")
    ops = events.filter(pl.col("stream").is_not_null() & pl.col("correlation").is_not_null()).join(
        launches, on="correlation", how="inner"
    )
    # one unit per launch and stream: its first op
    ops = ops.sort("start", "idx").with_columns(
        (pl.int_range(pl.len()).over("correlation", "stream") == 0).alias("_first")
    )
    unit = ops.filter("_first")
    rows = pl.concat(
        [
            unit.select(
                "idx",
                "stream",
                pl.col("launch_start").alias("t"),
                pl.lit(1).alias("d"),
                pl.lit(1).alias("launch"),
            ),
            unit.select(
                "idx",
                "stream",
                pl.col("start").alias("t"),
                pl.lit(-1).alias("d"),
                pl.lit(0).alias("launch"),
            ),
        ]
    ).sort("stream", "t", "launch", "idx")
    rows = rows.with_columns(pl.col("d").cum_sum().over("stream").alias("q"))
    rt = rows.filter(pl.col("launch") == 1).select("idx", pl.col("q").alias("queue_runtime"))
    kq = rows.filter(pl.col("launch") == 0).select("idx", pl.col("q").alias("queue_kernel"))
    return rt.join(kq, on="idx", how="full", coalesce=True)


def is_comm(name: pl.Expr) -> pl.Expr:
    return name.fill_null("").str.contains(COMM_KERNEL)
