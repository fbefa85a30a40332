"""GPU kernel breakdowns: time per kernel type, per kernel, and duration distributions.

`gpu_kernel_breakdown` is HTA's `get_gpu_kernel_breakdown` with one deliberate fix: every row
has real statistics. When a kernel type has more than `num_kernels` kernels, HTA folds the tail
into "others" and then aggregates its per-kernel table a second time, so every kept kernel
reports max = min = mean = its sum and stddev 0, and "others" reports statistics over per-
kernel sums. DEVIATION (both modes): here the fold only decides which names are kept; every
row, "others" included, is aggregated from the events themselves. Names and sums are HTA's.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from hta_tui.analysis import interval_arrays
from hta_tui.analysis.hta_view import (
    KERNEL_TYPE,
    KERNEL_TYPES,
    gpu_events,
    hta_view,
    job_cached,
    us,
)

#: Kernel types HTA analyses, in the order its "X overlapping Y" labels name them.
ANALYSED_TYPES: tuple[str, ...] = ("COMPUTATION", "COMMUNICATION", "MEMORY")

KERNEL_TYPE_COLUMNS: dict[str, pl.DataType] = {
    "kernel_type": pl.String(),
    "sum": pl.Float64(),
    "percentage": pl.Float64(),
}

KERNEL_COLUMNS: dict[str, pl.DataType] = {
    "name": pl.String(),
    "sum (us)": pl.Float64(),
    "max (us)": pl.Float64(),
    "min (us)": pl.Float64(),
    "stddev": pl.Float64(),
    "mean (us)": pl.Float64(),
    "kernel_type": pl.String(),
    "rank": pl.Int64(),
    "count": pl.Int64(),  # not in HTA: how many events the row aggregates
}

#: Duration statistics of a group of events (us), as every per-kernel table reports them.
STATS_COLUMNS: dict[str, pl.DataType] = {
    "count": pl.Int64(),
    "sum": pl.Float64(),
    "mean": pl.Float64(),
    "std": pl.Float64(),
    "min": pl.Float64(),
    "median": pl.Float64(),
    "max": pl.Float64(),
}


def duration_stats(d: pl.Expr) -> list[pl.Expr]:
    """The aggregations behind `STATS_COLUMNS` for durations `d` (us)."""
    return [
        pl.len().alias("count"),
        d.sum().alias("sum"),
        d.mean().alias("mean"),
        d.std().alias("std"),
        d.min().alias("min"),
        d.median().alias("median"),
        d.max().alias("max"),
    ]


DURATION_STATS_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "name": pl.String(),
    **STATS_COLUMNS,
    "cat": pl.String(),
}

_GPU_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "idx": pl.UInt32(),
    "name": pl.String(),
    "cat": pl.String(),
    "kernel_type": pl.String(),
    "start": pl.Int64(),
    "end": pl.Int64(),
    "dur": pl.Int64(),
}


def gpu_table(ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False) -> pl.DataFrame:
    """All ranks' GPU events (HTA's view) in one frame: rank, idx, name, cat, kernel_type,
    start, end, dur (int ns). The input of every breakdown here."""
    return job_cached(ranks, "gpu_table", lambda: _gpu_table(ranks, hta_compat), hta_compat)


def named_gpu_table(ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False) -> pl.DataFrame:
    """`gpu_table` with its names Categorical, once per job: the breakdown's and the
    duration statistics' group-bys hash integers, not text (each cast them: ~1 ms a 100 MB
    rank apiece)."""

    def build() -> pl.DataFrame:
        gpu = gpu_table(ranks, hta_compat=hta_compat)
        return gpu.with_columns(pl.col("name").cast(pl.Categorical))

    return job_cached(ranks, "named_gpu_table", build, hta_compat)


def _gpu_table(ranks: Mapping[int, pl.DataFrame], hta_compat: bool) -> pl.DataFrame:
    views = hta_view(ranks, hta_compat=hta_compat, columns=())
    whole = _gpu_table_at_once(views)
    if whole is not None:
        return whole
    made = _gpu_frames_at_once(views)
    frames = [
        made[rank]
        if rank in made
        else gpu_events(view).select(pl.lit(rank, pl.Int64).alias("rank"), *_GPU_COLUMNS)
        for rank, view in views.items()
    ]
    if not frames:
        return pl.DataFrame(schema=_GPU_SCHEMA)
    return pl.concat(frames).cast(_GPU_SCHEMA)


_GPU_PICKED = ("idx", "name", "cat", "kernel_type", "start", "end", "dur")
_KERNEL_TYPE = pl.col("kernel_type").cast(pl.String)
#: the GPU table's columns after its rank (the kernel type as a string)
_GPU_COLUMNS = (*_GPU_PICKED[:3], _KERNEL_TYPE, *_GPU_PICKED[4:])


def _gpu_table_at_once(views: Mapping[int, pl.DataFrame]) -> pl.DataFrame | None:
    """A batch's GPU table in one query when its views are of one schema: the tagged views'
    GPU rows (`per_rank.tagged_views`), not each rank's split out, picked and ranked (~50 us
    a tiny rank). Its columns are integers and strings (no float a sum would add chunk by
    chunk), the rank flagged sorted as the ranks' tables concatenated are. None outside a
    batch or on views of several schemas (made rank by rank, `_gpu_frames_at_once`)."""
    from hta_tui.analysis.per_rank import gpu_rows_stacked  # (numpy: not on the client)

    picked = gpu_rows_stacked(views, *_GPU_COLUMNS)
    if picked is None:
        return None
    gpu = picked.cast(_GPU_SCHEMA)
    gpu.replace_column(0, gpu["rank"].set_sorted())
    return gpu


def _gpu_frames_at_once(views: Mapping[int, pl.DataFrame]) -> dict[int, pl.DataFrame]:
    """`_gpu_table`'s frame of each of a batch's ranks without a query a rank: its GPU rows
    found at once (`gpu_rows_at_once`), its columns picked and a literal's rank column
    inserted (flagged sorted): the select's table, chunk for chunk."""
    from hta_tui.analysis.per_rank import gpu_rows_at_once  # (numpy: not on the client)
    from hta_tui.analysis.rank_column import ranked

    out = {}
    for rank, gpu in gpu_rows_at_once(views).items():
        picked = [gpu[c] for c in _GPU_PICKED]
        picked[3] = picked[3].cast(pl.String)
        out[rank] = ranked(rank, pl.DataFrame(picked))
    return out


