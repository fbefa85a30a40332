"""CUDA kernel launch statistics: how long each launch call took and how long its work waited.

HTA's `get_cuda_kernel_launch_stats`: for each launch (a CPU call and the GPU op of the same
correlation), cpu_duration is the call's duration, gpu_duration the op's and launch_delay the
op's start minus the call's end, clipped at 0 (us). HTA then plots three subsets, which
`short_gpu_kernels`, `runtime_outliers` and `launch_delay_outliers` return:
- short GPU kernels: cpu_duration <= runtime_cutoff and gpu_duration < cpu_duration (the
  launch costs more than the work);
- runtime outliers: cpu_duration > runtime_cutoff;
- launch delay outliers: launch_delay > launch_delay_cutoff.

Which launches:
- hta_compat=True, as HTA 0.5: correlations of `cudaLaunchKernel`, `cudaLaunchKernelExC` and
  the MTIA launch (plus `cudaMemcpyAsync`, `cudaMemsetAsync` with include_memory_events); then
  every CPU-side event (no stream) x every GPU event (HTA's rule: any stream) of such a
  correlation, one row per pair. `cuLaunchKernel` (Triton), every `hip*` launch and
  `cudaGraphLaunch` are not launches for HTA 0.5 (its queue-length analysis does know
  `cuLaunchKernel` and some `hip*` names; this one does not).
- default: every runtime/driver call (kinds "runtime" and "driver") whose correlation has a
  kernel (and, with include_memory_events, a memcpy or memset) on the GPU: cudaLaunchKernel,
  cudaLaunchKernelExC, cuLaunchKernel, cuLaunchKernelEx, hipLaunchKernel,
  hipExtLaunchKernel, hipModuleLaunchKernel, hipExtModuleLaunchKernel, cudaGraphLaunch,
  hipGraphLaunch, cudaMemcpyAsync, hipMemcpyWithStream ... DEVIATION: more launches than
  HTA on traces with those calls; identical rows otherwise. A synchronous copy
  (`cudaMemcpy`) counts too: its call includes the copy, so its launch_delay clips to 0.

Graph launches (default mode): one call enqueues many ops under one correlation. The row is
per launch call, not per op: cpu_duration is the call's duration, gpu_duration the sum of
the durations of all its ops (the GPU work the call paid for), launch_delay the first op's
start minus the call's end (clipped at 0), and gpu_ops the number of ops. For an ordinary
launch gpu_ops is 1 and the row is HTA's. (HTA would give one row per op, each with the
call's duration, so one slow graph launch would count as many runtime outliers.)

Columns: HTA's correlation, cpu_duration, gpu_duration, launch_delay, then `launch` (the
CPU call's name), `gpu_ops`, and the three subsets above as booleans for the cutoffs given.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis.hta_view import hta_view, job_cached, us
from hta_tui.analysis.per_rank import views_at_once
from hta_tui.trace.schema import LAUNCH_KINDS

#: Launch names of HTA 0.5's `cuda_kernel_launch_stats`.
HTA_KERNEL_LAUNCH_NAMES: tuple[str, ...] = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "runFunction - job_prep_and_submit_for_execution",
)
HTA_MEMORY_LAUNCH_NAMES: tuple[str, ...] = ("cudaMemcpyAsync", "cudaMemsetAsync")

COLUMNS: dict[str, pl.DataType] = {
    "correlation": pl.Int64(),
    "cpu_duration": pl.Float64(),
    "gpu_duration": pl.Float64(),
    "launch_delay": pl.Float64(),
    "launch": pl.String(),
    "gpu_ops": pl.Int64(),
    "short_gpu_kernel": pl.Boolean(),
    "runtime_outlier": pl.Boolean(),
    "launch_delay_outlier": pl.Boolean(),
}

HTA_COLUMNS: tuple[str, ...] = ("correlation", "cpu_duration", "gpu_duration", "launch_delay")


def _pairs_compat(view: pl.DataFrame, *, include_memory_events: bool) -> pl.DataFrame:
    names = HTA_KERNEL_LAUNCH_NAMES + (HTA_MEMORY_LAUNCH_NAMES if include_memory_events else ())
    corr = view.filter(pl.col("name").is_in(names))["correlation"].drop_nulls().unique()
    rows = view.filter(pl.col("correlation").is_in(corr.implode()))
    cpu = rows.filter(~pl.col("gpu")).select(
        "correlation",
        pl.col("idx").alias("cpu_idx"),
        pl.col("name").alias("launch"),
        pl.col("start").alias("cpu_start"),
        pl.col("dur").alias("cpu_dur"),
    )
    gpu = rows.filter(pl.col("gpu")).select(
        "correlation", pl.col("idx").alias("gpu_idx"), "start", "dur"
    )
    return (
        cpu.join(gpu, on="correlation", how="inner")
        .sort(["cpu_idx", "gpu_idx"])
        .select(
            "correlation",
            "launch",
            "cpu_dur",
            pl.col("dur").alias("gpu_dur"),
            (pl.col("start") - pl.col("cpu_start") - pl.col("cpu_dur")).alias("delay"),
            pl.lit(1, pl.Int64).alias("gpu_ops"),
        )
    )


def _pairs_default(view: pl.DataFrame, *, include_memory_events: bool) -> pl.DataFrame:
    """A rank view's launches (or, with a `rank` column, a batch's views' at once: the rank
    in every key; integers only, so each rank's rows are its own to the bit)."""
    kinds = ("kernel", "memcpy", "memset") if include_memory_events else ("kernel",)
    keys = ["rank"] if "rank" in view.columns else []
    # One query: the inner join keeps the calls whose correlation has GPU work.
    lf = view.lazy()
    per_corr = (
        lf.filter(pl.col("gpu") & pl.col("kind").is_in(kinds) & pl.col("correlation").is_not_null())
        .group_by([*keys, "correlation"])
        .agg(
            pl.col("dur").sum().alias("gpu_dur"),
            pl.col("start").min().alias("first_start"),
            pl.len().cast(pl.Int64).alias("gpu_ops"),
        )
    )
    launches = lf.filter(pl.col("kind").is_in(LAUNCH_KINDS)).select(
        *keys,
        "correlation",
        pl.col("idx").alias("cpu_idx"),
        pl.col("name").alias("launch"),
        pl.col("start").alias("cpu_start"),
        pl.col("dur").alias("cpu_dur"),
    )
    return (
        launches.join(per_corr, on=[*keys, "correlation"], how="inner")
        .sort([*keys, "cpu_idx"])
        .select(
            *keys,
            "correlation",
            "launch",
            "cpu_dur",
            "gpu_dur",
            (pl.col("first_start") - pl.col("cpu_start") - pl.col("cpu_dur")).alias("delay"),
            "gpu_ops",
        )
        .collect()
    )


