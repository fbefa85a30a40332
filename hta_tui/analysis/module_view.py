"""The TensorBoard plugin's module view: the nn.Module hierarchy with occurrences, operators,
host and device time.

Modules are the `nn.Module: Name_k` python_function frames that carry `Python module id`
(profiler `with_modules=True`). As in the plugin (`module_op.aggegate_module_view`):

* a module is keyed by its frame name and module id; its parent is the nearest module frame
  up its chain of `Python parent id`s (the hierarchy comes from the Python frames, not time);
* per occurrence, on its thread's tree of operators and module frames (nested by time; other
  Python frames and user annotations other than ProfilerStep#N and collectives are not in
  that tree): host total = duration, host self = duration minus its direct children's,
  operators = direct children that are plain operators (not ProfilerStep, DataLoader,
  Optimizer.*, DataParallel.forward, DistributedDataParallel.forward, annotations);
* figures are summed over occurrences (of a module under any parent); avg = device total /
  occurrences when there is device time, else host total / occurrences.

DEVIATION (GPU traces): the plugin links kernels to operators only through legacy `Runtime`
events, so on every PyTorch >= 1.10 trace its device times are 0. Here device total = GPU time
(kernels, memcpy, memset) launched by runtime / driver calls inside the occurrence, device self
= the device totals of its direct operators (the plugin's definition).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from hta_tui.analysis import memory_records, nesting, shared
from hta_tui.analysis.host_context import enclosing, rows_at
from hta_tui.analysis.hta_view import us
from hta_tui.analysis.kernel_owners import thread_order
from hta_tui.analysis.per_rank import ranks_with
from hta_tui.analysis.sequences import _levels

MODULE_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "module": pl.String(),  # "Linear_0": the frame name without "nn.Module: "
    "module_id": pl.Int64(),
    "parent": pl.String(),  # the parent's `module`, null at the top
    "parent_id": pl.Int64(),
    "path": pl.String(),  # "/"-joined modules from the top, for a tree or a filter
    "depth": pl.UInt32(),
    "occurrences": pl.UInt32(),
    "operators": pl.UInt32(),
    "host total (us)": pl.Float64(),
    "host self (us)": pl.Float64(),
    "device total (us)": pl.Float64(),
    "device self (us)": pl.Float64(),
    "avg (us)": pl.Float64(),
}

#: The collectives in the tree: the memory tables' (`memory_records`), whose nesting of the
#: tree this view reads (`_shared_graph`).
_COLLECTIVES = list(memory_records.COLLECTIVES)
_NOT_OPERATORS = ("DataParallel.forward", "DistributedDataParallel.forward")
_MODULE_PREFIX = "nn.Module: "


def _is_module() -> pl.Expr:
    return (pl.col("kind") == "python") & pl.col("python_module_id").is_not_null()


def _tree_nodes() -> pl.Expr:
    """Rows of the plugin's operator tree: operators, module frames, steps, collectives."""
    name = pl.col("name")
    annotation_kept = name.str.starts_with("ProfilerStep#") | name.is_in(_COLLECTIVES)
    return (
        (pl.col("kind") == "cpu_op")
        | _is_module()
        | ((pl.col("kind") == "annotation") & annotation_kept)
    )


def _plain_operator() -> pl.Expr:
    name = pl.col("name")
    return (
        (pl.col("kind") == "cpu_op")
        & ~name.str.starts_with("ProfilerStep#")
        & ~name.str.starts_with("Optimizer.")
        & ~(name.str.starts_with("enumerate(DataLoader)#") & name.str.ends_with(".__next__"))
        & ~name.str.starts_with("enumerate(DataPipe)#")
        & ~name.is_in(_NOT_OPERATORS)
    )


#: Rounds of pruning frames above no asked frame before `_module_parents` jumps pointers.
_PRUNE = 3


