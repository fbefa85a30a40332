"""The steps of the TensorBoard plugin's Overview, and which of them it keeps.

Steps are the `ProfilerStep#N` events (named N); without any, one step "0" spans the host
ops. When runtime calls inside steps launched GPU work, each step is moved to the device
(`StepParser._update_steps_duration`): start = max(previous step's end, host start), end =
max(host end, end of the GPU work its runtime calls launched). Then the trailing steps that
launched nothing are dropped, and the last one that did too when it launched fewer than 80 %
of the GPU ops of the step before (the profiler may have missed its kernels). The plugin does
this silently; here every step gets a row saying whether it was used and why not.
"""

from __future__ import annotations

import polars as pl

from hta_tui.analysis import tb_roles
from hta_tui.analysis.hta_view import job_cached

#: The plugin's tail rule: a last step with fewer GPU ops than this share of the one before.
TAIL_SHARE = 0.8

STEP_COLUMNS: dict[str, pl.DataType] = {
    "step": pl.Int64(),  # N of ProfilerStep#N; 0 for the whole-trace step
    "host_start": pl.Int64(),  # ns, as in the file
    "host_end": pl.Int64(),
    "start": pl.Int64(),  # device-adjusted
    "end": pl.Int64(),
    "gpu_ops": pl.UInt32(),  # kernels, memcpy, memset launched from inside the step
    "used": pl.Boolean(),
    "reason": pl.String(),
}

_NO_GPU = "launched no GPU work, after the last step that did"
_SHORT = f"launched < {TAIL_SHARE:.0%} of the GPU ops of the step before (incomplete capture)"


def host_steps(events: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    """`step`, `host_start`, `host_end` in the plugin's order (by start)."""
    marks = (
        events.lazy()  # the few step rows' three columns, not the whole rows
        .filter(tb_roles.step_rows(tb_compat=tb_compat))
        .select(
            pl.col("name").str.split("#").list.get(1).str.to_integer(strict=False).alias("step"),
            pl.col("ts").alias("host_start"),
            (pl.col("ts") + pl.col("dur")).alias("host_end"),
        )
        .collect()
    )
    marks = marks.drop_nulls().sort("host_start", maintain_order=True)
    if not marks.is_empty():
        return marks
    host = events.lazy().filter(tb_roles.host_span_rows())  # lazy: two columns, not 38
    return (
        host.select(
            pl.lit(0, pl.Int64).alias("step"),
            pl.col("ts").min().alias("host_start"),
            (pl.col("ts") + pl.col("dur")).max().alias("host_end"),
        )
        .collect()
        .drop_nulls()
    )


def profiler_steps(events: pl.DataFrame, *, tb_compat: bool = False) -> pl.DataFrame:
    """Every step with its host and device-adjusted extent, its GPU ops and whether the
    Overview uses it (`reason` says why not). Columns: STEP_COLUMNS. Built once per frame and
    mode: the breakdown, the GPU metrics and the step list all start from it."""
    return job_cached(
        {0: events}, "tb_steps", lambda: _profiler_steps(events, tb_compat=tb_compat), tb_compat
    )


def _profiler_steps(events: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    steps = host_steps(events, tb_compat=tb_compat).with_row_index("i")
    if steps.is_empty():
        return pl.DataFrame(schema=STEP_COLUMNS)
    links = tb_roles.device_links(events, tb_compat=tb_compat)
    inside = (
        links.drop_nulls("rt_start")
        .sort("rt_start")
        .join_asof(steps, left_on="rt_start", right_on="host_start", strategy="backward")
        .filter(pl.col("rt_end") <= pl.col("host_end"))
    )
    per_step = inside.group_by("i").agg(
        pl.col("dev_start").min(), pl.col("dev_end").max(), pl.col("dev_ops").sum()
    )
    steps = steps.join(per_step, on="i", how="left").sort("i")
    gpu_ops = pl.col("dev_ops").fill_null(0).cast(pl.UInt32)
    if per_step.is_empty():
        return steps.select(
            "step",
            "host_start",
            "host_end",
            pl.col("host_start").alias("start"),
            pl.col("host_end").alias("end"),
            gpu_ops.alias("gpu_ops"),
            pl.lit(True).alias("used"),
            pl.lit(None, pl.String).alias("reason"),
        )
    prev = _first_start(events, steps, inside, tb_compat=tb_compat)
    ends = pl.max_horizontal("host_end", "dev_end", pl.lit(prev)).cum_max()
    adjusted = steps.with_columns(gpu_ops.alias("gpu_ops"), ends.alias("end")).with_columns(
        pl.max_horizontal("host_start", pl.col("end").shift(1).fill_null(prev)).alias("start")
    )
    return _mark_tail(adjusted).select(list(STEP_COLUMNS))


def _first_start(
    events: pl.DataFrame, steps: pl.DataFrame, inside: pl.DataFrame, *, tb_compat: bool
) -> int:
    """The plugin's `prev_step_end_time`: the first step's host start, or later, the end of
    GPU work launched outside any step that ended before the first step's GPU work began."""
    first = steps.row(0, named=True)
    prev = int(first["host_start"])
    if first["dev_start"] is None:
        return prev
    matched = inside["correlation"].implode()
    stray = (
        tb_roles.device_ends(events, tb_compat=tb_compat)
        .filter(~pl.col("correlation").is_in(matched).fill_null(False))
        .filter(pl.col("end") < first["dev_start"])
        .select(pl.col("end").max())
        .collect()
    )
    latest = stray["end"].item()
    return max(prev, int(latest)) if latest is not None else prev  # type: ignore[arg-type]


def _mark_tail(steps: pl.DataFrame) -> pl.DataFrame:
    """`used`/`reason` by the plugin's tail rule (only with more than one step)."""
    n = steps.height
    launched = steps["gpu_ops"].to_list()
    last = max((i for i, c in enumerate(launched) if c > 0), default=-1)
    keep, short = n, False
    if n > 1 and last >= 0:
        keep = last + 1
        if last > 0 and launched[last - 1] * TAIL_SHARE > launched[last]:
            keep, short = last, True
    reason = (
        pl.when(pl.col("i") < keep)
        .then(None)
        .when((pl.col("i") == last) & pl.lit(short))
        .then(pl.lit(_SHORT))
        .otherwise(pl.lit(_NO_GPU))
    )
    return steps.with_columns((pl.col("i") < keep).alias("used"), reason.alias("reason"))
