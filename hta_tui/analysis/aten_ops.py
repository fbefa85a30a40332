"""ATen ops, the kernels they launch, and the delays before those launches run.

HTA's `get_aten_op_kernels_and_delay(ranks, sort_by)`: every kernel launch (runtime or driver
call named `cuda*LaunchKernel*`, `cuLaunchKernel*` or `runFunction*`, and by default ROCm's
`hip*LaunchKernel*`) that lies within an ATen op (a name starting with "aten::") is charged to
the innermost such op, HTA's "deepest" one: the containing op that starts last. Per op
instance, the kernel names in launch order make its `kernel_sequence` (" -> "); its launch
delay is the first launch's start minus the op's start, its runtime delay the first kernel's
start minus the first launch's start. Per (op name, sequence): `occurrence_count`,
`avg_aten_op_launch_delay` and `avg_runtime_delay` (us, rounded to 3 decimals like HTA),
sorted by `sort_by` (descending, like HTA), then op name and sequence.

HTA loops over launches in Python; here the containing ops come from one inequality join and the
rest is group-bys. Differences, each on purpose:

* DEVIATION (default mode): only ops on the launch's own thread (pid, tid) contain it. HTA
  searches every thread, so an ATen op that merely overlaps in time on another thread (the
  backward thread, a data-loader) can take the launch. With `hta_compat=True` any thread counts.
* DEVIATION (default mode): among containing ops with the same start, HTA takes the first in
  the file, which in Kineto files is the outer one (`aten::matmul` over its `aten::mm`); we take
  the shorter, inner one (then the later in the file). `hta_compat=True` takes HTA's.
* A launch without a kernel in the view is skipped (HTA raises "can only convert an array of
  size 1"); a launch with several GPU events lists them all, by start.
* One table for every rank with a `rank` column (HTA returns one per rank, and from the second
  rank on its tables also hold the launches of the ranks before: its list is never reset).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from hta_tui.analysis.hta_view import profiler_step_names, rank_view
from hta_tui.analysis.per_rank import divided_as_alone, tagged
from hta_tui.analysis.sequences import kernel_links

COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "aten_op_name": pl.String(),
    "kernel_sequence": pl.String(),
    "occurrence_count": pl.Int64(),
    "avg_aten_op_launch_delay": pl.Float64(),
    "avg_runtime_delay": pl.Float64(),
}

#: HTA's KERNEL_LAUNCH_CATEGORY_PATTERN, matched at the start of the name (`str.match`).
LAUNCH_PATTERN = r"^(cuda.*LaunchKernel|cuLaunchKernel|runFunction)"
#: DEVIATION (default mode): ROCm's launches too (hipLaunchKernel, hipExtLaunchKernel,
#: hipModuleLaunchKernel ...); HTA's pattern has none, so a ROCm trace had no row.
ALL_LAUNCHES = r"^(cuda.*LaunchKernel|cuLaunchKernel|hip.*LaunchKernel|runFunction)"


#: Past this many ns of laid-out time the offsets could overflow Int64: the ranks go one at
#: a time instead (a rank whose clock jumps by decades, as a broken file's can, then costs
#: only itself, as it did alone).
_MAX_LAYOUT = 2**62


def _one_rank(frame: pl.DataFrame) -> bool:
    """Whether every row of `frame` (not empty) is one rank's, as a worker's are: its joins
    and layout need no rank key."""
    ranks = frame["rank"]
    return ranks.null_count() == 0 and bool(ranks.min() == ranks.max())


def _with_offsets(rows: pl.DataFrame, *, same_thread: bool) -> pl.DataFrame | None:
    """`rows` with `__off`, a time offset per rank and (pid, tid) so one inequality join keeps
    launches and ops of a thread together: each rank's threads (or the rank as one, when not
    `same_thread`) are laid one after another, each as long as the rank's span, and the ranks
    one after another, so times of different threads or ranks land in disjoint ranges. None
    when several ranks' layout would pass `_MAX_LAYOUT`."""
    lo = pl.min_horizontal(pl.col("start").min(), pl.col("end").min())
    hi = pl.max_horizontal(pl.col("start").max(), pl.col("end").max())
    who = pl.struct(pl.col("pid").fill_null(-1), pl.col("tid").fill_null(-1))
    if _one_rank(rows):
        # one rank (a worker's): its base is 0, no group-by or join of every row
        thread = who.rank("dense").cast(pl.Int64) if same_thread else pl.lit(1, pl.Int64)
        return rows.with_columns((thread * (hi - lo + 1) - lo).alias("__off"))
    if same_thread:
        rows = rows.with_columns(who.rank("dense").over("rank").cast(pl.Int64).alias("__t"))
    else:
        rows = rows.with_columns(pl.lit(1, pl.Int64).alias("__t"))
    per_rank = (
        rows.group_by("rank")
        .agg(lo.alias("__lo"), (hi - lo + 1).alias("__span"), pl.col("__t").max().alias("__n"))
        .sort("rank")
        .with_columns(
            (pl.col("__span") * (pl.col("__n") + 1))
            .cum_sum()
            .shift(1, fill_value=0)
            .alias("__base")
        )
    )
    length = per_rank.select(
        (pl.col("__span").cast(pl.Float64) * (pl.col("__n") + 1)).sum()
    ).item()  # (in floats: no overflow while asking whether it would)
    if per_rank.height > 1 and (length or 0) > _MAX_LAYOUT:
        return None
    return (
        rows.join(per_rank, on="rank", how="left", maintain_order="left")
        .with_columns(
            (pl.col("__base") + pl.col("__t") * pl.col("__span") - pl.col("__lo")).alias("__off")
        )
        .drop("__t", "__lo", "__span", "__n", "__base")
    )


