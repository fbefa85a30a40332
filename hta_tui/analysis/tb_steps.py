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

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import tb_roles
from hta_tui.analysis.hta_view import job_cached, made_ahead
from hta_tui.analysis.per_rank import made_at_once
from hta_tui.analysis.rank_column import tagged, untagged

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
    found = (
        events.lazy()  # the few step rows' three columns, not the whole rows
        .filter(tb_roles.STEP_NAME)
        .select("name", "cat", "ts", "dur")
        .collect()  # (`step_rows`' test of `cat`'s text on those few rows, not every row)
        .lazy()
        .filter(tb_roles.step_rows(tb_compat=tb_compat))
        .select(
            pl.col("name").str.split("#").list.get(1).str.to_integer(strict=False).alias("step"),
            pl.col("ts").alias("host_start"),
            (pl.col("ts") + pl.col("dur")).alias("host_end"),
        )
        .collect()
    )
    marks = found.drop_nulls().sort("host_start", maintain_order=True)
    if not marks.is_empty():
        return marks
    # no step row at all: the span's own step rows (this mode's or fewer) are none either, so
    # its step test (every row's `cat` and name) is skipped
    spans = tb_roles.host_span_rows(steps=not found.is_empty())
    host = events.lazy().filter(spans)  # lazy: two columns, not 38
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


def steps_ahead(events: pl.DataFrame) -> None:
    """`profiler_steps` (the default mode's) made ahead of any view (`hta_view.made_ahead`:
    the read-ahead's, never waited for by a view)."""
    made_ahead({0: events}, "tb_steps", lambda: _profiler_steps(events, tb_compat=False), False)


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


#: what `_profiler_steps` reads of a rank's events
_READ = ("name", "cat", "kind", "ts", "dur", "correlation")


def prime_steps(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> None:
    """Inside a batch of small ranks (`per_rank.made_at_once`), every rank's
    `profiler_steps` made at once (one query set, ~25 queries a tiny rank alone) and kept
    as each rank's: the analyses that ask rank by rank then find them."""
    made_at_once(
        ranks,
        "tb_steps",
        _READ,
        lambda frames: _steps_at_once(frames, tb_compat=tb_compat),
        tb_compat,
    )


def _steps_at_once(
    frames: list[tuple[int, pl.DataFrame]], *, tb_compat: bool
) -> dict[int, pl.DataFrame]:
    """`_profiler_steps` of each rank (frames of one schema), made over them at once with
    `rank` in every key; rank -> its table as its own build makes it (integers only: no
    float to keep to the bit; row order as each rank's)."""
    every = tagged(frames)
    steps = _host_steps_at_once(every, tb_compat=tb_compat)
    steps = steps.with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).over("rank").alias("i"))
    links = tb_roles.device_links(every, tb_compat=tb_compat, by=["rank"])
    inside = (
        links.drop_nulls("rt_start")
        .sort("rank", "rt_start")
        .join_asof(
            steps.select("rank", "i", "host_start", "host_end"),
            left_on="rt_start",
            right_on="host_start",
            by="rank",
            strategy="backward",
            check_sortedness=False,  # sorted within each rank, as `by` needs
        )
        .filter(pl.col("rt_end") <= pl.col("host_end"))
    )
    per_step = inside.group_by("rank", "i").agg(
        pl.col("dev_start").min(), pl.col("dev_end").max(), pl.col("dev_ops").sum()
    )
    steps = steps.join(per_step, on=["rank", "i"], how="left").sort("rank", "i")
    first = _first_starts(every, steps, inside, tb_compat=tb_compat)
    gpu_ops = pl.col("dev_ops").fill_null(0).cast(pl.UInt32)
    ends = pl.max_horizontal("host_end", "dev_end", "prev").cum_max().over("rank")
    moved = steps.join(first, on="rank", how="left", maintain_order="left").with_columns(
        gpu_ops.alias("gpu_ops"), ends.alias("end")
    )
    moved = moved.with_columns(
        pl.max_horizontal(
            "host_start", pl.col("end").shift(1).over("rank").fill_null(pl.col("prev"))
        ).alias("start")
    )
    # a rank whose steps launched nothing keeps its host extents, every step used
    plain = pl.col("launched").not_()
    table = _tails_at_once(moved).select(
        "rank",
        "step",
        "host_start",
        "host_end",
        pl.when(plain).then(pl.col("host_start")).otherwise(pl.col("start")).alias("start"),
        pl.when(plain).then(pl.col("host_end")).otherwise(pl.col("end")).alias("end"),
        "gpu_ops",
        pl.when(plain).then(pl.lit(True)).otherwise(pl.col("used")).alias("used"),
        pl.when(plain).then(pl.lit(None, pl.String)).otherwise(pl.col("reason")).alias("reason"),
    )
    mine = untagged(table, [rank for rank, _ in frames])
    empty = pl.DataFrame(schema=STEP_COLUMNS)
    return {rank: t if t.height else empty for rank, t in mine.items()}


