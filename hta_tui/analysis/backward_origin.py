"""The forward operator behind each backward operator, so backward work gets a module.

The autograd thread runs `...Backward0` ops outside any `record_function` or nn.Module frame
of the user's. PyTorch links each one to the forward op that created its autograd node in two
ways, and both are used:

1. a `fwdbwd` flow: its start ("s") sits on the forward op (same pid, tid and ts), its finish
   ("f") on the backward op;
2. the autograd `Sequence number`: the forward op and its backward ops carry the same one.

The flow wins; the sequence number fills in when a trace has no flows (older profilers, or
flows dropped by a converter). Hook markers ("before/after backward of X", user annotations
some users add with module backward hooks) are not needed; `hook_module` reports the last one
seen before a backward op, for a check when they are there.
"""

from __future__ import annotations

import polars as pl

#: Backward ops: autograd's `evaluate_function:` wrapper and the node itself
#: (`GatherBackward0`, `BackwardHookFunctionBackward`, `torch::autograd::AccumulateGrad`).
BACKWARD_RE = r"^autograd::engine::evaluate_function: |Backward\d*$|^torch::autograd::"
_HOOK_RE = r"^(before|after) backward of (.+?)(:.*)?$"

ORIGIN_COLUMNS: dict[str, pl.DataType] = {
    "bwd": pl.UInt32(),  # idx of the backward op
    "fwd": pl.UInt32(),  # idx of the forward op that created it; null when not found
    "via": pl.String(),  # "flow" or "seq"
    "hook_module": pl.String(),  # last "before/after backward of X" marker before it, if any
}


def is_backward() -> pl.Expr:
    return pl.col("name").str.contains(BACKWARD_RE)


def backward_origins(
    events: pl.DataFrame, flows: pl.DataFrame | None = None, only: pl.Series | None = None
) -> pl.DataFrame:
    """One row per backward cpu op of the rank (`ORIGIN_COLUMNS`); `only`: just these idx."""
    ops = events.lazy().filter(pl.col("kind") == "cpu_op")
    # The name regex only ever runs on a few rows: the ops asked for, or those with a seq.
    if only is not None:
        bwd = ops.filter(pl.col("idx").is_in(only.implode()))
    else:
        name = pl.col("name")
        bwd = ops.filter(
            name.str.contains("Backward", literal=True)
            | name.str.contains("autograd::", literal=True)
        )
        bwd = bwd.filter(is_backward())
    bwd = bwd.select("idx", "pid", "tid", "ts", "dur", "seq").collect().lazy()
    by_flow = _by_flow(bwd, ops, flows)
    # The sequence number: the latest forward op with it that starts before the backward op.
    fwd = (
        ops.filter(pl.col("seq").is_not_null())
        .join(bwd.select("seq").drop_nulls().unique(), on="seq", how="semi")
        .filter(~is_backward())
    )
    by_seq = (
        bwd.filter(pl.col("seq").is_not_null())
        .join(fwd.select(pl.col("idx").alias("fwd"), "seq", pl.col("ts").alias("f_ts")), on="seq")
        .filter(pl.col("f_ts") < pl.col("ts"))
        .sort("f_ts")
        .group_by("idx")
        .agg(pl.col("fwd").last().alias("seq_fwd"))
    )
    out = (
        bwd.join(by_flow, on="idx", how="left")
        .join(by_seq, on="idx", how="left")
        .select(
            pl.col("idx").alias("bwd"),
            pl.coalesce("flow_fwd", "seq_fwd").alias("fwd"),
            pl.when(pl.col("flow_fwd").is_not_null())
            .then(pl.lit("flow"))
            .when(pl.col("seq_fwd").is_not_null())
            .then(pl.lit("seq"))
            .alias("via"),
            "pid",
            "tid",
            "ts",
        )
        .collect()
    )
    hooks = _hook_markers(events, only)
    return out.join(hooks, on="bwd", how="left").cast(ORIGIN_COLUMNS).select(list(ORIGIN_COLUMNS))


def _by_flow(bwd: pl.LazyFrame, ops: pl.LazyFrame, flows: pl.DataFrame | None) -> pl.LazyFrame:
    """idx of a backward op -> idx of the forward op its fwdbwd flow starts on."""
    empty = pl.LazyFrame(schema={"idx": pl.UInt32(), "flow_fwd": pl.UInt32()})
    if flows is None or flows.is_empty():
        return empty
    fb = flows.lazy().filter(pl.col("cat") == "fwdbwd")
    keys = ["pid", "tid", "ts"]

    # An endpoint binds to the op of its thread that starts at its ts (the outermost of
    # several, which is the one PyTorch records the flow on).
    def bound(ph: str, side: pl.LazyFrame, col: str) -> pl.LazyFrame:
        return (
            fb.filter(pl.col("ph") == ph)
            .join(side.select("idx", *keys, "dur"), on=keys)
            .sort("dur", descending=True)
            .group_by("id")
            .agg(pl.col("idx").first().alias(col))
        )

    finishes = bound("f", bwd, "idx")
    ends = finishes.join(fb.filter(pl.col("ph") == "s"), on="id").select(keys).unique()
    fwd = ops.join(ends, on=keys, how="semi").filter(~is_backward())
    starts = bound("s", fwd, "flow_fwd")
    return finishes.join(starts, on="id").select("idx", "flow_fwd")


def _hook_markers(events: pl.DataFrame, only: pl.Series | None = None) -> pl.DataFrame:
    """For each backward op, the module of the last hook marker on its thread before it."""
    marks = (
        events.lazy()
        .filter(pl.col("kind").is_in(("annotation", "cpu_op")))
        .filter(pl.col("name").str.contains("backward of ", literal=True))
        .filter(pl.col("name").str.contains(_HOOK_RE))
        .select(
            "pid",
            "tid",
            pl.col("ts").alias("m_ts"),
            pl.col("name").str.extract(_HOOK_RE, 2).alias("hook_module"),
        )
        .drop_nulls(["pid", "tid"])
        .sort("m_ts")
        .collect()
    )
    bwd = events.lazy().filter(pl.col("kind") == "cpu_op")
    if only is not None:
        bwd = bwd.filter(pl.col("idx").is_in(only.implode()))
    else:
        bwd = bwd.filter(is_backward())
    bwd = (
        bwd.select(pl.col("idx").alias("bwd"), "pid", "tid", "ts")
        .drop_nulls(["pid", "tid"])
        .sort("ts")
        .collect()
    )
    if marks.is_empty() or bwd.is_empty():
        return pl.DataFrame(schema={"bwd": pl.UInt32(), "hook_module": pl.String()})
    return bwd.join_asof(
        marks,
        left_on="ts",
        right_on="m_ts",
        by=["pid", "tid"],
        strategy="backward",
        check_sortedness=False,
    ).select("bwd", "hook_module")
