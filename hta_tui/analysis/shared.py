"""What several analyses compute of one rank, computed once per rank and kept: the nesting of
the plugin's operator tree (the memory tables and the module view), the tree itself (memory
attribution, memory statistics), the memory events with their operators (every memory table)
and the allocations' Python context (the events table, what is alive at a peak, leak
candidates).

Kept by `hta_view.job_cached`, keyed by the identity of the rank's frames and dropped with
them (nothing outlives a trace reload), built once even when two analyses ask at the same
time. A table here is one rank's; the analyses add the rank column and concatenate.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from hta_tui.analysis import memory_device
from hta_tui.analysis import memory_records as records
from hta_tui.analysis.enclosing import innermost_and_levels, levels
from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.memory_context import python_context


def tree_nodes(events: pl.DataFrame) -> pl.DataFrame:
    """The plugin's operator-tree nodes of one rank (`memory_records.tree_nodes`)."""
    return job_cached({0: events}, "operator_tree_nodes", lambda: records.tree_nodes(events))


def tree_levels(
    events: pl.DataFrame, made: Callable[[], pl.DataFrame] | None = None
) -> pl.DataFrame:
    """Each operator-tree node's depth and parent (`enclosing.levels` of `tree_nodes`): the
    one nesting of those ranges per rank, read by the memory tables and the module view.
    `made`: how a caller that sorts the nodes anyway (with its probes) gives it."""

    def build() -> pl.DataFrame:
        return levels(tree_nodes(events).select("key", "node", "start", "end"))

    return job_cached({0: events}, "operator_tree_levels", made or build)


def operator_tree(events: pl.DataFrame) -> pl.DataFrame:
    """The plugin's operator tree of one rank's events (`memory_records.effective_tree`)."""
    return job_cached(
        {0: events},
        "operator_tree",
        lambda: records.effective_tree(tree_nodes(events), tree_levels(events)),
    )


def memory_records(events: pl.DataFrame, memory: pl.DataFrame) -> pl.DataFrame:
    """Every memory event of the rank with its operator (`memory_records.memory_records`):
    each event attributed once, whichever memory tables are asked for. The tree's nesting
    and each event's innermost node come from one sort (the tree kept as `operator_tree`,
    unless the statistics built it first)."""

    def build() -> pl.DataFrame:
        recs = memory_device.sorted_records(memory)
        nodes = tree_nodes(events)
        found, nested = innermost_and_levels(
            nodes.select("key", "node", "start", "end"), records.probes(recs)
        )
        nesting = tree_levels(events, lambda: nested)  # kept for the module view
        tree = job_cached(
            {0: events}, "operator_tree", lambda: records.effective_tree(nodes, nesting)
        )
        return records.attribute(recs, tree, found)

    return job_cached({0: memory}, "memory_records", build)


def allocation_context(events: pl.DataFrame, memory: pl.DataFrame) -> pl.DataFrame:
    """seq, module and stack of every allocation of the rank (`python_context`)."""
    return job_cached(
        {0: memory},
        "memory_context",
        lambda: python_context(events, memory_records(events, memory).filter(pl.col("bytes") > 0)),
    )
