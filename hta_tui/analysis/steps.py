"""Profiler steps, per-rank iterations and straggler candidates.

`profiler_steps` is HTA's `get_profiler_steps`: the numbers N of the `ProfilerStep#N` events
(HTA's regex `ProfilerStep\\s*#\\s*(\\d+)`) that survive HTA's view of the job. With at least two
distinct step names in the job, the view keeps on each rank only the events that start before
that rank's last ProfilerStep, so the last step is dropped; a lone step is kept. Names that
start with "ProfilerStep" without a number count as no step (HTA's -1, left out).

`iterations` is HTA's `extract_iteration_info`: one row per rank and kept step event, `ts`
relative to the job's first event (HTA aligns ranks on the smallest timestamp of all of them),
`dur` and `end`, in microseconds.

`straggler_candidates` mirrors the idea of HTA's `get_potential_stragglers` (a rank that starts
its collectives late makes every other rank wait in them) with per-rank metrics that need no
choice of a "dominant" kernel, and works with one step or with modern NCCL names; see its doc.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import polars as pl

from hta_tui.analysis.hta_view import (
    KERNEL_TYPE,
    KERNEL_TYPES,
    at_once,
    gpu_launches,
    hta_view,
    job_cached,
    profiler_step_names,
    us,
    with_times,
)
from hta_tui.analysis.lazy import lazy_module

#: (numpy's: imported when first used, so the report's client, which reads this module's
#: names, imports no numpy)
interval_arrays = lazy_module("hta_tui.analysis.interval_arrays")
np = lazy_module("numpy")

_STEP_RE = r"^ProfilerStep\s*#\s*(\d+)"
#: The step number in a ProfilerStep name (group 1).
STEP_NUMBER = _STEP_RE

ITERATION_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "iter": pl.Int64(),
    "ts": pl.Float64(),
    "dur": pl.Float64(),
    "end": pl.Float64(),
}

STRAGGLER_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "steps": pl.Int64(),
    "step_time (us)": pl.Float64(),
    "comm_time (us)": pl.Float64(),
    "compute_time (us)": pl.Float64(),
    "step_time_z": pl.Float64(),
    "comm_time_z": pl.Float64(),
    "compute_time_z": pl.Float64(),
    "straggler": pl.Boolean(),
    "reason": pl.String(),
}

#: Robust z-score beyond which a rank stands out (3 MADs, the usual outlier cut).
Z_THRESHOLD = 3.0
#: A metric stands out only when it is also this far from the ranks' median: a share of the
#: median step time, and at least MIN_DIFF_US. Robust z-scores alone flag noise when the
#: ranks agree closely (76 us of computation in a 19 ms step gave z = 3.8 on a real job).
MIN_STEP_SHARE = 0.02
MIN_DIFF_US = 20.0
#: Scale from the median absolute deviation to a standard deviation for normal data.
_MAD_TO_SD = 1.4826
#: Scale from the mean absolute deviation to a standard deviation (sqrt(pi/2)).
_MEAN_AD_TO_SD = 1.2533


def _origin(ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False) -> int | None:
    """HTA's alignment origin: the smallest `ts` of all ranks' events (ns); with
    `hta_compat`, rounded up like every start of a fractional-microsecond file."""
    found = [o for o in origins(ranks, hta_compat=hta_compat).values() if o is not None]
    return min(found) if found else None


def origins(
    ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False
) -> dict[int, int | None]:
    """rank -> `_origin` of that rank alone, the rounding made for every rank at once (2
    queries a call, not 2 a rank: asked per rank by the steps' and the findings' parts)."""
    firsts: dict[int, int | None] = {}
    ok = pl.col("cat").is_not_null() & (pl.col("cat") != "Trace")
    _prime_firsts(ranks, ok)
    for rank, ev in sorted(ranks.items()):
        # kept per rank: the steps' part and the findings' part each ask every rank's
        found = job_cached(
            {0: ev}, "first ts", lambda ev=ev: ev.select(pl.col("ts").filter(ok).min())
        )
        firsts[rank] = found.item()
    known = [r for r, v in firsts.items() if v is not None]
    out: dict[int, int | None] = dict.fromkeys(firsts)
    if known:
        # with_times rounds each row alone (a whole microsecond, rounded or not, stays itself)
        first = pl.DataFrame(
            {"ts": [firsts[r] for r in known], "dur": [0] * len(known)},
            schema={"ts": pl.Int64, "dur": pl.Int64},
        )
        timed = with_times(first, hta_compat=hta_compat)["start"].to_list()
        out.update(zip(known, (int(t) for t in timed), strict=True))
    return out


def _prime_firsts(ranks: Mapping[int, pl.DataFrame], ok: pl.Expr) -> None:
    """Inside a batch of small ranks, every rank's first `ts` (`origins`' "first ts") made
    in one query over the batch and kept as each rank's (a query a rank alone)."""
    from hta_tui.analysis.per_rank import made_at_once  # (numpy: not on the client)
    from hta_tui.analysis.rank_column import tagged

    def build(frames: list[tuple[int, pl.DataFrame]]) -> dict[int, pl.DataFrame]:
        every = tagged(frames)
        found = dict(every.group_by("rank").agg(pl.col("ts").filter(ok).min()).rows())
        dtype = every.schema["ts"]
        return {r: pl.DataFrame({"ts": [found.get(r)]}, schema={"ts": dtype}) for r, _ in frames}

    made_at_once(ranks, "first ts", ("ts", "cat"), build)


