"""Trace diff: what changed between a control and a test trace, op by op and kernel by kernel.

`compare_traces` and `ops_diff` are HTA's `TraceDiff.compare_traces` / `TraceDiff.ops_diff`
(hta 0.5) on one rank per side (HTA's default: the first rank); `control` and `test` are that
rank's `events` frame. How HTA gets there, and so how we do:

1. Each side is read as HTA's `LabeledTrace` reads it: `Trace.parse_traces()` only, so rows
   without a category and the "Trace" span are dropped and, with `hta_compat=True`,
   timestamps are rounded (see `hta_view`), but there is NO ProfilerStep filter and no rank
   alignment (`load_traces` would do those; TraceDiff never calls it). The last step is
   compared like any other.
2. Iterations (`hta.common.trace.add_iteration`): a CPU event belongs to `ProfilerStep#N` when
   `step.start <= event.start < step.end`; a GPU event belongs to the iteration of the CPU event
   that launched it (same `correlation`, the last such CPU event in file order); anything else
   has no iteration and is never compared (GPU user annotations, kernels without a launch).
3. The compared iteration defaults to the smallest ProfilerStep number of the side (HTA's
   `LabeledTrace.iterations()[:1]`), the first complete one. A side without ProfilerStep has
   no iteration: HTA raises, we compare it as empty; an iteration the side does not have is
   empty too (HTA raises). "Every complete iteration" (`average_iterations`,
   `all_iterations`) means every step but the last one when there are several: the rest of
   HTA (and of this app) treats the last step as cut off by the end of the trace.
4. Device type: CPU = events without a stream, GPU = the rest (HTA's `stream == -1`).
   DEVIATION (default mode only, none in the reference traces): a CPU-side kind that carries a
   `stream` arg (a Triton launch's cpu_op) is a CPU event, takes its iteration by time, and
   counts under CPU; with `hta_compat=True` it is a GPU event as in HTA (iteration by
   correlation; `stream == 0` gets none, HTA's `stream > 0`). A GPU-side annotation
   (`gpu_user_annotation`, often without a stream) is no CPU op by default: it has no launch,
   so no iteration, and is never compared (HTA counts `ProfilerStep#N` twice there).
5. Per side, count and total duration per name (or `shorten_name`), outer-joined on the name,
   missing = 0, `diff_* = test - control`, category "+", "-" or "=" from the count change.
   Rows in HTA's order (pandas' outer concat): the control's names sorted, then the names
   only the test has, sorted.
   Durations are float microseconds (HTA: the integer `dur` column in microseconds; exact
   nanoseconds here by default, HTA's rounded ones with `hta_compat=True`, see `hta_view`).

6. DEVIATION (default mode only): a Python frame (`file(line): function`, `with_stack=True`)
   that one side has and the other has not, with a frame of the same file and function on
   the other side, is one row named with both lines (`module.py(1743->1750): _call_impl`):
   two torch versions number the same code differently, and HTA shows it "gone" and "new".
   `kernel_diff_detail` takes that name too. `hta_compat=True` keeps HTA's two rows.

Other deviations (both modes, no effect on the reference traces): only CPU-side ProfilerStep
events define iterations (HTA would also use a `gpu_user_annotation` named ProfilerStep#N,
whose GPU-clock span says nothing about CPU events); steps are assumed not to overlap (HTA takes
the last step in file order that contains the event, we take the latest-starting one).

Beyond HTA: `match_shapes` (match by name and recorded input shapes), `average_iterations`
(every complete iteration, counts and durations per iteration), `breakdown_diff` (temporal,
kernel-type and per-kernel statistics side by side) and `kernel_diff_detail` (one op or
kernel, both sides, with the kernels a CPU op launches).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import polars as pl

from hta_tui.analysis.hta_view import (
    CPU_KINDS,
    kernel_type,
    rank_view,
    us,
)
from hta_tui.analysis.kernels import (
    ANALYSED_TYPES,
    STATS_COLUMNS,
    duration_stats,
    gpu_table,
    kernel_duration_stats,
    kernel_type_breakdown,
)
from hta_tui.analysis.self_time import with_self_dur
from hta_tui.analysis.temporal import COLUMNS as TEMPORAL_COLUMNS
from hta_tui.analysis.temporal import temporal_breakdown

DeviceType = Literal["ALL", "CPU", "GPU"]
Iteration = int | Sequence[int] | None

_STEP_RE = r"^ProfilerStep\s*#\s*(\d+)"
#: Input columns the diff needs beyond `hta_view.CORE_COLUMNS`.
_VIEW_COLUMNS = ("pid", "tid", "external_id", "input_dims")

CONTROL = "Control"
TEST = "Test"

CATEGORIES: tuple[str, ...] = ("added", "deleted", "increased", "decreased", "unchanged")


# --------------------------------------------------------------------------------------------
# iterations


def _launcher_mask() -> pl.Expr:
    """HTA's CPUOperatorFilter: not (stream >= 0 and correlation >= 0), not a device sync."""
    on_gpu = (
        (pl.col("stream").fill_null(-1) >= 0) & (pl.col("correlation").fill_null(-1) >= 0)
    ) | pl.col("name").is_in(("Event Sync", "Context Sync"))
    return ~on_gpu


