"""The four GPU metrics over time, per rank, device and bucket of the plugin's counters.

The plugin draws only GPU utilization per bucket and SM efficiency per kernel edge; both are
given here on the same buckets, with est. achieved occupancy and the tensor-core share of
kernel time beside them, so one chart holds all four (percent, 0-100):
- utilization: union of the device's kernels inside the bucket / bucket length (equal to
  `gpu_metrics.rank_utilization_series` x 100);
- SM efficiency: min(Σ blocks per SM, 1) of each stretch between kernel edges, weighted by
  its time inside the bucket, / bucket length;
- occupancy: `est. achieved occupancy %` weighted by each kernel's time inside the bucket
  (kernels without one left out, as in the whole-span figure); null where no kernel ran;
- tensor cores: share of kernel time inside the bucket in tensor-core kernels (modern list);
  null where no kernel ran.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import gpu_metrics, tensor_cores
from hta_tui.analysis.per_rank import each_rank

#: series column -> legend label
SERIES: dict[str, str] = {
    "utilization_pct": "GPU utilization",
    "sm_efficiency_pct": "est. SM efficiency",
    "occupancy_pct": "est. achieved occupancy",
    "tc_pct": "tensor-core kernel time",
}

COLUMNS: dict[str, pl.DataType] = {
    "device": pl.Int64(),
    "since_start (us)": pl.Float64(),
    **{c: pl.Float64() for c in SERIES},
}


def rank_metric_series(events: pl.DataFrame, *, tb_compat: bool = False) -> pl.DataFrame:
    """One rank: COLUMNS, one row per device and bucket."""
    kernels = gpu_metrics.device_kernels(events, tb_compat=tb_compat)
    grid_of = gpu_metrics.trace_buckets(events)
    if kernels.is_empty() or grid_of is None:
        return pl.DataFrame(schema=COLUMNS)
    first, size, n, last = grid_of
    cut = gpu_metrics.bucket_overlaps
    keys = ["device", "b"]
    util = gpu_metrics.rank_utilization_series(events, tb_compat=tb_compat).select(
        "device", "since_start (us)", (100 * pl.col("utilization")).alias("utilization_pct")
    )
    length = (pl.col("b_end") - pl.col("b")).first()
    sm = (
        cut(gpu_metrics.sm_efficiency_ranges(kernels), first, size, n, last)
        .group_by(keys)
        .agg((100 * (pl.col("value") * pl.col("overlap")).sum() / length).alias("sm"))
    )
    ov = pl.col("overlap")
    occ_ok = pl.col("occupancy") >= 0
    per_kernel = (
        cut(kernels, first, size, n, last)
        .filter(ov > 0)
        .with_columns(tensor_cores.uses_tc(pl.col("name"), modern=True).alias("tc"))
        .group_by(keys)
        .agg(
            ((pl.col("occupancy") * ov).filter(occ_ok).sum() / ov.filter(occ_ok).sum()).alias(
                "occ"
            ),
            (100 * ov.filter("tc").sum() / ov.sum()).alias("tcp"),
        )
    )
    since = ((pl.col("b") - first) / 1000).alias("since_start (us)")
    parts = sm.join(per_kernel, on=keys, how="full", coalesce=True).select(
        "device", since, "sm", "occ", "tcp"
    )
    return (
        util.join(parts, on=["device", "since_start (us)"], how="left")
        .select(
            "device",
            "since_start (us)",
            "utilization_pct",
            pl.col("sm").fill_null(0.0).alias("sm_efficiency_pct"),
            pl.col("occ").alias("occupancy_pct"),
            pl.col("tcp").alias("tc_pct"),
        )
        .sort("device", "since_start (us)")
    )


def metric_series(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> pl.DataFrame:
    return each_rank(
        ranks,
        lambda ev: rank_metric_series(ev, tb_compat=tb_compat),
        {"rank": pl.Int64(), **COLUMNS},
    )
