"""The memory events of one file, each with the operator that made it, as the TensorBoard
profiler plugin (torch-tb-profiler 0.4.3) attributes them; the base of every memory analysis.

The plugin's operator tree of a thread holds its `cpu_op` events, `ProfilerStep#N`, the
`nn.Module:` python frames and gloo/nccl collectives (user annotations); a parent with a single
child of the same name (both `cpu_op`) is merged with it. A memory event belongs to the
innermost node enclosing its ts (start <= ts < end) on its own thread; it has an operator only
when that node is an operator: not a ProfilerStep, module, `Optimizer.*`, DataLoader `__next__`,
collective annotation or `[Distributed]DataParallel.forward`. Frees are named after the
allocation they release. Found here with sorts and as-of joins (`enclosing`), not a tree walk.

DEVIATIONS, documented in README:
- devices: the plugin knows `Device Type` 0 (CPU) and 1 (CUDA, `GPU<id>`) only; ROCm builds
  write other numbers and the plugin drops or crashes on them (its README, quirk 3). We name
  6 (HIP) `GPU<id>` too, 12 `XPU<id>`, any other `DEV<type>:<id>`.
- the plugin rebuilds backward passes under `<module>.backward` nodes when a trace has modules
  and forward/backward flows, which can drop `autograd::engine::evaluate_function` nodes it
  cannot place; we keep the thread's tree as recorded.
- overlapping (not nested) operators: the plugin drops the later one from its tree; here it
  stays, and only events where two overlap can be attributed differently.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from hta_tui.analysis.enclosing import innermost, innermost_and_levels, levels, node_columns
from hta_tui.analysis.op_tree import id_rows, merges_by_row, parent_rows, rows_at

ROOT = "CallTreeRoot"
UNKNOWN = "<unknown>"
#: user annotations the plugin puts in its tree (as non-operators)
COLLECTIVES = tuple(
    f"{lib}:{op}"
    for lib in ("nccl", "gloo")
    for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
)
_NOT_OPS = ("DataParallel.forward", "DistributedDataParallel.forward")

RECORD_COLUMNS = (
    "seq",
    "ts",
    "bytes",
    "total_allocated",
    "total_reserved",
    "addr",
    "device",
    "pid",
    "tid",
    "op",
    "parent",
    "node",
)


def device_name() -> pl.Expr:
    """CPU, GPU<id>, ...: the plugin's device names (see the module doc for other types)."""
    t, i = pl.col("device_type"), pl.col("device_id").cast(pl.String)
    return (
        pl.when(t == 0)
        .then(pl.lit("CPU"))
        .when(t.is_in([1, 6]))
        .then(pl.lit("GPU") + i)
        .when(t == 12)
        .then(pl.lit("XPU") + i)
        .otherwise(pl.lit("DEV") + t.cast(pl.String) + pl.lit(":") + i)
        .fill_null("unknown device")
        .alias("device")
    )


def start_ns(events: pl.DataFrame, memory: pl.DataFrame) -> int | None:
    """The plugin's `profiler_start_ts`: the earliest complete or memory event."""
    firsts = [f["ts"].min() for f in (events, memory) if not f.is_empty()]
    firsts = [f for f in firsts if f is not None]
    return min(firsts) if firsts else None  # type: ignore[return-value, type-var]


def tree_nodes(events: pl.DataFrame) -> pl.DataFrame:
    """The plugin's operator-tree nodes: node (idx), key (tid), start, end, name, is_op,
    merge (a cpu_op, so it merges with a single same-named child)."""
    name = pl.col("name")
    kind = pl.col("kind")
    step = name.str.starts_with("ProfilerStep#")
    in_tree = (
        (kind == "cpu_op")
        | ((kind == "annotation") & (step | name.is_in(COLLECTIVES)))
        | ((kind == "python") & name.str.starts_with("nn.Module: "))
    )
    op_like = (kind == "cpu_op") & ~step
    is_op = (
        op_like
        & ~name.is_in(_NOT_OPS)
        & ~name.str.starts_with("Optimizer.")
        & ~(name.str.starts_with("enumerate(DataLoader)#") & name.str.ends_with(".__next__"))
        & ~name.str.starts_with("enumerate(DataPipe)#")
    )
    return (  # lazy: the filter reads these columns, not the whole frame
        events.lazy()
        .filter(in_tree & pl.col("tid").is_not_null())
        .select(
            *node_columns(),
            "name",
            is_op.alias("is_op"),
            op_like.alias("merge"),
        )
        .collect()
    )


