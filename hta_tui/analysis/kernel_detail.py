"""One kernel up close, and the operators behind the GPU time: the drill-down tables.

Not HTA analyses in themselves (HTA has no kernel detail view); every number is derived from
HTA's view of the events (`hta_view`, `kernels.gpu_table`) with HTA's definitions:

* `kernel_table`: `gpu_kernel_breakdown`'s kernel table over the given ranks together, one row
  per (kernel_type, name). With `fold`, HTA's rule (duration_ratio / num_kernels) folds the
  tail of each type into "others"; over several ranks it is applied to the ranks' totals (HTA
  applies it per rank). For one rank the rows are exactly `gpu_kernel_breakdown`'s.
* Launch links: a GPU event's launch is the runtime/driver call with its correlation (the last
  one in file order, HTA's `index_correlation`); the launch's operator is the innermost
  `cpu_op` on the launch's own thread that contains the call (the containing op that starts
  last; among equal starts the shorter, then the later in the file). Launch delay is the GPU
  event's start minus the call's end, clipped at 0 (HTA's `cuda_kernel_launch_stats`); op
  delay the call's start minus the op's start (HTA's aten op launch delay).

Times in microseconds (float), like every HTA output.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hta_tui.analysis import kernels
from hta_tui.analysis.hta_view import hta_view, us
from hta_tui.trace.schema import GPU_WORK_KINDS, LAUNCH_KINDS

#: Shown for GPU work whose launch lies in no cpu_op (or that has no launch in the trace).
NO_OPERATOR = "(no cpu op)"

#: Short headers: the table must show numbers at 80 columns; the name comes after them.
KERNEL_TABLE_COLUMNS: dict[str, pl.DataType] = {
    "share %": pl.Float64(),
    "sum us": pl.Float64(),
    "count": pl.Int64(),
    "mean us": pl.Float64(),
    "std us": pl.Float64(),
    "min us": pl.Float64(),
    "max us": pl.Float64(),
    "name": pl.String(),
    "type": pl.String(),
    "ranks": pl.Int64(),
}

LAUNCHER_COLUMNS: dict[str, pl.DataType] = {
    "operator": pl.String(),
    "launch": pl.String(),
    "count": pl.Int64(),
    "sum us": pl.Float64(),
    "mean delay us": pl.Float64(),
    "max delay us": pl.Float64(),
    "op delay us": pl.Float64(),
    "ranks": pl.Int64(),
}

STREAM_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "stream": pl.Int64(),
    "count": pl.Int64(),
    "sum us": pl.Float64(),
}

OCCURRENCE_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "time (ms)": pl.Float64(),
    "dur (us)": pl.Float64(),
    "n": pl.Int64(),
}

#: Numbers first, the (long) name last, as in the kernel table.
OPERATOR_COLUMNS: dict[str, pl.DataType] = {
    "gpu us": pl.Float64(),
    "gpu ops": pl.Int64(),
    "instances": pl.Int64(),
    "max ops": pl.Int64(),
    "ranks": pl.Int64(),
    "operator": pl.String(),
}


# -- the kernel table ---------------------------------------------------------------------------
def kernel_table(
    ranks: Mapping[int, pl.DataFrame],
    *,
    fold: bool = True,
    duration_ratio: float = 0.8,
    num_kernels: int = 10,
    hta_compat: bool = False,
) -> pl.DataFrame:
    """Per (type, name) over all of `ranks`: share of the analysed GPU time (%), sum, count,
    mean, std (sample; 0 for one event), min, max (us) and how many ranks ran it.

    Kernel types as `gpu_kernel_breakdown` (COMPUTATION, COMMUNICATION, MEMORY; OTHER such as
    syncs left out, as in HTA). `fold=True`: HTA's top-k rule per type (module doc), the tail
    in one "others" row per type, with statistics over its events; `fold=False`: every kernel.
    Sorted by sum descending, then name. No GPU kernels: empty, with the columns.
    """
    gpu = kernels.gpu_table(ranks, hta_compat=hta_compat)
    analysed = gpu.filter(pl.col("kernel_type").is_in(kernels.ANALYSED_TYPES))
    if analysed.is_empty():
        return pl.DataFrame(schema=KERNEL_TABLE_COLUMNS)
    key = [pl.col("name"), pl.col("kernel_type").alias("type")]
    if not fold:
        return _kernel_stats(analysed.group_by(key).agg(*_stats(pl.col("dur"), pl.col("rank"))))
    # each kernel's events grouped once (hashing every event's name once, not twice: the
    # fold's join back onto every event cost three times the rest); the folded tail's
    # statistics from its kernels' durations put together
    each = analysed.group_by(key).agg(
        *_stats(pl.col("dur"), pl.col("rank")), pl.col("dur").alias("durs"), pl.col("rank")
    )
    folded = _fold(
        each.select(pl.col("type").alias("kernel_type"), "name", pl.col("total").alias("dur")),
        duration_ratio=duration_ratio,
        num_kernels=num_kernels,
    ).rename({"kernel_type": "type"})
    each = each.join(folded, on=["type", "name"], how="left")
    others = pl.col("shown") == "others"
    tail = (
        each.filter(others)
        .select("type", "durs", "rank")
        .explode("durs", "rank")
        .group_by("type")
        .agg(*_stats(pl.col("durs"), pl.col("rank")))
        .with_columns(pl.lit("others").alias("name"))
    )
    kept = each.filter(~others).drop("durs", "rank", "shown")
    return _kernel_stats(pl.concat([kept, tail], how="diagonal"))


def _stats(dur: pl.Expr, rank: pl.Expr) -> list[pl.Expr]:
    """A group's statistics (us) from its events' durations (ns) and ranks; `total` its
    duration (ns) for the fold."""
    d = us(dur)
    return [
        pl.len().alias("count"),
        d.sum().alias("sum us"),
        d.mean().alias("mean us"),
        d.std().fill_null(0.0).alias("std us"),
        d.min().alias("min us"),
        d.max().alias("max us"),
        rank.n_unique().alias("ranks"),
        dur.sum().alias("total"),
    ]


def _kernel_stats(groups: pl.DataFrame) -> pl.DataFrame:
    """The kernel table from its groups' statistics: shares, sorted, typed."""
    total = pl.col("sum us").sum()
    return (
        groups.with_columns(
            pl.when(total > 0).then(100 * pl.col("sum us") / total).alias("share %")
        )
        .sort(["sum us", "name", "type"], descending=[True, False, False])
        .cast(KERNEL_TABLE_COLUMNS)
        .select(list(KERNEL_TABLE_COLUMNS))
    )