def _module_parents(python: pl.DataFrame, asked: pl.Series) -> pl.DataFrame:
    """python_id (of those `asked`) -> the nearest module frame strictly above it, up its
    chain of `Python parent id`s (none where the chain ends, or loops, without one:
    `_pointer_jump`). Frames written in id order (as Kineto writes them) need no sort."""
    ids = python["python_id"].cast(pl.Int64).to_numpy()
    if ids.size and (ids[1:] > ids[:-1]).all():  # ids distinct and in order
        frames, order, by_id = python, np.arange(ids.size), ids
        is_module = python["python_module_id"].is_not_null().to_numpy()
    else:
        frames = python.select("python_id", "python_parent_id").unique(
            "python_id", keep="first", maintain_order=True
        )
        ids = frames["python_id"].cast(pl.Int64).to_numpy()
        order = np.argsort(ids, kind="stable")
        by_id = ids[order]
        modules = python.filter(pl.col("python_module_id").is_not_null())["python_id"]
        is_module = np.isin(ids, modules.cast(pl.Int64).to_numpy())
    n = len(ids)
    parent_ids = frames["python_parent_id"].cast(pl.Int64)
    has_parent = parent_ids.is_not_null().to_numpy()
    wanted = parent_ids.fill_null(0).to_numpy()
    if n and by_id[-1] - by_id[0] == n - 1:  # ids distinct, in order, with no gap (Kineto's)
        at = np.clip(wanted - by_id[0], 0, n - 1)  # a parent id's row, where it is one
    else:
        at = np.minimum(np.searchsorted(by_id, wanted), max(n - 1, 0))
    found = has_parent & (n > 0) & (by_id[at] == wanted) if n else has_parent
    ptr = np.where(found, order[at] if n else 0, -1)  # the parent's row, -1: none
    wanted_rows = np.isin(ids, asked.drop_nulls().cast(pl.Int64).to_numpy())
    rows = np.flatnonzero(wanted_rows)
    # Only the asked frames and the frames above them matter: the others (most frames are
    # leaves, or lead only to leaves) are pruned, a few levels of them, before the jumps.
    keep = np.ones(n, dtype=bool)
    for _ in range(_PRUNE):
        up = ptr[keep]
        has_child = np.zeros(n, dtype=bool)
        has_child[up[up >= 0]] = True
        keep &= has_child | wanted_rows
    kept = np.flatnonzero(keep)
    at_kept = np.full(n, -1)
    at_kept[kept] = np.arange(kept.size)
    kept_ptr = np.where(ptr[kept] >= 0, at_kept[np.maximum(ptr[kept], 0)], -1)
    ans = _pointer_jump(kept_ptr, is_module[kept])[at_kept[rows]]
    ans = np.where(ans >= 0, kept[np.maximum(ans, 0)], -1)
    anc = pl.Series(np.where(ans >= 0, ids[np.maximum(ans, 0)] if n else 0, 0), dtype=pl.Int64)
    return pl.DataFrame({"python_id": ids[rows]}).with_columns(
        pl.when(pl.Series(ans >= 0)).then(anc).otherwise(None).alias("parent_python_id")
    )


def _pointer_jump(ptr: np.ndarray, is_module: np.ndarray) -> np.ndarray:
    """Each row's nearest module row strictly above it (-1: none) by pointer jumping over
    `ptr` (each row's parent row, -1: none): one pass per doubling of the depth, not per
    frame; a chain that loops without a module, or deeper than 2^64, has none."""
    ptr = ptr.copy()
    ans = np.full(ptr.size, -1)  # the answer's row, once `done`
    done = ptr < 0
    for _ in range(64):
        todo = np.flatnonzero(~done)
        if not len(todo):
            break
        # every read of this pass before any write: each row steps from the last pass's state
        p = ptr[todo]
        hit, p_done, p_ans, p_ptr = is_module[p], done[p], ans[p], ptr[p]
        inherit = ~hit & p_done
        jump = ~hit & ~p_done
        ans[todo[hit]] = p[hit]
        ans[todo[inherit]] = p_ans[inherit]
        done[todo[hit | inherit]] = True
        ptr[todo[jump]] = p_ptr[jump]
        done[todo[jump]] = p_ptr[jump] < 0  # the chain ends without a module
    return ans