def effective_tree(nodes: pl.DataFrame, nesting: pl.DataFrame | None = None) -> pl.DataFrame:
    """Nodes with their parent, after the plugin's merge of a same-named single child
    (`op_tree.same_name_merges`): every node gets `merged`, `eff`, the node it counts as
    (itself, or the ancestor it merged into), and `eff_parent`, the effective node of its
    parent (null at the top). `nesting`: `levels` of the nodes, when already made."""
    if nesting is None:
        nesting = levels(nodes.select("key", "node", "start", "end"))
    tree = _with_nesting(nodes, nesting)
    up = parent_rows(tree, node="node")
    eff = merges_by_row(tree, up, node="node", mergeable="merge")["merged", "top"]
    # each node's parent's effective node, by its row (what a join on the parent ids gave)
    eff_parent = eff["top"].gather(np.maximum(up, 0)).set(pl.Series(up < 0), None)  # type: ignore[arg-type]
    return tree.with_columns(eff["merged"], eff["top"].alias("eff"), eff_parent.alias("eff_parent"))


def _with_nesting(nodes: pl.DataFrame, nesting: pl.DataFrame) -> pl.DataFrame:
    """`nodes.join(nesting, on="node")` (rows in the nesting's order), as a gather of the
    nodes' rows when their ids are sorted and every nesting node is one of them (always, for
    nodes from `tree_nodes`: ids are event idx, in file order): hashing the tree's 100k+
    nodes with their names cost the memory tables ~25 ms a rank."""
    ids = nodes["node"]
    want = nesting["node"]
    if ids.is_empty() or ids.null_count() or want.null_count():
        return nodes.join(nesting, on="node")
    have = ids.cast(pl.Int64).to_numpy()
    asked = want.cast(pl.Int64).to_numpy()
    if not (np.diff(have) > 0).all():  # not sorted, or not unique
        return nodes.join(nesting, on="node")
    rows = np.minimum(np.searchsorted(have, asked), have.size - 1)
    # every asked id found, once (a repeated one would be a row counted twice)
    if not (have[rows] == asked).all() or np.bincount(rows, minlength=1).max() > 1:
        return nodes.join(nesting, on="node")
    return pl.concat([nodes[rows], nesting.drop("node")], how="horizontal")


def sorted_memory(memory: pl.DataFrame) -> pl.DataFrame:
    """The memory events with `seq` (file order) and `device`, in time order (file order among
    equal ts)."""
    return memory.with_row_index("seq").with_columns(device_name()).sort("ts", maintain_order=True)


