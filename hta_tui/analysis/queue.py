"""Launch-queue length per GPU stream: how much work the CPU has enqueued ahead of the GPU.

HTA's `TraceCounters.get_queue_length_time_series`: on each stream the queue length goes
+1 when a CPU call enqueues a GPU op (the launch, at its start) and -1 when that op starts on
the GPU. Every change is one row of a step function: the value holds until the next row.

Which pairs count:
- hta_compat=True: HTA 0.5's launch names (`HTA_LAUNCH_NAMES`: cudaLaunchKernel,
  cudaLaunchKernelExC, cuLaunchKernel, cudaMemcpyAsync, cudaMemsetAsync, the MTIA launch,
  hipLaunchKernel, hipExtModuleLaunchKernel, hipMemcpyAsync, hipMemsetAsync,
  hipMemcpyWithStream), each paired with every GPU event (any event with a stream, HTA's rule)
  of the same correlation.
- default: any runtime/driver call paired with the kernels, memcpys and memsets of its
  correlation. DEVIATION: this adds what HTA 0.5 misses, e.g. `cudaGraphLaunch` (one launch,
  +1 for each op of the graph, all at the launch), `hipModuleLaunchKernel`,
  `hipExtLaunchKernel`, `cudaMemcpy2DAsync`, `cuLaunchKernelEx`.
- A GPU op without such a launch is left out, and so is a launch without a GPU op: HTA's fix
  for the negative queue lengths it once reported (its case
  `negative_queue_length_values_check` has GPU ops whose launch is not in the trace; each
  was counted -1 with no +1). Queue lengths are therefore never negative, unless a trace
  has an op starting before its own launch (clock skew).

Equal timestamps: HTA sorts with an unstable quicksort, so the order of a +1 and a -1 at the
same microsecond is arbitrary there (and differs between machines). We order by time, then
GPU starts before launches (no momentary peak that never existed) unless the op is the one
launched at that time (it cannot start before its own launch), then file order. Each such
tie can move one point of HTA's series by 2; `tie_slack` bounds the effect on the summary.

Times are the view's (`hta_view`): int ns as in the file, rounded like HTA's with
`hta_compat=True` on fractional-microsecond traces.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from hta_tui.analysis.describe import DESCRIBE_COLUMNS, describe
from hta_tui.analysis.hta_view import hta_view, us
from hta_tui.analysis.per_rank import views_at_once
from hta_tui.trace.schema import GPU_WORK_KINDS, LAUNCH_KINDS

#: `TraceSymbolTable.get_runtime_launch_events_query` in HTA 0.5.
HTA_LAUNCH_NAMES: tuple[str, ...] = (
    "cudaMemsetAsync",
    "cudaMemcpyAsync",
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "runFunction - job_prep_and_submit_for_execution",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipMemcpyAsync",
    "hipMemsetAsync",
    "hipMemcpyWithStream",
)

#: HTA's CUDA_MAX_LAUNCH_QUEUE_PER_STREAM.
CUDA_MAX_LAUNCH_QUEUE_PER_STREAM = 1024

SERIES_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "stream": pl.Int64(),
    "ts": pl.Int64(),  # ns, as in the file (HTA: us since the job's first event)
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "queue_length": pl.Int64(),
}

SUMMARY_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "stream": pl.Int64(),
    **DESCRIBE_COLUMNS,
}

BLOCKED_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "stream": pl.Int64(),
    "duration_at_max_queue_length": pl.Float64(),  # us
    "relative_duration_at_max_queue_length": pl.Float64(),
}

_COLUMNS = ("pid", "tid")


def launch_pairs(view: pl.DataFrame, *, hta_compat: bool) -> pl.DataFrame:
    """Every (launch, GPU op) pair of a rank view that the queue counts.

    Columns: correlation, launch_idx, launch_start (the CPU call), idx, stream, pid, tid,
    start, end (the GPU op), all from the view. One row per GPU op: a graph launch gives one
    row per op of the graph.
    """
    keys = ["rank"] if "rank" in view.columns else []  # (a batch's views at once)
    lf = view.lazy()  # filters before the view's other columns are copied
    if hta_compat:
        # HTA keeps a launch only when its partner's event index is > 0: an op that is the
        # file's first event counts as partner-missing (our idx counts complete events, so
        # this holds when the file starts with one, as Kineto's do).
        gpu = lf.filter(pl.col("gpu") & (pl.col("idx") > 0))
        launches = lf.filter(pl.col("name").is_in(HTA_LAUNCH_NAMES))
    else:
        gpu = lf.filter(pl.col("gpu") & pl.col("kind").is_in(GPU_WORK_KINDS))
        launches = lf.filter(pl.col("kind").is_in(LAUNCH_KINDS))
    launches = launches.filter(pl.col("correlation").is_not_null()).select(
        *keys,
        "correlation",
        pl.col("idx").alias("launch_idx"),
        pl.col("start").alias("launch_start"),
    )
    ops = gpu.filter(pl.col("correlation").is_not_null()).select(
        *keys, "correlation", "idx", "stream", "pid", "tid", "start", "end"
    )
    return launches.join(ops, on=[*keys, "correlation"], how="inner").collect()


def _rank_series(rank: int | None, pairs: pl.DataFrame) -> pl.DataFrame:
    """+1 at each launch, -1 at its op's start; sorted by stream, time, then at equal times
    ops start (-1) before launches (+1), except an op launched at that very time (it starts
    after its own launch), then file order. numpy's lexsort: 10x a polars sort on 4 keys.
    `rank` None: a batch's pairs with their `rank` column, sorted by rank first (each
    rank's streams sum to 0 too, so one running sum serves every rank)."""
    launch, start = pairs["launch_start"].to_numpy(), pairs["start"].to_numpy()
    ts = np.concatenate([launch, start])
    own = np.where(launch >= start, 2, 0).astype(np.int8)
    order = np.concatenate([np.ones(launch.size, dtype=np.int8), own])
    pos = np.concatenate([pairs["launch_idx"].to_numpy(), pairs["idx"].to_numpy()])
    stream = np.tile(pairs["stream"].to_numpy(), 2)
    ranks = np.tile(pairs["rank"].to_numpy(), 2) if rank is None else None
    keys = (pos, order, ts, stream) if ranks is None else (pos, order, ts, stream, ranks)
    perm = np.lexsort(keys)
    delta = np.concatenate([np.ones(launch.size, np.int64), np.full(start.size, -1, np.int64)])
    threads = pairs.lazy().select("pid", "tid")  # nullable: gathered by polars, not numpy
    at = pl.Series(perm)
    column = pl.lit(rank, pl.Int64) if ranks is None else pl.Series(ranks[perm])
    return (  # (one query: as eager steps, 4 a rank)
        pl.concat([threads, threads])
        .select(
            column.alias("rank"),
            pl.Series("stream", stream[perm]),
            pl.Series("ts", ts[perm]),
            pl.col("pid").gather(at),
            pl.col("tid").gather(at),
            # Each pair adds +1 and -1 on its op's stream, so every stream's deltas sum to 0
            # and one running sum over the stream-sorted rows restarts at 0 on each stream.
            pl.Series("queue_length", np.cumsum(delta[perm])),
        )
        .cast(SERIES_COLUMNS)
        .collect()
    )