def rank_module_view(events: pl.DataFrame) -> pl.DataFrame:
    """The module table of one rank (MODULE_COLUMNS without rank); empty without modules."""
    schema = {k: v for k, v in MODULE_COLUMNS.items() if k != "rank"}
    mods = (  # lazy: the columns read below, not the whole rows
        events.lazy()
        .filter(_is_module())
        .select("idx", "pid", "tid", "name", "python_module_id", "python_id", "dur")
        .collect()
    )
    if mods.is_empty():
        return pl.DataFrame(schema=schema)
    graph = _shared_graph(events, mods)
    if graph is None:
        graph = _own_graph(events, mods)
    # only the module frames' children are read (most nodes are operators' children): the
    # others' names were gathered and tested for nothing
    inner = graph.filter(
        (pl.col("level") > 0) & pl.col("parent").is_in(mods["idx"].implode())
    ).select("idx", "parent")
    # a gather of the few columns read (idx is the row number), not a join of the whole rank
    info = rows_at(events, inner["idx"], ("name", "kind", "dur")).drop("idx")
    children = (
        pl.concat([inner, info], how="horizontal")
        .group_by("parent")
        .agg(
            pl.col("dur").sum().alias("child_dur"),
            _plain_operator().sum().cast(pl.UInt32).alias("operators"),
        )
    )
    device = _device_time(events, graph, mods)
    occ = (
        mods.select("idx", "name", "python_module_id", "python_id", "dur")
        .join(children, left_on="idx", right_on="parent", how="left")
        .join(device, on="idx", how="left")
        .with_columns(
            pl.col("child_dur").fill_null(0),
            pl.col("operators").fill_null(0),
            pl.col("dev_total").fill_null(0),
            pl.col("dev_self").fill_null(0),
        )
    )
    # Each occurrence's parent module, from the Python frames' parent ids.
    python = (
        events.lazy()
        .filter(pl.col("kind") == "python")
        .select("python_id", "python_parent_id", "python_module_id")
        .drop_nulls("python_id")
        .collect()
    )
    up = _module_parents(python, mods["python_id"]).join(
        mods.select(
            pl.col("python_id").alias("parent_python_id"),
            pl.col("name").alias("parent_name"),
            pl.col("python_module_id").alias("parent_id"),
        ).unique("parent_python_id"),
        on="parent_python_id",
        how="left",
    )
    occ = _siblings_not_children(occ.join(up, on="python_id", how="left"))
    keys = ["name", "python_module_id"]
    table = occ.group_by(keys).agg(
        pl.len().cast(pl.UInt32).alias("occurrences"),
        pl.col("operators").sum().cast(pl.UInt32),
        # a re-entered occurrence's time is already in the outer one's total
        pl.col("dur").filter(~pl.col("reentered")).sum().alias("host"),
        (pl.col("dur") - pl.col("child_dur")).sum().alias("host_self"),
        pl.col("dev_total").filter(~pl.col("reentered")).sum().alias("dev_total"),
        pl.col("dev_self").sum().alias("dev_self"),
    )
    # A module called from several parents (one rotary embedding shared by every attention
    # layer) is under each of them, with its figures over all its occurrences, as in the plugin.
    edges = occ.select(*keys, "parent_name", "parent_id").unique()
    table = edges.join(table, on=keys)
    strip = lambda c: pl.col(c).str.strip_prefix(_MODULE_PREFIX)  # noqa: E731
    table = table.select(
        strip("name").alias("module"),
        pl.col("python_module_id").alias("module_id"),
        strip("parent_name").alias("parent"),
        "parent_id",
        "occurrences",
        "operators",
        us(pl.col("host")).alias("host total (us)"),
        us(pl.col("host_self")).alias("host self (us)"),
        us(pl.col("dev_total")).alias("device total (us)"),
        us(pl.col("dev_self")).alias("device self (us)"),
        us(
            pl.when(pl.col("dev_total") > 0).then(pl.col("dev_total")).otherwise(pl.col("host"))
            / pl.col("occurrences")
        ).alias("avg (us)"),
    )
    return _with_paths(table).cast(schema).select(list(schema)).sort("path")


