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
    kernels = kernels.with_columns(_uses_tc(kernels["name"]))
    util = util.sort("device", "since_start (us)")
    parts = []
    for device in util["device"].unique(maintain_order=True).to_list():
        r = ranges.filter(pl.col("device") == device)
        k = kernels.filter(pl.col("device") == device)
        parts.append(
            _device_series(_arrays(r, _RANGE_COLUMNS), _arrays(k, _KERNEL_COLUMNS), grid_of)
        )
    out = util.select(
        "device", "since_start (us)", (100 * pl.col("utilization")).alias("utilization_pct")
    ).hstack(_series_frame(parts))
    if not tensor_cores.names_tell(events):
        out = out.with_columns(pl.lit(None, pl.Float64).alias("tc_pct"))
    return out


_RANGE_COLUMNS = ("start", "end", "value")
_KERNEL_COLUMNS = ("start", "end", "occupancy", "tc")


def _uses_tc(names: pl.Series) -> pl.Expr:
    """`tc`: `uses_tc` (the modern list) of each row's name, from the flags each process
    tests once a name (`tensor_cores.tc_names`; the GPU metrics tested them just before)."""
    return tensor_cores.tc_flags(names)[0].alias("tc")


def _arrays(df: pl.DataFrame, columns: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    return tuple(df[c].to_numpy() for c in columns)


def _series_frame(parts: list[dict[str, np.ndarray]]) -> pl.DataFrame:
    """The devices' `_device_series` one after another: SM efficiency, occupancy, share."""
    data = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    return pl.DataFrame(data, nan_to_null=True).select(
        "sm_efficiency_pct",
        *(pl.when("some").then(c).alias(c) for c in ("occupancy_pct", "tc_pct")),
    )


def _device_series(
    ranges: tuple[np.ndarray, ...],
    kernels: tuple[np.ndarray, ...],
    grid_of: tuple[int, int, int, int],
) -> dict[str, np.ndarray]:
    """SM efficiency, occupancy and tensor-core share per bucket of one device, from its
    SM efficiency stretches (start, end, value) and its kernels (start, end, occupancy, tc);
    `some`: a kernel ran in the bucket (else no occupancy or share: null)."""
    first, size, n, last = grid_of
    length = np.full(n, size, dtype=np.int64)
    length[-1] = last - (first + (n - 1) * size)
    r_start, r_end, value = ranges
    rows, bucket, ov = interval_arrays.spread(r_start, r_end, first, size, n, last)
    sm = 100 * np.bincount(bucket, value[rows] * ov, minlength=n) / length
    k_start, k_end, occupancy, is_tc = kernels
    rows, bucket, ov = interval_arrays.spread(k_start, k_end, first, size, n, last)
    occ = occupancy[rows]
    # a missing one (NaN) is left out, and one no occupancy can be (1e308 % overflowed)
    ok = (occ >= 0) & (occ <= 100)
    tc = is_tc[rows]
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
    return {
        "sm_efficiency_pct": sm if r_start.size else np.full(n, np.nan),
        "occupancy_pct": occ_pct,
        "tc_pct": tc_pct,
        "some": some,
    }


def metric_series(ranks: Mapping[int, pl.DataFrame], *, tb_compat: bool = False) -> pl.DataFrame:
    """`rank_metric_series` of every rank, `rank` first. Several ranks (default mode) at once
    (`_ranks_series`): the same numpy per (rank, device), on slices of every rank's kernels
    and stretches, with no query per rank."""
    if len(ranks) < 2 or tb_compat:
        return each_rank(
            ranks,
            lambda ev: rank_metric_series(ev, tb_compat=tb_compat),
            {"rank": pl.Int64(), **COLUMNS},
        )
    return _ranks_series(ranks)


def _ranks_series(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    util = gpu_metrics.ranks_utilization_series(ranks)
    if util.is_empty():
        return pl.DataFrame(schema={"rank": pl.Int64(), **COLUMNS})
    grids = gpu_metrics.ranks_grids(ranks)
    _, ranges = gpu_metrics.ranks_busy_and_ranges(ranks)
    kernels = gpu_metrics.ranks_kernels(ranks)
    kernels = kernels.with_columns(_uses_tc(kernels["name"]))
    # each (rank, device)'s rows in the rank's order, from one stable sort
    kernels = kernels.sort("rank", "device", maintain_order=True)
    k_groups = _slices(kernels)
    r_groups = _slices(ranges)
    k_cols, r_cols = _arrays(kernels, _KERNEL_COLUMNS), _arrays(ranges, _RANGE_COLUMNS)
    parts = []
    keys = util.select("rank", "device").unique(maintain_order=True)
    for rank, device in keys.iter_rows():
        k = k_groups.get((rank, device), (0, 0))
        r = r_groups.get((rank, device), (0, 0))
        parts.append(
            _device_series(
                tuple(c[r[0] : r[1]] for c in r_cols),
                tuple(c[k[0] : k[1]] for c in k_cols),
                grids[rank],
            )
        )
    untold = [r for r, told in tensor_cores.ranks_tell(ranks).items() if not told]
    out = util.select(
        "rank",
        "device",
        "since_start (us)",
        (100 * pl.col("utilization")).alias("utilization_pct"),
    ).hstack(_series_frame(parts))
    if untold:
        out = out.with_columns(
            pl.when(pl.col("rank").is_in(untold)).then(None).otherwise("tc_pct").alias("tc_pct")
        )
    return out


def _slices(df: pl.DataFrame) -> dict[tuple[int, int], tuple[int, int]]:
    """(rank, device) -> its rows' [start, stop) in `df` (sorted by rank and device)."""
    groups = gpu_metrics._groups([df["rank"].to_numpy(), df["device"].to_numpy()])
    ranks, devices = df["rank"].to_list(), df["device"].to_list()
    return {(ranks[lo], devices[lo]): (lo, hi) for lo, hi in groups}