def queue_length_series(
    ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False
) -> pl.DataFrame:
    """The queue length of every stream of every rank as a step function.

    Columns rank, stream, ts (int ns, as in the file), pid, tid (of the stream's GPU
    events) and queue_length: the value from ts until the stream's next row. Sorted by rank,
    stream, ts. Empty (with the columns) when no rank launched anything on a GPU.
    """
    views = hta_view(ranks, hta_compat=hta_compat, columns=_COLUMNS)
    made = views_at_once(views, _READ, lambda t: _series_at_once(t, hta_compat), keep=True)
    frames = [
        made[rank]
        if rank in made
        else _rank_series(rank, launch_pairs(view, hta_compat=hta_compat))
        for rank, view in views.items()
    ]
    if not frames:
        return pl.DataFrame(schema=SERIES_COLUMNS)
    return pl.concat(frames)


#: What the launch pairs read of a view (`launch_pairs`)
_READ = ("idx", "name", "kind", "gpu", "correlation", "stream", "pid", "tid", "start", "end")


def _series_at_once(table: pl.DataFrame, hta_compat: bool) -> pl.DataFrame | None:
    """The queue lengths (`_rank_series`) of a batch's views at once (`per_rank.views_at_once`:
    two queries a schema, not three a rank; integers only); None (each rank alone) when a
    stream or a time is null."""
    pairs = launch_pairs(table, hta_compat=hta_compat)
    used = pairs.select("stream", "launch_start", "start", "launch_idx", "idx")
    if any(used.null_count().row(0)):
        return None
    return _rank_series(None, pairs)


def queue_length_summary_from_series(series: pl.DataFrame) -> pl.DataFrame:
    """HTA's `describe()` of queue_length per rank and stream.

    count, mean, std (sample), min, 25%, 50%, 75% (linear quantiles), max, as floats; sorted
    by rank and stream. Empty where HTA returns None.
    """
    q = pl.col("queue_length").cast(pl.Float64)
    return (
        series.group_by(["rank", "stream"])
        .agg(describe(q))
        .sort(["rank", "stream"])
        .cast(SUMMARY_COLUMNS)
        .select(list(SUMMARY_COLUMNS))
    )


