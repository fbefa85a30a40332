"""The host side of the critical-path graph: the CUDA runtime lock across threads, and each
CPU thread's call stack walked depth first (HTA's `_construct_graph_from_call_stack`), on
numpy arrays: the thread's boundaries sorted like HTA's `compare_events`, the nesting found
by bracket matching (an end closes whatever is on top of the stack, as in HTA)."""

from __future__ import annotations

import numpy as np
import polars as pl

from hta_tui.analysis.critical_path.rules import (
    BLOCKING_CALLS,
    DEP,
    LOCK_CALLS,
    OP,
    RowOf,
    nulls,
    part,
)


def lock_edges(
    nodes: pl.DataFrame, ts: np.ndarray, graph: np.ndarray
) -> tuple[list[dict], np.ndarray]:
    """The CUDA runtime lock, across threads, in each graph of a batch (`graph`: each node's
    graph, the nodes graph after graph): its calls' boundaries in (time, idx) order; each
    start is closed by the next end of its graph (its own span, or a dependency on the call
    that held the lock), and consecutive ends follow one another. Also which nodes' events
    hold the lock (the call-stack walk leaves their edges to this)."""
    parts: list[dict] = []
    names = nodes["name"].to_numpy()
    is_lock = np.isin(names, LOCK_CALLS) & nulls(nodes["stream"])
    lock_rows = np.flatnonzero(is_lock)
    if lock_rows.size:
        lnode = np.concatenate([2 * lock_rows, 2 * lock_rows + 1])
        lidx = nodes["idx"].to_numpy()[lnode // 2]
        order = np.lexsort((lidx, ts[lnode], graph[lnode // 2]))
        seq = lnode[order]
        of = graph[seq // 2]
        start = seq % 2 == 0
        # each start is closed by the next end in the sequence (of its graph)
        end_pos = np.flatnonzero(~start)
        nxt = np.searchsorted(end_pos, np.arange(seq.size))
        s = np.flatnonzero(start & (nxt < end_pos.size))
        closing = seq[end_pos[nxt[s]]]
        mine = graph[closing // 2] == of[s]
        s, closing = s[mine], closing[mine]
        same = closing // 2 == seq[s] // 2
        parts.append(part(seq[s][same], closing[same], OP, ts, seq[s][same] // 2))
        parts.append(part(seq[s][~same], closing[~same], DEP, ts, np.full((~same).sum(), -1)))
        e = np.flatnonzero(~start[1:] & ~start[:-1] & (of[1:] == of[:-1])) + 1
        parts.append(part(seq[e - 1], seq[e], DEP, ts, np.full(e.size, -1)))
    return parts, is_lock


def _bracket_match(is_start: np.ndarray, thread: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tokens of nested sequences (+1 start, -1 end), one a `thread` (its tokens one after
    another): the start each end closes (index into the tokens) and each token's depth
    before it in its thread. An end pops whatever is on top of the stack (HTA's call
    stack), so only the token order matters."""
    step = np.where(is_start, 1, -1)
    cum = np.cumsum(step)
    first = np.concatenate([[True], thread[1:] != thread[:-1]])
    at = np.maximum.accumulate(np.where(first, np.arange(step.size), 0))
    depth_after = cum - np.where(at > 0, cum[np.maximum(at - 1, 0)], 0)
    depth_before = depth_after - step
    level = np.where(is_start, depth_after, depth_before)
    order = np.lexsort((np.arange(level.size), level, thread))
    # within a thread's level tokens alternate start, end: pair neighbours
    match = np.full(level.size, -1, dtype=np.int64)
    lv, st, th = level[order], is_start[order], thread[order]
    pair = (~st[1:]) & st[:-1] & (lv[1:] == lv[:-1]) & (th[1:] == th[:-1])
    ends = order[1:][pair]
    match[ends] = order[:-1][pair]
    return match, depth_before


def thread_remapped(cpu: pl.DataFrame, by: str) -> pl.DataFrame:
    """Each `by` group's (one graph's) CPU events as the call-stack walk reads them (idx,
    start, end, dur, pid, tid; null ids as -1), in their order. HTA merges the backward
    thread into the forward one when exactly one thread has ops or annotations named
    "...forward..." and exactly one "...autograd..." and they differ."""
    marked = cpu.filter(pl.col("cat").is_in(("cpu_op", "user_annotation")))

    def only(word: str) -> pl.DataFrame:
        return (
            marked.filter(pl.col("name").str.contains(word, literal=True))
            .group_by(by)
            .agg(pl.col("tid").n_unique().alias("_n"), pl.col("tid").first().alias(word))
            .filter((pl.col("_n") == 1) & pl.col(word).is_not_null())
            .drop("_n")
        )

    merge = (
        only("forward")
        .join(only("autograd"), on=by)
        .filter(pl.col("forward") != pl.col("autograd"))
    )
    return (
        cpu.select(by, "idx", "start", "end", "dur", "pid", "tid")
        .join(merge, on=by, how="left", maintain_order="left")
        .select(
            by,
            "idx",
            "start",
            "end",
            "dur",
            pl.col("pid").fill_null(-1),
            pl.when(pl.col("tid") == pl.col("autograd"))
            .then(pl.col("forward"))
            .otherwise(pl.col("tid"))
            .fill_null(-1)
            .alias("tid"),
        )
    )


def call_stack_edges(
    t: pl.DataFrame,
    nodes: pl.DataFrame,
    ts: np.ndarray,
    row_of_idx: RowOf,
    is_lock: np.ndarray,
    by: str,
) -> list[dict]:
    """The call-stack edges of a batch's graphs, from `thread_remapped` (the graph's number
    in `by`; numpy, no query): each graph's threads walked as alone, every thread at once."""
    if t.is_empty():
        return []
    m = t.height
    # tokens: starts then ends, sorted like HTA's compare_events within each thread
    graph = np.tile(t[by].to_numpy().astype(np.int64), 2)
    idx = np.tile(t["idx"].to_numpy().astype(np.int64), 2)
    dur = np.tile(t["dur"].to_numpy(), 2)
    time = np.concatenate([t["start"].to_numpy(), t["end"].to_numpy()])
    is_start = np.arange(2 * m) < m
    pid = np.tile(t["pid"].to_numpy(), 2)
    tid = np.tile(t["tid"].to_numpy(), 2)
    k2 = np.where(is_start, -dur, dur)
    k3 = np.where(is_start, idx, -idx)
    order = np.lexsort((k3, k2, is_start, time, tid, pid, graph))
    idx, is_start, pid, tid, graph = (
        idx[order],
        is_start[order],
        pid[order],
        tid[order],
        graph[order],
    )
    thread_change = np.concatenate(
        [[True], (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1]) | (graph[1:] != graph[:-1])]
    )
    thread_no = np.cumsum(thread_change)
    # bracket matching, every thread at once
    match, depth_before = _bracket_match(is_start, thread_no)
    parent_tok = _parents(is_start, depth_before, thread_no)
    event = np.where(is_start, idx, np.where(match >= 0, idx[np.maximum(match, 0)], -1))
    ev_parent_tok = np.where(
        is_start, parent_tok, np.where(match >= 0, parent_tok[np.maximum(match, 0)], -1)
    )
    ev_parent = np.where(ev_parent_tok >= 0, idx[np.maximum(ev_parent_tok, 0)], -1)
    # keep tokens of events with nodes
    row_arr = row_of_idx(event, graph)
    keep = row_arr >= 0
    row_k = row_arr[keep]
    start_k = is_start[keep]
    thread_k = thread_no[keep]
    parent_k = ev_parent[keep]
    graph_k = graph[keep]
    node = 2 * row_k + (~start_k)
    if node.size < 2:
        return []
    step = np.where(start_k, 1, -1)
    cum = np.cumsum(step)
    first = np.concatenate([[True], thread_k[1:] != thread_k[:-1]])
    base = np.maximum.accumulate(np.where(first, np.arange(node.size), 0))
    cum_before = cum - step
    op_depth_before = cum_before - np.where(base > 0, cum[np.maximum(base - 1, 0)], 0)
    a, b = np.arange(node.size - 1), np.arange(1, node.size)
    same_thread = thread_k[a] == thread_k[b]
    lock_a, lock_b = is_lock[row_k[a]], is_lock[row_k[b]]
    shares = lock_a & lock_b & (start_k[a] | ~start_k[b])
    ok = same_thread & ~shares
    a, b = a[ok], b[ok]
    to_start = start_k[b]
    dep = to_start & (op_depth_before[b] == 0)
    # attribution: (start, *) -> src; (end, end) -> dest; (end, start) -> parent of src
    parent_row = row_of_idx(parent_k[a], graph_k[a])
    attributed = np.where(start_k[a], row_k[a], np.where(~start_k[b], row_k[b], parent_row))
    out = [
        part(node[a][dep], node[b][dep], DEP, ts, np.full(dep.sum(), -1)),
        part(node[a][~dep], node[b][~dep], OP, ts, attributed[~dep]),
    ]
    # blocking calls: the edge into their end weighs 0
    blocking = np.isin(nodes["name"].to_numpy(), BLOCKING_CALLS)
    e = out[1]
    zero = (e["dst"] % 2 == 1) & blocking[e["dst"] // 2]
    e["weight"] = np.where(zero, 0, e["weight"])
    return out


def _parents(is_start: np.ndarray, depth_before: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """Each start token's enclosing start token (-1 at top level): the last start before it
    one level up in its thread (every thread at once)."""
    n = is_start.size
    out = np.full(n, -1, dtype=np.int64)
    starts = np.flatnonzero(is_start)
    if starts.size == 0:
        return out
    d = depth_before[starts]
    th = thread[starts].astype(np.int64)
    # (thread, depth) as one number (depths apart by more than their range: a depth one
    # below the lowest never names another thread's), then as its place among them
    low = int(d.min())
    span = int(d.max()) - low + 2
    code = th * span + (d - low)
    codes, group = np.unique(code, return_inverse=True)
    key = group.astype(np.int64) * n + starts
    by_key = np.argsort(key, kind="stable")
    keys = key[by_key]
    ask = np.flatnonzero(d >= 1)
    want = th[ask] * span + (d[ask] - 1 - low)
    g = np.searchsorted(codes, want)
    known = g < codes.size
    known[known] = codes[g[known]] == want[known]
    ask, g = ask[known], g[known]
    at = np.searchsorted(keys, g * n + starts[ask]) - 1
    hit = at >= 0
    hit[hit] = keys[at[hit]] // n == g[hit]
    out[starts[ask[hit]]] = starts[by_key[at[hit]]]
    return out
