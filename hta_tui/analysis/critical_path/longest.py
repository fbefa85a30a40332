"""The longest path through an edge table (a DAG), without a graph library: the edges stay
numpy arrays (CSR by source) and one pass of Kahn's algorithm both orders the nodes and
relaxes each edge once; a re-run with other weights (what-if) reuses that order."""

from __future__ import annotations

import numpy as np


class CycleError(ValueError):
    """The edges are not a DAG (HTA fails the analysis on cycles too)."""


def _csr(n: int, src: np.ndarray) -> tuple[np.ndarray, list[int]]:
    order = np.argsort(src, kind="stable")
    start = np.searchsorted(src[order], np.arange(n + 1)).tolist()
    return order, start


def _backtrack(src: np.ndarray, dist: list[int], pred: list[int]) -> tuple[int, np.ndarray]:
    if not dist:
        return 0, np.zeros(0, dtype=np.int64)
    dist_a = np.asarray(dist, dtype=np.int64)
    v = int(np.argmax(dist_a))
    path: list[int] = []
    src_l = src
    while pred[v] >= 0:
        e = pred[v]
        path.append(e)
        v = int(src_l[e])
    path.reverse()
    return int(dist_a[np.argmax(dist_a)]), np.asarray(path, dtype=np.int64)


def solve(
    n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray
) -> tuple[int, np.ndarray, np.ndarray]:
    """(length, edge ids of the path from its first to its last node, a topological order).
    Weights >= 0. CycleError when the edges loop."""
    if src.size == 0:
        return 0, np.zeros(0, dtype=np.int64), np.arange(n, dtype=np.int64)
    by_src, start = _csr(n, src)
    s_dst = dst[by_src].tolist()
    s_w = weight[by_src].tolist()
    s_id = by_src.tolist()
    indeg = np.bincount(dst, minlength=n).tolist()
    ready = [v for v in range(n - 1, -1, -1) if indeg[v] == 0]
    dist = [0] * n
    pred = [-1] * n
    out: list[int] = []
    push, pop, emit = ready.append, ready.pop, out.append
    while ready:
        u = pop()
        emit(u)
        du = dist[u]
        for j in range(start[u], start[u + 1]):
            v = s_dst[j]
            c = du + s_w[j]
            if c > dist[v] or (pred[v] < 0 and c >= dist[v]):
                dist[v] = c
                pred[v] = s_id[j]
            indeg[v] -= 1
            if indeg[v] == 0:
                push(v)
    if len(out) != n:
        raise CycleError(f"{n - len(out)} nodes on cycles")
    length, path = _backtrack(src, dist, pred)
    return length, path, np.asarray(out, dtype=np.int64)


def topological_order(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Nodes in an order where every edge goes forward; CycleError when there is none."""
    return solve(n, src, dst, np.zeros(src.size, dtype=np.int64))[2]


def longest_path(
    n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, order: np.ndarray | None = None
) -> tuple[int, np.ndarray]:
    """(length, path edge ids). With `order` (from `solve`) only the relaxation runs."""
    if order is None:
        length, path, _ = solve(n, src, dst, weight)
        return length, path
    if src.size == 0:
        return 0, np.zeros(0, dtype=np.int64)
    by_src, start = _csr(n, src)
    s_dst = dst[by_src].tolist()
    s_w = weight[by_src].tolist()
    s_id = by_src.tolist()
    dist = [0] * n
    pred = [-1] * n
    for u in order.tolist():
        du = dist[u]
        for j in range(start[u], start[u + 1]):
            v = s_dst[j]
            c = du + s_w[j]
            if c > dist[v] or (pred[v] < 0 and c >= dist[v]):
                dist[v] = c
                pred[v] = s_id[j]
    return _backtrack(src, dist, pred)


def longest_lengths(
    n: int,
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    order: np.ndarray,
    firsts: np.ndarray,
) -> np.ndarray:
    """The length of the longest path of each of several disjoint graphs at once (their
    nodes one graph after another, graph i's from `firsts[i]`; `order` their topological
    orders one after another): `longest_path`'s length of each, one relaxation over them
    all (a graph at a time cost its own setup, ~50 us a tiny graph)."""
    dist = [0] * n
    if src.size:
        by_src, start = _csr(n, src)
        s_dst = dst[by_src].tolist()
        s_w = weight[by_src].tolist()
        for u in order.tolist():
            du = dist[u]
            for j in range(start[u], start[u + 1]):
                v = s_dst[j]
                c = du + s_w[j]
                if c > dist[v]:
                    dist[v] = c
    ends = np.r_[firsts[1:], n]
    out = np.zeros(firsts.size, dtype=np.int64)
    some = ends > firsts
    if some.any():
        out[some] = np.maximum.reduceat(np.asarray(dist, dtype=np.int64), firsts[some])
    return out