def _cpu_side(*, hta_compat: bool) -> pl.Expr:
    """Events that take their iteration by time (HTA: `stream < 0`); see module point 4."""
    no_stream = pl.col("stream").is_null() | (pl.col("stream") < 0)
    if hta_compat:
        return no_stream
    # a GPU-side annotation (`ProfilerStep#6` on the GPU's clock) is no CPU op, even without
    # a stream: counted as one, step 6 came out twice, 82 ms inside a 47 ms step
    on_gpu = pl.col("kind") == "gpu_annotation"
    return (no_stream & ~on_gpu) | pl.col("kind").is_in(CPU_KINDS)


def _gpu_side(*, hta_compat: bool) -> pl.Expr:
    """Events that take their iteration from their launch (HTA: `stream > 0`)."""
    if hta_compat:
        return pl.col("stream").fill_null(-1) > 0
    return ~_cpu_side(hta_compat=False)


def _step_number() -> pl.Expr:
    return pl.col("name").str.extract(_STEP_RE, 1).cast(pl.Int64)


def step_numbers(events: pl.DataFrame) -> list[int]:
    """Sorted ProfilerStep numbers named in a side's events (HTA's `iterations()`)."""
    if events.is_empty():
        return []
    return (
        events.select(_step_number().alias("n"))
        .filter(pl.col("n").is_not_null())
        .get_column("n")
        .unique()
        .sort()
        .to_list()
    )


def with_iterations(view: pl.DataFrame, *, hta_compat: bool = False) -> pl.DataFrame:
    """Add `iteration` (Int64, null when none) to a `rank_view`, as HTA's `add_iteration`."""
    cpu = _cpu_side(hta_compat=hta_compat)
    steps = (
        view.filter(cpu & pl.col("name").str.contains(_STEP_RE))
        .select(
            pl.col("start").alias("_step_start"),
            pl.col("end").alias("_step_end"),
            _step_number().alias("_step"),
        )
        .sort("_step_start")
    )
    timed = (
        view.select("idx", "start")
        .sort("start")
        .join_asof(steps, left_on="start", right_on="_step_start", strategy="backward")
        .select(
            "idx",
            pl.when(pl.col("start") < pl.col("_step_end"))
            .then(pl.col("_step"))
            .otherwise(None)
            .alias("_t_iter"),
        )
    )
    out = view.join(timed, on="idx", how="left", maintain_order="left").with_columns(
        pl.when(cpu).then(pl.col("_t_iter")).otherwise(None).alias("iteration")
    )
    launches = (
        out.filter(_launcher_mask() & pl.col("correlation").is_not_null())
        .sort("idx")
        .group_by("correlation")
        .agg(pl.col("iteration").last().alias("_l_iter"))
    )
    out = out.join(launches, on="correlation", how="left", maintain_order="left")
    return out.with_columns(
        pl.when(cpu)
        .then(pl.col("iteration"))
        .when(_gpu_side(hta_compat=hta_compat))
        .then(pl.col("_l_iter"))
        .otherwise(None)
        .cast(pl.Int64)
        .alias("iteration")
    ).drop("_t_iter", "_l_iter")


def side_view(events: pl.DataFrame, *, hta_compat: bool = False) -> pl.DataFrame:
    """One side's events as HTA's TraceDiff sees them (module point 1) with `iteration`."""
    view = rank_view(events, set(), hta_compat=hta_compat, columns=_VIEW_COLUMNS, step_filter=False)
    return with_iterations(view, hta_compat=hta_compat)


def complete_iterations(events: pl.DataFrame) -> list[int]:
    """The side's ProfilerStep numbers but the last one, or the only one (module point 3)."""
    steps = step_numbers(events)
    return steps[:-1] if len(steps) > 1 else steps