def _finish(
    pairs: pl.DataFrame,
    runtime_cutoff: float,
    launch_delay_cutoff: float,
    *,
    by: tuple[str, ...] = (),
) -> pl.DataFrame:
    """The launches' table from their pairs (ns). `by` ("rank"): a batch's pairs at once,
    each rank's divisions to us as polars makes them on its own table (a one-row one
    exactly, a longer one by the reciprocal: `divided_as_alone`)."""
    if by:
        from hta_tui.analysis.per_rank import divided_as_alone  # (numpy: not on the client)

        alone = pl.len().over(by) == 1
        to_us = lambda e: divided_as_alone(e, 1000, alone)  # noqa: E731  (ns, as `us`)
    else:
        to_us = us
    cpu, gpu, delay = pl.col("cpu_duration"), pl.col("gpu_duration"), pl.col("launch_delay")
    return (  # one query (as eager steps: 4 a rank), the divisions on the same rows
        pairs.lazy()
        .select(
            *by,
            "correlation",
            to_us(pl.col("cpu_dur")).alias("cpu_duration"),
            to_us(pl.col("gpu_dur")).alias("gpu_duration"),
            to_us(pl.col("delay").clip(lower_bound=0)).alias("launch_delay"),
            "launch",
            "gpu_ops",
        )
        .with_columns(
            ((cpu <= runtime_cutoff) & (gpu < cpu)).alias("short_gpu_kernel"),
            (cpu > runtime_cutoff).alias("runtime_outlier"),
            (delay > launch_delay_cutoff).alias("launch_delay_outlier"),
        )
        .cast(COLUMNS)
        .select(*by, *COLUMNS)
        .collect()
    )


