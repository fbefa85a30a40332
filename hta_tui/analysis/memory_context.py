"""The Python context of memory events: the innermost `nn.Module` and the Python frames around
each one, from the `python_function` events a trace has when recorded `with_stack` /
`with_modules` (null without them)."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis.enclosing import innermost, innermost_and_levels, node_columns

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
    inner, nesting = innermost_and_levels(code.select("key", "node", "start", "end"), probes)
    inner = inner.select(pl.col("row").alias("seq"), "node")
    parents = nesting.select("node", "parent")
    names = code.select("node", "name")
    parts = []
    at = inner
    for depth in range(STACK_DEPTH):
        at = at.join(names, on="node", how="left").rename({"name": f"f{depth}"})
        parts.append(f"f{depth}")
        at = at.join(parents, on="node", how="left").drop("node").rename({"parent": "node"})
    joined = pl.concat_str([pl.col(p) for p in parts], separator=STACK_SEP, ignore_nulls=True)
    stack = at.select("seq", pl.when(joined != "").then(joined).alias("stack"))
    return out.join(stack, on="seq", how="left")