def memory_records(
    events: pl.DataFrame,
    memory: pl.DataFrame,
    recs: pl.DataFrame | None = None,
    tree: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Every memory event in time order (file order among equal ts), with device, the plugin's
    operator (`op`, null outside any operator), its parent node's name (`parent`) and the
    operator's tree node (`node`, the effective one). Frees take their allocation's operator
    (matched by device and address: the next free after an allocation). `recs`:
    `sorted_memory(memory)`, `tree`: `effective_tree(tree_nodes(events))`, when already made
    (`shared` keeps both per rank)."""
    recs = sorted_memory(memory) if recs is None else recs
    if tree is None:
        nodes = tree_nodes(events)
        found, nesting = innermost_and_levels(
            nodes.select("key", "node", "start", "end"), probes(recs)
        )
        tree = effective_tree(nodes, nesting)
    else:
        found = innermost(tree.select("key", "node", "start", "end"), probes(recs))
    return attribute(recs, tree, found)


def probes(recs: pl.DataFrame) -> pl.DataFrame:
    """The memory events as probes of their thread's tree (`enclosing`)."""
    return recs.filter(pl.col("tid").is_not_null()).select(
        pl.col("tid").alias("key"), pl.col("seq").alias("row"), "ts"
    )


def attribute(recs: pl.DataFrame, tree: pl.DataFrame, found: pl.DataFrame) -> pl.DataFrame:
    """`memory_records` from the sorted events, the tree and each event's innermost node
    (`enclosing.innermost` of the tree's nodes)."""
    named = _named_by_row(recs, tree, found)
    if named is None:
        named = _named_by_join(recs, tree, found)
    return _name_frees(named).select(RECORD_COLUMNS)


def _named_by_join(recs: pl.DataFrame, tree: pl.DataFrame, found: pl.DataFrame) -> pl.DataFrame:
    """`recs` with each event's node, op and parent (null outside any operator), by joins."""
    names = (
        tree.select("node", "eff", "eff_parent")
        .join(
            tree.select(pl.col("node").alias("eff"), pl.col("name").alias("op"), "is_op"), on="eff"
        )
        .join(
            tree.select(pl.col("node").alias("eff_parent"), pl.col("name").alias("parent")),
            on="eff_parent",
            how="left",
        )
    )
    found = found.join(names, on="node", how="left").select(
        pl.col("row").alias("seq"),
        pl.when(pl.col("is_op")).then(pl.col("eff")).alias("node"),
        pl.when(pl.col("is_op")).then(pl.col("op")).alias("op"),
        pl.when(pl.col("is_op")).then(pl.col("parent").fill_null(ROOT)).alias("parent"),
    )
    return recs.join(found, on="seq", how="left", maintain_order="left")  # time order


def _named_by_row(
    recs: pl.DataFrame, tree: pl.DataFrame, found: pl.DataFrame
) -> pl.DataFrame | None:
    """`_named_by_join` by row gathers: every id here (a node's idx, an event's seq) is a
    small distinct integer, so an array indexed by id finds each row (the joins hashed the
    tree's nodes with their names twice and the rank's memory events once: ~35 ms a rank of
    vit_memory 8x100MB). None where an id is null or repeated (the joins then)."""
    ids, seqs, rows = tree["node"], recs["seq"], found["row"]
    if tree.is_empty() or recs.is_empty() or found.is_empty():
        return None
    if ids.null_count() or seqs.null_count() or rows.null_count():
        return None
    ids_np = ids.cast(pl.Int64).to_numpy()
    rows_np = rows.cast(pl.Int64).to_numpy()
    seqs_np = seqs.cast(pl.Int64).to_numpy()
    if min(ids_np.min(), rows_np.min(), seqs_np.min()) < 0:
        return None
    if max(ids_np.max(), rows_np.max()) > 8 * (tree.height + recs.height) + 1024:
        return None  # ids far apart: arrays indexed by them would be mostly empty
    tree_row, found_row = id_rows(ids_np), id_rows(rows_np)
    if not (_distinct(tree_row, ids_np) and _distinct(found_row, rows_np)):
        return None

    def at(table: np.ndarray, values: pl.Series) -> np.ndarray:
        """`table[v]` for each id (-1: null, or not an id of the table)."""
        return rows_at(table, values.cast(pl.Int64).fill_null(-1).to_numpy())

    def pick(col: pl.Series, where: np.ndarray) -> pl.Series:
        """col[where], null where `where` is -1."""
        return col.gather(np.maximum(where, 0)).set(pl.Series(where < 0), None)  # type: ignore[arg-type]

    own = at(tree_row, found["node"])  # the found node's row
    eff = np.where(own >= 0, at(tree_row, tree["eff"])[np.maximum(own, 0)], -1)
    up = np.where(own >= 0, at(tree_row, tree["eff_parent"])[np.maximum(own, 0)], -1)
    # a node whose effective node is not in the tree left the inner join: nothing found
    is_op = pick(tree["is_op"], eff).fill_null(False).to_numpy()
    named = np.where(is_op, own, -1)
    node = pick(tree["eff"], named)
    op = pick(tree["name"], np.where(is_op, eff, -1))
    # outside any node (or the parent's name null): the root, as the joins' fill_null gave
    parent = pick(tree["name"], up).fill_null(ROOT).set(pl.Series(~is_op), None)  # type: ignore[arg-type]
    # each event's found row (-1: a probe never asked, the event without a thread)
    found_at = at(found_row, seqs)
    return recs.with_columns(
        pick(node, found_at).alias("node"),
        pick(op, found_at).alias("op"),
        pick(parent, found_at).alias("parent"),
    )


def _distinct(table: np.ndarray, ids: np.ndarray) -> bool:
    """Whether `ids` are distinct, from their `id_rows` table (a repeated id's first row was
    overwritten): no hash of every id."""
    return bool((table[ids] == np.arange(ids.size)).all())


def address_runs(recs: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """`runs` of the events by device and address: time order within an address, for
    `recs` in time order."""
    return runs(recs, ("device", "addr"))


def runs(frame: pl.DataFrame, keys: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The rows of `frame` sorted by `keys`, stably, and whether each continues the keys of
    the one before it (a null is a group of its own, as a window over them makes it). A
    key of one value (the device, on most ranks) is left out of the sort: a sort on a
    string too cost ~5x as much."""
    if frame.is_empty():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    keys = tuple(k for k in keys if frame[k].null_count() or frame[k].min() != frame[k].max())
    if not keys:
        return np.arange(frame.height, dtype=np.int64), np.arange(frame.height) > 0
    by = frame.select(pl.arg_sort_by(keys, maintain_order=True)).to_series()
    order = by.cast(pl.Int64).to_numpy()
    same = (
        frame.select(keys)[order]
        .select(pl.all_horizontal(pl.col(c).eq_missing(pl.col(c).shift(1)) for c in keys))
        .to_series()
        .fill_null(False)
        .to_numpy()
        .astype(bool)
    )
    same[0] = False  # a null first one equals the shift's null
    return order, same


def _previous_at_address(recs: pl.DataFrame) -> np.ndarray:
    """Each event's previous one at its device and address (its row, -1: none), from one
    stable sort (`address_runs`): two windows over (device, address) cost twice as much."""
    row, same = address_runs(recs)
    prev = np.full(row.size, -1, dtype=np.int64)
    prev[row[same]] = row[np.flatnonzero(same) - 1]
    return prev


def _name_frees(recs: pl.DataFrame) -> pl.DataFrame:
    """A free takes the op and parent of the allocation it releases (the event just before it
    at the same device and address, when that is an allocation); only allocations are named
    after the op they happen in, as the plugin does."""
    prev = _previous_at_address(recs)
    alloc = (recs["bytes"] > 0).fill_null(False).to_numpy()
    after_alloc = (prev >= 0) & alloc[np.maximum(prev, 0)] & recs["addr"].is_not_null().to_numpy()
    take = np.where(alloc, np.arange(recs.height), np.where(after_alloc, prev, -1))
    return recs.with_columns(
        recs[c].gather(np.maximum(take, 0)).set(pl.Series(take < 0), None)  # type: ignore[arg-type]
        for c in ("op", "parent")
    )


def display_op(op: str = "op", parent: str = "parent") -> pl.Expr:
    """The plugin's operator column: `<parent> (aten::empty...)` for the allocator-like ops,
    `<unknown>` outside any operator."""
    name = pl.col(op).fill_null(UNKNOWN)
    return (
        pl.when(name.str.starts_with("aten::empty") & pl.col(parent).is_not_null())
        .then(pl.col(parent) + pl.lit(" (") + name + pl.lit(")"))
        .otherwise(name)
    )
