"""The TensorBoard plugin's operator tree of a rank, vectorised: each host node's parent, and
what its runtime calls launched.

Nodes are the plugin's (`EventParser._parse_node`): operators, `python` events, ProfilerSteps
and the nccl:/gloo: annotations, nested per thread by time (sorted by start, longer first).
A node's depth is the number of nodes open when it starts (a cumulative sum over start and end
edges), its parent the last node one level up before it (an as-of join), and a subtree is the
run of nodes after it in that order that start before it ends. A runtime call belongs to the
innermost node around it on its thread (DEVIATION: the plugin uses the `External id`, which
PyTorch 2.0-2.1 traces set to the call's correlation, so their kernels reach no operator;
`tb_compat=True` keeps the plugin's rule); its GPU work (kernels, memcpy, memset) by
`correlation`.

As the plugin (after the old autograd profiler's `_remove_dup_nodes`), an operator whose only
child is an operator of the same name absorbs it (`fold_same_name`): one call, the child's
children and runtime calls (its own are dropped). DEVIATION: overlapping (not nested) ranges
on one thread, which the plugin drops with an error, are nested by start here.
"""

from __future__ import annotations

import polars as pl

from hta_tui.analysis import tb_roles, tensor_cores
from hta_tui.analysis.hta_view import job_cached

_NAME = pl.col("name")  # tests on it are filled with False after (see tb_roles)
_EXCLUDED = ("DataParallel.forward", "DistributedDataParallel.forward")


def _node_rows() -> pl.Expr:
    annotation = tb_roles.cat_in(["user_annotation", "gpu_user_annotation"]) & (
        (_NAME.str.starts_with("ProfilerStep#") | _NAME.is_in(tb_roles.COMM_OPS)).fill_null(False)
    )
    return tb_roles.cat_in(["cpu_op", "operator", "python"]) | annotation


def _op_type() -> pl.Expr:
    """The plugin's `EventTypes.OPERATOR` (a ProfilerStep is a type of its own)."""
    return tb_roles.cat_in(["cpu_op", "operator"]) & ~tb_roles.STEP_NAME


def _is_operator() -> pl.Expr:
    """Nodes the Operator view lists (`node.is_operator_node`)."""
    return (
        tb_roles.cat_in(["cpu_op", "operator"])
        & ~tb_roles.STEP_NAME
        & ~tb_roles.DATALOADER
        & ~_NAME.str.starts_with("Optimizer.").fill_null(False)
        & ~_NAME.is_in(_EXCLUDED).fill_null(False)
    )


def _depths(nodes: pl.DataFrame) -> pl.DataFrame:
    """`depth` of each node: nodes open on its thread when it starts. At one instant, ends
    close first and starts open in pre-order; a zero-length node closes right after it opens,
    so it has no children (the plugin's `start < parent end` rule)."""
    zero = pl.col("end") == pl.col("start")
    starts = nodes.select(
        "tid", pl.col("start").alias("t"), pl.lit(1).alias("o"), "pos", pl.lit(0).alias("sub")
    )
    ends = nodes.select(
        "tid",
        pl.col("end").alias("t"),
        pl.when(zero).then(1).otherwise(0).alias("o"),
        "pos",
        pl.lit(1).alias("sub"),
    )
    edges = pl.concat([starts, ends]).sort("tid", "t", "o", "pos", "sub")
    delta = pl.when(pl.col("sub") == 0).then(1).otherwise(-1)
    return (
        edges.with_columns((delta.cum_sum().over("tid") - 1).alias("depth"))
        .filter(pl.col("sub") == 0)
        .select("pos", "depth")
    )


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
    built = job_cached(
        {0: events},
        "tb_op_tree",
        lambda: _build(events, tb_compat=tb_compat),  # type: ignore[arg-type, return-value]
        tb_compat,
    )
    return built  # type: ignore[return-value]