def _ranks_table(view: pl.DataFrame, *, hta_compat: bool) -> pl.DataFrame:
    """rank, aten_op_name, kernel_sequence, occurrence_count and the average delays (us) per
    rank, op name and kernel sequence, from the ranks' views in one frame (`rank` first):
    every rank in the same few queries, each key with its rank (a query per rank cost a
    rank of a dozen events ~40 queries)."""
    if view.is_empty():
        return pl.DataFrame()
    same_thread = not hta_compat
    # The columns used (a select costs nothing; every filter below copies what is left).
    view = view.select("rank", "idx", "name", "start", "end", "pid", "tid", "stream", "correlation")
    # Only launches and ATen ops need the thread offset: computed over just those rows. Every
    # launch name starts with "cu", "hip" or "runFunction": prefix tests (cheap) pick the few
    # rows the pattern then has to look at.
    name = pl.col("name").str
    prefixes = ("cu", "runFunction") if hta_compat else ("cu", "hip", "runFunction")
    maybe_launch = view.filter(pl.any_horizontal(name.starts_with(p) for p in prefixes))
    pattern = LAUNCH_PATTERN if hta_compat else ALL_LAUNCHES
    rows = pl.concat(
        [
            maybe_launch.filter(name.contains(pattern)).with_columns(
                pl.lit(True).alias("__launch")
            ),
            view.filter(name.starts_with("aten::")).with_columns(pl.lit(False).alias("__launch")),
        ]
    )
    if rows.is_empty():
        return pl.DataFrame()
    laid = _with_offsets(rows, same_thread=same_thread)
    if laid is None:  # one rank at a time (`_MAX_LAYOUT`)
        parts = [
            _ranks_table(v, hta_compat=hta_compat)
            for v in view.partition_by("rank", maintain_order=True)
        ]
        kept = [t for t in parts if t.width]
        return pl.concat(kept, how="diagonal_relaxed") if kept else pl.DataFrame()
    rows = laid
    # Names travel as codes (equal names, equal codes): sorts, joins and group-bys of long
    # kernel names cost more than the rest; the few distinct sequences get their names last.
    code = pl.col("name").cast(pl.Categorical).to_physical()
    if _one_rank(view):  # (correlations joined alone: a join on two keys cost ~2x)
        kernels = kernel_links(view.drop("rank"), min_stream=0, carry=("name", "start"))
        rank = pl.lit(view["rank"][0], dtype=view.schema["rank"]).alias("rank")
        kernels = kernels.select(rank, pl.all())
    else:
        kernels = kernel_links(view, min_stream=0, carry=("name", "start"), by=("rank",))
    kernel_names = kernels.select("rank", pl.col("idx").alias("k_idx"), "name")
    launches = (
        rows.filter("__launch")
        .select(
            "rank",
            pl.col("idx").alias("launcher"),
            pl.col("start").alias("l_start"),
            (pl.col("start") + pl.col("__off")).alias("l_lo"),
            (pl.col("end") + pl.col("__off")).alias("l_hi"),
        )
        .join(
            kernels.select(
                "rank",
                "launcher",
                pl.col("idx").alias("k_idx"),
                code.alias("k_code"),
                pl.col("start").alias("k_start"),
            ),
            on=["rank", "launcher"],
        )
    )
    op_rows = rows.filter(~pl.col("__launch"))
    ops = op_rows.select(
        "rank",
        pl.col("idx").alias("op"),
        code.alias("op_code"),
        pl.col("start").alias("o_start"),
        (pl.col("end") - pl.col("start")).alias("o_dur"),
        (pl.col("start") + pl.col("__off")).alias("o_lo"),
        (pl.col("end") + pl.col("__off")).alias("o_hi"),
    )
    if launches.is_empty() or ops.is_empty():
        return pl.DataFrame()
    deepest = _innermost_ops(
        launches.select("rank", "launcher", "l_lo", "l_hi").unique(), ops, same_thread
    )
    charged = launches.join(deepest, on=["rank", "launcher"]).sort(
        ["rank", "op", "launcher", "k_start"]
    )
    per_op = (
        charged.group_by("rank", "op", maintain_order=True)
        .agg(pl.col("op_code", "o_start", "l_start", "k_start").first(), "k_code", "k_idx")
        .group_by("rank", "op_code", "k_code")
        .agg(
            pl.len().alias("occurrence_count"),
            (pl.col("l_start") - pl.col("o_start")).mean().alias("__launch"),
            (pl.col("k_start") - pl.col("l_start")).mean().alias("__runtime"),
            pl.col("op").first(),
            pl.col("k_idx").first(),
        )
        .with_row_index("group")
    )
    # ns -> us (`hta_view.us`), as each rank's table alone divided them (`divided_as_alone`)
    alone = pl.len().over("rank") == 1
    per_op = per_op.with_columns(
        divided_as_alone(pl.col(f"__{c}"), 1000, alone).round(3).alias(name)
        for c, name in (("launch", "avg_aten_op_launch_delay"), ("runtime", "avg_runtime_delay"))
    )
    sequences = (
        per_op.select("group", "rank", "k_idx")
        .explode("k_idx")
        .join(kernel_names, on=["rank", "k_idx"], maintain_order="left")
        .group_by("group", maintain_order=True)
        .agg(pl.col("name").str.join(" -> ").alias("kernel_sequence"))
    )
    names = op_rows.select("rank", pl.col("idx").alias("op"), pl.col("name").alias("aten_op_name"))
    return (
        per_op.join(sequences, on="group")
        .join(names, on=["rank", "op"])
        .select(
            "rank",
            "aten_op_name",
            "kernel_sequence",
            "occurrence_count",
            "avg_aten_op_launch_delay",
            "avg_runtime_delay",
        )
    )


