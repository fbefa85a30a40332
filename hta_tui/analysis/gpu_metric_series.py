"""The four GPU metrics over time, per rank, device and bucket of the plugin's counters.

The plugin draws only GPU utilization per bucket and SM efficiency per kernel edge; both are
given here on the same buckets, with est. achieved occupancy and the tensor-core share of
kernel time beside them, so one chart holds all four (percent, 0-100):
- utilization: union of the device's kernels inside the bucket / bucket length (equal to
  `gpu_metrics.rank_utilization_series` x 100);
- SM efficiency: min(Σ blocks per SM, 1) of each stretch between kernel edges, weighted by
  its time inside the bucket, / bucket length; null on a device none of whose kernels says
  its blocks per SM (ROCm, MTIA), as in the whole-span figure;
- occupancy: `est. achieved occupancy %` weighted by each kernel's time inside the bucket
  (kernels without one left out, as in the whole-span figure); null where no kernel with one
  ran;
- tensor cores: share of kernel time inside the bucket in tensor-core kernels (modern list);
  null where no kernel ran, and everywhere on an accelerator whose kernel names cannot tell
  (`tensor_cores.names_tell`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from hta_tui.analysis import gpu_metrics, interval_arrays, tensor_cores
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
    """One rank: COLUMNS, one row per device and bucket. Utilization, the kernels and the SM
    efficiency stretches are those the GPU metrics made for the frame already; each kernel
    and stretch is cut at the buckets it touches (numpy) and summed per bucket (bincount)."""
    kernels = gpu_metrics.device_kernels(events, tb_compat=tb_compat)
    grid_of = gpu_metrics.trace_buckets(events)
    if kernels.is_empty() or grid_of is None:
        return pl.DataFrame(schema=COLUMNS)
    util = gpu_metrics.rank_utilization_series(events, tb_compat=tb_compat)
    ranges = gpu_metrics.device_sm_ranges(events, tb_compat=tb_compat)
    tc_names = kernels.select(pl.col("name").unique()).with_columns(
        tensor_cores.uses_tc(pl.col("name"), modern=True).alias("tc")
    )
    kernels = kernels.join(tc_names, on="name", how="left", nulls_equal=True)
    util = util.sort("device", "since_start (us)")
    parts = [
        _device_series(kernels, ranges, device, grid_of)
        for device in util["device"].unique(maintain_order=True).to_list()
    ]
    out = util.select(
        "device", "since_start (us)", (100 * pl.col("utilization")).alias("utilization_pct")
    ).hstack(pl.concat(parts))
    if not tensor_cores.names_tell(events):
        out = out.with_columns(pl.lit(None, pl.Float64).alias("tc_pct"))
    return out


def _device_series(
    kernels: pl.DataFrame, ranges: pl.DataFrame, device: int, grid_of: tuple[int, int, int, int]
) -> pl.DataFrame:
    """SM efficiency, occupancy and tensor-core share per bucket of one device."""
    first, size, n, last = grid_of
    cut = lambda df: interval_arrays.spread(  # noqa: E731
        df["start"].to_numpy(), df["end"].to_numpy(), first, size, n, last
    )
    length = np.full(n, size, dtype=np.int64)
    length[-1] = last - (first + (n - 1) * size)
    r = ranges.filter(pl.col("device") == device)
    rows, bucket, ov = cut(r)
    sm = 100 * np.bincount(bucket, r["value"].to_numpy()[rows] * ov, minlength=n) / length
    k = kernels.filter(pl.col("device") == device)
    rows, bucket, ov = cut(k)
    occ = k["occupancy"].to_numpy()[rows]
    # a missing one (NaN) is left out, and one no occupancy can be (1e308 % overflowed)
    ok = (occ >= 0) & (occ <= 100)
    tc = k["tc"].to_numpy()[rows]
    some = np.bincount(bucket[ov > 0], minlength=n) > 0  # else no occupancy or share (null)
    with np.errstate(invalid="ignore", divide="ignore"):
        occ_pct = np.bincount(bucket[ok], occ[ok] * ov[ok], minlength=n) / np.bincount(
            bucket[ok], ov[ok].astype(np.float64), minlength=n
        )
        tc_pct = (
            100
            * np.bincount(bucket[tc], ov[tc], minlength=n)
            / np.bincount(bucket, ov.astype(np.float64), minlength=n)
        )
    # unknown, not 0: no kernel of the device gives blocks per SM, or none in the bucket an
    # occupancy (0 / 0)
    return pl.DataFrame(
        {
            "sm_efficiency_pct": sm if r.height else np.full(n, np.nan),
            "occupancy_pct": occ_pct,
            "tc_pct": tc_pct,
            "some": some,
        },
        nan_to_null=True,
    ).select(
        "sm_efficiency_pct",
        *(pl.when("some").then(c).alias(c) for c in ("occupancy_pct", "tc_pct")),
    )


def metric_series(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> pl.DataFrame:
    return each_rank(
        ranks,
        lambda ev: rank_metric_series(ev, tb_compat=tb_compat),
        {"rank": pl.Int64(), **COLUMNS},
    )
