"""The TensorBoard plugin's operator tree of a rank, vectorised: each host node's parent, and
what its runtime calls launched.

Nodes are the plugin's (`EventParser._parse_node`): operators, `python` events, ProfilerSteps
and the nccl:/gloo: annotations (with `tb_compat`, nn.Module frames too, as the plugin's
ModuleNodes: not operators, but an op's self time excludes them), nested per thread by time
(sorted by start, longer first). A node's depth is the number of nodes open when it starts (a
cumulative sum over start and end edges), its parent the last node one level up before it (an
as-of join), and a subtree is the run of nodes after it in that order that start before it
ends. A runtime call belongs to the innermost node around it on its thread (DEVIATION: the
plugin uses the `External id`, which PyTorch 2.0-2.1 traces set to the call's correlation, so
their kernels reach no operator; `tb_compat=True` keeps the plugin's rule); its GPU work
(kernels, memcpy, memset) by `correlation`.

As the plugin (after the old autograd profiler's `_remove_dup_nodes`), an operator whose only
child is an operator of the same name absorbs it (`fold_same_name`): one call, the child's
children and runtime calls (its own are dropped). DEVIATION: overlapping (not nested) ranges
on one thread, which the plugin drops with an error, are nested by start here.

NOT REPRODUCED: the plugin's source (`OpTreeBuilder.build_tree`) also takes every top-level
backward root (`autograd::engine::evaluate_function: ...`) out of the tree when top-level
nn.Module frames and `fwdbwd` flows exist, and puts it back under the module of its forward
op, which would leave out a root whose forward op is in no module (the issue's activation
checkpointing trace, 5,469 us of a backward op's host self time here vs the plugin's 3,444,
is not among the shared traces). On the one shared trace where that pass applies (the MI300
ResNet, whose MSE loss backward has its forward op outside ResNet_0) the plugin's served
Operator view keeps that root, so every backward group is kept here too
(tests/test_tb_module_nodes.py); moving a kept root changes no operator's own numbers.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import numpy as np
import polars as pl

from hta_tui.analysis import nesting, tb_roles, tensor_cores
from hta_tui.analysis.checkpoint import checkpoint, none_inside
from hta_tui.analysis.hta_view import job_cached, made_ahead
from hta_tui.analysis.per_rank import made_at_once
from hta_tui.analysis.rank_column import tagged, untagged

_building = threading.Lock()
_NAME = pl.col("name")  # tests on it are filled with False after (see tb_roles)
_EXCLUDED = ("DataParallel.forward", "DistributedDataParallel.forward")


def _node_cats(*, tb_compat: bool) -> pl.Expr:
    """Rows that are nodes by their category alone (operators, `python` events; with
    `tb_compat`, nn.Module frames too); annotations are nodes by name (`_nodes`)."""
    nodes = tb_roles.cat_in(["cpu_op", "operator", "python"])
    if tb_compat:
        # the plugin's ModuleNode: a python_function frame with a `Python module id` is a node
        # (not an operator), so an op around one (activation checkpointing re-runs the
        # forward's modules inside a backward op) has the module's time as a child's
        return nodes | (
            tb_roles.cat_in(["python_function"]) & pl.col("python_module_id").is_not_null()
        )
    return nodes


_ANNOTATION = tb_roles.cat_in(["user_annotation", "gpu_user_annotation"])
#: the annotations that are nodes: ProfilerSteps and the collectives
_KEPT_ANNOTATION = (
    _NAME.str.starts_with("ProfilerStep#") | _NAME.is_in(tb_roles.COMM_OPS)
).fill_null(False)


def _nodes(frame: pl.DataFrame, *, tb_compat: bool) -> tuple[np.ndarray, np.ndarray]:
    """Which rows of `frame` are the plugin's nodes (operators, `python` events,
    ProfilerSteps and the nccl:/gloo: annotations; `_node_cats`) and which are runtime
    calls. The annotations' names are tested on their rows alone (a few hundred): the name
    tests over every row cost a rank 2-3 ms."""
    runtime = tb_roles.runtime_rows(tb_compat=False) if not tb_compat else pl.lit(False)
    picked = frame.select(
        _node_cats(tb_compat=tb_compat).fill_null(False).alias("node"),
        _ANNOTATION.fill_null(False).alias("annotation"),
        runtime.fill_null(False).alias("rt"),
    )
    node = picked["node"].to_numpy().copy()
    annotations = np.flatnonzero(picked["annotation"].to_numpy())
    if annotations.size:
        kept = frame["name"].gather(annotations).to_frame().select(_KEPT_ANNOTATION).to_series()
        node[annotations] |= kept.to_numpy()
    return node, picked["rt"].to_numpy()


def _op_type() -> pl.Expr:
    """The plugin's `EventTypes.OPERATOR` (a ProfilerStep is a type of its own)."""
    return tb_roles.cat_in(["cpu_op", "operator"]) & ~tb_roles.STEP_NAME