def kernel_type_breakdown(
    gpu: pl.DataFrame, types: Sequence[str], *, hta_compat: bool = False
) -> pl.DataFrame:
    """Time during which each combination of kernel types runs, summed over ranks.

    HTA's `_get_gpu_kernel_type_time`: per rank, each type's intervals are merged and the
    timeline is attributed to the set of types running ("COMPUTATION overlapping
    COMMUNICATION"). Sorted by sum, descending; percentage of the total, rounded to 1 decimal
    like HTA. With `hta_compat`, `sum` is an integer (HTA's int64) and combinations that last
    no time are rows of sum 0, as HTA emits them (`interval_arrays.sweep`); DEVIATION
    (default mode): exact float microseconds, and no zero-length rows.
    """
    return kernel_type_table(kernel_type_lengths(gpu, types, hta_compat=hta_compat), hta_compat)


#: `kernel_type_lengths`: a combination of kernel types and its integer ns on some ranks.
TYPE_LENGTH_COLUMNS: dict[str, pl.DataType] = {"kernel_type": pl.String(), "length": pl.Int64()}


def kernel_type_lengths(
    gpu: pl.DataFrame, types: Sequence[str], *, hta_compat: bool = False
) -> pl.DataFrame:
    """kernel_type (the combination's label), length (integer ns) over `gpu`'s ranks: the
    part of `kernel_type_breakdown` a rank makes alone; the job's table sums these
    (`kernel_type_table`), so rank by rank gives the same numbers as every rank at once."""
    types = list(types)
    codes = [KERNEL_TYPES.index(t) for t in types]
    if gpu.is_empty():
        return pl.DataFrame(schema=TYPE_LENGTH_COLUMNS)
    masks, lengths = [], []
    by_rank = np.argsort(gpu["rank"].to_numpy(), kind="stable")  # a no-op pass when per rank
    rank, start, end = (gpu[c].to_numpy()[by_rank] for c in ("rank", "start", "end"))
    kinds = gpu["kernel_type"].cast(KERNEL_TYPE).to_physical().fill_null(-1).to_numpy()[by_rank]
    bounds = [0, *(np.flatnonzero(np.diff(rank)) + 1).tolist(), rank.size]
    for a, b in itertools.pairwise(bounds):
        order = np.argsort(start[a:b], kind="stable")  # nearly ordered: a few linear passes
        s, e, kind = start[a:b][order], end[a:b][order], kinds[a:b][order]
        unions = [interval_arrays.union(s[kind == c], e[kind == c], ordered=True) for c in codes]
        mask, length = interval_arrays.sweep(unions, zero_length=hta_compat)
        masks.append(mask)
        lengths.append(length)
    per_mask = (
        pl.DataFrame({"mask": np.concatenate(masks), "length": np.concatenate(lengths)})
        .group_by("mask")
        .agg(pl.col("length").sum())
    )
    names = {
        m: " overlapping ".join(t for i, t in enumerate(types) if m & (1 << i))
        for m in per_mask["mask"].to_list()
    }
    labels = pl.col("mask").replace_strict(names, return_dtype=pl.String).alias("kernel_type")
    return per_mask.select(labels, "length").cast(TYPE_LENGTH_COLUMNS)