def job_origin_us(ranks: Mapping[int, pl.DataFrame]) -> float:
    """The job's clock origin in us (`iterations`' ts 0): to put tables written in the
    file's clock on the job's."""
    origin = _origin(ranks)
    return origin / 1000 if origin is not None else 0.0


def _step_numbers(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """name -> iter (null without a number) for the job's ProfilerStep names: the regex runs
    once on these few names instead of being compiled again for every rank's query."""
    names = pl.DataFrame({"name": sorted(profiler_step_names(ranks))}, schema={"name": pl.String})
    return names.with_columns(pl.col("name").str.extract(_STEP_RE, 1).cast(pl.Int64).alias("iter"))


def _step_rows(view: pl.DataFrame, numbers: pl.DataFrame) -> pl.DataFrame:
    """The view's CPU-side ProfilerStep events with their number (null when the name has
    none); `numbers` is `_step_numbers` of the job (it has every name of the view's steps).

    DEVIATION: a GPU-side `gpu_user_annotation` ProfilerStep#N (ROCm and recent CUDA traces)
    only shows where step N ran on the device; HTA's `extract_iteration_info` lists it as
    another row of step N (two `iter N` rows, and step times mixing CPU and GPU spans)."""
    names = tuple(numbers["name"].to_list())  # (the job's: the rows depend on no other)
    return job_cached({0: view}, "hta_step_rows", lambda: _find_step_rows(view, numbers), names)


def _find_step_rows(view: pl.DataFrame, numbers: pl.DataFrame) -> pl.DataFrame:
    is_step = pl.col("name").str.starts_with("ProfilerStep") & (pl.col("kind") != "gpu_annotation")
    return view.filter(is_step).join(numbers, on="name", how="left", maintain_order="left")


#: A batch's step rows made at once: ([(ranks of one schema, their `_step_rows` tagged
#: with `rank`)], the ranks made alone).
_AtOnce = tuple[list[tuple[list[int], pl.DataFrame]], list[int]]


def _rows_at_once(
    ranks: Mapping[int, pl.DataFrame], numbers: pl.DataFrame, *, hta_compat: bool
) -> _AtOnce | None:
    """Inside a batch of small ranks (`at_once`), every view's `_step_rows` in one query a
    schema of views (a view of its own schema, or of a group whose query fails, made
    alone), kept per batch and mode: the profiler steps, the iterations and the step
    metrics are then made over the batch at once, not a rank at a time (the views are
    picked afresh on every call, so a rank's own rows were found again by each of them).
    None outside a batch."""
    if len(ranks) < 2 or not at_once():
        return None
    from hta_tui.analysis.rank_column import tagged  # (numpy: not on the client)

    def build() -> _AtOnce:
        views = hta_view(ranks, hta_compat=hta_compat, columns=())
        groups: dict[tuple[object, ...], list[tuple[int, pl.DataFrame]]] = {}
        for rank, view in views.items():
            groups.setdefault((*view.columns, *view.dtypes), []).append((rank, view))
        made, alone = [], []
        for members in groups.values():
            found = None
            if len(members) > 1:
                with contextlib.suppress(pl.exceptions.PolarsError):  # (made alone: says why)
                    found = _find_step_rows(tagged(members), numbers)
            if found is None:
                alone += [r for r, _ in members]
            else:
                made.append(([r for r, _ in members], found))
        return made, sorted(alone)

    names = tuple(numbers["name"].to_list())
    return job_cached(ranks, "step rows at once", build, hta_compat, names)  # type: ignore[arg-type, return-value]


def _in_rank_order(
    made: list[pl.DataFrame], alone: dict[int, pl.DataFrame], ranks: Mapping[int, object]
) -> list[pl.DataFrame]:
    """A batch's tables in rank order: `made` (one a schema group, with `rank`) as it is
    when it is one and no rank was made `alone`, else cut by rank and put back in order."""
    if len(made) == 1 and not alone:
        return made
    from hta_tui.analysis.per_rank import by_rank  # (numpy: not on the client)

    pieces = dict(alone)
    for table in made:
        pieces |= by_rank(table, keep=True)
    return [pieces[r] for r in sorted(ranks) if r in pieces]


def iterations(ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False) -> pl.DataFrame:
    """HTA's `extract_iteration_info`: rank, iter, ts, dur, end (us, ts from the job's start).

    Sorted by rank, then start. A step name without a number gets iter -1 like HTA's. Empty
    (with the columns) when no rank has a ProfilerStep in HTA's view.
    """
    return iterations_from(
        iteration_rows(ranks, hta_compat=hta_compat), _origin(ranks, hta_compat=hta_compat)
    )


#: `iteration_rows`: a rank's steps in its file's clock (integer ns).
ITERATION_ROW_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "iter": pl.Int64(),
    "start": pl.Int64(),
    "dur": pl.Int64(),
    "end": pl.Int64(),
}