def tie_slack(series: pl.DataFrame) -> pl.DataFrame:
    """How far HTA's summary can be from ours because of equal timestamps, per rank and stream.

    At a time t where a stream has `a` launches and `b` op starts, any order of those a + b
    changes is as valid as ours (HTA's sort is unstable), and each of the a + b points can
    then differ by at most 2 * min(a, b). Columns rank, stream, ties (number of such times),
    mean, std (bounds on |difference| of those statistics) and value (bound on min, max and
    the quartiles). All zero for a stream without ties: its summary is exactly HTA's.
    """
    keys = ["rank", "stream"]
    delta = pl.col("queue_length").diff().over(keys).fill_null(pl.col("queue_length"))
    per_t = (
        series.with_columns(delta.alias("delta"))
        .group_by([*keys, "ts"])
        .agg(
            (pl.col("delta") > 0).sum().alias("a"),
            (pl.col("delta") < 0).sum().alias("b"),
        )
        .with_columns((2 * pl.min_horizontal("a", "b")).cast(pl.Float64).alias("shift"))
        .with_columns((pl.col("a") + pl.col("b")).cast(pl.Float64).alias("points"))
    )
    n = series.group_by(keys).agg(pl.len().cast(pl.Float64).alias("n"))
    return (
        per_t.group_by(keys)
        .agg(
            (pl.col("shift") > 0).sum().cast(pl.Int64).alias("ties"),
            (pl.col("points") * pl.col("shift")).sum().alias("abs_sum"),
            (pl.col("points") * pl.col("shift") ** 2).sum().alias("sq_sum"),
            pl.col("shift").max().alias("value"),
        )
        .join(n, on=keys)
        .select(
            *keys,
            "ties",
            (pl.col("abs_sum") / pl.col("n")).alias("mean"),
            (pl.col("sq_sum") / (pl.col("n") - 1).clip(1)).sqrt().alias("std"),
            "value",
        )
        .sort(keys)
    )


def queue_length_summary(
    ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False
) -> pl.DataFrame:
    """HTA's `get_queue_length_summary`: queue length statistics per rank and stream."""
    return queue_length_summary_from_series(queue_length_series(ranks, hta_compat=hta_compat))


def _duration(view: pl.DataFrame) -> int | None:
    """The view's last start minus its first (ns; None without one), read from the column
    (integers: exactly the query's answer, without its query, one a tiny rank)."""
    start = view["start"]
    if not start.dtype.is_integer():
        return view.select(pl.col("start").max() - pl.col("start").min()).item()
    if start.len() == start.null_count():
        return None
    return int(start.max()) - int(start.min())  # type: ignore[arg-type]


def time_blocked_on_full_queue(
    ranks: Mapping[int, pl.DataFrame],
    max_queue_length: int = CUDA_MAX_LAUNCH_QUEUE_PER_STREAM,
    *,
    hta_compat: bool = False,
    series: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """HTA's `get_time_spent_blocked_on_full_queue`: how long each stream's queue was full.

    A stream is full from each change that leaves queue_length >= `max_queue_length` until
    its next change (the last change of a stream has no length). Columns rank, stream,
    duration_at_max_queue_length (us) and relative_duration_at_max_queue_length (that over
    the rank's trace duration: last event start minus first, as HTA's
    `get_trace_duration`). Only streams that reached the maximum; sorted by rank, stream.
    `series` reuses a `queue_length_series(ranks, hta_compat=...)` already computed (sorted
    as that returns it).
    DEVIATION: HTA keeps its result in a dict keyed by rank, so it reports only the last
    such stream of each rank; we report every stream.
    """
    if series is None:
        series = queue_length_series(ranks, hta_compat=hta_compat)
    views = hta_view(ranks, hta_compat=hta_compat, columns=())
    durations = pl.DataFrame(
        [(rank, _duration(v)) for rank, v in views.items()],
        schema={"rank": pl.Int64, "trace_duration": pl.Int64},
        orient="row",
    )
    # The series is sorted by rank, stream and ts (as `queue_length_series` returns it), so the
    # next change of a stream is the next row unless the stream (or rank) changes there.
    same = (pl.col("rank") == pl.col("rank").shift(-1)) & (
        pl.col("stream") == pl.col("stream").shift(-1)
    )
    held = pl.when(same).then(pl.col("ts").shift(-1) - pl.col("ts"))
    return (
        series.with_columns(held.alias("held"))
        .filter(pl.col("queue_length") >= max_queue_length)
        .group_by(["rank", "stream"])
        .agg(pl.col("held").sum())
        .join(durations, on="rank", how="left")
        .select(
            "rank",
            "stream",
            us(pl.col("held")).alias("duration_at_max_queue_length"),
            (pl.col("held") / pl.col("trace_duration")).alias(
                "relative_duration_at_max_queue_length"
            ),
        )
        .sort(["rank", "stream"])
        .cast(BLOCKED_COLUMNS)
    )