def _resolve(events: pl.DataFrame, iteration: Iteration, every: bool) -> list[int]:
    """The iteration numbers to use on one side (module point 3)."""
    if iteration is not None:
        return [int(iteration)] if isinstance(iteration, int) else [int(i) for i in iteration]
    if every:
        return complete_iterations(events)
    return step_numbers(events)[:1]


def iteration_events(
    events: pl.DataFrame,
    *,
    iteration: Iteration = None,
    all_iterations: bool = False,
    hta_compat: bool = False,
) -> pl.DataFrame:
    """The events of one ProfilerStep iteration (or of several), with an `iteration` column.

    Default: HTA's choice, the first complete iteration (module point 3); `iteration` picks
    one number or a list; `all_iterations=True` every complete iteration. Rows are HTA's view
    (`rank_view` columns: start, end, dur in ns, gpu, kernel_type) in file order. No
    ProfilerStep, or an iteration the trace does not have: an empty frame.
    """
    view = side_view(events, hta_compat=hta_compat)
    iters = _resolve(events, iteration, all_iterations)
    return view.filter(pl.col("iteration").is_in(iters))


# --------------------------------------------------------------------------------------------
# compare_traces / ops_diff


def _shorten(name: str) -> str:
    """HTA's `hta.utils.utils.shorten_name`, character for character."""
    if name.startswith(("Memcpy", "Memset", "dma")):
        return name
    if name.find("<") < 0 and name.find("(") < 0:
        return name
    stack: list[str] = []
    for c in name.replace("->", ""):
        if c == ">":  # generic template arguments
            while stack and stack[-1] != "<":
                stack.pop()
            if stack and stack[-1] == "<":
                stack.pop()
        elif c == ")":  # arguments or comments
            while stack and stack[-1] != "(":
                stack.pop()
            if stack and stack[-1] == "(":
                stack.pop()
        else:
            stack.append(c)
    return "".join(stack).split(" ")[-1]


def short_names(names: pl.Series) -> pl.DataFrame:
    """name -> short_name for the distinct names (a few hundred, never one per event)."""
    uniq = names.drop_nulls().unique()
    return pl.DataFrame(
        {"name": uniq, "short_name": [_shorten(n) for n in uniq.to_list()]},
        schema={"name": pl.String, "short_name": pl.String},
    )


def _device_mask(device_type: str, *, hta_compat: bool) -> pl.Expr:
    kind = str(device_type).upper().removeprefix("DEVICETYPE.")
    if kind == "ALL":
        return pl.lit(True)
    cpu = _cpu_side(hta_compat=hta_compat)
    if kind == "CPU":
        return cpu
    if kind == "GPU":
        return ~cpu
    raise ValueError(f"device_type must be ALL, CPU or GPU, not {device_type!r}")


def _summary(
    events: pl.DataFrame,
    iteration: Iteration,
    *,
    device_type: str,
    use_short_name: bool,
    average_iterations: bool,
    match_shapes: bool,
    hta_compat: bool,
    self_time: bool = False,
) -> pl.DataFrame:
    """key columns, counts, total_duration (us) of one side's chosen iteration(s); with
    `self_time`, CPU events count their self time (self_time.py)."""
    view = side_view(events, hta_compat=hta_compat)
    if self_time:
        view = with_self_dur(view, _cpu_side(hta_compat=hta_compat)).with_columns(
            pl.col("self_dur").alias("dur")
        )
    iters = _resolve(events, iteration, average_iterations)
    ops = view.filter(
        pl.col("iteration").is_in(iters)
        & _device_mask(device_type, hta_compat=hta_compat)
        & pl.col("name").is_not_null()
    )
    keys = ["name", "input_dims"] if match_shapes else ["name"]
    out = ops.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("counts"), pl.col("dur").sum().alias("total_duration")
    )
    if use_short_name:
        out = (
            out.join(short_names(out["name"]), on="name", how="left")
            .drop("name")
            .rename({"short_name": "name"})
            .group_by(keys)
            .agg(pl.col("counts").sum(), pl.col("total_duration").sum())
        )
    out = out.with_columns(us(pl.col("total_duration")).alias("total_duration"))
    if average_iterations:
        n = max(len(iters), 1)
        out = out.with_columns(pl.col("counts") / n, pl.col("total_duration") / n)
    return out


side_summary = _summary  # one side of `compare_traces` (`compare_summaries`)

#: A Python frame's name (`with_stack=True`): `file(first line): function`.
_FRAME_RE = r"^(.*)\((\d+)\): (.+)$"
#: A frame matched across the sides by file and function: `file(control line->test line): f`.
_MOVED_RE = r"^(.*)\((\d+)->(\d+)\): (.+)$"