def iteration_rows(ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False) -> pl.DataFrame:
    """`iterations` before the job's origin is known: each rank's rows need only the rank
    (the origin, the smallest start of every rank, is subtracted by `iterations_from`)."""
    numbers = _step_numbers(ranks)
    batch = _rows_at_once(ranks, numbers, hta_compat=hta_compat)
    if batch is not None:
        return _iteration_rows_at_once(ranks, numbers, batch, hta_compat=hta_compat)
    views = hta_view(ranks, hta_compat=hta_compat, columns=())
    frames = list(_iteration_rows_each(views, numbers).values())
    if not frames:
        return pl.DataFrame(schema=ITERATION_ROW_COLUMNS)
    return pl.concat(frames).cast(ITERATION_ROW_COLUMNS)


def _iteration_rows_each(
    views: Mapping[int, pl.DataFrame], numbers: pl.DataFrame
) -> dict[int, pl.DataFrame]:
    """rank -> its `iteration_rows` (its view's steps), a rank without a step left out."""
    out = {}
    quick = at_once()  # (a batch's ranks: their rows gathered, no query a rank)
    for rank, view in views.items():
        steps = _step_rows(view, numbers)
        if steps.is_empty():
            continue
        made = _iteration_rows_at_hand(rank, steps) if quick else None
        if made is not None:
            out[rank] = made
            continue
        out[rank] = steps.sort(["start", "idx"]).select(
            pl.lit(rank, pl.Int64).alias("rank"),
            pl.col("iter").fill_null(-1),
            "start",
            "dur",
            "end",
        )
    return out


def _iteration_rows_at_once(
    ranks: Mapping[int, pl.DataFrame], numbers: pl.DataFrame, batch: _AtOnce, *, hta_compat: bool
) -> pl.DataFrame:
    """`iteration_rows` of a batch: one query a schema group over its step rows (each
    rank's sorted by start and row, as alone), a rank made alone as alone."""
    groups, alone = batch
    made = [
        found.sort(["rank", "start", "idx"]).select(
            "rank", pl.col("iter").fill_null(-1), "start", "dur", "end"
        )
        for _, found in groups
    ]
    views = hta_view(ranks, hta_compat=hta_compat, columns=()) if alone else {}
    each = _iteration_rows_each({r: views[r] for r in alone}, numbers)
    frames = _in_rank_order(made, each, ranks)
    frames = [f for f in frames if f.height]
    if not frames:
        return pl.DataFrame(schema=ITERATION_ROW_COLUMNS)
    return pl.concat(frames, how="diagonal_relaxed").cast(ITERATION_ROW_COLUMNS)


def _iteration_rows_at_hand(rank: int, steps: pl.DataFrame) -> pl.DataFrame | None:
    """`iteration_rows`' frame of one rank (its step rows sorted by start and row, a
    leading `rank` as a literal's: flagged sorted) without its two queries: gathered in
    numpy by the rows' order (`idx` is unique, so the order is the sort's); None for rows of
    another shape (nulls but in `iter`, other types)."""
    columns = ("start", "idx", "dur", "end")
    if any(steps[c].null_count() or not steps[c].dtype.is_integer() for c in columns):
        return None
    if any(steps[c].dtype != pl.Int64 for c in ("start", "dur", "end")):
        return None
    iters = _ints(steps["iter"], -1)
    if iters is None:
        return None
    from hta_tui.analysis.rank_column import ranked  # (numpy: not on the client)

    start, idx, dur, end = (steps[c].to_numpy() for c in columns)
    order = np.lexsort((idx, start))
    rows = pl.DataFrame(
        [
            pl.Series("iter", iters[order], dtype=pl.Int64),
            *(
                pl.Series(c, v[order], dtype=pl.Int64)
                for c, v in zip(("start", "dur", "end"), (start, dur, end), strict=True)
            ),
        ]
    )
    return ranked(rank, rows)


