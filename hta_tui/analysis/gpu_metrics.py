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

import itertools
from collections.abc import Mapping
from typing import Any, cast

import numpy as np
import polars as pl

from hta_tui.analysis import interval_arrays, op_tree, tb_roles, tb_steps, tensor_cores
from hta_tui.analysis.hta_view import job_cached
from hta_tui.analysis.per_rank import each_rank, ranks_events, tagged

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
    return events.lazy().filter(_is_kernel(tb_compat)).select(_KERNEL_COLUMNS).collect()


def _is_kernel(tb_compat: bool) -> pl.Expr:
    return tb_roles.gpu_work("Kernel", tb_compat=tb_compat) & pl.col("device").is_not_null()


#: `device_kernels`' columns
_KERNEL_COLUMNS = [
    pl.col("device"),
    pl.col("name"),
    pl.col("correlation"),
    pl.col("ts").alias("start"),
    (pl.col("ts") + pl.col("dur")).alias("end"),
    pl.col("blocks_per_sm"),
    pl.col("occupancy"),
]


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
        start, end, value = _level_ranges(
            rows["start"].to_numpy(), rows["end"].to_numpy(), rows["blocks_per_sm"].to_numpy()
        )
        parts.append(
            pl.DataFrame(
                {
                    "device": np.full(start.size, device, dtype=np.int64),
                    "start": start,
                    "end": end,
                    "value": value,
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
    per_name = per_name.with_columns(_tc_flags(per_name["name"]))
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


def _tc_flags(names: pl.Series) -> list[pl.Expr]:
    """`tc` / `tcp`: `uses_tc` of each row's name by the modern / the plugin's list, from
    the names' flags each process tests once (`tensor_cores.tc_names`: the string tests of a
    rank's few hundred kernel names were ~2.5 ms, made again by the series and the kernels'
    view)."""
    modern, plugin = tensor_cores.tc_flags(names)
    return [modern.alias("tc"), plugin.alias("tcp")]


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
    """COLUMNS, one row per rank and device. Several ranks (a batch of tiny ones, the app's
    every rank) at once over a rank column (`_ranks_metrics`): a dozen queries in all, where
    each rank alone costs ~30; the same rows, to the bit. The plugin's mode (its tensor-core
    share links kernels through each rank's operator tree) rank by rank."""
    if len(ranks) < 2 or tb_compat:
        tb_steps.prime_steps(ranks, tb_compat=tb_compat)  # a batch's steps made at once
        return each_rank(ranks, lambda ev: rank_gpu_metrics(ev, tb_compat=tb_compat), COLUMNS)
    return _ranks_metrics(ranks)


def ranks_kernels(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """`device_kernels` of every rank with a leading `rank`, in rank then file order (the
    default mode), made once per job: one query over the ranks' concatenated rows."""

    def build() -> pl.DataFrame:
        rows = ranks_events(ranks)
        if rows.is_empty():
            return pl.DataFrame(schema={"rank": pl.Int64, **_KERNEL_SCHEMA})
        return rows.lazy().filter(_is_kernel(False)).select("rank", *_KERNEL_COLUMNS).collect()

    return job_cached(ranks, "tb_kernels_ranks", build)


def ranks_busy_and_ranges(ranks: Mapping[int, pl.DataFrame]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`_ranks_busy_and_ranges` of every rank's kernels, once per job (the metrics and both
    series read them)."""
    both = job_cached(
        ranks,
        "tb_busy_ranges_ranks",
        lambda: cast(pl.DataFrame, _ranks_busy_and_ranges(ranks_kernels(ranks))),
    )
    return cast(tuple[pl.DataFrame, pl.DataFrame], both)


_KERNEL_SCHEMA = {
    "device": pl.Int64,
    "name": pl.String,
    "correlation": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "blocks_per_sm": pl.Float64,
    "occupancy": pl.Float64,
}


def _groups(keys: list[np.ndarray]) -> list[tuple[int, int]]:
    """(start, stop) of each run of equal keys (rows sorted by them)."""
    if not keys or keys[0].size == 0:
        return []
    change = np.zeros(keys[0].size, dtype=bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    cuts = [*np.flatnonzero(change).tolist(), int(keys[0].size)]
    return list(itertools.pairwise(cuts))


def _ranks_busy_and_ranges(kernels: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`_busy` and `sm_efficiency_ranges` of every rank (`rank` first): the same numpy on
    each (rank, device)'s kernels in file order, the groups cut from one stable sort."""
    rank = kernels["rank"].to_numpy()
    device = kernels["device"].to_numpy()
    order = np.lexsort((device, rank))  # stable: each group's rows in file order
    rank, device = rank[order], device[order]
    start = kernels["start"].to_numpy()[order]
    end = kernels["end"].to_numpy()[order]
    bps = kernels["blocks_per_sm"].to_numpy()[order]
    busy: list[tuple[int, int, np.ndarray, np.ndarray]] = []
    ranges: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = []
    for lo, hi in _groups([rank, device]):
        r, d = int(rank[lo]), int(device[lo])
        busy.append((r, d, *interval_arrays.union(start[lo:hi], end[lo:hi])))
        sel = bps[lo:hi] > 0
        if sel.any():
            ranges.append(
                (r, d, *_level_ranges(start[lo:hi][sel], end[lo:hi][sel], bps[lo:hi][sel]))
            )
    return (
        _stacked(busy, ("start", "end"), {"rank": pl.Int64, **_INTERVALS}),
        _stacked(ranges, ("start", "end", "value"), {"rank": pl.Int64, **_RANGES}),
    )


def _stacked(
    groups: list[tuple], columns: tuple[str, ...], schema: Mapping[str, pl.DataType]
) -> pl.DataFrame:
    """Each (rank, device, *arrays) group's rows one after another, as one frame."""
    if not groups:
        return pl.DataFrame(schema=dict(schema))
    sizes = np.array([g[2].size for g in groups], dtype=np.int64)
    data: dict[str, np.ndarray] = {
        "rank": np.repeat(np.array([g[0] for g in groups], dtype=np.int64), sizes),
        "device": np.repeat(np.array([g[1] for g in groups], dtype=np.int64), sizes),
    }
    for i, c in enumerate(columns):
        data[c] = np.concatenate([g[2 + i] for g in groups])
    return pl.DataFrame(data, schema=dict(schema))


def _level_ranges(
    start: np.ndarray, end: np.ndarray, bps: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One device's (start, end, value) of `sm_efficiency_ranges` (kernels with blocks)."""
    t = np.concatenate([start, end])
    order = np.argsort(t, kind="stable")
    t, d = t[order], np.concatenate([bps, -bps])[order]
    first = np.flatnonzero(np.concatenate([[True], t[1:] != t[:-1]]))
    level = np.cumsum(np.add.reduceat(d, first))[:-1]
    lo, hi = t[first][:-1], t[first][1:]
    keep = level > 1e-12
    return lo[keep], hi[keep], np.minimum(level[keep], 1.0)


def _ranks_spans(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """`steps_span` of every rank that has one: `rank`, `s0`, `s1` (ns), `length` (float)."""
    tb_steps.prime_steps(ranks)  # a batch's steps made at once
    steps = tagged(
        [(r, tb_steps.profiler_steps(ev, tb_compat=False)) for r, ev in sorted(ranks.items())]
    )
    schema = {"rank": pl.Int64, "s0": pl.Int64, "s1": pl.Int64, "length": pl.Float64}
    if steps.is_empty():
        return pl.DataFrame(schema=schema)
    return (
        steps.lazy()
        .filter("used")
        .group_by("rank", maintain_order=True)
        .agg(pl.col("start").first().alias("s0"), pl.col("end").last().alias("s1"))
        .filter(pl.col("s1") > pl.col("s0"))
        .with_columns((pl.col("s1") - pl.col("s0")).cast(pl.Float64).alias("length"))
        .collect()
    )


def _ranks_metrics(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """`rank_gpu_metrics` of every rank at once (the default mode): each rank's rows as
    alone, ranks in order, to the bit. Eager, the rows of each group in the rank's order (a
    float sum depends on both: a lazy group-by adds as a plain column sum does not). A
    figure divided by the rank's span is divided as on the rank alone
    (`per_rank.divided_as_alone`: exactly when it has one device, else as times the
    inverse)."""
    spans = _ranks_spans(ranks)
    kernels = ranks_kernels(ranks).join(spans.select("rank"), on="rank", how="semi")
    if kernels.is_empty():
        return pl.DataFrame(schema=COLUMNS)
    busy, ranges = (
        df.join(spans.select("rank"), on="rank", how="semi", maintain_order="left")
        for df in ranks_busy_and_ranges(ranks)
    )
    lo = pl.max_horizontal(pl.col("start"), pl.col("s0"))
    clipped = (pl.min_horizontal(pl.col("end"), pl.col("s1")) - lo).clip(lower_bound=0)
    by = ["rank", "device"]

    def spanned(rows: pl.DataFrame) -> pl.DataFrame:
        """`rows` with their rank's span and `len` inside it (> 0 only), in their order."""
        with_span = rows.join(spans, on="rank", how="left", maintain_order="left")
        return with_span.with_columns(clipped.alias("len")).filter(pl.col("len") > 0)

    def per_span(table: pl.DataFrame, name: str) -> pl.DataFrame:
        """`n` / the rank's span length as the rank alone divides it: exactly when it has
        one device, else as times the inverse (numpy: a polars expression dividing by the
        aggregated column gave the latter either way)."""
        alone = table.select(pl.len().over("rank") == 1).to_series().to_numpy()
        n = table["n"].cast(pl.Float64).to_numpy()
        length = table["length"].to_numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            value = np.where(alone, n / length, n * (1.0 / length))
        return table.select(*by).with_columns(pl.Series(name, value, dtype=pl.Float64))

    util = busy.join(spans, on="rank", how="left", maintain_order="left")
    util = util.group_by(by).agg((100 * clipped.sum()).alias("n"), pl.col("length").first())
    sm = (
        spanned(ranges)
        .group_by(by)
        .agg((100 * (pl.col("value") * pl.col("len")).sum()).alias("n"), pl.col("length").first())
    )
    occ = (
        spanned(kernels.filter(pl.col("occupancy") >= 0))
        .group_by(by)
        .agg(
            ((pl.col("occupancy") * pl.col("len")).sum() / pl.col("len").sum()).alias(
                "est_achieved_occupancy_pct"
            )
        )
    )
    tell = pl.DataFrame(
        {"rank": list(ranks), "tell": list(tensor_cores.ranks_tell(ranks).values())},
        schema={"rank": pl.Int64, "tell": pl.Boolean},
    )
    dur = pl.col("end") - pl.col("start")
    total = pl.col("dur").sum()
    per_name = kernels.group_by("rank", "device", "name").agg(dur.sum().alias("dur"))
    tc = (
        per_name.with_columns(_tc_flags(per_name["name"]))
        .group_by(by)
        .agg(
            (100 * pl.col("dur").filter("tc").sum() / total).alias("tc_kernel_pct"),
            (100 * pl.col("dur").filter("tcp").sum() / total).alias("tc_kernel_pct_plugin_list"),
        )
        .join(tell, on="rank")
        .select(
            *by,
            *(
                pl.when("tell").then(c).otherwise(pl.lit(None, pl.Float64)).alias(c)
                for c in ("tc_kernel_pct", "tc_kernel_pct_plugin_list")
            ),
        )
    )
    out = per_span(util, "gpu_utilization_pct")
    for part in (per_span(sm, "est_sm_efficiency_pct"), occ, tc):
        out = out.join(part, on=by, how="left")
    return out.select([pl.col(c).cast(t) for c, t in COLUMNS.items()]).sort(by)


def bucket_size_us(range_us: float) -> int:
    """The plugin's bucket: a power of ten of us giving at most 100 buckets."""
    size = 1
    while range_us / size > _MAX_BUCKETS:
        size *= 10
    return size


#: The profiler's own span event: the trace's span where there is one.
_PROFILER_SPAN = tb_roles.cat_in(["trace"]) & (pl.col("name") == "PyTorch Profiler (0)")


def _trace_span(events: pl.DataFrame) -> tuple[int, int] | None:
    """The 'PyTorch Profiler (0)' span, else the extent of every event the plugin reads."""
    marker = events.filter(_PROFILER_SPAN)
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
    return None if span is None else _grid(*span)


def _grid(first: int, last: int) -> tuple[int, int, int, int] | None:
    """`trace_buckets` of the span [first, last] ns (None: not one bucket long)."""
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
    """`rank_utilization_series` of every rank, `rank` first; several ranks at once over a
    rank column (`ranks_utilization_series`), the plugin's mode rank by rank."""
    if len(ranks) < 2 or tb_compat:
        return each_rank(ranks, lambda ev: rank_utilization_series(ev, tb_compat=tb_compat))
    return ranks_utilization_series(ranks)


_UTIL_SCHEMA = {
    "device": pl.Int64,
    "ts": pl.Float64,
    "since_start (us)": pl.Float64,
    "utilization": pl.Float64,
}


def ranks_grids(ranks: Mapping[int, pl.DataFrame]) -> dict[int, tuple[int, int, int, int]]:
    """rank -> `trace_buckets` of its events, for every rank that has them: two queries over
    every rank's events, not two a rank."""
    ev = ranks_events(ranks)
    if ev.is_empty():
        return {}
    end = pl.col("ts") + pl.col("dur")
    marked = (
        ev.lazy()
        .filter(_PROFILER_SPAN)
        .group_by("rank")
        .agg(pl.col("ts").last().alias("a"), end.last().alias("b"))
        .collect()
    )
    known = (
        ev.lazy()
        .filter(tb_roles.known_rows())
        .group_by("rank")
        .agg(pl.col("ts").min().alias("a"), end.max().alias("b"))
        .collect()
    )
    spans = {r: (int(a), int(b)) for r, a, b in known.iter_rows()}
    spans.update({r: (int(a), int(b)) for r, a, b in marked.iter_rows()})
    grids = {rank: _grid(first, last) for rank, (first, last) in spans.items()}
    return {rank: grid for rank, grid in grids.items() if grid is not None}


def ranks_utilization_series(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """`rank_utilization_series` of every rank (default mode) with a leading `rank`, once per
    job: each (rank, device)'s union cut at its rank's buckets (`interval_arrays.spread`, the
    same ns as `bucket_overlaps`), the figures made over every rank in one query."""
    return job_cached(ranks, "tb_util_series_ranks", lambda: _ranks_util(ranks))


def _ranks_util(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    grids = ranks_grids(ranks)
    busy, _ = ranks_busy_and_ranges(ranks)
    rank = busy["rank"].to_numpy()
    device = busy["device"].to_numpy()
    start, end = busy["start"].to_numpy(), busy["end"].to_numpy()
    cols: dict[str, list[np.ndarray]] = {c: [] for c in ("rank", "device", "b", "b_end", "busy")}
    firsts: list[np.ndarray] = []
    for lo, hi in _groups([rank, device]):
        grid = grids.get(int(rank[lo]))
        if grid is None:
            continue
        first, size, n, last = grid
        _, bucket, ov = interval_arrays.spread(start[lo:hi], end[lo:hi], first, size, n, last)
        b = first + np.arange(n, dtype=np.int64) * size
        b_end = b + size
        b_end[-1] = last  # the last bucket may be longer
        cols["rank"].append(np.full(n, rank[lo], dtype=np.int64))
        cols["device"].append(np.full(n, device[lo], dtype=np.int64))
        cols["b"].append(b)
        cols["b_end"].append(b_end)
        cols["busy"].append(np.bincount(bucket, ov, minlength=n).astype(np.int64))
        firsts.append(np.full(n, first, dtype=np.int64))
    if not firsts:
        return pl.DataFrame(schema={"rank": pl.Int64, **_UTIL_SCHEMA})
    data = {c: np.concatenate(v) for c, v in cols.items()}
    data["first"] = np.concatenate(firsts)
    return (
        pl.DataFrame(data)
        .select(
            "rank",
            "device",
            _exact_us(pl.col("b")).alias("ts"),
            ((pl.col("b") - pl.col("first")) / 1000).alias("since_start (us)"),
            (pl.col("busy") / (pl.col("b_end") - pl.col("b"))).alias("utilization"),
        )
        .sort("rank", "device", "ts")
    )


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