def _own_graph(events: pl.DataFrame, mods: pl.DataFrame) -> pl.DataFrame:
    """idx, level and parent (idx, null at the top) of the tree nodes on the module threads,
    nested here by HTA's rules (`sequences._levels`)."""
    threads = mods.select("pid", "tid").unique().with_row_index("thread")
    nodes = (  # (lazy: the filter reads the few columns it needs, not the whole frame)
        events.lazy()
        .filter(_tree_nodes())
        .join(threads.lazy(), on=["pid", "tid"])
        .select(
            "thread",
            "idx",
            pl.col("ts").alias("start"),
            (pl.col("ts") + pl.col("dur")).alias("end"),
        )
        .collect()
    )
    # in open order (threads apart): each node's parent is the last one before it on its
    # thread one level up (`nesting.parents`, numpy), not an as-of join per level
    graph = nodes.join(_levels(nodes), on="idx").sort("pos")
    up = nesting.parents(graph["thread"].to_numpy(), graph["level"].to_numpy())
    parents = graph["idx"].gather(np.maximum(up, 0)).set(pl.Series(up < 0), None)  # type: ignore[arg-type]
    return graph.select("idx", "level", parents.alias("parent"))


def _shared_graph(events: pl.DataFrame, mods: pl.DataFrame) -> pl.DataFrame | None:
    """`_own_graph` read off the rank's one nesting of the plugin's operator tree
    (`shared.tree_levels`, which the memory tables make anyway), or None where the two could
    differ. They nest the same ranges the same way when, on the module threads, every tree
    node has a pid (this view's threads are (pid, tid), the tree's tids), each tid one pid,
    no node lasts zero time (HTA's rules and `enclosing`'s place such a node apart where
    another ends) and a Python frame is a module exactly when it is named one (each view's
    test of a module frame)."""
    tids = mods["tid"].drop_nulls().unique().implode()
    named = pl.col("name").str.starts_with(_MODULE_PREFIX).fill_null(False)
    modules_named = (
        events.lazy()
        .filter(pl.col("tid").is_in(tids) & (pl.col("kind") == "python"))
        .select((pl.col("python_module_id").is_not_null() == named).all())
        .collect()
        .item()
    )
    if not modules_named:
        return None
    # so the tree's nodes on those threads are this view's (`_tree_nodes`): their pid and
    # dur gathered (row numbers), not the events scanned again for them
    tree = shared.tree_nodes(events)
    on_module_threads = tree.select(pl.col("key").is_in(tids)).to_series()
    held = rows_at(events, tree["node"].filter(on_module_threads), ("pid", "tid", "dur"))
    same = held.select(
        (pl.col("pid").null_count() == 0)
        & ((pl.col("dur") > 0).fill_null(False).all() | (pl.len() == 0)),
        # each tid one pid (a group-by of the few tids, not a hash of every pair)
        held.group_by("tid")
        .agg((pl.col("pid").min() == pl.col("pid").max()).alias("one"))["one"]
        .all(),
    )
    if not all(same.row(0)):
        return None
    levels = shared.tree_levels(events)
    node = tree["node"].to_numpy()
    if levels.height == tree.height and (node[1:] > node[:-1]).all():
        # the nesting of every tree node, in node order: row for row the tree's (a sort,
        # not a join), where its nodes are the tree's
        levels = levels.sort("node")
        if levels["node"].equals(tree["node"]):
            return levels.filter(on_module_threads).select(
                pl.col("node").alias("idx"), pl.col("depth").alias("level"), "parent"
            )
    tree = tree.filter(on_module_threads).select("node")
    return tree.join(levels, on="node", maintain_order="left").select(
        pl.col("node").alias("idx"), pl.col("depth").alias("level"), "parent"
    )


def _siblings_not_children(occ: pl.DataFrame) -> pl.DataFrame:
    """A module occurrence whose parent is the same module (name and id) is another instance
    beside it, not its child: torch.compile names every GraphModule `GraphModule_0` (id 0),
    and a GraphModule's call enters Module.__call__ twice; as a child, the module view made a
    64-level chain of one row whose levels exceeded their parent's time. Such an occurrence
    takes the parent of the nearest occurrence above it of another module, and `reentered`
    marks it (its time lies inside the outer one's, so totals count the outer only)."""
    same = (pl.col("parent_name") == pl.col("name")) & (
        pl.col("parent_id") == pl.col("python_module_id")
    )
    occ = occ.with_columns(same.fill_null(False).alias("reentered"))
    up = occ.select(
        pl.col("python_id").alias("parent_python_id"),
        pl.col("parent_python_id").alias("pp"),
        pl.col("parent_name").alias("pname"),
        pl.col("parent_id").alias("pid_"),
    ).unique("parent_python_id")
    for _ in range(64):
        loop = (pl.col("parent_name") == pl.col("name")) & (
            pl.col("parent_id") == pl.col("python_module_id")
        )
        if occ.filter(loop.fill_null(False)).is_empty():
            break
        occ = (
            occ.join(up, on="parent_python_id", how="left")
            .with_columns(
                *(
                    pl.when(loop.fill_null(False)).then(pl.col(new)).otherwise(pl.col(c)).alias(c)
                    for c, new in (
                        ("parent_python_id", "pp"),
                        ("parent_name", "pname"),
                        ("parent_id", "pid_"),
                    )
                )
            )
            .drop("pp", "pname", "pid_")
        )
    return occ