def _ints(column: pl.Series, null: int) -> np.ndarray | None:
    """An Int64 column's values in numpy, `null` for a null (no query: a Series' fill_null
    is one); None for another type."""
    if column.dtype != pl.Int64:
        return None
    if not column.null_count():
        return column.to_numpy()
    floats = column.to_numpy()  # (nulls as NaN; step numbers are far below 2**53)
    return np.where(np.isnan(floats), null, floats).astype(np.int64)


def _metric_steps(view: pl.DataFrame, numbers: pl.DataFrame) -> pl.DataFrame | None:
    """`_rank_step_metrics`' numbered steps (iter, s_start, s_end, by start) of a batch's
    rank without a query: gathered in numpy; None (made by its query) when two start
    together (the query's sort may order them either way) or a value is missing."""
    rows = _step_rows(view, numbers)
    iters = _ints(rows["iter"], -1)
    if iters is None or any(
        rows[c].null_count() or rows[c].dtype != pl.Int64 for c in ("start", "end")
    ):
        return None
    numbered = (iters != -1) if rows["iter"].null_count() else np.ones(rows.height, dtype=bool)
    if rows["iter"].null_count() and (rows["iter"] == -1).any():
        return None  # (a real -1 among the nulls)
    iters, start, end = (
        iters[numbered],
        rows["start"].to_numpy()[numbered],
        rows["end"].to_numpy()[numbered],
    )
    if np.unique(start).size < start.size:
        return None
    order = np.argsort(start, kind="stable")
    return pl.DataFrame(
        [
            pl.Series("iter", iters[order], dtype=pl.Int64),
            pl.Series("s_start", start[order], dtype=pl.Int64),
            pl.Series("s_end", end[order], dtype=pl.Int64),
        ]
    )


def iterations_from(rows: pl.DataFrame, origin: int | None) -> pl.DataFrame:
    """`iterations` from `iteration_rows` (in rank order) and the job's origin (ns)."""
    if rows.is_empty():
        return pl.DataFrame(schema=ITERATION_COLUMNS)
    return rows.select(
        "rank",
        "iter",
        us(pl.col("start") - origin).alias("ts"),
        us(pl.col("dur")).alias("dur"),
        us(pl.col("end") - origin).alias("end"),
    ).cast(ITERATION_COLUMNS)


def profiler_steps(ranks: Mapping[int, pl.DataFrame]) -> list[int]:
    """HTA's `get_profiler_steps`: sorted step numbers over all ranks (see module doc)."""
    steps: set[int] = set()
    numbers = _step_numbers(ranks)
    batch = _rows_at_once(ranks, numbers, hta_compat=False)
    views = hta_view(ranks, columns=())
    if batch is not None:  # (a batch's step rows, found at once: one query a group)
        groups, alone = batch
        for _, found in groups:
            steps.update(found["iter"].drop_nulls().unique().to_list())
        views = {r: views[r] for r in alone}
    quick = at_once()  # (a batch's ranks: no query a rank)
    for view in views.values():
        iters = _step_rows(view, numbers)["iter"]
        if quick and iters.dtype == pl.Int64:
            floats = iters.to_numpy()  # (nulls as NaN when any: step numbers are small)
            steps.update(int(i) for i in floats[~np.isnan(floats)])
            continue
        steps.update(iters.drop_nulls().to_list())
    return sorted(steps)


def ranks_profiler_steps(ranks: Mapping[int, pl.DataFrame]) -> dict[int, list[int]]:
    """rank -> `profiler_steps({rank: events})`, each rank alone (a report's batch keeps each
    rank's steps for its scope): ranks whose own step names are the same (HTA's view of each
    alone is then the one the group gives it) found in one query over their views (three
    queries a tiny rank alone); a rank alone in its names, or a group whose views differ in
    schema or whose query fails, makes its own."""
    groups: dict[frozenset[str], list[int]] = {}
    for rank, events in sorted(ranks.items()):
        groups.setdefault(frozenset(profiler_step_names({rank: events})), []).append(rank)
    out: dict[int, list[int]] = {}
    for members in groups.values():
        if len(members) > 1:
            with contextlib.suppress(pl.exceptions.PolarsError):  # (each makes its own)
                out |= _steps_at_once({r: ranks[r] for r in members})
        out |= {r: profiler_steps({r: ranks[r]}) for r in members if r not in out}
    return dict(sorted(out.items()))


