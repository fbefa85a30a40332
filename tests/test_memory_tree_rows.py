"""Issue 27: the memory tables' operator tree and each memory event's operator are found by
row (arrays indexed by the node and event ids), not by hash joins of the rank's 100k+ tree
nodes and its memory events: the same frames as the joins gave, on a real trace whose tree
has same-named merges, and the joins kept where the ids do not allow rows."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from hta_tui.analysis import memory_device, memory_records, memory_stats, shared
from hta_tui.analysis.enclosing import innermost_and_levels
from hta_tui.analysis.memory_context import (
    MODULE_PREFIX,
    STACK_DEPTH,
    STACK_SEP,
    python_context,
)
from hta_tui.analysis.memory_events import KB
from hta_tui.analysis.op_tree import same_name_merges
from hta_tui.trace.parse import parse_file


def _joined_tree(nodes: pl.DataFrame, nesting: pl.DataFrame) -> pl.DataFrame:
    """The effective tree as joins on the node ids (the definition the rows must match)."""
    tree = nodes.join(nesting, on="node")
    eff = same_name_merges(tree, node="node", mergeable="merge").rename({"top": "eff"})
    eff_map = eff.select(pl.col("node").alias("parent"), pl.col("eff").alias("eff_parent"))
    return tree.join(eff, on="node").join(eff_map, on="parent", how="left")


def _joined_records(recs: pl.DataFrame, tree: pl.DataFrame, found: pl.DataFrame) -> pl.DataFrame:
    """Each memory event's node, operator and parent as joins (the plugin's rule: a node
    that is not an operator names nothing; the parent of a top-level operator is the root):
    the module's own join path, kept for ids rows cannot address."""
    named = memory_records._named_by_join(recs, tree, found)
    return memory_records._name_frees(named).select(memory_records.RECORD_COLUMNS)


@contextmanager
def _joins() -> Iterator[list[int]]:
    """The heights of the frames DataFrame.join was called on meanwhile."""
    seen: list[int] = []
    orig = pl.DataFrame.join

    def counted(self: pl.DataFrame, *a, **k):  # type: ignore[no-untyped-def]
        seen.append(self.height)
        return orig(self, *a, **k)

    pl.DataFrame.join = counted  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        pl.DataFrame.join = orig  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def vit_frames(shared: Path) -> dict[str, pl.DataFrame]:
    """The frames of a real trace with memory events and a deep operator tree."""
    (path,) = sorted((shared / "traces" / "pytorch_cpu_vit_memory").glob("*.json.gz"))[:1]
    return parse_file(path).frames