def kernel_type_table(lengths: pl.DataFrame, hta_compat: bool = False) -> pl.DataFrame:
    """`kernel_type_breakdown` from `kernel_type_lengths` of any split of the ranks (the
    lengths stay integer ns until summed: the same table whichever way they were split)."""
    schema = KERNEL_TYPE_COLUMNS | ({"sum": pl.Int64()} if hta_compat else {})
    if lengths.is_empty():
        return pl.DataFrame(schema=schema)
    total = pl.col("sum").sum()
    return (
        lengths.group_by("kernel_type")
        .agg(us(pl.col("length").sum()).alias("sum"))
        .sort(["sum", "kernel_type"], descending=[True, False])
        .with_columns(
            pl.when(total != 0).then(100 * pl.col("sum") / total).round(1).alias("percentage")
        )
        .cast(schema)
    )


def _folded_names(gpu: pl.DataFrame, *, duration_ratio: float, num_kernels: int) -> pl.DataFrame:
    """(rank, kernel_type, name) -> shown name: the name, or "others" when HTA folds it.

    HTA's `_aggr_gpu_kernel_time`: when a (rank, type) has more than `num_kernels` kernel
    names, sort by total time descending; a name folds when the running total exceeds the
    `duration_ratio` quantile (linear) of the running totals, or from the
    `num_kernels`-th name on.
    """
    keys = ["rank", "kernel_type"]
    per_name = (
        gpu.group_by([*keys, "name"])
        .agg(pl.col("dur").sum().alias("total"))
        .with_columns(pl.col("name").cast(pl.String))  # ties break on the text
        .sort([*keys, "total", "name"], descending=[False, False, True, False])
    )
    cum = pl.col("total").cum_sum().over(keys)
    return (
        per_name.with_columns(cum.alias("cum"), pl.int_range(pl.len()).over(keys).alias("pos"))
        .with_columns(
            (
                (pl.len().over(keys) > num_kernels)
                & (
                    (pl.col("cum") > pl.col("cum").quantile(duration_ratio, "linear").over(keys))
                    | (pl.col("pos") >= num_kernels)
                )
            ).alias("fold")
        )
        .select(
            *keys,
            "name",
            pl.when(pl.col("fold")).then(pl.lit("others")).otherwise("name").alias("shown"),
        )
    )


def _stats(dur_ns: pl.Expr) -> list[pl.Expr]:
    d = us(dur_ns)
    return [
        d.sum().alias("sum (us)"),
        d.max().alias("max (us)"),
        d.min().alias("min (us)"),
        d.std().fill_null(0.0).alias("stddev"),
        d.mean().alias("mean (us)"),
        pl.len().alias("count"),
    ]