def _steps_at_once(ranks: Mapping[int, pl.DataFrame]) -> dict[int, list[int]]:
    """`ranks_profiler_steps` of ranks of the same step names; empty when their views differ
    in schema (each makes its own)."""
    from hta_tui.analysis.rank_column import tagged  # (numpy: not on the client)

    views = hta_view(ranks, columns=())
    if len({tuple(v.schema.items()) for v in views.values()}) > 1:
        return {}
    found = _find_step_rows(tagged(sorted(views.items())), _step_numbers(ranks))
    per = found.group_by("rank").agg(pl.col("iter").drop_nulls().unique())
    got = dict(zip(per["rank"].to_list(), per["iter"].to_list(), strict=True))
    return {r: sorted(got.get(r) or []) for r in ranks}


def _robust_z(col: str) -> pl.Expr:
    """(x - median) / (1.4826 * MAD) over the frame; with MAD 0 (most ranks equal), the mean
    absolute deviation stands in, so one rank off an otherwise identical job still stands out.
    Null when every rank has the same value or the metric is missing."""
    x = pl.col(col)
    dev = x - x.median()
    mad = dev.abs().median() * _MAD_TO_SD
    mean_ad = dev.abs().mean() * _MEAN_AD_TO_SD
    scale = pl.when(mad > 0).then(mad).when(mean_ad > 0).then(mean_ad).otherwise(None)
    return dev / scale


def _rank_step_metrics(
    view: pl.DataFrame, numbers: pl.DataFrame, gpu: pl.DataFrame, rank: int
) -> pl.DataFrame | None:
    """Per step of one rank: step duration, NCCL kernel busy time and computation busy time (ns).

    `gpu`: the rank's rows of `gpu_launches`. A GPU event belongs to the step during which its
    launch started on the CPU (HTA assigns GPU events to the iteration of their launch the
    same way). Busy time is the union of the events' intervals, so overlapping NCCL kernels on
    several streams count once. None without numbered steps.
    """
    quick = _metric_steps(view, numbers) if at_once() else None
    steps = (
        quick
        if quick is not None
        # (one query, not three)
        else (
            _step_rows(view, numbers)
            .lazy()
            .filter(pl.col("iter").is_not_null())
            .select("iter", pl.col("start").alias("s_start"), pl.col("end").alias("s_end"))
            .sort("s_start")
            .collect()
        )
    )
    if steps.is_empty():
        return None
    # numpy: each launch to the step it started in by binary search, then per step number
    # a union of its kernels of each type (a loop over steps, not events)
    import numpy as np  # (here: the report's client imports this module, not numpy)

    s_start, s_end = steps["s_start"].to_numpy(), steps["s_end"].to_numpy()
    launch = gpu["launch_start"].to_numpy()
    at = np.searchsorted(s_start, launch, side="right") - 1
    inside = at >= 0
    inside[inside] = launch[inside] < s_end[at[inside]]
    iters = steps["iter"].to_numpy()
    it = iters[at[inside]]
    start, end = gpu["start"].to_numpy()[inside], gpu["end"].to_numpy()[inside]
    order = np.argsort(start, kind="stable")
    start, end, it = start[order], end[order], it[order]
    kinds = gpu["kernel_type"]
    kinds = kinds if kinds.dtype == KERNEL_TYPE else kinds.cast(KERNEL_TYPE)
    if quick is not None:  # (the names: a Series' `to_physical` is a query)
        kind = kinds.to_numpy()[inside][order]
        codes = {t: t for t in KERNEL_TYPES}
    else:
        kind = kinds.to_physical().to_numpy()[inside][order]
        codes = {t: KERNEL_TYPES.index(t) for t in KERNEL_TYPES}
    covered: dict[str, list[int]] = {"comm": [], "comp": []}
    for name, ktype in (("comm", "COMMUNICATION"), ("comp", "COMPUTATION")):
        of_type = kind == codes[ktype]
        for n in iters:
            keep = of_type & (it == n)
            union = interval_arrays.union(start[keep], end[keep], ordered=True)
            covered[name].append(interval_arrays.length(union))
    if quick is not None:  # (the select below, without its query: a literal's rank column)
        from hta_tui.analysis.rank_column import ranked  # (numpy: not on the client)

        made = pl.DataFrame(
            [
                steps["iter"],
                pl.Series("step", s_end - s_start, dtype=pl.Int64),
                pl.Series("comm", covered["comm"], dtype=pl.Int64),
                pl.Series("comp", covered["comp"], dtype=pl.Int64),
            ]
        )
        return ranked(rank, made)
    return steps.select(
        pl.lit(rank, pl.Int64).alias("rank"),
        "iter",
        (pl.col("s_end") - pl.col("s_start")).alias("step"),
        pl.Series("comm", covered["comm"], dtype=pl.Int64),
        pl.Series("comp", covered["comp"], dtype=pl.Int64),
    )