def _frame_parts(names: pl.Series) -> pl.DataFrame:
    """name, file, line, function and the frame's rank among the side's frames of one file
    and function (by line), for the names that are Python frames."""
    return (
        pl.DataFrame({"name": names.unique()}, schema={"name": pl.String})
        .with_columns(
            pl.col("name").str.extract(_FRAME_RE, 1).alias("file"),
            pl.col("name").str.extract(_FRAME_RE, 2).cast(pl.Int64).alias("line"),
            pl.col("name").str.extract(_FRAME_RE, 3).alias("function"),
        )
        .filter(pl.col("line").is_not_null())
        .with_columns(
            pl.col("line").rank("ordinal").over("file", "function").alias("nth"),
            pl.len().over("file", "function").alias("of"),
        )
    )


def moved_frames(control: pl.Series, test: pl.Series) -> pl.DataFrame:
    """Python frames one side has and the other has not, paired by file and function where
    only their line numbers differ (two torch versions, the same code): name (control),
    test_name, and `joined`, the row's name with both lines (`module.py(1743->1750): f`).
    Where a file has several functions of that name gone and new, they pair in line order,
    and only when both sides have as many of them."""
    c = _frame_parts(control.filter(~control.is_in(test.implode())))
    t = _frame_parts(test.filter(~test.is_in(control.implode())))
    pairs = c.join(t, on=["file", "function", "nth", "of"], how="inner", suffix="_t")
    return pairs.select(
        "name",
        pl.col("name_t").alias("test_name"),
        pl.format("{}({}->{}): {}", "file", "line", "line_t", "function").alias("joined"),
    )


def side_name(name: str, side: str) -> str:
    """The name a row of `moved_frames` has on one side (`CONTROL` or `TEST`); other names
    are the same on both."""
    found = re.match(_MOVED_RE, name)
    if found is None:
        return name
    file, c_line, t_line, function = found.groups()
    return f"{file}({c_line if side == CONTROL else t_line}): {function}"


def compare_traces(
    control: pl.DataFrame,
    test: pl.DataFrame,
    *,
    control_iteration: Iteration = None,
    test_iteration: Iteration = None,
    device_type: DeviceType = "ALL",
    use_short_name: bool = False,
    average_iterations: bool = False,
    match_shapes: bool = False,
    hta_compat: bool = False,
    self_time: bool = False,
) -> pl.DataFrame:
    """HTA's `TraceDiff.compare_traces` on one rank per side (see the module docstring).

    Columns: name, Control_counts, Control_total_duration, Test_counts, Test_total_duration,
    diff_counts, diff_duration, counts_change_categories ("+", "-", "="); durations in us;
    one row per name seen on either side, in HTA's order (module point 5). `use_short_name`
    groups by HTA's shortened names. Beyond HTA: `match_shapes=True` keys rows by (name,
    input_dims) and adds an `input_dims` column (JSON text of the op's "Input Dims", null for
    kernels and ops without recorded shapes); `average_iterations=True` takes every complete
    iteration of each side (or the listed ones) and reports counts and durations per
    iteration (counts become floats); `self_time=True` gives CPU events their self time
    (nested events' time subtracted) instead of HTA's inclusive time, so nested rows do not
    count the same time twice. Empty sides give empty frames, never exceptions.
    """
    kw = dict(
        device_type=device_type,
        use_short_name=use_short_name,
        average_iterations=average_iterations,
        match_shapes=match_shapes,
        hta_compat=hta_compat,
        self_time=self_time,
    )
    c = _summary(control, control_iteration, **kw)
    t = _summary(test, test_iteration, **kw)
    return compare_summaries(
        c,
        t,
        match_shapes=match_shapes,
        average_iterations=average_iterations,
        hta_compat=hta_compat,
    )


