"""The Python context of memory events: the innermost `nn.Module` and the Python frames around
each one, from the `python_function` events a trace has when recorded `with_stack` /
`with_modules` (null without them)."""

from __future__ import annotations

import numpy as np
import polars as pl

from hta_tui.analysis.enclosing import (
    innermost,
    innermost_and_levels,
    innermost_chain,
    node_columns,
)

MODULE_PREFIX = "nn.Module: "
#: Python frames kept per event, innermost first
STACK_DEPTH = 3
STACK_SEP = " < "


def python_context(events: pl.DataFrame, recs: pl.DataFrame) -> pl.DataFrame:
    """seq, module (innermost nn.Module, its name without the prefix) and stack (the
    STACK_DEPTH innermost other Python frames, innermost first) of every record."""
    out = recs.select("seq")
    frames = (  # lazy: the filter reads these columns, not the whole frame
        events.lazy()
        .filter((pl.col("kind") == "python") & pl.col("tid").is_not_null())
        .select(
            *node_columns(),
            "name",
        )
        .collect()
    )
    if frames.is_empty():  # recorded without with_stack / with_modules
        return out.with_columns(pl.lit(None, pl.String).alias(c) for c in ("module", "stack"))
    probes = recs.filter(pl.col("tid").is_not_null()).select(
        pl.col("tid").alias("key"), pl.col("seq").alias("row"), "ts"
    )
    is_module = pl.col("name").str.starts_with(MODULE_PREFIX)
    modules = frames.filter(is_module)
    found = innermost(modules.select("key", "node", "start", "end"), probes).join(
        modules.select("node", pl.col("name").str.strip_prefix(MODULE_PREFIX).alias("module")),
        on="node",
        how="left",
    )
    out = out.join(found.select(pl.col("row").alias("seq"), "module"), on="seq", how="left")
    code = frames.filter(~is_module)
    nodes = code.select("key", "node", "start", "end")
    chain = innermost_chain(nodes, probes, STACK_DEPTH)
    if chain is not None:  # each allocation's frames found by the sweep, no climb
        return out.join(_stack_names(chain, code), on="seq", how="left")
    inner, nesting = innermost_and_levels(nodes, probes)
    inner = inner.select(pl.col("row").alias("seq"), "node")
    return out.join(_stacks(inner, code, nesting), on="seq", how="left")


def _stack_names(chain: pl.DataFrame, code: pl.DataFrame) -> pl.DataFrame:
    """seq and stack of each probe from its frames (`innermost_chain`, innermost first),
    names gathered by row number (a frame's node is its unique idx)."""
    nodes = code["node"].cast(pl.Int64).to_numpy()
    row_of = np.full(int(nodes.max(initial=-1)) + 2, -1, dtype=np.int64)  # last slot: none
    row_of[nodes] = np.arange(nodes.size)
    names = code["name"].append(pl.Series([None], dtype=pl.String))  # row -1: null
    parts = []
    for i in range(STACK_DEPTH):
        at = row_of[chain[f"node_{i}"].fill_null(-1).to_numpy()]
        parts.append(names.gather(np.where(at < 0, nodes.size, at)).alias(f"f{i}"))
    return _joined(chain.select(pl.col("row").alias("seq")).with_columns(parts))


def _joined(frames: pl.DataFrame) -> pl.DataFrame:
    """seq and the frames' names (f0, f1, ...) joined innermost first (null: none)."""
    parts = [c for c in frames.columns if c != "seq"]
    joined = pl.concat_str([pl.col(p) for p in parts], separator=STACK_SEP, ignore_nulls=True)
    return frames.select("seq", pl.when(joined != "").then(joined).alias("stack"))


def _stacks(inner: pl.DataFrame, code: pl.DataFrame, nesting: pl.DataFrame) -> pl.DataFrame:
    """seq and stack of each probe from its innermost frame (`inner`: seq, node): the frames
    climbed by row number (numpy) where a join per depth hashed every frame of the rank
    twice over (a frame's node is its unique idx; its parent from `nesting`)."""
    nodes = code["node"].cast(pl.Int64).to_numpy()
    # row_of[node]: the frame's row in `code`, -1 for none (its last slot, read for node -1)
    row_of = np.full(int(nodes.max(initial=-1)) + 2, -1, dtype=np.int64)
    row_of[nodes] = np.arange(nodes.size)
    # each frame's parent's row, set by row number from the nesting (a join of every frame
    # on its node hashed the rank's 100k+ frames)
    nested = nesting["node"].cast(pl.Int64).to_numpy()
    up = nesting["parent"].cast(pl.Int64).fill_null(-1).to_numpy()
    parent_row = np.full(nodes.size + 1, -1, dtype=np.int64)  # row -1 (none) has no parent
    known = (nested >= 0) & (nested < row_of.size - 1)
    at = row_of[np.where(known, nested, -1)]
    parent_row[at[at >= 0]] = row_of[up[at >= 0]]
    names = code["name"].append(pl.Series([None], dtype=pl.String))  # row -1: null
    start = inner["node"].cast(pl.Int64).fill_null(-1).to_numpy()
    at = np.where(start < 0, -1, row_of[np.maximum(start, 0)])
    parts = {}
    for depth in range(STACK_DEPTH):
        parts[f"f{depth}"] = names.gather(np.where(at < 0, nodes.size, at))
        at = parent_row[at]
    return _joined(inner.select("seq").with_columns(**parts))