def straggler_candidates(
    ranks: Mapping[int, pl.DataFrame],
    *,
    steps: list[int] | None = None,
    threshold: float = Z_THRESHOLD,
    hta_compat: bool = False,
) -> pl.DataFrame:
    """Ranks whose step time, or whose time in collectives, stands out from the other ranks.

    Per rank, over the chosen `steps` (default: every step of `profiler_steps`): the median
    step duration, the median NCCL time per step (union of COMMUNICATION kernels, `^nccl.*Kernel`,
    which includes NCCL >= 2.19's `ncclDevKernel_*`) and the median computation time per step,
    each turned into a robust z-score over ranks ((x - median) / (1.4826 * MAD)).

    A rank is a straggler candidate when its step time is high (z >= threshold), or when its
    collective time is low (z <= -threshold) or its computation time is high (z >= threshold):
    in synchronous training every rank waits inside its collectives for the slowest one, so
    the straggler is the rank that waits least while its peers' NCCL kernels stretch. This is
    HTA's premise too (it ranks ranks by how late they start the dominant collective) without
    HTA's choice of one dominant kernel, its 1 % duration cut or its `ncclKernel` prefix (which
    misses modern `ncclDevKernel_*` names). A metric stands out only when it is also far from
    the median in absolute terms (`_verdicts`: a share of the step time, a minimum in us);
    `reason` gives the evidence: the rank's value, the median, the difference.

    One row per rank with at least one step; z-scores are null with fewer than 3 such ranks
    (no robust reference) or when all ranks agree. Empty for a job without ProfilerSteps.
    """
    per_step = step_metrics(ranks, hta_compat=hta_compat)
    if steps is not None:
        per_step = per_step.filter(pl.col("iter").is_in(steps))
    return stragglers_from(per_step, threshold)


#: `step_metrics`: per rank and step, its duration and its NCCL and computation busy time (ns).
STEP_METRIC_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "iter": pl.Int64(),
    "step": pl.Int64(),
    "comm": pl.Int64(),
    "comp": pl.Int64(),
}


def step_metrics(ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False) -> pl.DataFrame:
    """Each rank's steps' metrics (`_rank_step_metrics`), the ranks in order: what
    `straggler_candidates` compares across ranks, made by each rank alone."""
    kt = pl.col("kernel_type")
    launched = gpu_launches(ranks, hta_compat=hta_compat)
    if launched.width == 0:  # no ranks
        return pl.DataFrame(schema=STEP_METRIC_COLUMNS)
    launched = (
        launched.lazy()
        .filter(kt.is_in(("COMMUNICATION", "COMPUTATION")) & pl.col("launch_start").is_not_null())
        .select("rank", "launch_start", "start", "end", "kernel_type")
        .collect()
    )
    numbers = _step_numbers(ranks)
    if at_once():  # (a batch's launches, rank after rank: cut as slices, no query)
        from hta_tui.analysis.rank_column import parts  # (numpy: not on the client)

        by_rank = parts(launched, "rank", keep=True)
    else:
        by_rank = launched.partition_by("rank", as_dict=True)
    empty = launched.clear()
    views = hta_view(ranks, hta_compat=hta_compat, columns=())
    batch = _rows_at_once(ranks, numbers, hta_compat=hta_compat)
    made: list[pl.DataFrame] = []
    if batch is not None:  # (a batch: each group's steps at once, a rank that cannot be made alone)
        groups, alone = batch
        left = set(alone)
        for members, found in groups:
            table = _step_metrics_at_once(found, launched)
            if table is None:
                left |= set(members)
                continue
            made.append(table[0])
            left |= table[1]
        views = {r: v for r, v in views.items() if r in left}
    each = {}
    for rank, view in views.items():
        m = _rank_step_metrics(view, numbers, by_rank.get((rank,), empty), rank)
        if m is not None and not m.is_empty():
            each[rank] = m
    rows = _in_rank_order(made, each, ranks) if batch is not None else list(each.values())
    rows = [r for r in rows if r.height]
    if not rows:
        return pl.DataFrame(schema=STEP_METRIC_COLUMNS)
    return pl.concat(rows, how="diagonal_relaxed").cast(STEP_METRIC_COLUMNS)