def _is_operator() -> pl.Expr:
    """Nodes the Operator view lists (`node.is_operator_node`): the rule row by row, which
    `operator_flags` answers by name (tests/test_op_tree_flags.py holds them equal)."""
    return (
        tb_roles.cat_in(["cpu_op", "operator"])
        & ~tb_roles.STEP_NAME
        & ~tb_roles.DATALOADER
        & ~_NAME.str.starts_with("Optimizer.").fill_null(False)
        & ~_NAME.is_in(_EXCLUDED).fill_null(False)
    )


def operator_flags(frame: pl.DataFrame) -> list[pl.Expr]:
    """`_is_operator` (`is_op`) and `_op_type` (`op_type`) for `frame`'s rows, their name
    tests made on its distinct names (a rank's 68k nodes have a few hundred) and found by
    one lookup a row."""
    names = frame.select(pl.col("name").unique()).with_columns(
        (~tb_roles.STEP_NAME).alias("not_step"),
        (
            ~tb_roles.STEP_NAME
            & ~tb_roles.DATALOADER
            & ~_NAME.str.starts_with("Optimizer.").fill_null(False)
            & ~_NAME.is_in(_EXCLUDED).fill_null(False)
        ).alias("op_name"),
    )
    op_cat = tb_roles.cat_in(["cpu_op", "operator"])

    def named(test: str) -> pl.Expr:
        return _NAME.is_in(names.filter(test)["name"].implode(), nulls_equal=True)

    return [
        (op_cat & named("op_name")).alias("is_op"),
        (op_cat & named("not_step")).alias("op_type"),
    ]


def tree(events: pl.DataFrame, *, tb_compat: bool = False) -> pl.DataFrame:
    """Every host node: `pos` (pre-order), name, tid, start, end, `parent` (pos or null),
    `is_op`, shapes and stack, `rt_dur` (its runtime calls), `dev_self`, `tc_self` and
    `tc_self_plugin` (GPU work its runtime calls launched, ns), `last` (pos of its last
    descendant)."""
    return build(events, tb_compat=tb_compat)[0]