def compare_summaries(
    c: pl.DataFrame,
    t: pl.DataFrame,
    *,
    match_shapes: bool = False,
    average_iterations: bool = False,
    hta_compat: bool = False,
) -> pl.DataFrame:
    """`compare_traces` from each side's summary (`side_summary`, each side asked on its
    own: the registry's `diff_side_ops`)."""
    keys = ["name", "input_dims"] if match_shapes else ["name"]
    if not hta_compat:  # one row for a Python frame whose line moved (module point 6)
        moved = moved_frames(c["name"], t["name"])
        c = c.join(moved.select("name", "joined"), on="name", how="left")
        t = t.join(moved.select(pl.col("test_name").alias("name"), "joined"), on="name", how="left")
        c, t = (
            side.with_columns(pl.coalesce("joined", "name").alias("name")).drop("joined")
            for side in (c, t)
        )
    count_type = pl.Float64 if average_iterations else pl.Int64
    c = c.rename(
        {"counts": f"{CONTROL}_counts", "total_duration": f"{CONTROL}_total_duration"}
    ).with_columns(pl.lit(True).alias("_in_control"))
    t = t.rename({"counts": f"{TEST}_counts", "total_duration": f"{TEST}_total_duration"})
    comp = c.join(t, on=keys, how="full", coalesce=True, nulls_equal=True)
    value_cols = [
        f"{CONTROL}_counts",
        f"{CONTROL}_total_duration",
        f"{TEST}_counts",
        f"{TEST}_total_duration",
    ]
    comp = comp.with_columns(pl.col(value_cols).fill_null(0)).with_columns(
        pl.col(f"{CONTROL}_counts", f"{TEST}_counts").cast(count_type),
        pl.col(f"{CONTROL}_total_duration", f"{TEST}_total_duration").cast(pl.Float64),
    )
    diff = pl.col(f"{TEST}_counts") - pl.col(f"{CONTROL}_counts")
    comp = comp.with_columns(
        diff.alias("diff_counts"),
        (pl.col(f"{TEST}_total_duration") - pl.col(f"{CONTROL}_total_duration")).alias(
            "diff_duration"
        ),
    ).with_columns(
        pl.when(pl.col("diff_counts") > 0)
        .then(pl.lit("+"))
        .when(pl.col("diff_counts") < 0)
        .then(pl.lit("-"))
        .otherwise(pl.lit("="))
        .alias("counts_change_categories")
    )
    schema: dict[str, pl.DataType] = {"name": pl.String()}
    if match_shapes:
        schema["input_dims"] = pl.String()
    schema |= {
        f"{CONTROL}_counts": count_type(),
        f"{CONTROL}_total_duration": pl.Float64(),
        f"{TEST}_counts": count_type(),
        f"{TEST}_total_duration": pl.Float64(),
        "diff_counts": count_type(),
        "diff_duration": pl.Float64(),
        "counts_change_categories": pl.String(),
    }
    # HTA's row order (pandas' outer concat): the control's names sorted, then the names only
    # the test has, sorted.
    comp = comp.sort([pl.col("_in_control").is_null(), *keys], nulls_last=True)
    return comp.select(list(schema)).cast(schema)


def ops_diff(
    control: pl.DataFrame,
    test: pl.DataFrame,
    *,
    control_iteration: Iteration = None,
    test_iteration: Iteration = None,
    device_type: DeviceType = "ALL",
    use_short_name: bool = False,
    average_iterations: bool = False,
    hta_compat: bool = False,
) -> dict[str, list[str]]:
    """HTA's `TraceDiff.ops_diff`: names added, deleted, increased, decreased, unchanged.

    From `compare_traces` (same arguments; `use_short_name` and `average_iterations` are
    beyond HTA, which always uses full names): added = only in test, deleted = only in
    control, increased / decreased / unchanged = in both with more / fewer / as many
    occurrences in test. Names in `compare_traces` order.
    """
    df = compare_traces(
        control,
        test,
        control_iteration=control_iteration,
        test_iteration=test_iteration,
        device_type=device_type,
        use_short_name=use_short_name,
        average_iterations=average_iterations,
        hta_compat=hta_compat,
    )
    return ops_from_compare(df)


def ops_from_compare(df: pl.DataFrame) -> dict[str, list[str]]:
    """`ops_diff` from a `compare_traces` table (its counts only: self or inclusive time
    alike)."""
    c, t, d = pl.col(f"{CONTROL}_counts"), pl.col(f"{TEST}_counts"), pl.col("diff_counts")
    rules = {
        "added": (c == 0) & (t > 0),
        "deleted": (c > 0) & (t == 0),
        "increased": (c > 0) & (d > 0),
        "decreased": (t > 0) & (d < 0),
        "unchanged": (t > 0) & (d == 0),
    }
    return {k: df.filter(rule).get_column("name").to_list() for k, rule in rules.items()}


# --------------------------------------------------------------------------------------------
# beyond HTA: breakdowns side by side, one op or kernel in detail