def gpu_kernel_breakdown(
    ranks: Mapping[int, pl.DataFrame],
    *,
    duration_ratio: float = 0.8,
    num_kernels: int = 10,
    include_memory_kernels: bool = True,
    hta_compat: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """HTA's GPU kernel breakdown: (kernel_type_df, kernel_df).

    kernel_type_df: kernel_type, sum (us), percentage, over all ranks (see
    `kernel_type_breakdown`). kernel_df: per rank and analysed type (COMPUTATION,
    COMMUNICATION, and MEMORY when `include_memory_kernels`), the top kernels by total time
    and an "others" row for the folded tail, with HTA's columns name, sum (us), max (us),
    min (us), stddev, mean (us), kernel_type, rank, plus count; sorted by kernel_type, name,
    rank like HTA. Statistics are real for every row (see the module docstring); stddev is
    the sample standard deviation, 0 for a single event. OTHER kernels (syncs ...) appear in
    neither table, as in HTA. No GPU events: two empty tables.
    """
    gpu = named_gpu_table(ranks, hta_compat=hta_compat)
    types = _types(include_memory_kernels)
    type_df = kernel_type_breakdown(gpu, types, hta_compat=hta_compat)
    kernel_df = _kernel_df(gpu, types, duration_ratio=duration_ratio, num_kernels=num_kernels).sort(
        ["kernel_type", "name", "rank"]
    )
    return type_df, kernel_df


def _types(include_memory_kernels: bool) -> tuple[str, ...]:
    return tuple(ANALYSED_TYPES if include_memory_kernels else ANALYSED_TYPES[:2])


def _kernel_df(
    gpu: pl.DataFrame, types: Sequence[str], *, duration_ratio: float, num_kernels: int
) -> pl.DataFrame:
    """The per-kernel rows of `gpu_kernel_breakdown` (folded per rank and type: each rank's
    rows are its own), unsorted."""
    # Categorical names and enum types: the group-bys and the join hash integers, not text.
    analysed = gpu.filter(pl.col("kernel_type").is_in(list(types))).select(
        "rank",
        pl.col("kernel_type").cast(KERNEL_TYPE),
        pl.col("name").cast(pl.Categorical),
        "dur",
    )
    names = _folded_names(
        analysed, duration_ratio=duration_ratio, num_kernels=num_kernels
    ).with_columns(pl.col("name", "shown").cast(pl.Categorical))
    return (
        analysed.join(names, on=["rank", "kernel_type", "name"], how="left")
        .group_by(["rank", "kernel_type", pl.col("shown").alias("name")])
        .agg(_stats(pl.col("dur")))
        .cast(KERNEL_COLUMNS)
        .select(list(KERNEL_COLUMNS))
    )


def kernel_duration_stats(
    ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False
) -> pl.DataFrame:
    """count, sum, mean, std, min, median, max (us) of every GPU event name, per rank.

    Over HTA's GPU events (stream set, so memcpy, memset and sync spans too); `cat` is the
    category of the name's first event; std is null for a single event. Sorted by rank,
    then total time descending.
    """
    gpu = named_gpu_table(ranks, hta_compat=hta_compat)
    d = us(pl.col("dur"))
    return (
        gpu.group_by(["rank", "name"])
        .agg(
            *duration_stats(d),
            # Rows are in file order within a rank already; the first event's category.
            pl.col("cat").get(pl.col("idx").arg_min()).alias("cat"),
        )
        .with_columns(pl.col("name").cast(pl.String))  # (sorted as text)
        .sort(["rank", "sum", "name"], descending=[False, True, False])
        .cast(DURATION_STATS_COLUMNS)
        .select(list(DURATION_STATS_COLUMNS))
    )


DISTRIBUTION_PERCENTILES: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)


