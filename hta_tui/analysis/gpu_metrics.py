"""The TensorBoard plugin's GPU metrics per rank and device: utilization, est. SM efficiency,
est. achieved occupancy, kernel time using tensor cores, and the bucketed time series.

All are measured over the span of the Overview's used steps (first start to last end, gaps
included), as `GPUMetricsParser` does; the device is the kernel's `args.device`.
- GPU utilization: union of the device's kernels / span.
- Est. SM efficiency: over the timeline cut at kernel edges, min(Σ `blocks per SM` of the
  kernels running, 1), weighted by time, / span.
- Est. achieved occupancy: the trace's `est. achieved occupancy %`, weighted by each kernel's
  time inside the span.
- Tensor cores: share of kernel time in tensor-core kernels. The plugin counts only kernels
  linked to an operator through a `Runtime` event (none on PyTorch >= 1.10 traces, so it shows
  no figure); DEVIATION (default mode): every kernel of the device counts, named by the modern
  list (`tc_kernel_pct`), and by the plugin's list (`tc_kernel_pct_plugin_list`); AMD's
  matrix-core (MFMA) kernels count in the modern list; an accelerator whose kernel names cannot
  tell (MTIA, XPU, ...) has no figure (null: n/a), not 0%.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from hta_tui.analysis import interval_arrays, op_tree, tb_roles, tb_steps, tensor_cores
from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.per_rank import each_rank

_MAX_BUCKETS = 100

COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "device": pl.Int64(),
    "gpu_utilization_pct": pl.Float64(),
    "est_sm_efficiency_pct": pl.Float64(),
    "est_achieved_occupancy_pct": pl.Float64(),
    "tc_kernel_pct": pl.Float64(),
    "tc_kernel_pct_plugin_list": pl.Float64(),
}


def device_kernels(events: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    """The device's kernels: once per frame and mode (the metrics and the series share them)."""
    return job_cached(
        {0: events}, "tb_kernels", lambda: _select_kernels(events, tb_compat), tb_compat
    )


def _select_kernels(events: pl.DataFrame, tb_compat: bool) -> pl.DataFrame:
    return (
        events.lazy()
        .filter(tb_roles.gpu_work("Kernel", tb_compat=tb_compat) & pl.col("device").is_not_null())
        .select(
            "device",
            "name",
            "correlation",
            pl.col("ts").alias("start"),
            (pl.col("ts") + pl.col("dur")).alias("end"),
            "blocks_per_sm",
            "occupancy",
        )
        .collect()
    )