@pytest.fixture(scope="module")
def vit(
    vit_frames: dict[str, pl.DataFrame],
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """nodes, nesting, sorted memory events and each one's innermost node, of a real trace."""
    frames = vit_frames
    recs = memory_device.sorted_memory(frames["memory"])
    nodes = memory_records.tree_nodes(frames["events"])
    found, nesting = innermost_and_levels(
        nodes.select("key", "node", "start", "end"), memory_records.probes(recs)
    )
    return nodes, nesting, recs, found


def test_tree_and_attribution_by_row_are_the_joins(vit) -> None:  # type: ignore[no-untyped-def]
    nodes, nesting, recs, found = vit
    with _joins() as joins:
        tree = memory_records.effective_tree(nodes, nesting)
        records = memory_records.attribute(recs, tree, found)
    assert not joins  # main hashed the tree three times and the events once
    reference = _joined_tree(nodes, nesting)
    assert tree.equals(reference)
    assert tree["merged"].any()  # same-named single children merged: eff differs from node
    assert (tree["eff_parent"] != tree["parent"]).any()
    assert records.equals(_joined_records(recs, reference, found))
    assert records["op"].null_count() < records.height  # most events inside an operator


def test_ids_rows_cannot_address_keep_the_joins(vit) -> None:  # type: ignore[no-untyped-def]
    nodes, nesting, recs, found = vit
    # ids out of file order (the nesting's gather needs them sorted), and far apart
    shuffled = nodes.with_columns(pl.col("node").cast(pl.Int64) * 1_000_003).reverse()
    scaled = nesting.with_columns(pl.col("node", "parent").cast(pl.Int64) * 1_000_003)
    far = found.with_columns(pl.col("node").cast(pl.Int64) * 1_000_003)
    tree = memory_records.effective_tree(shuffled, scaled)
    assert tree.equals(_joined_tree(shuffled, scaled))
    assert memory_records.attribute(recs, tree, far).equals(_joined_records(recs, tree, far))


def test_events_no_probe_asked_for_name_nothing(vit) -> None:  # type: ignore[no-untyped-def]
    nodes, nesting, recs, found = vit
    tree = memory_records.effective_tree(nodes, nesting)
    half = found.head(found.height // 2)  # the others as events without a thread
    with _joins() as joins:
        ours = memory_records.attribute(recs, tree, half)
    assert not joins
    assert ours.equals(_joined_records(recs, tree, half))
    whole = memory_records.attribute(recs, tree, found)
    assert ours["op"].null_count() > whole["op"].null_count()


def test_memory_stats_sums_by_row(vit_frames: dict[str, pl.DataFrame]) -> None:
    """The memory statistics sum each node's events on arrays indexed by node row: no frame
    of every tree node (and device) joined to the self sums and to the operator names; the
    self columns add up to the events attributed to an operator, per device."""
    events, memory = vit_frames["events"], vit_frames["memory"]
    records = shared.memory_records(events, memory)
    tree = shared.operator_tree(events)
    with _joins() as joins:
        stats = memory_stats.memory_stats(events, records)
    assert max(joins, default=0) < tree.height // 10  # main joined all 100k+ nodes twice
    inside = records.filter(pl.col("node").is_not_null())
    expected = inside.group_by("device").agg(
        (pl.col("bytes") > 0).sum().cast(pl.Int64).alias("allocs"),
        pl.col("bytes").sum().alias("inc"),
        pl.col("bytes").filter(pl.col("bytes") > 0).sum().alias("alloc"),
    )
    got = stats.group_by("device").agg(
        pl.col("self_allocation_count").sum().alias("allocs"),
        (pl.col("self_size_increase_kb").sum() * KB).round().cast(pl.Int64).alias("inc"),
        (pl.col("self_allocation_size_kb").sum() * KB).round().cast(pl.Int64).alias("alloc"),
    )
    assert got.sort("device").equals(expected.sort("device"))
    assert expected["allocs"].sum() > 100
    assert (stats["allocation_count"] >= stats["self_allocation_count"]).all()
    assert (stats["allocation_count"] > stats["self_allocation_count"]).any()  # nested ops
    assert (stats["calls"] > 0).all()


def test_python_stacks_climb_by_row(vit_frames: dict[str, pl.DataFrame]) -> None:
    """Each allocation's Python frames are climbed by row number, the frames' parents set
    from their nesting by row: no join of every Python frame of the rank on its node."""
    events, memory = vit_frames["events"], vit_frames["memory"]
    allocs = shared.memory_records(events, memory).filter(pl.col("bytes") > 0)
    python = events.filter(pl.col("kind") == "python")
    frames = python.filter(~pl.col("name").str.starts_with(MODULE_PREFIX)).height
    assert frames > 4 * allocs.height  # a join of every frame stands out
    with _joins() as joins:
        context = python_context(events, allocs)
    assert max(joins) < frames  # main joined every frame to the nesting
    stacks = context["stack"].drop_nulls()
    assert stacks.len() > allocs.height // 2
    assert (stacks.str.count_matches(STACK_SEP, literal=True) == STACK_DEPTH - 1).any()


def _frees_by_windows(recs: pl.DataFrame) -> pl.DataFrame:
    """The free-naming rule as windows over (device, address): the definition."""
    alloc = pl.col("bytes") > 0
    by = ["device", "addr"]
    return recs.with_columns(
        pl.when(alloc)
        .then(pl.col(c))
        .when(alloc.shift(1).over(by) & pl.col("addr").is_not_null())
        .then(pl.col(c).shift(1).over(by))
        .alias(c)
        for c in ("op", "parent")
    )


def _some_null(rng: np.random.Generator, values: list, p_null: float, n: int = 80) -> list:
    return [None if rng.random() < p_null else v for v in rng.choice(values, n).tolist()]


def test_frees_named_as_the_windows_name_them() -> None:
    """Frees named after the allocation just before them at their device and address, found
    by one sort: as the windows do, with null sizes, addresses and devices among them."""
    schema = {"device": pl.String, "addr": pl.Int64, "bytes": pl.Int64, "op": pl.String}
    for seed in range(20):
        rng = np.random.default_rng(seed)
        recs = pl.DataFrame(
            {
                "device": _some_null(rng, ["CPU", "GPU0", "GPU1"], 0.05 * (seed % 2)),
                "addr": _some_null(rng, [1, 2, 3, 4], 0.15),
                "bytes": _some_null(rng, [-16, -8, 0, 8, 16], 0.1),
                "op": _some_null(rng, ["aten::empty", "aten::add", "aten::mm"], 0.2),
            },
            schema=schema,
        ).with_columns(pl.col("op").alias("parent"))
        assert memory_records._name_frees(recs).equals(_frees_by_windows(recs))


def test_memory_stats_of_no_operator_is_empty(vit_frames: dict[str, pl.DataFrame]) -> None:
    """Memory events and no operator around them (a rank without host ops, a zoom between
    operators): an empty table, not an error."""
    events, memory = vit_frames["events"], vit_frames["memory"]
    records = shared.memory_records(events, memory)
    no_ops = events.filter(pl.col("kind") == "runtime")
    assert shared.operator_tree(no_ops).is_empty() and not records.is_empty()
    stats = memory_stats.memory_stats(no_ops, records)
    assert stats.is_empty() and stats.schema == pl.Schema(memory_stats.COLUMNS)
    last_end = shared.operator_tree(events)["end"].max()
    late = memory_stats.memory_stats(events, records, last_end + 1, last_end + 10**9)
    assert late.is_empty()


def test_memory_stats_null_size_adds_nothing(vit_frames: dict[str, pl.DataFrame]) -> None:
    """An attributed event without a size adds nothing to its node's subtree sums, as to its
    self sums: the table is that of the same events with size 0 (the running sums' nulls
    once read as NaN and cast to garbage)."""
    events, memory = vit_frames["events"], vit_frames["memory"]
    records = shared.memory_records(events, memory)
    some = (pl.col("node").is_not_null() & (pl.col("seq") % 7 == 0)).alias("some")
    marked = records.with_columns(some)
    assert marked["some"].sum() > 10

    def blank(size: int | None) -> pl.DataFrame:
        lit = pl.lit(size, pl.Int64)
        return marked.with_columns(
            pl.when(pl.col("some")).then(lit).otherwise(pl.col("bytes")).alias("bytes")
        ).drop("some")

    nulls, zeros = blank(None), blank(0)
    got = memory_stats.memory_stats(events, nulls)
    assert got.equals(memory_stats.memory_stats(events, zeros))
    assert (got["size_increase_kb"].abs() < 1e12).all()