def _step_metrics_at_once(
    found: pl.DataFrame, launched: pl.DataFrame
) -> tuple[pl.DataFrame, set[int]] | None:
    """`_rank_step_metrics` of a group of a batch's ranks (their step rows tagged with
    `rank`, `_rows_at_once`) in numpy over the group: each launch to its rank's step by one
    sort of the steps and launches together, then the union of each (rank, step number,
    kernel type)'s kernels, every group at once (a union of integers: as each rank's
    alone). Returns the table and the ranks to make alone (two steps starting together:
    the order their query gives them is its own); None for values of another shape."""
    steps = found.filter(pl.col("iter").is_not_null()).select(
        "rank", "iter", pl.col("start").alias("s_start"), pl.col("end").alias("s_end")
    )
    if any(steps[c].dtype != pl.Int64 or steps[c].null_count() for c in steps.columns):
        return None
    twice = steps.filter(pl.struct("rank", "s_start").is_duplicated())["rank"].unique()
    alone = set(twice.to_list())
    if alone:
        steps = steps.filter(~pl.col("rank").is_in(twice))
    steps = steps.sort("rank", "s_start")
    members = steps["rank"].unique()
    gpu = launched.filter(pl.col("rank").is_in(members))
    if any(gpu[c].dtype != pl.Int64 or gpu[c].null_count() for c in gpu.columns[:4]):
        return None
    r, s_start, s_end, iters = (steps[c].to_numpy() for c in ("rank", "s_start", "s_end", "iter"))
    lr, launch, start, end = (gpu[c].to_numpy() for c in ("rank", "launch_start", "start", "end"))
    comm = gpu.select(pl.col("kernel_type") == "COMMUNICATION").to_series().to_numpy()
    n = r.size
    # each launch to the last step of its rank starting at or before it (a step first at a tie)
    merged = np.lexsort(
        (np.r_[np.zeros(n), np.ones(lr.size)], np.r_[s_start, launch], np.r_[r, lr])
    )
    last = np.maximum.accumulate(np.where(merged < n, merged, -1))
    at = np.empty(lr.size, dtype=np.int64)
    at[merged[merged >= n] - n] = last[merged >= n]
    inside = at >= 0
    inside[inside] = (r[at[inside]] == lr[inside]) & (launch[inside] < s_end[at[inside]])
    pos = np.flatnonzero(inside)
    it, rk, kind = iters[at[pos]], lr[pos], comm[pos]
    start, end = start[pos], end[pos]
    order = np.lexsort((pos, start, kind, it, rk))
    rk, it, kind, start, end = rk[order], it[order], kind[order], start[order], end[order]
    lengths = _union_lengths(rk, it, kind, start, end)
    if lengths is None:
        return None
    covered = {"comm": np.zeros(n, dtype=np.int64), "comp": np.zeros(n, dtype=np.int64)}
    for j, key in enumerate(zip(r.tolist(), iters.tolist(), strict=True)):
        covered["comm"][j] = lengths.get((*key, True), 0)
        covered["comp"][j] = lengths.get((*key, False), 0)
    table = pl.DataFrame(
        [
            pl.Series("rank", r, dtype=pl.Int64),
            pl.Series("iter", iters, dtype=pl.Int64),
            pl.Series("step", s_end - s_start, dtype=pl.Int64),
            pl.Series("comm", covered["comm"], dtype=pl.Int64),
            pl.Series("comp", covered["comp"], dtype=pl.Int64),
        ]
    )
    return table, alone


def _union_lengths(
    rank: np.ndarray, it: np.ndarray, kind: np.ndarray, start: np.ndarray, end: np.ndarray
) -> dict[tuple[int, int, bool], int] | None:
    """(rank, step number, communication?) -> the length of the union of its intervals
    (`interval_arrays.union` of each group alone), the intervals sorted by group then
    start. Each group moved onto its own stretch of one axis so that one running maximum
    serves them all; None when the stretches would not fit in 62 bits."""
    if not rank.size:
        return {}
    first = np.r_[True, (rank[1:] != rank[:-1]) | (it[1:] != it[:-1]) | (kind[1:] != kind[:-1])]
    heads = np.flatnonzero(first)
    group = np.cumsum(first) - 1
    low = np.minimum.reduceat(np.minimum(start, end), heads)
    span = np.maximum.reduceat(np.maximum(start, end), heads) - low + 1
    if span.sum() >= 2**62:
        return None
    offset = np.r_[0, np.cumsum(span)[:-1]] - low
    s, e = start + offset[group], end + offset[group]
    running = np.maximum.accumulate(e)
    new = first.copy()
    new[1:] |= s[1:] > running[:-1]
    cut = np.flatnonzero(new)
    lengths = np.maximum.reduceat(end, cut) - start[cut]
    per = np.add.reduceat(lengths, np.searchsorted(cut, heads))
    keys = zip(rank[heads].tolist(), it[heads].tolist(), kind[heads].tolist(), strict=True)
    return dict(zip(keys, per.tolist(), strict=True))


