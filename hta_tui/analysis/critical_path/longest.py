"""The longest path through an edge table (a DAG): topological order by Kahn's algorithm,
then one relaxation per node in that order. No graph library: the edges stay numpy arrays
(CSR by source), the loop touches each edge once."""

from __future__ import annotations

import numpy as np


class CycleError(ValueError):
    """The edges are not a DAG (HTA fails the analysis on cycles too)."""


def topological_order(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Nodes in an order where every edge goes forward; CycleError when there is none.
    Nodes are visited in id order among the ready ones' batches (ids follow time)."""
    order_e = np.argsort(src, kind="stable")
    s_dst = dst[order_e].tolist()
    start = np.searchsorted(src[order_e], np.arange(n + 1)).tolist()
    indeg = np.bincount(dst, minlength=n).tolist()
    ready = [v for v in range(n) if indeg[v] == 0]
    ready.reverse()
    out: list[int] = []
    push, pop, emit = ready.append, ready.pop, out.append
    while ready:
        u = pop()
        emit(u)
        for j in range(start[u], start[u + 1]):
            v = s_dst[j]
            indeg[v] -= 1
            if indeg[v] == 0:
                push(v)
    if len(out) != n:
        raise CycleError(f"{n - len(out)} nodes on cycles")
    return np.asarray(out, dtype=np.int64)


def longest_path(
    n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, order: np.ndarray | None = None
) -> tuple[int, np.ndarray]:
    """(length, edge ids along the path from its first to its last node). Weights >= 0."""
    if src.size == 0:
        return 0, np.zeros(0, dtype=np.int64)
    if order is None:
        order = topological_order(n, src, dst)
    by_dst = np.argsort(dst, kind="stable")
    d_src = src[by_dst].tolist()
    d_w = weight[by_dst].tolist()
    d_id = by_dst.tolist()
    start = np.searchsorted(dst[by_dst], np.arange(n + 1)).tolist()
    dist = [0] * n
    pred = [-1] * n
    for v in order.tolist():
        best, arg = 0, -1
        for j in range(start[v], start[v + 1]):
            c = dist[d_src[j]] + d_w[j]
            if c > best or (arg < 0 and c == best):
                best, arg = c, j
        dist[v] = best
        pred[v] = d_id[arg] if arg >= 0 else -1
    dist_a = np.asarray(dist, dtype=np.int64)
    v = int(np.argmax(dist_a))
    path: list[int] = []
    pred_a = pred
    while pred_a[v] >= 0:
        e = pred_a[v]
        path.append(e)
        v = int(src[e])
    path.reverse()
    return int(dist_a.max()), np.asarray(path, dtype=np.int64)
