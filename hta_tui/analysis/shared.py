"""What several analyses compute of one rank, computed once per rank and kept: the plugin's
operator tree (memory attribution, memory statistics), the memory events with their operators
(every memory table) and the allocations' Python context (the events table, what is alive at
a peak, leak candidates).

Kept by `hta_view.job_cached`, keyed by the identity of the rank's frames and dropped with
them (nothing outlives a trace reload), built once even when two analyses ask at the same
time. A table here is one rank's; the analyses add the rank column and concatenate.
"""

from __future__ import annotations

import polars as pl

from hta_tui.analysis import memory_device
from hta_tui.analysis import memory_records as records
from hta_tui.analysis.enclosing import innermost_and_levels
from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.memory_context import python_context


def operator_tree(events: pl.DataFrame) -> pl.DataFrame:
    """The plugin's operator tree of one rank's events (`memory_records.effective_tree`)."""
    return job_cached(
        {0: events},
        "operator_tree",
        lambda: records.effective_tree(records.tree_nodes(events)),
    )


def memory_records(events: pl.DataFrame, memory: pl.DataFrame) -> pl.DataFrame:
    """Every memory event of the rank with its operator (`memory_records.memory_records`):
    each event attributed once, whichever memory tables are asked for. The tree's nesting
    and each event's innermost node come from one sort (the tree kept as `operator_tree`,
    unless the statistics built it first)."""

    def build() -> pl.DataFrame:
        recs = memory_device.sorted_records(memory)
        nodes = records.tree_nodes(events)
        found, nesting = innermost_and_levels(
            nodes.select("key", "node", "start", "end"), records.probes(recs)
        )
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