def _side_by_side(
    c: pl.DataFrame, t: pl.DataFrame, keys: list[str], values: list[str], *, fill: bool
) -> pl.DataFrame:
    """Outer join on `keys`; `control_<v>`, `test_<v>`, `diff_<v>` (test - control)."""
    c = c.select(*keys, *[pl.col(v).alias(f"control_{v}") for v in values])
    t = t.select(*keys, *[pl.col(v).alias(f"test_{v}") for v in values])
    out = c.join(t, on=keys, how="full", coalesce=True, nulls_equal=True)
    cols = []
    for v in values:
        cv, tv = pl.col(f"control_{v}"), pl.col(f"test_{v}")
        if fill:
            cv, tv = cv.fill_null(0), tv.fill_null(0)
        cols += [cv.alias(f"control_{v}"), tv.alias(f"test_{v}"), (tv - cv).alias(f"diff_{v}")]
    return out.select(*keys, *cols)


def _restrict(events: pl.DataFrame, iteration: Iteration, *, hta_compat: bool) -> pl.DataFrame:
    """The raw events of the chosen iteration(s), for the breakdowns to re-read.

    The ProfilerStep events themselves are left out: they are CPU annotations, no breakdown
    counts them, and with two of them left the breakdowns' view would apply HTA's last-step
    filter to the selection.
    """
    idx = iteration_events(events, iteration=iteration, hta_compat=hta_compat)["idx"]
    return events.filter(
        pl.col("idx").is_in(idx.implode()) & ~pl.col("name").str.contains(_STEP_RE).fill_null(False)
    )


def breakdown_diff(
    control: pl.DataFrame,
    test: pl.DataFrame,
    *,
    iteration_only: bool = False,
    control_iteration: Iteration = None,
    test_iteration: Iteration = None,
    hta_compat: bool = False,
) -> dict[str, pl.DataFrame]:
    """The two sides' GPU breakdowns side by side (not an HTA analysis).

    Over each side's whole trace (HTA's view), or with `iteration_only=True` over the
    iteration `compare_traces` compares (default the first complete one, or the given ones).
    Returns three frames, each with control_*, test_* and diff_* (test - control) columns:

    - "temporal": metric (idle_time(us), compute_time(us), non_compute_time(us),
      kernel_time(us) and the three percentages), control, test, diff (null on a side
      without GPU events);
    - "kernel_type": kernel_type (HTA's "X overlapping Y" labels), sum (us) and
      percentage per side, sorted by the larger side's time;
    - "kernels": name, cat, kernel_type and count, sum, mean, median, min, max (us) of every
      GPU event name (`kernel_duration_stats`), missing counts and sums 0, other statistics
      null on the side that lacks the kernel; sorted by |diff_sum| descending.
    """
    if iteration_only:
        control = _restrict(control, control_iteration, hta_compat=hta_compat)
        test = _restrict(test, test_iteration, hta_compat=hta_compat)

    temporal_df = temporal_sides(
        side_temporal(control, hta_compat=hta_compat), side_temporal(test, hta_compat=hta_compat)
    )

    def types(events: pl.DataFrame) -> pl.DataFrame:
        gpu = gpu_table({0: events}, hta_compat=hta_compat)
        return kernel_type_breakdown(gpu, ANALYSED_TYPES, hta_compat=hta_compat)

    type_df = _side_by_side(
        types(control), types(test), ["kernel_type"], ["sum", "percentage"], fill=True
    )
    type_df = type_df.sort(
        pl.max_horizontal("control_sum", "test_sum"), "kernel_type", descending=[True, False]
    )

    stat_cols = ["count", "sum", "mean", "median", "min", "max"]

    def stats(events: pl.DataFrame) -> pl.DataFrame:
        return kernel_duration_stats({0: events}, hta_compat=hta_compat)

    cs, ts = stats(control), stats(test)
    cats = (
        pl.concat([cs.select("name", "cat"), ts.select("name", "cat")])
        .unique("name", keep="first", maintain_order=True)
        .with_columns(
            kernel_type().cast(pl.String).alias("kernel_type"),
        )
    )
    counts = _side_by_side(cs, ts, ["name"], ["count", "sum"], fill=True)
    rest = _side_by_side(cs, ts, ["name"], ["mean", "median", "min", "max"], fill=False)
    kernels = (
        counts.join(rest, on="name", how="left")
        .join(cats, on="name", how="left")
        .with_columns(pl.col("^(control|test|diff)_count$").cast(pl.Int64))
    )
    order = ["name", "cat", "kernel_type"] + [
        f"{side}_{s}" for s in stat_cols for side in ("control", "test", "diff")
    ]
    kernels = kernels.select(order).sort(
        pl.col("diff_sum").abs(), "name", descending=[True, False], nulls_last=True
    )
    return {"temporal": temporal_df, "kernel_type": type_df, "kernels": kernels}