def _build(events: pl.DataFrame, *, tb_compat: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    wanted = _node_rows()
    if not tb_compat:
        wanted = wanted | tb_roles.runtime_rows(tb_compat=False)
    rows = (
        events.filter(wanted)
        .select(
            "name",
            pl.col("tid").fill_null(0),
            pl.col("ts").alias("start"),
            (pl.col("ts") + pl.col("dur")).alias("end"),
            "external_id",
            "correlation",
            "input_dims",
            "call_stack",
            _is_operator().alias("is_op"),
            _op_type().alias("op_type"),
            (~_node_rows()).alias("is_rt"),
        )
        # at equal extents a host node encloses a runtime call, never the reverse
        .sort(
            "tid",
            "start",
            "end",
            "is_rt",
            descending=[False, False, True, False],
            maintain_order=True,
        )
        .with_row_index("pos")
    )
    rows = rows.join(_depths(rows), on="pos", how="left")
    parents = rows.select(
        "pos", "tid", pl.col("depth").alias("pdepth"), pl.col("pos").alias("parent")
    )
    rows = (
        rows.with_columns((pl.col("depth") - 1).alias("pdepth"))
        .join_asof(
            parents,
            on="pos",
            by=["tid", "pdepth"],
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .drop("pdepth")
    )
    nodes = rows.filter(~pl.col("is_rt")).rename({"pos": "old"}).with_row_index("pos")
    renumber = nodes.select(pl.col("old").alias("parent"), pl.col("pos").alias("new"))
    nodes = (
        nodes.join(renumber, on="parent", how="left")
        .with_columns(pl.col("new").alias("parent"))
        .drop("new", "old", "is_rt", "correlation")
    )
    if tb_compat:
        links = _links_by_external_id(events, nodes)
    else:  # the innermost node around the call on its thread
        links = (
            rows.filter("is_rt")
            .join(renumber, on="parent", how="inner")
            .select(
                "correlation",
                "external_id",
                pl.col("new").alias("pos"),
                pl.col("start").alias("ts"),
                (pl.col("end") - pl.col("start")).alias("dur"),
            )
        )
    nodes = nodes.join(_runtime_work(events, links, tb_compat=tb_compat), on="pos", how="left")
    fill = ["rt_dur", "dev_self", "tc_self", "tc_self_plugin"]
    return nodes.with_columns(pl.col(fill).fill_null(0), _last_descendant(nodes)), links


def _links_by_external_id(events: pl.DataFrame, nodes: pl.DataFrame) -> pl.DataFrame:
    """The plugin's rule: a `Runtime` call belongs to the first node with its External id."""
    runtimes = events.filter(
        tb_roles.runtime_rows(tb_compat=True)
        & pl.col("external_id").is_not_null()
        & (pl.col("external_id") != 0)
    ).select("correlation", "external_id", "ts", "dur")
    owner = (
        nodes.drop_nulls("external_id")
        .sort("start")
        .group_by("external_id")
        .agg(pl.col("pos").first())
    )
    return runtimes.join(owner, on="external_id")


def _last_descendant(nodes: pl.DataFrame) -> pl.Series:
    """pos of each node's last descendant (itself when it has none): per thread, the nodes
    that start before it ends are its subtree."""
    out = []
    for _, thread in nodes.group_by("tid", maintain_order=True):
        starts = thread["start"]
        first = int(thread["pos"][0])
        inside = starts.search_sorted(thread["end"], side="left").cast(pl.Int64) + first - 1
        out.append(pl.max_horizontal(inside, thread["pos"].cast(pl.Int64)).alias("last"))
    if not out:
        return pl.Series("last", [], dtype=pl.Int64)
    return pl.concat(out).alias("last")


def _runtime_work(events: pl.DataFrame, links: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    """Per node: its runtime calls' time and the GPU work they launched (ns)."""
    dur = pl.col("dur")
    work = events.filter(tb_roles.device_rows(tb_compat=tb_compat))
    # tensor-core flags per distinct name: a few hundred names, not a million rows
    names = work.select(pl.col("name").unique()).with_columns(
        tensor_cores.uses_tc(pl.col("name"), modern=True).alias("tc_m"),
        tensor_cores.uses_tc(pl.col("name"), modern=False).alias("tc_p"),
    )
    device = (
        work.join(names, on="name", how="left", nulls_equal=True)
        .group_by("correlation")
        .agg(
            dur.sum().alias("dev"),
            dur.filter(pl.col("tc_m")).sum().alias("tc"),
            dur.filter(pl.col("tc_p")).sum().alias("tcp"),
        )
    )
    # one runtime call per correlation gets its GPU work (a driver call may share it)
    first = pl.col("correlation").is_first_distinct()
    linked = (
        links.sort("ts")
        .join(device, on="correlation", how="left")
        .with_columns(
            pl.when(first & pl.col("correlation").is_not_null()).then(pl.col(c)).alias(c)
            for c in ("dev", "tc", "tcp")
        )
    )
    return linked.group_by("pos").agg(
        dur.sum().alias("rt_dur"),
        pl.col("dev").sum().alias("dev_self"),
        pl.col("tc").sum().alias("tc_self"),
        pl.col("tcp").sum().alias("tc_self_plugin"),
    )


_OWN = ("rt_dur", "dev_self", "tc_self", "tc_self_plugin")


def same_name_merges(
    nodes: pl.DataFrame, *, node: str, mergeable: str, parent: str = "parent"
) -> pl.DataFrame:
    """The plugin's merge rule (the old autograd profiler's `_remove_dup_nodes`), for the
    Operator view and the memory views alike: a `mergeable` node with the same name as its
    parent, also `mergeable`, and that parent's only child, merges into it. Columns: `node`,
    `merged` (this one merged into its parent) and `top` (the node it counts as: itself, or
    the top of its chain of merges)."""
    children = nodes.group_by(parent).agg(pl.len().alias("__n"))
    up = nodes.select(
        pl.col(node).alias(parent),
        pl.col("name").alias("__p_name"),
        pl.col(mergeable).alias("__p_merge"),
    ).join(children, on=parent, how="left")
    merged = nodes.join(up, on=parent, how="left").select(
        node,
        parent,
        (
            pl.col(mergeable)
            & pl.col("__p_merge").fill_null(False)
            & (pl.col("__n") == 1)
            & (pl.col("name") == pl.col("__p_name"))
        )
        .fill_null(False)
        .alias("merged"),
    )
    top = merged.select(
        node, pl.when("merged").then(pl.col(parent)).otherwise(pl.col(node)).alias("top")
    )
    links = merged.filter("merged").select(pl.col(node).alias("top"), pl.col(parent).alias("__up"))
    while True:  # chains of merges (a, a, a): up one link at a time to their top
        step = top.join(links, on="top", how="left")
        if step["__up"].null_count() == step.height:
            break
        top = step.select(node, pl.coalesce("__up", "top").alias("top"))
    return merged.select(node, "merged").join(top, on=node, how="left", maintain_order="left")


def fold_same_name(nodes: pl.DataFrame) -> pl.DataFrame:
    """Chains of same-named operators, each the only child of the one above, as one node
    (`same_name_merges`): the top keeps its extent and takes the innermost one's runtime work
    (`folded` marks the absorbed rows; an absorbing node's own runtime work is zeroed, as the
    plugin drops it). Adds `children_from`: the node whose children count as the top's."""
    merges = same_name_merges(nodes, node="pos", mergeable="op_type")
    nodes = nodes.join(merges.select("pos", pl.col("merged").alias("folded")), on="pos", how="left")
    absorbers = nodes.filter("folded")["parent"].implode()
    nodes = nodes.with_columns(pl.col("pos").is_in(absorbers).alias("absorbs"))
    # the innermost node of each chain, for its top
    inner = nodes.filter(pl.col("folded") & ~pl.col("absorbs")).select(
        pl.col("pos").alias("inner"), *(pl.col(c).alias(f"i_{c}") for c in _OWN)
    )
    moved = inner.join(
        merges.select(pl.col("pos").alias("inner"), pl.col("top").alias("pos")), on="inner"
    )
    nodes = nodes.with_columns(
        pl.when(pl.col("absorbs")).then(0).otherwise(pl.col(c)).alias(c) for c in _OWN
    ).join(moved, on="pos", how="left")
    return nodes.with_columns(
        pl.coalesce(f"i_{c}", c).alias(f"top_{c}") for c in _OWN
    ).with_columns(pl.coalesce("inner", "pos").alias("children_from"))


def subtree_sum(nodes: pl.DataFrame, col: str) -> pl.Series:
    """Σ `col` over each node's subtree (itself included), from pre-order prefix sums."""
    cum = pl.concat([pl.Series([0], dtype=pl.Int64), nodes[col].cast(pl.Int64).cum_sum()])
    total = cum.gather(nodes["last"] + 1) - cum.gather(nodes["pos"].cast(pl.Int64))
    return total.alias(col.replace("self", "total"))