def kernel_duration_distribution(
    ranks: Mapping[int, pl.DataFrame],
    name: str,
    *,
    bins: int = 30,
    hta_compat: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """How one kernel's duration spreads, per rank: (summary, histogram).

    summary: rank, count, mean, min, p50, p90, p95, p99, max (us; linear percentiles).
    histogram: rank, bin, bin_start, bin_end (us), count, over `bins` equal-width bins shared
    by all ranks (from the overall min to max), so ranks compare bar for bar; every bin is
    present (count 0 included), the last one closed; a single bin when every run took the same
    time. Empty frames when no rank ran `name`.
    Not an HTA analysis (HTA only plots a mean with min/max error bars).
    """
    bins = max(int(bins), 1)
    gpu = gpu_table(ranks, hta_compat=hta_compat).filter(pl.col("name") == name)
    d = us(pl.col("dur"))
    pct = [d.quantile(q, "linear").alias(f"p{round(q * 100):d}") for q in DISTRIBUTION_PERCENTILES]
    summary = (
        gpu.group_by("rank")
        .agg(
            pl.len().alias("count"),
            d.mean().alias("mean"),
            d.min().alias("min"),
            *pct,
            d.max().alias("max"),
        )
        .sort("rank")
    )
    hist_schema = {
        "rank": pl.Int64,
        "bin": pl.Int64,
        "bin_start": pl.Float64,
        "bin_end": pl.Float64,
        "count": pl.UInt32,
    }
    if gpu.is_empty():
        return summary, pl.DataFrame(schema=hist_schema)
    lo, hi = gpu.select(pl.col("dur").min().alias("lo"), pl.col("dur").max().alias("hi")).row(0)
    if hi == lo:  # one duration only: a single bin [lo, hi]
        bins, width = 1, 0.0
        bin_of = pl.lit(0, pl.Int64)
    else:
        width = (hi - lo) / bins
        bin_of = ((pl.col("dur") - lo) / width).floor().cast(pl.Int64).clip(0, bins - 1)
    binned = gpu.select("rank", bin_of.alias("bin"))
    grid = pl.DataFrame({"rank": summary["rank"]}).join(
        pl.DataFrame({"bin": pl.int_range(0, bins, eager=True)}), how="cross"
    )
    counts = binned.group_by(["rank", "bin"]).agg(pl.len().alias("count"))
    hist = (
        grid.join(counts, on=["rank", "bin"], how="left")
        .with_columns(
            pl.col("count").fill_null(0),
            ((lo + pl.col("bin") * width) / 1000).alias("bin_start"),
            ((lo + (pl.col("bin") + 1) * width) / 1000).alias("bin_end"),
        )
        .sort(["rank", "bin"])
        .cast(hist_schema)
        .select(list(hist_schema))
    )
    return summary, hist


#: The summary tables a rank sends for `gpu_kernel_breakdown` (`breakdown_summary`).
SUMMARY_LENGTHS = "gpu_kernel_type_lengths"


def breakdown_summary(
    ranks: Mapping[int, pl.DataFrame],
    *,
    duration_ratio: float = 0.8,
    num_kernels: int = 10,
    include_memory_kernels: bool = True,
    hta_compat: bool = False,
) -> dict[str, pl.DataFrame]:
    """What `gpu_kernel_breakdown` needs of some ranks, small: their per-kernel rows (top
    kernels and "others" per rank and type, as in the job's table) and each combination of
    kernel types' integer ns (`kernel_type_lengths`). `breakdown_reduce` of these, made
    rank by rank and concatenated, is `gpu_kernel_breakdown` of every rank."""
    gpu = named_gpu_table(ranks, hta_compat=hta_compat)
    types = _types(include_memory_kernels)
    return {
        "gpu_kernel_breakdown": _kernel_df(
            gpu, types, duration_ratio=duration_ratio, num_kernels=num_kernels
        ),
        SUMMARY_LENGTHS: kernel_type_lengths(gpu, types, hta_compat=hta_compat),
    }


def breakdown_reduce(
    parts: Mapping[str, pl.DataFrame], *, hta_compat: bool = False
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`gpu_kernel_breakdown`'s (kernel_type_df, kernel_df) from `breakdown_summary` of
    every rank (the types' lengths summed over ranks, HTA's percentages of that total)."""
    kernel_df = parts["gpu_kernel_breakdown"].cast(KERNEL_COLUMNS).select(list(KERNEL_COLUMNS))
    type_df = kernel_type_table(parts[SUMMARY_LENGTHS], hta_compat)
    return type_df, kernel_df.sort(["kernel_type", "name", "rank"])