def _innermost_ops(launches: pl.DataFrame, ops: pl.DataFrame, same_thread: bool) -> pl.DataFrame:
    """rank, launcher -> op, op_code, o_start of the innermost op containing each launch.

    The innermost is the containing op that starts last; among equal starts the shorter, then
    the later in the file (`same_thread`), else HTA's first in the file. Usually it is simply
    the last op to start before the launch (one as-of join, with ops ordered so that the last
    of equal starts is the preferred one); only launches that op does not contain, but some
    earlier op may, go through the inequality join over every containing op. (Ranks and
    threads lie apart in time, `_with_offsets`: no join reaches another rank's ops.)
    """
    keys = ["o_lo", "o_dur", "op"] if same_thread else ["o_lo", "op"]
    desc = [False, True, False] if same_thread else [False, True]
    ordered = (  # __reach: the latest end of any op starting up to here
        ops.drop("rank")
        .sort(keys, descending=desc)
        .with_columns(pl.col("o_hi").cum_max().alias("__reach"))
    )
    last_started = (
        launches.sort("l_lo")
        .join_asof(
            ordered,
            left_on="l_lo",
            right_on="o_lo",
            strategy="backward",
            check_sortedness=False,
        )
        .with_columns((pl.col("o_hi") >= pl.col("l_hi")).fill_null(False).alias("__in"))
    )
    cols = ["rank", "launcher", "op", "op_code", "o_start"]
    found = last_started.filter("__in").select(cols)
    # A launch that no op starting before it reaches past is in no op at all.
    rest = last_started.filter(~pl.col("__in") & (pl.col("__reach") >= pl.col("l_hi")))
    rest = rest.select("rank", "launcher", "l_lo", "l_hi")
    if rest.is_empty():
        return found
    at = _last_holding(ordered, rest)
    if at is not None:
        # the preferred containing op: the last in `ordered` (the inequality join's first)
        fallback = pl.concat(
            [rest.select("rank", "launcher"), ordered[at].select(cols[2:])], how="horizontal"
        ).sort("rank", "launcher")
        return pl.concat([found, fallback])
    pairs = rest.join_where(
        ops.drop("rank"), pl.col("o_lo") <= pl.col("l_lo"), pl.col("o_hi") >= pl.col("l_hi")
    )
    if same_thread:
        order = (["rank", "launcher", "o_start", "o_dur", "op"], [False, False, True, False, True])
    else:
        order = (["rank", "launcher", "o_start", "op"], [False, False, True, False])
    fallback = (
        pairs.sort(order[0], descending=order[1])
        .group_by("rank", "launcher", maintain_order=True)
        .first()
        .select(cols)
    )
    return pl.concat([found, fallback])