def side_temporal(events: pl.DataFrame, *, hta_compat: bool = False) -> pl.DataFrame:
    """One side's temporal breakdown as metric, value (null without GPU events)."""
    metrics = [c for c in TEMPORAL_COLUMNS if c != "rank"]
    tb = temporal_breakdown({0: events}, hta_compat=hta_compat)
    row = tb.row(0, named=True) if tb.height else {}
    return pl.DataFrame(
        {"metric": metrics, "value": [row.get(m) for m in metrics]},
        schema={"metric": pl.String, "value": pl.Float64},
    )


def temporal_sides(control: pl.DataFrame, test: pl.DataFrame) -> pl.DataFrame:
    """`breakdown_diff`'s "temporal" from each side's `side_temporal`."""
    return _side_by_side(control, test, ["metric"], ["value"], fill=False).rename(
        {"control_value": "control", "test_value": "test", "diff_value": "diff"}
    )


def side_iterations(events: pl.DataFrame, choice: str, average: bool) -> Iteration:
    """A side's iteration argument from the app's choice: "" (HTA's first complete one),
    "all" (every complete one, averaged), a number (as a list when `average`) or numbers
    ("2,3"). ValueError on anything else."""
    if choice == "all":
        return complete_iterations(events)
    if choice == "":
        return complete_iterations(events)[:1] if average else None
    if "," in choice:
        return [int(c) for c in choice.split(",") if c.strip()]
    return [int(choice)] if average else int(choice)


ITERATION_COLUMNS: dict[str, pl.DataType] = {
    "step": pl.Int64(),
    "complete": pl.Boolean(),  # all but the last ProfilerStep (or the only one)
    "compared": pl.Boolean(),  # compared under the iteration chosen
}


def side_iteration_table(events: pl.DataFrame, iteration: Iteration, average: bool) -> pl.DataFrame:
    """One side's ProfilerStep numbers: which are complete, which are compared."""
    steps = step_numbers(events)
    complete = set(complete_iterations(events))
    compared = set(_resolve(events, iteration, average))
    return pl.DataFrame(
        {
            "step": steps,
            "complete": [s in complete for s in steps],
            "compared": [s in compared for s in steps],
        },
        schema=ITERATION_COLUMNS,
    )


DETAIL_STATS_COLUMNS: dict[str, pl.DataType] = {
    "side": pl.String(),
    "iterations": pl.Int64(),
    **STATS_COLUMNS,
}