#: Most module paths `_with_paths` enumerates: past it each (module, parent) row keeps one.
MAX_PATHS = 10_000


def _with_paths(table: pl.DataFrame) -> pl.DataFrame:
    """path and depth of each module, by joining parents up to the top; a parent already on
    the path (a cycle of modules calling each other) ends it rather than repeating.

    A module under several parents is under each, so the paths multiply with every such
    ancestor: when they pass `MAX_PATHS` (tangled parent ids put every module under ten
    parents: 10^depth paths ran out of memory), each (module, parent) row gets one path
    instead, through its ancestors' first parents by name and id. DEVIATION: the plugin's
    tree would hold them all."""
    every = _climb(table, max(MAX_PATHS, table.height))
    return every if every is not None else _climb(table, None)  # type: ignore[return-value]


def _climb(table: pl.DataFrame, cap: int | None) -> pl.DataFrame | None:
    """Every path of each row of `table` (None once there would be more than `cap`); one
    each if no cap, through the first parent (by name, then id, nulls last) of each
    ancestor. The joins and cycle tests are made on integer codes of the (name, id) keys,
    not on "name\x00id" texts (a null code where the name or id is null, as `pl.format`
    gives a null text), and the height a join would reach is counted before it is made:
    the tangled parents of a long real trace pass the cap at their last join."""
    pairs = pl.concat(
        [
            table.select(pl.col("module").alias("n"), pl.col("module_id").alias("i")),
            table.select(pl.col("parent").alias("n"), pl.col("parent_id").alias("i")),
        ],
        how="vertical_relaxed",
    ).drop_nulls()
    codes = pairs.unique(maintain_order=True).with_row_index("code")

    def coded(name: str, id_: str, alias: str) -> pl.Series:
        return (
            table.select(pl.col(name).alias("n"), pl.col(id_).alias("i"))
            .cast(pairs.schema)  # type: ignore[arg-type]
            .join(codes, on=["n", "i"], how="left", maintain_order="left")["code"]
            .alias(alias)
        )

    own = coded("module", "module_id", "own")
    up = coded("parent", "parent_id", "key")
    has_up = table["parent"].is_not_null().alias("has_up")
    link = pl.DataFrame(
        [
            own.alias("p_own"),
            up.alias("p_key"),
            has_up.alias("p_has"),
            table["parent"].alias("p_parent"),
            table["parent_id"].alias("p_parent_id"),
        ]
    )
    if cap is None:  # each key's first parent row only
        link = link.sort("p_parent", "p_parent_id", nulls_last=True).unique(
            "p_own", keep="first", maintain_order=True
        )
    link = link.drop("p_parent_id")
    # rows each code's join gives (a key that matches none keeps its row)
    owned = link["p_own"].drop_nulls().to_numpy()
    rows_of = np.maximum(np.bincount(owned, minlength=codes.height), 1)
    cur = pl.DataFrame(
        [
            up,
            has_up,
            table["module"].alias("path"),
            pl.Series("depth", np.zeros(table.height, dtype=np.uint32)),
            table["parent"].alias("up"),
        ]
    ).with_columns(pl.concat_list(own).alias("seen"))
    cur = cur.with_row_index("__row")
    for _ in range(64):
        cycle = pl.col("seen").list.contains(pl.col("key")).fill_null(False)
        cur = cur.with_columns(
            pl.when(cycle).then(None).otherwise(pl.col("key")).alias("key"),
            pl.when(cycle).then(False).otherwise(pl.col("has_up")).alias("has_up"),
        )
        if not cur["has_up"].any():
            break
        if cap is not None:
            keys = cur["key"]
            grown = int(rows_of[keys.drop_nulls().to_numpy()].sum()) + keys.null_count()
            if grown > cap:
                return None
        cur = cur.with_columns(
            pl.col("seen").list.concat(pl.concat_list("key")),
            pl.when(pl.col("has_up"))
            .then(pl.format("{}/{}", "up", "path"))
            .otherwise(pl.col("path"))
            .alias("path"),
            (pl.col("depth") + pl.col("has_up").cast(pl.UInt32)).alias("depth"),
        )
        cur = cur.join(
            link, left_on="key", right_on="p_own", how="left", maintain_order="left_right"
        ).select(
            "__row",
            pl.col("p_key").alias("key"),
            pl.col("p_has").fill_null(False).alias("has_up"),
            "path",
            "depth",
            pl.col("p_parent").alias("up"),
            "seen",
        )
    return table[cur["__row"]].with_columns(cur["path"], cur["depth"])