def _fold(gpu: pl.DataFrame, *, duration_ratio: float, num_kernels: int) -> pl.DataFrame:
    """(kernel_type, name) -> shown name under HTA's `_aggr_gpu_kernel_time` rule, applied to
    the totals over every rank in `gpu` (see `kernels._folded_names`)."""
    key = ["kernel_type"]
    per_name = (
        gpu.group_by([*key, "name"])
        .agg(pl.col("dur").sum().alias("total"))
        .sort([*key, "total", "name"], descending=[False, True, False])
    )
    cum = pl.col("total").cum_sum().over(key)
    fold = (pl.len().over(key) > num_kernels) & (
        (pl.col("cum") > pl.col("cum").quantile(duration_ratio, "linear").over(key))
        | (pl.col("pos") >= num_kernels)
    )
    return (
        per_name.with_columns(cum.alias("cum"), pl.int_range(pl.len()).over(key).alias("pos"))
        .with_columns(fold.alias("fold"))
        .select(
            *key,
            "name",
            pl.when("fold").then(pl.lit("others")).otherwise("name").alias("shown"),
        )
    )


# -- launch links ---------------------------------------------------------------------------
def _launch_calls(view: pl.DataFrame) -> pl.DataFrame:
    """correlation -> the launch call (runtime/driver; the last in file order): launcher (idx),
    launch (name), l_start, l_end, pid, tid (null as -1)."""
    return (
        view.filter(pl.col("kind").is_in(LAUNCH_KINDS) & pl.col("correlation").is_not_null())
        .sort("idx")
        .group_by("correlation")
        .agg(pl.all().last())
        .select(
            "correlation",
            pl.col("idx").alias("launcher"),
            pl.col("name").alias("launch"),
            pl.col("start").alias("l_start"),
            pl.col("end").alias("l_end"),
            pl.col("pid").fill_null(-1).alias("pid"),
            pl.col("tid").fill_null(-1).alias("tid"),
        )
    )


def _ops(view: pl.DataFrame, kinds: tuple[str, ...]) -> pl.DataFrame:
    return view.filter(pl.col("kind").is_in(kinds)).select(
        pl.col("idx").alias("op"),
        pl.col("name").alias("operator"),
        pl.col("start").alias("o_start"),
        pl.col("end").alias("o_end"),
        pl.col("pid").fill_null(-1).alias("pid"),
        pl.col("tid").fill_null(-1).alias("tid"),
    )


