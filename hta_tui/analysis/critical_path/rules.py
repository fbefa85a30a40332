"""The critical path's vocabulary: HTA 0.6.1's call lists and thresholds, the edge and
bound types, and one edge-table part (`part`)."""

from __future__ import annotations

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


def part(src: np.ndarray, dst: np.ndarray, typ: int, ts: np.ndarray, row: np.ndarray) -> dict:
    """Edges src -> dst (node ids) of one type: weight = time between them (0 for the
    dependency types), attributed to `row` (-1: none)."""
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


class RowOf:
    """(Graph number,) event idx -> its row in the nodes of a batch of graphs (-1: no node),
    looked up as arrays: a table indexed by graph and idx while it stays small (one graph's:
    its idx), else a binary search over the sorted keys."""

    def __init__(self, idx: np.ndarray, rows: np.ndarray, graph: np.ndarray | None = None) -> None:
        idx = np.asarray(idx, dtype=np.int64)
        rows = np.asarray(rows, dtype=np.int64)
        self.width = int(idx.max()) + 2 if idx.size else 1
        graphs = int(graph.max()) + 1 if graph is not None and graph.size else 1
        key = idx if graph is None else np.asarray(graph, dtype=np.int64) * self.width + idx
        self.dense = graphs * self.width <= max(_DENSE, 4 * idx.size)
        if self.dense:
            self.table = np.full(graphs * self.width, -1, dtype=np.int64)
            self.table[key] = rows  # (a repeated idx: its last row, as alone)
        else:
            order = np.argsort(key, kind="stable")
            self.keys, self.rows = key[order], rows[order]

    def __call__(self, idx: np.ndarray, graph: np.ndarray | None = None) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        ok = (idx >= 0) & (idx < self.width)
        key = np.where(ok, idx, 0)
        if graph is not None:
            key = key + np.asarray(graph, dtype=np.int64) * self.width
        if self.dense:
            ok &= key < self.table.size
            return np.where(ok, self.table[np.where(ok, key, 0)], -1)
        at = np.searchsorted(self.keys, key, side="right") - 1
        hit = ok & (at >= 0)
        hit[hit] = self.keys[at[hit]] == key[hit]
        return np.where(hit, self.rows[np.maximum(at, 0)], -1)


#: `RowOf`'s table up to this many entries (a batch's graphs times its largest idx).
_DENSE = 1 << 22


def nulls(s: pl.Series) -> np.ndarray:
    """Which values are null, without a query where it can (a Series' `is_null` is one:
    ~0.1 ms, several a tiny graph): none, or a number column's NaNs as numpy gives them."""
    if not s.null_count():
        return np.zeros(s.len(), dtype=bool)
    if s.dtype.is_integer():
        return np.isnan(s.to_numpy())
    return s.is_null().to_numpy()


def is_comm(name: pl.Expr) -> pl.Expr:
    """HTA's communication kernels, on names."""
    return name.fill_null("").str.contains(COMM_KERNEL)