def stragglers_from(per_step: pl.DataFrame, threshold: float = Z_THRESHOLD) -> pl.DataFrame:
    """`straggler_candidates` from `step_metrics` of every rank (the cross-rank part: a
    median per rank, then robust z-scores over the ranks)."""
    if per_step.is_empty():
        return pl.DataFrame(schema=STRAGGLER_COLUMNS)
    per_rank = (
        per_step.group_by("rank")
        .agg(
            pl.len().alias("steps"),
            us(pl.col("step").median()).alias("step_time (us)"),
            us(pl.col("comm").median()).alias("comm_time (us)"),
            us(pl.col("comp").median()).alias("compute_time (us)"),
        )
        .sort("rank")
    )
    enough = per_rank.height >= 3
    z_cols = {
        "step_time_z": "step_time (us)",
        "comm_time_z": "comm_time (us)",
        "compute_time_z": "compute_time (us)",
    }
    per_rank = per_rank.with_columns(
        (_robust_z(src) if enough else pl.lit(None, pl.Float64)).alias(z)
        for z, src in z_cols.items()
    )
    return (
        per_rank.pipe(_verdicts, threshold).select(list(STRAGGLER_COLUMNS)).cast(STRAGGLER_COLUMNS)
    )


#: (label, metric column, z column, direction: +1 high stands out, -1 low stands out)
_SIGNALS = (
    ("slow steps", "step_time (us)", "step_time_z", 1),
    ("short collective waits", "comm_time (us)", "comm_time_z", -1),
    ("slow computation", "compute_time (us)", "compute_time_z", 1),
)


def _fmt_us(x: pl.Expr) -> pl.Expr:
    """Whole microseconds as text, thousands separated as every table's numbers (evidence in
    a verdict, not a table cell): the digits reversed, a comma after each three, back."""
    digits = x.round(0).cast(pl.Int64).cast(pl.String).str.reverse()
    grouped = digits.str.replace_all(r"(\d{3})", "${1},").str.strip_chars_end(",").str.reverse()
    return grouped + pl.lit(" us")


def _verdicts(per_rank: pl.DataFrame, threshold: float) -> pl.DataFrame:
    """`straggler` and `reason`, with the evidence: a signal counts when its robust z is past
    `threshold` and the rank is also at least the floor (MIN_STEP_SHARE of the median step,
    MIN_DIFF_US) from the median. A signal past the z cut but under the floor is named as
    noise, so a reader sees why a rank that looks odd was not flagged."""
    step = pl.col("step_time (us)").median()
    floor = pl.max_horizontal(step * MIN_STEP_SHARE, pl.lit(MIN_DIFF_US))
    flagged, noise = [], []
    for label, col, z, sign in _SIGNALS:
        x = pl.col(col)
        diff = x - x.median()
        past_z = (pl.col(z) * sign >= threshold).fill_null(False)
        big = diff.abs() >= floor
        evidence = (
            pl.lit(f"{label}: ")
            + _fmt_us(x)
            + pl.lit(" vs median ")
            + _fmt_us(x.median())
            + pl.lit(" (")
            + pl.when(diff >= 0).then(pl.lit("+")).otherwise(pl.lit("-"))
            + _fmt_us(diff.abs())
            + pl.lit(", ")
            + (diff.abs() / step * 100).round(1).cast(pl.String)
            + pl.lit("% of a step)")
        )
        flagged.append(pl.when(past_z & big).then(evidence))
        noise.append(pl.when(past_z & ~big).then(evidence + pl.lit(": under the noise floor")))
    hits = pl.concat_list(flagged).list.drop_nulls()
    quiet = pl.concat_list(noise).list.drop_nulls()
    return (
        per_rank.with_columns(hits.alias("hits"), quiet.alias("quiet"))
        .with_columns(
            (pl.col("hits").list.len() > 0).alias("straggler"),
            pl.when(pl.col("hits").list.len() > 0)
            .then(pl.col("hits").list.join("; "))
            .otherwise(pl.col("quiet").list.join("; "))
            .alias("reason"),
        )
        .drop("hits", "quiet")
    )


def potential_stragglers(candidates: pl.DataFrame, num_candidates: int = 2) -> list[int]:
    """HTA's `get_potential_stragglers` answer from `straggler_candidates`' table: the flagged
    ranks, the highest step-time z-score first, at most `num_candidates`."""
    flagged = candidates.filter(pl.col("straggler"))
    flagged = flagged.sort(["step_time_z", "rank"], descending=[True, False], nulls_last=True)
    return flagged["rank"].head(max(num_candidates, 1)).to_list()


def trace_duration(
    ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False
) -> dict[int, float]:
    """Per rank, last event start minus first event start in HTA's view (us); ranks whose view
    is empty are left out (the oracle's `trace_duration_per_rank`)."""
    out = {}
    for rank, view in hta_view(ranks, hta_compat=hta_compat, columns=()).items():
        if not view.is_empty():
            out[rank] = float(view.select(us(pl.col("start").max() - pl.col("start").min())).item())
    return out