def _last_holding(ordered: pl.DataFrame, rest: pl.DataFrame) -> np.ndarray | None:
    """Row in `ordered` (ops by o_lo) of the last op that starts by each launch of `rest`
    and ends no earlier than it (every such op holds it, as no other thread's or rank's op
    can: `_with_offsets`); None where a time is null (the inequality join then). The last
    row at or before the launch's start whose end reaches it: from there, back over spans
    of 2^k rows whose latest end falls short (a table of the latest end of every span of
    2^k rows ending at each row), k from high to low: ~17 vectorised steps for 100k ops,
    not a pair of every launch and every op around it."""
    times = (ordered["o_lo"], ordered["o_hi"], rest["l_lo"], rest["l_hi"])
    if any(t.null_count() for t in times):
        return None
    o_lo, o_hi, l_lo, l_hi = (t.to_numpy() for t in times)
    n = o_hi.size
    at = np.searchsorted(o_lo, l_lo, side="right") - 1
    spans = [o_hi]  # spans[k][i]: latest end of rows (i - 2^k, i]
    while (1 << len(spans)) <= n:
        k = 1 << (len(spans) - 1)
        prev = spans[-1]
        spans.append(np.concatenate([prev[:k], np.maximum(prev[k:], prev[:-k])]))
    for k in range(len(spans) - 1, -1, -1):
        inside = at >= 0
        short = inside.copy()
        short[inside] = spans[k][at[inside]] < l_hi[inside]
        at[short] -= 1 << k
    if (at < 0).any():  # (`rest` holds only launches some op reaches past)
        return None
    return at


def aten_op_kernels_and_delay(
    ranks: Mapping[int, pl.DataFrame],
    *,
    rank: int | None = None,
    sort_by: Sequence[str] = ("occurrence_count",),
    hta_compat: bool = False,
) -> pl.DataFrame:
    """HTA's `get_aten_op_kernels_and_delay` (module doc), for `rank` or every rank (None).

    Columns: rank, aten_op_name, kernel_sequence, occurrence_count, avg_aten_op_launch_delay,
    avg_runtime_delay (us). Empty, with the columns, without launches inside ATen ops (CPU-only
    ranks, a rank not in the job).
    """
    chosen = sorted(r for r in ranks if rank is None or r == rank)
    steps = profiler_step_names(ranks)  # HTA's step filter looks at the whole job
    views = [
        (r, rank_view(ranks[r], steps, hta_compat=hta_compat, columns=("pid", "tid")))
        for r in chosen
    ]
    table = _ranks_table(tagged(views), hta_compat=hta_compat)
    if table.is_empty():
        return pl.DataFrame(schema=COLUMNS)
    keys = list(sort_by)
    ties = [c for c in ("aten_op_name", "kernel_sequence") if c not in keys]
    return (
        table.select(list(COLUMNS))
        .cast(COLUMNS)
        .sort(["rank", *keys, *ties], descending=[False, *[True] * len(keys), *[False] * len(ties)])
    )