def _finished_at_once(
    pairs: Mapping[int, pl.DataFrame], runtime_cutoff: float, launch_delay_cutoff: float
) -> dict[int, pl.DataFrame]:
    """rank -> `_finish` of its pairs, for a batch's ranks (pairs of one schema) in one
    query (one a rank), split back one chunk a rank; empty when they differ in schema or
    the query fails (each rank's made alone)."""
    from hta_tui.analysis.rank_column import tagged, untagged  # (numpy: not on the client)

    if len(pairs) < 2 or len({tuple(p.schema.items()) for p in pairs.values()}) > 1:
        return {}
    try:
        made = _finish(
            tagged(sorted(pairs.items())), runtime_cutoff, launch_delay_cutoff, by=("rank",)
        )
    except pl.exceptions.PolarsError:
        return {}
    return untagged(made, pairs)


def cuda_kernel_launch_stats(
    ranks: Mapping[int, pl.DataFrame],
    *,
    runtime_cutoff: float = 50,
    launch_delay_cutoff: float = 100,
    include_memory_events: bool = True,
    hta_compat: bool = False,
) -> dict[int, pl.DataFrame]:
    """Per rank, one row per launch (see the module docstring), in launch order.

    Durations in us. Every rank gets a frame; it is empty (with the columns) when the rank
    launched nothing, as HTA's is. Kept per job and options: the findings' launch summary
    asks for the same tables as the analysis (a batch made them twice, ~0.4 ms a tiny rank).
    """
    args = (runtime_cutoff, launch_delay_cutoff, include_memory_events, hta_compat)
    made = job_cached(ranks, "cuda_kernel_launch_stats", lambda: _launch_stats(ranks, *args), *args)
    return dict(made)  # type: ignore[call-overload]


def _launch_stats(
    ranks: Mapping[int, pl.DataFrame],
    runtime_cutoff: float,
    launch_delay_cutoff: float,
    include_memory_events: bool,
    hta_compat: bool,
) -> dict[int, pl.DataFrame]:
    out = {}
    views = hta_view(ranks, hta_compat=hta_compat, columns=())
    made = (
        views_at_once(
            views, _READ, lambda t: _pairs_default(t, include_memory_events=include_memory_events)
        )
        if not hta_compat
        else {}
    )
    cutoffs = (runtime_cutoff, launch_delay_cutoff)
    finished = _finished_at_once(made, *cutoffs)  # (a batch's: one query, not one a rank)
    for rank, view in views.items():
        if rank in finished:
            out[rank] = finished[rank]
            continue
        if rank in made:
            pairs = made[rank]
        elif hta_compat:
            pairs = _pairs_compat(view, include_memory_events=include_memory_events)
        else:
            pairs = _pairs_default(view, include_memory_events=include_memory_events)
        out[rank] = _finish(pairs, *cutoffs)
    return out


#: What the default launches read of a view (`_pairs_default`), a batch's at once
_READ = ("idx", "name", "kind", "gpu", "correlation", "start", "dur")


def short_gpu_kernels(stats: pl.DataFrame, runtime_cutoff: float = 50) -> pl.DataFrame:
    """Launches whose GPU work is shorter than the call (call <= runtime_cutoff us)."""
    cpu = pl.col("cpu_duration")
    return stats.filter((cpu <= runtime_cutoff) & (pl.col("gpu_duration") < cpu))


def runtime_outliers(stats: pl.DataFrame, runtime_cutoff: float = 50) -> pl.DataFrame:
    """Launch calls longer than runtime_cutoff us."""
    return stats.filter(pl.col("cpu_duration") > runtime_cutoff)


def launch_delay_outliers(stats: pl.DataFrame, launch_delay_cutoff: float = 100) -> pl.DataFrame:
    """Launches whose GPU work started more than launch_delay_cutoff us after the call ended."""
    return stats.filter(pl.col("launch_delay") > launch_delay_cutoff)