def _device_time(events: pl.DataFrame, graph: pl.DataFrame, mods: pl.DataFrame) -> pl.DataFrame:
    """idx of a module occurrence -> dev_total, dev_self (ns of GPU work it launched)."""
    empty = pl.DataFrame(
        schema={"idx": pl.UInt32(), "dev_total": pl.Int64(), "dev_self": pl.Int64()}
    )
    gpu = (
        events.lazy()
        .filter(
            pl.col("kind").is_in(("kernel", "memcpy", "memset"))
            & pl.col("correlation").is_not_null()
        )
        .select("correlation", "dur")
        .collect()
    )
    if gpu.is_empty():
        return empty
    launches = (
        events.lazy()
        .filter(pl.col("kind").is_in(("runtime", "driver")) & pl.col("correlation").is_not_null())
        .select("idx", "pid", "tid", "ts", "dur", "correlation")
        .collect()
        .join(
            gpu.group_by("correlation").agg(pl.col("dur").sum().alias("gpu_ns")), on="correlation"
        )
        .select("idx", "pid", "tid", "ts", "dur", "gpu_ns")
    )
    if launches.is_empty():
        return empty
    nested = _nested_device_time(events, graph, mods, launches)
    if nested is not None:
        return nested.cast(empty.schema)
    # only what the totals read: module frames and operators, not every Python frame
    around = enclosing(
        events, launches, among=_is_module() | (pl.col("kind") == "cpu_op"), ordered=False
    )
    mod_ids = mods.select(pl.col("idx").alias("c_idx"))
    gpu_ns = launches.select(pl.col("idx").alias("q"), "gpu_ns")
    total = (
        around.join(mod_ids, on="c_idx", how="semi")
        .join(gpu_ns, on="q")
        .group_by("c_idx")
        .agg(pl.col("gpu_ns").sum().alias("dev_total"))
    )
    # Self (the plugin's): the device totals of the module's direct plain operators.
    in_tree = graph.select(pl.col("idx").alias("c_idx"), pl.col("parent").alias("owner"))
    ops = events.lazy().filter(_plain_operator()).select(pl.col("idx").alias("c_idx")).collect()
    self_ = (
        around.join(ops, on="c_idx", how="semi")
        .join(in_tree, on="c_idx")
        .join(mod_ids.rename({"c_idx": "owner"}), on="owner", how="semi")
        .join(gpu_ns, on="q")
        .group_by("owner")
        .agg(pl.col("gpu_ns").sum().alias("dev_self"))
    )
    return (
        total.rename({"c_idx": "idx"})
        .join(self_.rename({"owner": "idx"}), on="idx", how="full", coalesce=True)
        .with_columns(pl.col("dev_total").fill_null(0), pl.col("dev_self").fill_null(0))
        .cast(empty.schema)
    )