def _launched_kernels(view: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """GPU events launched from inside the given CPU op instances (on the op's thread).

    A launch (runtime/driver call with a correlation) belongs to the latest-starting op
    instance on its (pid, tid) that starts at or before it, if it has not ended; so kernels of
    nested child ops count for the parent, and an op nested in itself counts them once. The
    launch is matched to its GPU events by `correlation`, like HTA's launch/kernel link.
    """
    if ops.is_empty():
        return view.clear()
    spans = ops.select(
        pl.col("pid").fill_null(-1),
        pl.col("tid").fill_null(-1),
        pl.col("start").alias("_op_start"),
        pl.col("end").alias("_op_end"),
    ).sort("_op_start")
    launches = (
        view.filter(~pl.col("gpu") & pl.col("correlation").is_not_null() & _launcher_mask())
        .select(
            pl.col("pid").fill_null(-1),
            pl.col("tid").fill_null(-1),
            "start",
            "correlation",
        )
        .sort("start")
        .join_asof(
            spans,
            left_on="start",
            right_on="_op_start",
            by=["pid", "tid"],
            strategy="backward",
            check_sortedness=False,  # both sides are sorted by time, hence within each thread
        )
        .filter(pl.col("start") < pl.col("_op_end"))
    )
    corr = launches.get_column("correlation").unique()
    return view.filter(pl.col("gpu") & pl.col("correlation").is_in(corr.implode()))


def kernel_diff_detail(
    control: pl.DataFrame,
    test: pl.DataFrame,
    name: str,
    *,
    control_iteration: Iteration = None,
    test_iteration: Iteration = None,
    all_iterations: bool = False,
    use_short_name: bool = False,
    input_dims: str | None = None,
    hta_compat: bool = False,
) -> dict[str, pl.DataFrame]:
    """One op or kernel on both sides, for a drill-down from a `compare_traces` row.

    Scope: the iteration(s) `compare_traces` compares (`all_iterations=True`: every complete
    one). `name` is a full name, or a short one with `use_short_name=True`; `input_dims`
    narrows to one recorded shape (a `match_shapes` row). Returns:

    - "stats": one row per side (Control, Test): iterations, count, sum, mean, std, min,
      median, max of the duration (us); zero counts and null statistics where absent;
    - "kernels": for a CPU-side name, the GPU events launched from inside its instances (its
      own launches and those of ops nested in it, matched by thread and time, then by
      correlation), per kernel name: control/test/diff count and sum (us), and the calls per
      op instance on each side; sorted by |diff_sum| descending. Empty for a GPU kernel.
    """
    kw = dict(all_iterations=all_iterations, use_short_name=use_short_name, input_dims=input_dims)
    return detail_from_sides(
        item_side(control, name, CONTROL, iteration=control_iteration, hta_compat=hta_compat, **kw),
        item_side(test, name, TEST, iteration=test_iteration, hta_compat=hta_compat, **kw),
    )


ITEM_OPS_COLUMNS: dict[str, pl.DataType] = {
    "cpu_ops": pl.Int64(),  # CPU-side instances of the name in scope
    "cpu_side": pl.Boolean(),  # the name is a CPU event's (no stream) anywhere on the side
}


def item_side(
    events: pl.DataFrame,
    name: str,
    side: str,
    *,
    iteration: Iteration = None,
    all_iterations: bool = False,
    use_short_name: bool = False,
    input_dims: str | None = None,
    hta_compat: bool = False,
) -> dict[str, pl.DataFrame]:
    """One side (`CONTROL` or `TEST`) of `kernel_diff_detail`, asked on its own (the
    registry's `diff_side_item`): "stats" (its row), "launched" (name, count, sum of the
    kernels its CPU instances launched), "ops" (`ITEM_OPS_COLUMNS`)."""
    view = side_view(events, hta_compat=hta_compat)
    iters = _resolve(events, iteration, all_iterations)
    scoped = view.filter(pl.col("iteration").is_in(iters))
    if use_short_name:
        scoped = scoped.join(short_names(scoped["name"]), on="name", how="left")
        match = pl.col("short_name") == name
    else:
        match = pl.col("name") == side_name(name, side)
    if input_dims is not None:
        match = match & (pl.col("input_dims") == input_dims)
    hits = scoped.filter(match)
    d = us(pl.col("dur"))
    stats = hits.select(
        pl.lit(side).alias("side"),
        pl.lit(len(iters)).alias("iterations"),
        *duration_stats(d),
    ).cast(DETAIL_STATS_COLUMNS)
    cpu_ops = hits.filter(~pl.col("gpu"))
    launched = (
        _launched_kernels(scoped, cpu_ops)
        .group_by("name")
        .agg(pl.len().cast(pl.Int64).alias("count"), us(pl.col("dur")).sum().alias("sum"))
    )
    named = events.filter(pl.col("name") == name)
    ops = pl.DataFrame(
        {
            "cpu_ops": [cpu_ops.height],
            "cpu_side": [named.height > 0 and named["stream"].is_null().all()],
        },
        schema=ITEM_OPS_COLUMNS,
    )
    return {"stats": stats, "launched": launched, "ops": ops}


def detail_from_sides(
    control: dict[str, pl.DataFrame], test: dict[str, pl.DataFrame]
) -> dict[str, pl.DataFrame]:
    """`kernel_diff_detail` from each side's `item_side`."""
    per_op = {CONTROL: control["ops"]["cpu_ops"][0], TEST: test["ops"]["cpu_ops"][0]}
    stats = pl.concat([control["stats"], test["stats"]]).with_columns(
        pl.when(pl.col("count") > 0).then(pl.col("sum")).otherwise(pl.lit(0.0)).alias("sum")
    )
    kernels = _side_by_side(
        control["launched"], test["launched"], ["name"], ["count", "sum"], fill=True
    )
    kernels = kernels.with_columns(
        pl.col("^(control|test|diff)_count$").cast(pl.Int64),
        (pl.col("control_count") / per_op[CONTROL] if per_op[CONTROL] else pl.lit(None))
        .cast(pl.Float64)
        .alias("control_per_op"),
        (pl.col("test_count") / per_op[TEST] if per_op[TEST] else pl.lit(None))
        .cast(pl.Float64)
        .alias("test_per_op"),
    ).sort(pl.col("diff_sum").abs(), "name", descending=[True, False])
    return {"stats": stats, "kernels": kernels}