def build(events: pl.DataFrame, *, tb_compat: bool = False) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(`tree`'s nodes, the runtime calls with their owner node: `correlation`,
    `external_id`, `pos`, `ts`, `dur`). Built once per frame and mode: the operator and the
    kernel-by-operator views share it."""
    checkpoint()  # never while the lock is held (`none_inside`)
    with _building, none_inside():  # the two views run side by side in `registry.run`
        built = job_cached(
            {0: events},
            "tb_op_tree",
            lambda: _build(events, tb_compat=tb_compat),  # type: ignore[arg-type, return-value]
            tb_compat,
        )
    return built  # type: ignore[return-value]


def build_ahead(events: pl.DataFrame) -> None:
    """`build` (the default mode's) made ahead of any view (`hta_view.made_ahead`: the
    read-ahead's, never waited for by a view)."""
    made_ahead({0: events}, "tb_op_tree", lambda: _build(events, tb_compat=False), False)


def _build(events: pl.DataFrame, *, tb_compat: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    # the rows by index and their times as numpy; text columns are gathered once, in order
    node, runtime = _nodes(events, tb_compat=tb_compat)
    rows = np.flatnonzero(node | runtime)
    tid = events["tid"].fill_null(0).to_numpy()[rows]
    start = events["ts"].to_numpy()[rows]
    end = start + events["dur"].to_numpy()[rows]
    is_rt = ~node[rows]
    # by thread, start, longer first; at equal extents a host node encloses a runtime call
    packed = nesting.packed_thread_time(tid, start)
    if packed is None:
        order = np.lexsort((is_rt, -end, start, tid))
    else:
        order = nesting.sort_packed(packed, -end, is_rt)
    rows, tid, start, end, is_rt = rows[order], tid[order], start[order], end[order], is_rt[order]
    depth = nesting.depths(tid, start, end)
    parent = nesting.parents(tid, depth)
    # renumbered over the nodes alone: a parent that is a runtime call is no parent
    is_node = ~is_rt
    new_pos = np.cumsum(is_node) - 1
    has_node_parent = parent >= 0
    has_node_parent[has_node_parent] = is_node[parent[has_node_parent]]
    new_parent = np.where(has_node_parent, new_pos[np.maximum(parent, 0)], -1)
    # the operator tests on the nodes' rows alone (string tests: 1/3 of the rows)
    gathered = events.select("name", "cat", "external_id", "input_dims", "call_stack")[
        rows[is_node]
    ]
    nodes = gathered.select(
        "name",
        pl.Series("tid", tid[is_node]),
        pl.Series("start", start[is_node]),
        pl.Series("end", end[is_node]),
        "external_id",
        "input_dims",
        "call_stack",
        *operator_flags(gathered),
        pl.Series("depth", depth[is_node], dtype=pl.Int32),
        # -1 (no parent) -> null
        pl.Series("parent", new_parent[is_node]).cast(pl.UInt32, strict=False),
    ).with_row_index("pos")
    if tb_compat:
        links = _links_by_external_id(events, nodes)
    else:  # the innermost node around the call on its thread
        call = is_rt & has_node_parent
        links = events.select("correlation", "external_id")[rows[call]].with_columns(
            pl.Series("pos", new_parent[call], dtype=pl.UInt32),
            pl.Series("ts", start[call]),
            pl.Series("dur", end[call] - start[call]),
        )
    work = _runtime_work(events, links, nodes.height, tb_compat=tb_compat)
    last = nesting.last_descendants(tid[is_node], start[is_node], end[is_node])
    return nodes.with_columns(*work, pl.Series("last", last)), links


def _links_by_external_id(events: pl.DataFrame, nodes: pl.DataFrame) -> pl.DataFrame:
    """The plugin's rule: a `Runtime` call belongs to the first node with its External id."""
    runtimes = (
        events.lazy()
        .filter(
            tb_roles.runtime_rows(tb_compat=True)
            & pl.col("external_id").is_not_null()
            & (pl.col("external_id") != 0)
        )
        .select("correlation", "external_id", "ts", "dur")
        .collect()
    )
    owner = (
        nodes.drop_nulls("external_id")
        .sort("start")
        .group_by("external_id")
        .agg(pl.col("pos").first())
    )
    return runtimes.join(owner, on="external_id")


def _runtime_work(
    events: pl.DataFrame, links: pl.DataFrame, n: int, *, tb_compat: bool
) -> list[pl.Series]:
    """Per node (`n` of them): its runtime calls' time and the GPU work they launched (ns).
    The earliest runtime call of a correlation gets its GPU work (a driver call may share
    it); sums per node by bincount (ns sums are exact in float64 below 2**53, 104 days)."""
    work = (
        events.lazy()
        .filter(tb_roles.device_rows(tb_compat=tb_compat) & pl.col("correlation").is_not_null())
        .select("name", "correlation", "dur")
        .collect()
    )
    # tensor-core flags per distinct name: a few hundred names, not a million rows (each
    # name tested once per process)
    flags = _tc_flags(work)
    by_ts = np.argsort(links["ts"].to_numpy(), kind="stable")
    corr = links["correlation"].fill_null(-1).to_numpy()[by_ts]
    has = links["correlation"].is_not_null().to_numpy()[by_ts]
    first_corr, first = np.unique(np.where(has, corr, np.iinfo(np.int64).min), return_index=True)
    owner_pos = links["pos"].to_numpy()[by_ts][first].astype(np.int64)
    keep = has[first]
    first_corr, owner_pos = first_corr[keep], owner_pos[keep]
    k_corr = work["correlation"].to_numpy()
    return _node_sums(first_corr, owner_pos, k_corr, work, flags, links["pos"].to_numpy(), links, n)


def _node_sums(
    first_key: np.ndarray,
    owner_pos: np.ndarray,
    k_key: np.ndarray,
    work: pl.DataFrame,
    flags: pl.DataFrame,
    link_node: np.ndarray,
    links: pl.DataFrame,
    n: int,
) -> list[pl.Series]:
    """Each node's runtime time (its links, `link_node`) and the GPU work whose key
    (`k_key`) is among the sorted `first_key` its owner (`owner_pos`) launched: bincount
    sums, alone and over a batch alike."""
    at = np.minimum(np.searchsorted(first_key, k_key), max(first_key.size - 1, 0))
    linked = first_key.size > 0
    hit = (first_key[at] == k_key) if linked else np.zeros(k_key.size, dtype=bool)
    pos = owner_pos[at[hit]] if linked else np.zeros(0, dtype=np.int64)
    dur = work["dur"].to_numpy()[hit]

    def per_node(where: np.ndarray, weights: np.ndarray, name: str) -> pl.Series:
        sums = np.bincount(where, weights.astype(np.float64), minlength=n)
        return pl.Series(name, sums.astype(np.int64))

    tc_m, tc_p = (flags[c].fill_null(False).to_numpy()[hit] for c in ("tc_m", "tc_p"))
    return [
        per_node(link_node.astype(np.int64), links["dur"].to_numpy(), "rt_dur"),
        per_node(pos, dur, "dev_self"),
        per_node(pos[tc_m], dur[tc_m], "tc_self"),
        per_node(pos[tc_p], dur[tc_p], "tc_self_plugin"),
    ]


def _tc_flags(work: pl.DataFrame) -> pl.DataFrame:
    """`tc_m` / `tc_p`: each row's name uses tensor cores by the modern / the plugin's list
    (false for a null name)."""
    modern, plugin = tensor_cores.tc_names(work["name"])
    return work.select(
        pl.col("name").is_in(names.implode()).alias(c)
        for c, names in (("tc_m", modern), ("tc_p", plugin))
    )


_OWN = ("rt_dur", "dev_self", "tc_self", "tc_self_plugin")


def same_name_merges(
    nodes: pl.DataFrame, *, node: str, mergeable: str, parent: str = "parent"
) -> pl.DataFrame:
    """The plugin's merge rule (the old autograd profiler's `_remove_dup_nodes`), for the
    Operator view and the memory views alike: a `mergeable` node with the same name as its
    parent, also `mergeable`, and that parent's only child, merges into it. Columns: `node`,
    `merged` (this one merged into its parent) and `top` (the node it counts as: itself, or
    the top of its chain of merges). On numpy, each node's parent as a row number."""
    return merges_by_row(
        nodes, parent_rows(nodes, node=node, parent=parent), node=node, mergeable=mergeable,
        parent=parent,
    )  # fmt: skip


def parent_rows(nodes: pl.DataFrame, *, node: str, parent: str = "parent") -> np.ndarray:
    """Each node's parent as a row number of `nodes` (-1: none, or not among them)."""
    n = nodes.height
    ids = nodes[node]
    if n and ids.dtype.is_integer() and (ids.to_numpy() == np.arange(n)).all():
        return nodes[parent].fill_null(-1).cast(pl.Int64).to_numpy()  # ids are row numbers
    if n and ids.dtype.is_integer() and not ids.null_count():
        own = ids.cast(pl.Int64).to_numpy()
        if own.min() >= 0 and own.max() < 8 * n + 1024:  # small ids (event idx): by an array
            table = id_rows(own)
            if (table[own] == np.arange(n)).all():  # distinct (no id's row overwritten)
                up = nodes[parent].cast(pl.Int64).fill_null(-1).to_numpy()
                return rows_at(table, up)
    rows = pl.DataFrame({parent: ids, "__row": pl.int_range(n, eager=True, dtype=pl.Int64)})
    up = nodes.select(parent).join(rows, on=parent, how="left", maintain_order="left")
    return up["__row"].fill_null(-1).to_numpy()


def id_rows(ids: np.ndarray) -> np.ndarray:
    """The row of each id, indexed by the id (-1: no row): `ids` distinct small integers
    >= 0 (event idx), so an array finds a row where a join would hash them."""
    table = np.full(int(ids.max(initial=-1)) + 1, -1, dtype=np.int64)
    table[ids] = np.arange(ids.size, dtype=np.int64)
    return table


def rows_at(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """`table[id]` for each id of an `id_rows` table (-1: a negative id, i.e. null, or one
    past the table)."""
    ok = (ids >= 0) & (ids < table.size)
    return np.where(ok, table[np.where(ok, ids, 0)], -1)


def merges_by_row(
    nodes: pl.DataFrame, up: np.ndarray, *, node: str, mergeable: str, parent: str = "parent"
) -> pl.DataFrame:
    """`same_name_merges` with each node's parent row given (`parent_rows`): a caller that
    needs those rows again (the memory tables' effective parents) finds them once."""
    n = nodes.height
    ids = nodes[node]
    top_type = nodes.head(0).select(pl.when(True).then(pl.col(parent)).otherwise(node)).dtypes[0]
    has = up >= 0
    at = np.maximum(up, 0)
    children = np.bincount(up[has], minlength=n)
    can = nodes[mergeable].fill_null(False).to_numpy()
    merged = has & can & can[at] & (children[at] == 1)
    # names compared only where the rest allows a merge (a few rows, not every node's name)
    maybe = np.flatnonzero(merged)
    names = nodes["name"]
    same = (names.gather(maybe) == names.gather(at[maybe])).fill_null(False).to_numpy()
    merged[maybe] = same
    # chains of merges (a, a, a) to their top by pointer doubling: log2 of the longest chain
    # passes (one link a pass made a file of 60k nested same-named ops take 50 s)
    top = np.where(merged, at, np.arange(n))
    while not np.array_equal(jump := top[top], top):
        top = jump
    return pl.DataFrame({node: ids, "merged": merged}).with_columns(
        ids.gather(top).cast(top_type).alias("top")
    )


def fold_same_name(nodes: pl.DataFrame) -> pl.DataFrame:
    """Chains of same-named operators, each the only child of the one above, as one node
    (`same_name_merges`): the top keeps its extent and takes the innermost one's runtime work
    (`folded` marks the absorbed rows; an absorbing node's own runtime work is zeroed, as the
    plugin drops it). Adds `children_from`: the node whose children count as the top's."""
    merges = same_name_merges(nodes, node="pos", mergeable="op_type")
    n = nodes.height
    folded = merges["merged"].to_numpy()
    top = merges["top"].cast(pl.Int64).to_numpy()  # pos is the row number
    parent = nodes["parent"].cast(pl.Int64).fill_null(-1).to_numpy()
    absorbs = np.zeros(n, dtype=bool)
    absorbs[parent[folded]] = True
    # the innermost node of each chain (one per chain: each link is an only child), for its top
    inner_of = np.full(n, -1, dtype=np.int64)
    inner = np.flatnonzero(folded & ~absorbs)
    inner_of[top[inner]] = inner
    has = inner_of >= 0
    at = np.maximum(inner_of, 0)
    own = {c: nodes[c].to_numpy() for c in _OWN}
    return nodes.with_columns(
        pl.Series("folded", folded),
        pl.Series("absorbs", absorbs),
        *(pl.Series(c, np.where(absorbs, 0, v)) for c, v in own.items()),
    ).with_columns(
        *(
            pl.Series(f"top_{c}", np.where(has, v[at], np.where(absorbs, 0, v)))
            for c, v in own.items()
        ),
        pl.Series("children_from", np.where(has, inner_of, np.arange(n))),
    )


def subtree_sum(nodes: pl.DataFrame, col: str) -> pl.Series:
    """Σ `col` over each node's subtree (itself included), from pre-order prefix sums."""
    cum = pl.concat([pl.Series([0], dtype=pl.Int64), nodes[col].cast(pl.Int64).cum_sum()])
    total = cum.gather(nodes["last"] + 1) - cum.gather(nodes["pos"].cast(pl.Int64))
    return total.alias(col.replace("self", "total"))


#: what `_build` reads of a rank's events (`tb_compat=False`)
_READ = (
    "name", "cat", "kind", "ts", "dur", "tid", "correlation", "external_id", "input_dims",
    "call_stack",
)  # fmt: skip


def prime_trees(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> None:
    """Inside a batch of small ranks (`per_rank.made_at_once`), every rank's op tree (`build`)
    made at once (~19 queries a tiny rank alone) and kept as each rank's: the operators and
    the kernels by operator then find it. The plugin's mode links runtime calls by External
    id (an unordered join): rank by rank."""
    if tb_compat:
        return
    made_at_once(ranks, "tb_op_tree", _READ, _build_at_once, tb_compat)


def _build_at_once(
    frames: list[tuple[int, pl.DataFrame]],
) -> dict[int, tuple[pl.DataFrame, pl.DataFrame]]:
    """`_build` of each rank (frames of one schema, `tb_compat=False`) over them at once: the
    rank a key of every sort, thread and correlation; rank -> (nodes, links) as its own
    build makes them (integers only; each node's sums over its rows in their order)."""
    every = tagged(frames)
    if every["ts"].null_count() or every["dur"].null_count():
        raise ValueError("a time is missing: numpy would make every rank's times floats")
    node, runtime = _nodes(every, tb_compat=False)
    rows = np.flatnonzero(node | runtime)
    rank = every["rank"].to_numpy()[rows]
    tid = every["tid"].fill_null(0).to_numpy()[rows]
    start = every["ts"].to_numpy()[rows]
    end = start + every["dur"].to_numpy()[rows]
    is_rt = ~node[rows]
    order = np.lexsort((is_rt, -end, start, tid, rank))  # each rank's order as `_build`'s
    rows, rank, tid, start, end, is_rt = (a[order] for a in (rows, rank, tid, start, end, is_rt))
    changed = (rank[1:] != rank[:-1]) | (tid[1:] != tid[:-1])
    thread = np.concatenate([[0], np.cumsum(changed)]).astype(np.int64)  # (rank, tid)
    depth = nesting.depths(thread, start, end)
    parent = nesting.parents(thread, depth)
    is_node = ~is_rt
    new_pos = np.cumsum(is_node) - 1  # over every rank's nodes
    has_node_parent = parent >= 0
    has_node_parent[has_node_parent] = is_node[parent[has_node_parent]]
    new_parent = np.where(has_node_parent, new_pos[np.maximum(parent, 0)], -1)
    # each rank's nodes numbered from its own first
    node_rank = rank[is_node]
    first_node = np.searchsorted(node_rank, node_rank, side="left")
    local_parent = np.where(has_node_parent[is_node], new_parent[is_node] - first_node, -1)
    gathered = every.select("rank", "name", "cat", "external_id", "input_dims", "call_stack")[
        rows[is_node]
    ]
    nodes = gathered.select(
        "rank",
        pl.Series("pos", np.arange(node_rank.size) - first_node).cast(pl.UInt32),
        "name",
        pl.Series("tid", tid[is_node]),
        pl.Series("start", start[is_node]),
        pl.Series("end", end[is_node]),
        "external_id",
        "input_dims",
        "call_stack",
        *operator_flags(gathered),
        pl.Series("depth", depth[is_node], dtype=pl.Int32),
        pl.Series("parent", local_parent).cast(pl.UInt32, strict=False),
    )
    call = is_rt & has_node_parent
    call_rank = rank[call]
    owner = new_parent[call]  # over every rank's nodes
    links = every.select("rank", "correlation", "external_id")[rows[call]].with_columns(
        pl.Series("pos", owner - np.searchsorted(node_rank, call_rank), dtype=pl.UInt32),
        pl.Series("ts", start[call]),
        pl.Series("dur", end[call] - start[call]),
    )
    work = _runtime_work_at_once(every, links, owner, node_rank.size)
    last = nesting.last_descendants(thread[is_node], start[is_node], end[is_node]) - first_node
    nodes = nodes.with_columns(*work, pl.Series("last", last))
    ranks = [r for r, _ in frames]
    trees, calls = untagged(nodes, ranks), untagged(links, ranks)
    return {r: (trees[r], calls[r]) for r in ranks}


def _runtime_work_at_once(
    every: pl.DataFrame, links: pl.DataFrame, owner: np.ndarray, n: int
) -> list[pl.Series]:
    """`_runtime_work` of every rank's nodes (`n` of them, ranks one after another; `owner`:
    each link's node among them): the earliest runtime call of a (rank, correlation) gets
    its GPU work; each node's sums over its rows in the rank's order."""
    work = (
        every.lazy()
        .filter(tb_roles.device_rows(tb_compat=False) & pl.col("correlation").is_not_null())
        .select("rank", "name", "correlation", "dur")
        .collect()
    )
    flags = _tc_flags(work)
    ranks = np.unique(every["rank"].to_numpy())
    l_rank = np.searchsorted(ranks, links["rank"].to_numpy())
    l_corr = links["correlation"].fill_null(-1).to_numpy()
    has = links["correlation"].is_not_null().to_numpy()
    k_corr = work["correlation"].to_numpy()
    if (l_corr[has].size and l_corr[has].min() < 0) or (k_corr.size and k_corr.min() < 0):
        raise ValueError("a negative correlation: rank by rank")
    if max(l_corr.max(initial=0), k_corr.max(initial=0)) >= 1 << 40:
        raise ValueError("a correlation too large to key with its rank: rank by rank")
    by_ts = np.lexsort((links["ts"].to_numpy(), l_rank))  # each rank's calls by start, stable
    mine = by_ts[has[by_ts]]
    key = (l_rank[mine] << 40) | l_corr[mine]
    first_key, first = np.unique(key, return_index=True)  # each key's earliest call
    owner_pos = owner[mine][first].astype(np.int64)
    k_key = (np.searchsorted(ranks, work["rank"].to_numpy()) << 40) | k_corr
    return _node_sums(first_key, owner_pos, k_key, work, flags, owner, links, n)