def _busy(events: pl.DataFrame, kernels: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    """The union of each device's kernels (`device`, `start`, `end`), once per frame."""

    def build() -> pl.DataFrame:
        parts = [pl.DataFrame(schema=_INTERVALS)]
        for device in sorted(kernels["device"].unique().to_list()):
            rows = kernels.filter(pl.col("device") == device)
            starts, ends = interval_arrays.union(rows["start"].to_numpy(), rows["end"].to_numpy())
            parts.append(
                pl.DataFrame({"device": device, "start": starts, "end": ends}, schema=_INTERVALS)
            )
        return pl.concat(parts, rechunk=True)

    return job_cached({0: events}, "tb_busy", build, tb_compat)


def steps_span(events: pl.DataFrame, *, tb_compat: bool) -> tuple[int, int] | None:
    """(first used step's start, last used step's end), ns."""
    steps = tb_steps.profiler_steps(events, tb_compat=tb_compat).filter("used")
    if steps.is_empty():
        return None
    return int(steps["start"][0]), int(steps["end"][-1])


def device_sm_ranges(events: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    """`sm_efficiency_ranges` of the device's kernels, once per frame and mode (the metrics,
    the SM efficiency counter and the series share them)."""
    return job_cached(
        {0: events},
        "tb_sm_ranges",
        lambda: sm_efficiency_ranges(device_kernels(events, tb_compat=tb_compat)),
        tb_compat,
    )


def sm_efficiency_ranges(kernels: pl.DataFrame) -> pl.DataFrame:
    """Per device, the timeline cut at kernel edges with min(Σ blocks per SM, 1): `device`,
    `start`, `end`, `value` (the plugin's `merge_ranges_with_value`). numpy: a stable sort of
    the nearly ordered edges is a few linear passes, a polars sort is not."""
    k = kernels.filter(pl.col("blocks_per_sm") > 0)
    parts = [pl.DataFrame(schema=_RANGES)]
    for device in sorted(k["device"].unique().to_list()):
        rows = k.filter(pl.col("device") == device)
        bps = rows["blocks_per_sm"].to_numpy()
        t = np.concatenate([rows["start"].to_numpy(), rows["end"].to_numpy()])
        order = np.argsort(t, kind="stable")
        t, d = t[order], np.concatenate([bps, -bps])[order]
        first = np.flatnonzero(np.concatenate([[True], t[1:] != t[:-1]]))
        level = np.cumsum(np.add.reduceat(d, first))[:-1]
        start, end = t[first][:-1], t[first][1:]
        keep = level > 1e-12
        parts.append(
            pl.DataFrame(
                {
                    "device": np.full(int(keep.sum()), device, dtype=np.int64),
                    "start": start[keep],
                    "end": end[keep],
                    "value": np.minimum(level[keep], 1.0),
                },
                schema=_RANGES,
            )
        )
    return pl.concat(parts, rechunk=True)


_INTERVALS = {"device": pl.Int64, "start": pl.Int64, "end": pl.Int64}
_RANGES = {"device": pl.Int64, "start": pl.Int64, "end": pl.Int64, "value": pl.Float64}


def _clip(start: int, end: int) -> tuple[pl.Expr, pl.Expr]:
    lo = pl.max_horizontal(pl.col("start"), pl.lit(start))
    hi = pl.min_horizontal(pl.col("end"), pl.lit(end))
    return lo, (hi - lo).clip(lower_bound=0)


def _tc_shares(events: pl.DataFrame, kernels: pl.DataFrame, *, tb_compat: bool) -> pl.DataFrame:
    """Per device: tensor-core share of kernel time, modern and plugin lists (percent)."""
    if tb_compat:
        nodes = op_tree.tree(events, tb_compat=True).filter("is_op")
        runtimes = (
            events.lazy()
            .filter(tb_roles.runtime_rows(tb_compat=True))
            .select("correlation", "external_id")
            .collect()
        )
        linked = runtimes.join(
            nodes.select("external_id").unique(), on="external_id", how="semi"
        ).select("correlation")
        kernels = kernels.join(linked, on="correlation", how="semi")
    dur = pl.col("end") - pl.col("start")
    total = dur.sum()
    per_name = kernels.group_by("device", "name").agg(dur.sum().alias("dur"))
    per_name = per_name.with_columns(
        tensor_cores.uses_tc(pl.col("name"), modern=True).alias("tc"),
        tensor_cores.uses_tc(pl.col("name"), modern=False).alias("tcp"),
    )
    total = pl.col("dur").sum()
    if not tensor_cores.names_tell(events):
        # kernel names of this accelerator say nothing of its matrix units: unknown, not 0%
        return per_name.group_by("device").agg(
            pl.lit(None, pl.Float64).alias("tc_kernel_pct"),
            pl.lit(None, pl.Float64).alias("tc_kernel_pct_plugin_list"),
        )
    return per_name.group_by("device").agg(
        (100 * pl.col("dur").filter("tc").sum() / total).alias("tc_kernel_pct"),
        (100 * pl.col("dur").filter("tcp").sum() / total).alias("tc_kernel_pct_plugin_list"),
    )


def rank_gpu_metrics(events: pl.DataFrame, *, tb_compat: bool = False) -> pl.DataFrame:
    """One row per device of one rank (COLUMNS without `rank`)."""
    cols = {c: t for c, t in COLUMNS.items() if c != "rank"}
    kernels = device_kernels(events, tb_compat=tb_compat)
    span = steps_span(events, tb_compat=tb_compat)
    if kernels.is_empty() or span is None or span[1] <= span[0]:
        return pl.DataFrame(schema=cols)
    start, end = span
    length = float(end - start)
    busy = _busy(events, kernels, tb_compat=tb_compat)
    _, clipped = _clip(start, end)
    util = busy.group_by("device").agg((100 * clipped.sum() / length).alias("gpu_utilization_pct"))
    sm = (
        device_sm_ranges(events, tb_compat=tb_compat)
        .with_columns(clipped.alias("len"))
        .filter(pl.col("len") > 0)
        .group_by("device")
        .agg(
            (100 * (pl.col("value") * pl.col("len")).sum() / length).alias("est_sm_efficiency_pct")
        )
    )
    occ = (
        kernels.filter(pl.col("occupancy") >= 0)
        .with_columns(clipped.alias("len"))
        .filter(pl.col("len") > 0)
        .group_by("device")
        .agg(
            ((pl.col("occupancy") * pl.col("len")).sum() / pl.col("len").sum()).alias(
                "est_achieved_occupancy_pct"
            )
        )
    )
    tc = _tc_shares(events, kernels, tb_compat=tb_compat)
    out = util
    for part in (sm, occ, tc):
        out = out.join(part, on="device", how="left")
    return out.select(
        [
            pl.col(c).cast(t) if c in out.columns else pl.lit(None, t).alias(c)
            for c, t in cols.items()
        ]
    ).sort("device")


def gpu_metrics(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> pl.DataFrame:
    return each_rank(ranks, lambda ev: rank_gpu_metrics(ev, tb_compat=tb_compat), COLUMNS)


def bucket_size_us(range_us: float) -> int:
    """The plugin's bucket: a power of ten of us giving at most 100 buckets."""
    size = 1
    while range_us / size > _MAX_BUCKETS:
        size *= 10
    return size


def _trace_span(events: pl.DataFrame) -> tuple[int, int] | None:
    """The 'PyTorch Profiler (0)' span, else the extent of every event the plugin reads."""
    marker = events.filter(tb_roles.cat_in(["trace"]) & (pl.col("name") == "PyTorch Profiler (0)"))
    if not marker.is_empty():
        row = marker.row(-1, named=True)
        return int(row["ts"]), int(row["ts"] + row["dur"])
    # lazy: the extent of the rows, not a copy of their 38 columns
    known = (
        events.lazy()
        .filter(tb_roles.known_rows())
        .select(pl.len(), pl.col("ts").min(), (pl.col("ts") + pl.col("dur")).max().alias("end"))
        .collect()
        .row(0)
    )
    if not known[0]:
        return None
    return int(known[1]), int(known[2])


def _exact_us(ns: pl.Expr) -> pl.Expr:
    """Absolute ns -> us without losing the fraction (1.6e18 ns is past float's 2**53)."""
    return (ns // 1000).cast(pl.Float64) + (ns % 1000).cast(pl.Float64) / 1000


def trace_buckets(events: pl.DataFrame) -> tuple[int, int, int, int] | None:
    """The plugin's counter buckets over the trace span: (first ns, bucket ns, count, last
    ns); the last bucket runs to the span's end."""
    span = _trace_span(events)
    if span is None:
        return None
    first, last = span
    size = bucket_size_us((last - first) / 1000) * 1000
    n = int((last - first) / size)
    return (first, size, n, last) if n >= 1 else None


def _bucket_frame(first: int, size: int, n: int, last: int) -> pl.DataFrame:
    return pl.DataFrame({"i": pl.int_range(n, eager=True)}).with_columns(
        (first + pl.col("i") * size).alias("b"),
        # the last bucket may be longer
        pl.when(pl.col("i") == n - 1)
        .then(last)
        .otherwise(first + (pl.col("i") + 1) * size)
        .alias("b_end"),
    )


def bucket_overlaps(spans: pl.DataFrame, first: int, size: int, n: int, last: int) -> pl.DataFrame:
    """Each [start, end) row against every bucket it touches: the row's columns plus `b`,
    `b_end` and `overlap` (ns inside the bucket). Bucket numbers are arithmetic, no search."""
    buckets = _bucket_frame(first, size, n, last)
    lo = pl.max_horizontal("start", "b")
    hi = pl.min_horizontal("end", "b_end")
    return (
        spans.filter((pl.col("end") > first) & (pl.col("start") < last))
        .with_columns(
            pl.int_ranges(
                ((pl.col("start") - first) // size).clip(0, n - 1),
                ((pl.col("end") - 1 - first) // size).clip(0, n - 1) + 1,
            ).alias("i")
        )
        .explode("i")
        .join(buckets, on="i")
        .with_columns((hi - lo).clip(lower_bound=0).alias("overlap"))
    )


def rank_utilization_series(events: pl.DataFrame, *, tb_compat: bool = False) -> pl.DataFrame:
    """Per device and bucket: `ts` (us, as in the file), `since_start (us)` (from the
    profiler's span), `utilization` (0-1). Once per frame and mode: the GPU metrics and the
    four-metric series both give it."""
    return job_cached(
        {0: events}, "tb_util_series", lambda: _utilization_series(events, tb_compat), tb_compat
    )


def _utilization_series(events: pl.DataFrame, tb_compat: bool) -> pl.DataFrame:
    schema = {
        "device": pl.Int64,
        "ts": pl.Float64,
        "since_start (us)": pl.Float64,
        "utilization": pl.Float64,
    }
    kernels = device_kernels(events, tb_compat=tb_compat)
    grid_of = trace_buckets(events)
    if kernels.is_empty() or grid_of is None:
        return pl.DataFrame(schema=schema)
    first, size, n, last = grid_of
    busy = _busy(events, kernels, tb_compat=tb_compat)
    cut = bucket_overlaps(busy, first, size, n, last)
    per = cut.group_by("device", "b").agg(pl.col("overlap").sum().alias("busy"))
    buckets = _bucket_frame(first, size, n, last)
    grid = busy.select("device").unique().join(buckets.select("b", "b_end"), how="cross")
    return (
        grid.join(per, on=["device", "b"], how="left")
        .select(
            "device",
            _exact_us(pl.col("b")).alias("ts"),
            ((pl.col("b") - first) / 1000).alias("since_start (us)"),
            (pl.col("busy").fill_null(0) / (pl.col("b_end") - pl.col("b"))).alias("utilization"),
        )
        .sort("device", "ts")
    )


def utilization_series(
    ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False
) -> pl.DataFrame:
    return each_rank(ranks, lambda ev: rank_utilization_series(ev, tb_compat=tb_compat))


def sm_efficiency_series(
    ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False
) -> pl.DataFrame:
    """The plugin's est. SM efficiency counter: per rank and device, each stretch of the
    timeline between kernel edges with min(Σ blocks per SM, 1); `start`/`end` in us as in
    the file. One row per stretch: large, so only when asked for."""
    return each_rank(
        ranks,
        lambda ev: device_sm_ranges(ev, tb_compat=tb_compat).select(
            "device",
            _exact_us(pl.col("start")).alias("start"),
            _exact_us(pl.col("end")).alias("end"),
            "value",
        ),
    )


def device_table(
    metas: Mapping[int, dict[str, Any]], used: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The GPUs each rank's file describes (`deviceProperties`): name, memory, compute
    capability, SMs, threads and registers per SM, shared memory. With `used` (rank, device
    rows, e.g. `gpu_metrics`), only the GPUs a rank ran kernels on: a file lists its node's."""
    rows = []
    for rank, meta in sorted(metas.items()):
        for i, props in enumerate(meta.get("device_properties") or []):
            if not isinstance(props, dict):
                continue
            mem = props.get("totalGlobalMem")
            major, minor = props.get("computeMajor"), props.get("computeMinor")
            rows.append(
                {
                    "rank": rank,
                    "device": props.get("id", i),
                    "name": props.get("name"),
                    "memory_gb": round(float(mem) / 1024**3, 2) if mem is not None else None,
                    "compute_capability": f"{major}.{minor}" if major is not None else None,
                    "sm_count": props.get("numSms"),
                    "max_threads_per_sm": props.get("maxThreadsPerMultiprocessor"),
                    "regs_per_sm": props.get("regsPerMultiprocessor"),
                    "shared_memory_per_sm": props.get("sharedMemPerMultiprocessor"),
                }
            )
    table = pl.DataFrame(rows, infer_schema_length=None, strict=False)
    if used is None or table.is_empty() or used.is_empty():
        return table
    return table.join(used.select("rank", "device"), on=["rank", "device"], how="semi")