def _links(view: pl.DataFrame, gpu_rows: pl.DataFrame) -> pl.DataFrame:
    """`gpu_rows` (rows of `view` with a correlation column) with their launch (launcher,
    launch, l_start, l_end; null when none) and innermost cpu_op (operator, o_start)."""
    rows = gpu_rows.join(_launch_calls(view), on="correlation", how="left")
    calls = (
        rows.filter(pl.col("launcher").is_not_null())
        .select("launcher", "l_start", "l_end", "pid", "tid")
        .unique("launcher")
    )
    return rows.join(_innermost(calls, _ops(view, ("cpu_op",))), on="launcher", how="left")


def _containing(calls: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """Every (call, op) pair where the op, on the call's thread, contains the call: calls
    (launcher, l_start, l_end, pid, tid) x ops (op, operator, o_start, o_end, pid, tid), with
    o_dur. One inequality join, the threads moved to disjoint time ranges first so that
    containment implies the same thread."""
    lo = min(int(calls["l_start"].min()), int(ops["o_start"].min()))  # type: ignore[arg-type]
    hi = max(int(calls["l_end"].max()), int(ops["o_end"].max()))  # type: ignore[arg-type]
    span = hi - lo + 1
    threads = pl.concat([calls.select("pid", "tid"), ops.select("pid", "tid")]).unique()
    threads = threads.sort(["pid", "tid"]).with_row_index("thread")
    off = pl.col("thread").cast(pl.Int64) * span - lo
    left = calls.join(threads, on=["pid", "tid"]).with_columns(
        (pl.col("l_start") + off).alias("__a"), (pl.col("l_end") + off).alias("__b")
    )
    right = (
        ops.join(threads, on=["pid", "tid"])
        .drop("pid", "tid")
        .with_columns(
            (pl.col("o_end") - pl.col("o_start")).alias("o_dur"),
            (pl.col("o_start") + off).alias("__c"),
            (pl.col("o_end") + off).alias("__d"),
        )
    )
    pairs = left.drop("thread").join_where(
        right.drop("thread"), pl.col("__c") <= pl.col("__a"), pl.col("__d") >= pl.col("__b")
    )
    return pairs.drop("__a", "__b", "__c", "__d")


def _innermost(calls: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """launcher -> operator, o_start: the innermost op on the call's thread containing it (the
    one starting last; of equal starts the shorter, then the later in the file)."""
    schema = {"launcher": pl.UInt32, "operator": pl.String, "o_start": pl.Int64}
    if calls.is_empty() or ops.is_empty():
        return pl.DataFrame(schema=schema)
    return (
        _containing(calls, ops)
        .sort(["launcher", "o_start", "o_dur", "op"], descending=[False, True, False, True])
        .group_by("launcher", maintain_order=True)
        .first()
        .select("launcher", "operator", "o_start")
        .cast(schema)
    )


def _gpu_work() -> pl.Expr:
    return pl.col("gpu") & pl.col("kind").is_in(GPU_WORK_KINDS)


def _named(ranks: Mapping[int, pl.DataFrame], name: str, hta_compat: bool) -> pl.DataFrame:
    """Every rank's GPU events called `name`, linked to launch and operator, with `rank`."""
    parts = []
    for rank, view in hta_view(ranks, hta_compat=hta_compat, columns=("pid", "tid")).items():
        rows = view.filter(pl.col("gpu") & (pl.col("name") == name)).select(
            "idx", "start", "end", "dur", "stream", "correlation"
        )
        if rows.is_empty():
            continue
        parts.append(_links(view, rows).with_columns(pl.lit(rank, pl.Int64).alias("rank")))
    return pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()


def kernel_launchers(
    ranks: Mapping[int, pl.DataFrame], name: str, *, hta_compat: bool = False
) -> pl.DataFrame:
    """Who launches the GPU events called `name`: per (operator, launch call) over `ranks`,
    count, their GPU time (sum us), mean and max launch delay, mean op delay (us; module doc),
    and on how many ranks. Events without a launch or outside any cpu_op show as `NO_OPERATOR`
    (launch "-" when there is no launch). Sorted by sum descending, then operator, launch."""
    rows = _named(ranks, name, hta_compat)
    if rows.is_empty():
        return pl.DataFrame(schema=LAUNCHER_COLUMNS)
    delay = (pl.col("start") - pl.col("l_end")).clip(lower_bound=0)
    return (
        rows.with_columns(
            pl.col("operator").fill_null(NO_OPERATOR),
            pl.col("launch").fill_null("-"),
            delay.alias("delay"),
            (pl.col("l_start") - pl.col("o_start")).alias("op_delay"),
        )
        .group_by("operator", "launch")
        .agg(
            pl.len().alias("count"),
            us(pl.col("dur").sum()).alias("sum us"),
            us(pl.col("delay").mean()).alias("mean delay us"),
            us(pl.col("delay").max()).alias("max delay us"),
            us(pl.col("op_delay").mean()).alias("op delay us"),
            pl.col("rank").n_unique().alias("ranks"),
        )
        .sort(["sum us", "operator", "launch"], descending=[True, False, False])
        .cast(LAUNCHER_COLUMNS)
        .select(list(LAUNCHER_COLUMNS))
    )


def kernel_streams(
    ranks: Mapping[int, pl.DataFrame], name: str, *, hta_compat: bool = False
) -> pl.DataFrame:
    """Where the GPU events called `name` ran: rank, stream, count, sum us; sorted by rank
    and stream."""
    gpu = kernels.gpu_table(ranks, hta_compat=hta_compat).filter(pl.col("name") == name)
    if gpu.is_empty():
        return pl.DataFrame(schema=STREAM_COLUMNS)
    streams = []
    for rank, view in hta_view(ranks, hta_compat=hta_compat, columns=()).items():
        rows = view.filter(pl.col("gpu") & (pl.col("name") == name))
        if not rows.is_empty():
            streams.append(
                rows.group_by("stream")
                .agg(pl.len().alias("count"), us(pl.col("dur").sum()).alias("sum us"))
                .with_columns(pl.lit(rank, pl.Int64).alias("rank"))
            )
    return (
        pl.concat(streams)
        .cast(STREAM_COLUMNS)
        .select(list(STREAM_COLUMNS))
        .sort(["rank", "stream"])
    )


def kernel_occurrences(
    ranks: Mapping[int, pl.DataFrame],
    name: str,
    *,
    max_points: int = 300,
    hta_compat: bool = False,
    origin_ns: int | None = None,
) -> pl.DataFrame:
    """When the GPU events called `name` ran and how long they took, for a chart.

    rank, time (ms from `origin_ns`, default `trace_origin`: the trace's start, as on the
    timeline), dur (us), n. With at most
    `max_points` events, one row per event (n = 1); with more, the span is cut into
    `max_points / ranks` equal buckets (so at most about `max_points` rows in all) and each
    (rank, bucket) gives the bucket's middle, the longest duration in it (spikes stay
    visible) and how many events it holds. Sorted by rank, time.
    """
    gpu = kernels.gpu_table(ranks, hta_compat=hta_compat)
    rows = gpu.filter(pl.col("name") == name)
    if rows.is_empty():
        return pl.DataFrame(schema=OCCURRENCE_COLUMNS)
    origin = (trace_origin(ranks) or 0) if origin_ns is None else origin_ns
    t = (pl.col("start") - origin).cast(pl.Float64) / 1e6
    if rows.height <= max_points:
        out = rows.select(
            "rank", t.alias("time (ms)"), us(pl.col("dur")).alias("dur (us)"), pl.lit(1).alias("n")
        )
    else:
        lo = int(rows["start"].min())  # type: ignore[arg-type]
        hi = int(rows["start"].max())  # type: ignore[arg-type]
        buckets = max(max_points // rows["rank"].n_unique(), 1)
        width = max((hi - lo) / buckets, 1.0)
        bucket = ((pl.col("start") - lo) / width).floor().clip(0, buckets - 1)
        out = (
            rows.group_by("rank", bucket.alias("b"))
            .agg(us(pl.col("dur").max()).alias("dur (us)"), pl.len().alias("n"))
            .with_columns(((lo - origin + (pl.col("b") + 0.5) * width) / 1e6).alias("time (ms)"))
        )
    return out.cast(OCCURRENCE_COLUMNS).select(list(OCCURRENCE_COLUMNS)).sort(["rank", "time (ms)"])


#: A table's times count from the trace's start, as the timeline's do (one number per moment
#: on every screen), and their column says so.
START = "start (us from trace start)"

RUN_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "stream": pl.Int64(),
    "dur (us)": pl.Float64(),
    START: pl.Float64(),  # from `origin_ns`, the timeline's origin
    "correlation": pl.Int64(),
    "ts": pl.Int64(),  # ns as in the file (the run's place on the timeline)
}


def trace_origin(ranks: Mapping[int, pl.DataFrame]) -> int | None:
    """The earliest event of the ranks (ns as in the file): the timeline's origin when every
    rank is given (`TraceSet.origin_ns`)."""
    firsts = [f["ts"].min() for f in ranks.values() if not f.is_empty()]
    firsts = [int(v) for v in firsts if v is not None]  # type: ignore[arg-type]
    return min(firsts) if firsts else None


def kernel_runs(
    ranks: Mapping[int, pl.DataFrame],
    name: str,
    *,
    top: int = 200,
    hta_compat: bool = False,
    origin_ns: int | None = None,
) -> pl.DataFrame:
    """The `top` longest runs of the GPU events called `name` (`RUN_COLUMNS`), longest
    first: single instances a user can open on the timeline. Starts are us from `origin_ns`
    (default `trace_origin`), the timeline's origin: the same number there and here."""
    gpu = kernels.gpu_table(ranks, hta_compat=hta_compat)
    parts = []
    for rank, view in hta_view(ranks, hta_compat=hta_compat, columns=("ts",)).items():
        rows = view.filter(pl.col("gpu") & (pl.col("name") == name))
        if not rows.is_empty():
            parts.append(
                rows.top_k(top, by="dur").select(
                    pl.lit(rank, pl.Int64).alias("rank"),
                    "stream",
                    "dur",
                    "start",
                    "correlation",
                    "ts",
                )
            )
    if not parts or gpu.is_empty():
        return pl.DataFrame(schema=RUN_COLUMNS)
    origin = trace_origin(ranks) if origin_ns is None else origin_ns
    return (
        pl.concat(parts, how="vertical_relaxed")
        .top_k(top, by="dur")
        .sort(["dur", "rank", "start"], descending=[True, False, False])
        .select(
            "rank",
            "stream",
            us(pl.col("dur")).alias("dur (us)"),
            us(pl.col("ts") - (origin or 0)).alias(START),
            "correlation",
            "ts",
        )
        .cast(RUN_COLUMNS)
    )


def launching_operators(
    ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False
) -> pl.DataFrame:
    """The operators that launch GPU work (kernels, memcpy, memset), by GPU time.

    Per operator name (cpu_op and annotation events: aten ops, record_function ranges,
    module annotations) over `ranks`: `gpu us`, the GPU time of the work launched from inside
    its instances (a launch call on the op's thread within the op, nested ops included, so the
    times of nested names overlap and do not add up); `gpu ops`, how many GPU ops that is;
    `instances` that launched any; `max ops`, the most one instance launched (a kernel
    sequence needs at least `min_pattern_len`); and on how many `ranks`. Sorted by GPU time
    descending, then name. Nothing launched: empty, with the columns.
    """
    parts = []
    for rank, view in hta_view(ranks, hta_compat=hta_compat, columns=("pid", "tid")).items():
        rows = view.filter(_gpu_work() & pl.col("correlation").is_not_null()).select(
            "idx", "dur", "stream", "correlation"
        )
        if rows.is_empty():
            continue
        launches = _launch_calls(view)
        calls = (
            rows.join(launches, on="correlation")
            .group_by("launcher", "l_start", "l_end", "pid", "tid")
            .agg(pl.col("dur").sum().alias("gpu"), pl.len().alias("ops"))
        )
        ops = _ops(view, ("cpu_op", "annotation"))
        if calls.is_empty() or ops.is_empty():
            continue
        per_op = (
            _containing(calls, ops)
            .group_by("op")
            .agg(
                pl.col("operator").first(),
                pl.col("gpu").sum(),
                pl.col("ops").sum(),
            )
            .with_columns(pl.lit(rank, pl.Int64).alias("rank"))
        )
        parts.append(per_op)
    if not parts:
        return pl.DataFrame(schema=OPERATOR_COLUMNS)
    return (
        pl.concat(parts)
        .group_by("operator")
        .agg(
            us(pl.col("gpu").sum()).alias("gpu us"),
            pl.col("ops").sum().alias("gpu ops"),
            pl.len().alias("instances"),
            pl.col("ops").max().alias("max ops"),
            pl.col("rank").n_unique().alias("ranks"),
        )
        .sort(["gpu us", "operator"], descending=[True, False])
        .cast(OPERATOR_COLUMNS)
        .select(list(OPERATOR_COLUMNS))
    )
