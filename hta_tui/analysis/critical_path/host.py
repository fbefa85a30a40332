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


def lock_edges(nodes: pl.DataFrame, ts: np.ndarray) -> tuple[list[dict], np.ndarray]:
    """The CUDA runtime lock, across threads: its calls' boundaries in (time, idx) order;
    each start is closed by the next end (its own span, or a dependency on the call that
    held the lock), and consecutive ends follow one another. Also which nodes' events hold
    the lock (the call-stack walk leaves their edges to this)."""
    parts: list[dict] = []
    names = nodes["name"].to_numpy()
    is_lock = np.isin(names, LOCK_CALLS) & nulls(nodes["stream"])
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
        parts.append(part(seq[s][same], closing[same], OP, ts, seq[s][same] // 2))
        parts.append(part(seq[s][~same], closing[~same], DEP, ts, np.full((~same).sum(), -1)))
        e = np.flatnonzero(~start[1:] & ~start[:-1]) + 1
        parts.append(part(seq[e - 1], seq[e], DEP, ts, np.full(e.size, -1)))
    return parts, is_lock


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
) -> list[dict]:
    """One graph's call-stack edges, from its rows of `thread_remapped` (numpy, no query)."""
    if t.is_empty():
        return []
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
    row_arr = row_of_idx(event)
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
    parent_row = row_of_idx(parent_k[a])
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