def _nested_device_time(
    events: pl.DataFrame, graph: pl.DataFrame, mods: pl.DataFrame, launches: pl.DataFrame
) -> pl.DataFrame | None:
    """`_device_time`'s answer from one nesting of the launch threads (numpy: a sort, each
    range's parent and last descendant; every range's launched GPU time a difference of one
    cumulative sum), not `enclosing`'s pairs of every launch and every range around it; or
    None where the two could differ. They agree when, on the launch threads, the operators,
    module frames and launches have distinct ids and times that last (no null, no zero
    length), nest (each range inside its parent: `enclosing` then finds every range that
    truly holds a launch) and no range lies inside a launch (ranges of equal times: the one
    of smaller id holds the other, `sequences._levels`'s order)."""
    asked = launches.filter(pl.col("pid").is_not_null() & pl.col("tid").is_not_null())
    tids = asked["tid"].unique().implode()
    held = (  # (threads told apart by (pid, tid) below: a tid filter, not a join)
        events.lazy()
        .filter(
            (_is_module() | (pl.col("kind") == "cpu_op"))
            & pl.col("pid").is_not_null()
            & pl.col("tid").is_in(tids)
        )
        .select(
            "pid", "tid", "idx", "ts", "dur",
            pl.when(pl.col("kind") == "cpu_op").then(2).otherwise(1).cast(pl.Int8).alias("type"),
            pl.lit(0, pl.Int64).alias("gpu_ns"),
        )
        .collect()
    )  # fmt: skip
    rows = pl.concat(
        [held, asked.select(*held.columns[:5], pl.lit(0, pl.Int8).alias("type"), "gpu_ns")],
        how="vertical_relaxed",
    )
    ok = rows.select(
        (pl.sum_horizontal(pl.col("ts", "dur", "idx").null_count()) == 0)
        & (pl.col("dur") > 0).all()
        & (pl.col("idx").n_unique() == pl.len())
    ).item()
    if not ok:
        return None
    thread = rows.select(pl.struct("pid", "tid").rank("dense")).to_series().to_numpy()
    start = rows["ts"].to_numpy()
    end = start + rows["dur"].to_numpy()
    idx = rows["idx"].cast(pl.Int64).to_numpy()
    # `sequences._levels`' opening order: by thread, start, longer first, smaller id first
    order = thread_order(thread, start, end, idx)
    thread, start, end = thread[order], start[order], end[order]
    kind = rows["type"].to_numpy()[order]
    up = nesting.parents(thread, nesting.depths(thread, start, end))
    inner = np.flatnonzero(up >= 0)
    if (end[inner] > end[up[inner]]).any() or (kind[up[inner]] == 0).any():
        return None
    last = nesting.last_descendants(thread, start, end)
    cum = np.concatenate([[0], np.cumsum(rows["gpu_ns"].to_numpy()[order])])
    below = cum[last + 1] - cum[np.arange(order.size)]  # GPU ns of the launches inside
    ranges = pl.DataFrame({"idx": rows["idx"].gather(order), "type": kind, "ns": below})
    total = ranges.filter(pl.col("type") == 1).select("idx", pl.col("ns").alias("dev_total"))
    # Self (the plugin's): the device totals of the module's direct plain operators.
    # (the operators right under a module first: only their names are tested)
    owners = graph.select("idx", pl.col("parent").alias("owner")).filter(
        pl.col("owner").is_in(mods["idx"].implode())
    )
    ops = ranges.filter((pl.col("type") == 2) & (pl.col("ns") != 0)).join(owners, on="idx")
    plain = rows_at(events, ops["idx"], ("name", "kind")).select(_plain_operator()).to_series()
    self_ = (
        ops.filter(plain)
        .group_by("owner")
        .agg(pl.col("ns").sum().alias("dev_self"))
        .rename({"owner": "idx"})
    )
    return total.join(self_, on="idx", how="full", coalesce=True).with_columns(
        pl.col("dev_total").fill_null(0), pl.col("dev_self").fill_null(0)
    )


def module_view(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Every rank's module table (MODULE_COLUMNS); CPU-only ranks included. A batch's ranks
    without a module frame are left out as their empty tables would be, found in one query
    (two a rank: most tiny ranks have none)."""
    found = ranks_with(ranks, _is_module())
    frames = [
        rank_module_view(events).select(pl.lit(rank, pl.Int64).alias("rank"), pl.all())
        for rank, events in sorted(ranks.items())
        if found is None or rank in found
    ]
    frames = [f for f in frames if not f.is_empty()]
    if not frames:
        return pl.DataFrame(schema=MODULE_COLUMNS)
    return pl.concat(frames).cast(MODULE_COLUMNS)