def _host_steps_at_once(every: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    """`host_steps` of every rank (`rank` first): the marks, else the host span's step 0."""
    marks = (
        every.lazy()
        .filter(tb_roles.step_rows(tb_compat=tb_compat))
        .select(
            "rank",
            pl.col("name").str.split("#").list.get(1).str.to_integer(strict=False).alias("step"),
            pl.col("ts").alias("host_start"),
            (pl.col("ts") + pl.col("dur")).alias("host_end"),
        )
        .drop_nulls()
        .collect()
        .sort("rank", "host_start", maintain_order=True)  # each rank's as its own sort
    )
    spans = (
        every.lazy()
        .filter(tb_roles.host_span_rows() & ~pl.col("rank").is_in(marks["rank"].implode()))
        .group_by("rank")
        .agg(
            pl.col("ts").min().alias("host_start"),
            (pl.col("ts") + pl.col("dur")).max().alias("host_end"),
        )
        .drop_nulls()
        .select("rank", pl.lit(0, pl.Int64).alias("step"), "host_start", "host_end")
        .collect()
    )
    return pl.concat([marks, spans.cast(marks.schema)]).sort("rank", maintain_order=True)


def _first_starts(
    every: pl.DataFrame, steps: pl.DataFrame, inside: pl.DataFrame, *, tb_compat: bool
) -> pl.DataFrame:
    """`_first_start` of every rank (`rank`, `prev`) and whether any of its steps launched
    GPU work (`launched`)."""
    first = (
        steps.group_by("rank")
        .agg(
            pl.col("host_start").first().alias("host_first"),
            pl.col("dev_start").first().alias("dev_first"),
            pl.col("dev_ops").is_not_null().any().alias("launched"),
        )
        .with_columns(pl.col("host_first").cast(pl.Int64))
    )
    matched = inside.select("rank", "correlation", pl.lit(True).alias("__matched")).unique()
    stray = (
        every.lazy()
        .filter(tb_roles.device_rows(tb_compat=tb_compat))  # `tb_roles.device_ends`, ranked
        .select("rank", "correlation", (pl.col("ts") + pl.col("dur")).alias("end"))
        .join(matched.lazy(), on=["rank", "correlation"], how="left")
        .filter(pl.col("__matched").is_null())
        .join(first.lazy().select("rank", "dev_first"), on="rank")
        .filter(pl.col("end") < pl.col("dev_first"))
        .group_by("rank")
        .agg(pl.col("end").max().alias("latest"))
        .collect()
    )
    latest = pl.col("latest").cast(pl.Int64)
    prev = (
        pl.when(pl.col("dev_first").is_null() | latest.is_null())
        .then(pl.col("host_first"))
        .otherwise(pl.max_horizontal("host_first", latest))
    )
    return first.join(stray, on="rank", how="left").select("rank", prev.alias("prev"), "launched")


def _tails_at_once(steps: pl.DataFrame) -> pl.DataFrame:
    """`_mark_tail` of every rank's steps (`rank`, `i` in order)."""
    i = pl.col("i").cast(pl.Int64)
    marked = steps.with_columns(
        pl.when(pl.col("gpu_ops") > 0).then(i).max().over("rank").alias("__last"),
        pl.len().over("rank").alias("__n"),
    )
    launched = lambda at: (  # noqa: E731  the GPU ops of the rank's step `at`
        pl.col("gpu_ops").filter(i == at).first().over("rank")
    )
    last = pl.col("__last")
    marked = marked.with_columns(
        (launched(last - 1) * TAIL_SHARE > launched(last)).fill_null(False).alias("__cut")
    )
    cut = pl.col("__cut")
    tail = (pl.col("__n") > 1) & last.is_not_null()
    short = tail & (last > 0) & cut
    keep = (
        pl.when(short).then(last).when(tail).then(last + 1).otherwise(pl.col("__n").cast(pl.Int64))
    )
    reason = (
        pl.when(i < keep)
        .then(None)
        .when((i == last) & short)
        .then(pl.lit(_SHORT))
        .otherwise(pl.lit(_NO_GPU))
    )
    return marked.with_columns((i < keep).alias("used"), reason.alias("reason"))
