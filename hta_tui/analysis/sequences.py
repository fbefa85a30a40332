"""Frequent CUDA kernel sequences: which kernels each instance of an operator launches.

HTA's `get_frequent_cuda_kernel_sequences(operator_name, rank, min_pattern_len, top_k)`:

1. Candidates: the rank's events whose name *contains* `operator_name` (a substring, as HTA).
2. Roots: the candidates at the smallest call-graph depth among all candidates, launching at
   least `min_pattern_len` kernels in their subtree (HTA's `num_kernels`).
3. Pattern of a root: its name, then the names of every GPU event launched from its subtree
   (kernels, memcpy, memset, syncs) by start time, joined with "|".
4. Per pattern: `count` (roots), `GPU kernel duration (us)` (sum of those GPU events' durations),
   `CPU op duration (us)` (sum of the roots' durations). Sorted by count (descending), then
   pattern. HTA returns every pattern: `top_k` only chooses what it overlays on the trace file
   and plots, so it does not cut the table here either.

HTA walks a Python call graph per root (53 s on a 98k-event rank); here the call graph is
sorts, cumulative sums and as-of joins (see `call_graph`), and the patterns one group-by.

`rank=None` takes the job's smallest rank (HTA's default 0 fails where there is no rank 0); a
rank that is not in the job, an empty `operator_name`, no match or no kernels give an empty
table, never an exception. HTA 0.5 itself fails on pandas 3 ("The axis argument to unique is not
supported for dtype object") and on traces where the call graph cannot be built.

The call graph (HTA 0.5 `hta.common.trace_call_graph.CallGraph`), vectorised:

* Threads: each (pid, tid) of HTA's view. A thread is GPU (skipped) when every event has a
  stream > 0, or every pid or every tid is 0. In the others, the events without a stream are
  the nodes (HTA's `stream == -1`).
* Order of the ends (`hta.common.trace_call_stack._less_than`): by time; at equal times a
  closing end comes before an opening one, longer events open first and shorter ones close
  first, ties by index (opening: smaller first; closing: larger first). Zero-length events open
  and close inside whatever event is open at that time. DEVIATION: HTA's comparator is not
  transitive when a zero-length event sits exactly where one event ends and another starts
  (the result then depends on its sort's input order); we put it inside the one starting.
* The stack size after each end is a cumulative sum, so an event's level is the stack size
  when it opens. HTA pops the top of the stack at every closing end, whichever event it is; the
  slot at level `l` therefore always holds the last event pushed at level `l`, which makes an
  event's ancestor at level `l` the last event opened at level `l` before it on its thread (an
  as-of join), even where events overlap without nesting.
* Kernels: a GPU-side event (HTA's GPUKernelFilter) with stream > 0 (DEVIATION, default mode:
  any stream, so ROCm's stream-0 kernels count) is a child of the CPU-side
  event of its correlation that comes last in the file (`index_correlation`), when that event
  is a node.
* Backward thread (`CallGraph._connect_stacks`): when exactly two threads are labelled, "main"
  (has a `ProfilerStep#` event) and "bwd" (has an `autograd::` event), each top-level node of
  the bwd thread that lies within a `## backward ##` annotation of the main thread (or, without
  those, a `ProfilerStep#` one) becomes that annotation's child, the first such annotation in
  file order winning: its subtree moves `depth(annotation) + 1` levels down and belongs to the
  annotation's subtree.
* `depth` is HTA's: 0 for a thread's top-level events, a kernel's launcher's depth + 1, and -1
  for events outside the graph (GPU threads, kernels without a launcher node).
* DEVIATION (hta_compat only): HTA's rounding can give a sub-microsecond event an end before
  its start; HTA's comparator then raises ("Unexpected case", e.g. on nccl_parser_config) and
  the analysis fails. We treat such an event as zero-length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from hta_tui.analysis.hta_view import _hta_kernel_filter, profiler_step_names, rank_view, us

COLUMNS: dict[str, pl.DataType] = {
    "pattern": pl.String(),
    "count": pl.Int64(),
    "GPU kernel duration (us)": pl.Float64(),
    "CPU op duration (us)": pl.Float64(),
}

#: The columns of HTA's view the call graph needs beyond its core ones.
COLUMNS_NEEDED: tuple[str, ...] = ("pid", "tid")

_THREAD = ["pid", "tid"]


def hta_stream() -> pl.Expr:
    """HTA's `stream` column: -1 where the event has none."""
    return pl.col("stream").fill_null(-1)


def kernel_links(
    view: pl.DataFrame,
    *,
    min_stream: int = 1,
    carry: Sequence[str] = (),
    by: Sequence[str] = (),
) -> pl.DataFrame:
    """GPU-side rows with a stream >= `min_stream` and the CPU-side row that launched them.

    The call graph takes streams > 0 (HTA's `get_cpu_gpu_correlation`); other analyses any
    stream (`min_stream=0`).

    Columns: idx (the kernel's), launcher (idx of the last CPU-side event in file order with the
    same correlation, HTA's `index_correlation`), then the kernel's `carry` columns, in the
    kernels' order. Kernels without a launcher are left out. `by`: columns (first in the
    answer) telling apart views of several ranks in one frame (`rank`): a correlation links
    within its rank only.
    """
    on_gpu = _hta_kernel_filter()
    corr = pl.col("correlation")
    # the columns read, before any filter (a filter copies every column of the rows kept)
    wanted = dict.fromkeys([*by, "idx", "correlation", "stream", "name", *carry])
    rows = view.lazy().select(list(wanted))
    cpu = rows.filter(~on_gpu & corr.is_not_null()).select(*by, "correlation", "idx").collect()
    if cpu["correlation"].n_unique() == cpu.height:  # one CPU row each: it is the last
        launchers = cpu.rename({"idx": "launcher"})
    else:
        launchers = cpu.group_by(*by, "correlation").agg(pl.col("idx").max().alias("launcher"))
    return (
        rows.filter(on_gpu & corr.is_not_null() & (hta_stream() >= min_stream))
        .select(*by, "idx", "correlation", *carry)
        .join(launchers.lazy(), on=[*by, "correlation"], maintain_order="left")
        .filter(pl.col("launcher") > 0)
        .select(*by, "idx", "launcher", *carry)
        .collect()
    )


def _stack_threads(view: pl.DataFrame, min_stream: int = 1) -> pl.DataFrame:
    """(pid, tid) of the threads HTA builds a call stack for, with their main/bwd label."""
    on_gpu = hta_stream() >= min_stream
    return (
        view.filter(pl.col("pid").is_not_null() & pl.col("tid").is_not_null())
        .group_by(_THREAD)
        .agg(
            gpu=on_gpu.all() | (pl.col("pid") == 0).all() | (pl.col("tid") == 0).all(),
            main=pl.col("name").str.starts_with("ProfilerStep#").any(),
            bwd=pl.col("name").str.contains("autograd::", literal=True).any(),
        )
        .filter(~pl.col("gpu"))
        .with_columns(
            pl.when("main")
            .then(pl.lit("main"))
            .when("bwd")
            .then(pl.lit("bwd"))
            .otherwise(None)
            .alias("label")
        )
        .sort(_THREAD)
        .select(*_THREAD, "label")
    )


def _levels(nodes: pl.DataFrame) -> pl.DataFrame:
    """Each node's open position (`pos`) in its thread's sorted ends and its level.

    `nodes`: thread, idx, start, end; a node of null start has no row (the parser makes no
    null ts, but a frame from elsewhere must not break the nesting). Sort keys per end:
    thread, time, class (0 closing, 1 opening, 2 / 3 zero-length opening / closing, or -2 / -1
    when no event opens at that time), then k1 (duration: longer opens first, shorter closes
    first) and k2 (idx: smaller opens first, larger closes first).
    """
    if nodes["start"].null_count():  # no place in time: nested nowhere (left out)
        nodes = nodes.filter(pl.col("start").is_not_null())
    end = pl.max_horizontal("start", "end")  # HTA's rounding can make end < start
    base = nodes.lazy().select("thread", "idx", "start", end.alias("end"))
    zero = pl.col("end") == pl.col("start")
    dur = pl.col("end") - pl.col("start")
    idx = pl.col("idx").cast(pl.Int64)
    opens = base.select(
        "thread",
        "idx",
        pl.col("start").alias("time"),
        pl.lit(1, pl.Int8).alias("delta"),
        pl.when(zero).then(2).otherwise(1).cast(pl.Int8).alias("cls"),
        pl.when(zero).then(0).otherwise(-dur).alias("k1"),
        idx.alias("k2"),
    )
    closes = base.select(
        "thread",
        "idx",
        pl.col("end").alias("time"),
        pl.lit(-1, pl.Int8).alias("delta"),
        pl.when(zero).then(3).otherwise(0).cast(pl.Int8).alias("cls"),
        pl.when(zero).then(0).otherwise(dur).alias("k1"),
        (-idx).alias("k2"),
    )
    ends = pl.concat([opens, closes])
    if base.select(zero.any()).collect().item():
        ends = _place_zero_length(ends, opens)
    ends = ends.collect()
    # One argsort, then only idx and delta gathered in that order: sorting every column of
    # the ends cost about twice as much.
    order = ends.select(pl.arg_sort_by(_end_order(nodes))).to_series()
    # Every event closes, so the running stack size is back at 0 where a thread ends and one
    # cumulative sum over the sorted threads is each thread's stack size.
    return (
        ends.select("idx", "delta")[order]
        .with_row_index("pos")
        .with_columns(pl.col("delta").cast(pl.Int32).cum_sum().alias("size"))
        .filter(pl.col("delta") == 1)
        .select("idx", pl.col("pos").cast(pl.Int64), (pl.col("size") - 1).alias("level"))
    )


def _place_zero_length(ends: pl.LazyFrame, opens: pl.LazyFrame) -> pl.LazyFrame:
    """A zero-length event goes before the closing ends at its time unless some event opens
    then (class -2 / -1 instead of 2 / 3): a lookup only the (few) zero-length ends need."""
    opening = (
        opens.filter(pl.col("cls") == 1)
        .select("thread", "time")
        .unique()
        .with_columns(pl.lit(True).alias("opening"))
    )
    # Only the (few) zero-length ends need that lookup: join just those.
    zero_ends = (
        ends.filter(pl.col("cls") >= 2)
        .join(opening, on=["thread", "time"], how="left")
        .with_columns(
            pl.when(pl.col("opening").is_null())
            .then(pl.col("cls") - 4)
            .otherwise(pl.col("cls"))
            .alias("cls")
        )
        .drop("opening")
    )
    return pl.concat([ends.filter(pl.col("cls") < 2), zero_ends])


def _end_order(nodes: pl.DataFrame) -> list[pl.Expr]:
    """Sort keys equivalent to (thread, time, cls, k1, k2), packed into three integers where
    the values allow it: a sort on fewer keys is much cheaper."""
    plain = [pl.col(c) for c in ("thread", "time", "cls", "k1", "k2")]
    bounds = nodes.select(
        pl.col("thread").max().alias("threads"),
        pl.min_horizontal(pl.col("start").min(), pl.col("end").min()).alias("lo"),
        pl.max_horizontal(pl.col("start").max(), pl.col("end").max()).alias("hi"),
    ).row(0, named=True)
    if bounds["lo"] is None:
        return plain
    # thread < 2^17 and time span < 2^45 ns (9.7 h): thread * 2^45 + time fits in 62 bits.
    # cls + 2 is 0..5 and |k1| (a duration) < 2^59: (cls + 2) * 2^60 + k1 + 2^59 fits too.
    span = bounds["hi"] - bounds["lo"]
    if bounds["threads"] >= 1 << 17 or span >= 1 << 45:
        return plain
    thread_time = pl.col("thread").cast(pl.Int64) * (1 << 45) + (pl.col("time") - bounds["lo"])
    cls_k1 = (pl.col("cls").cast(pl.Int64) + 2) * (1 << 60) + pl.col("k1") + (1 << 59)
    return [thread_time, cls_k1, pl.col("k2")]


def ancestors_at(
    graph: pl.DataFrame, query: pl.DataFrame, *, thread: str = "thread", pos: str = "pos"
) -> pl.Series:
    """For each query row (thread, pos, level), the idx of the last node opened at that level at
    or before `pos` on that thread (null when none), in query order."""
    right = graph.select(
        pl.col("thread"), pl.col("level"), pl.col("pos").alias("__pos"), pl.col("idx")
    ).sort("__pos")
    left = (
        query.select(pl.col(thread).alias("thread"), pl.col("level"), pl.col(pos).alias("__pos"))
        .with_row_index("__row")
        .sort("__pos")
    )
    out = left.join_asof(
        right, on="__pos", by=["thread", "level"], strategy="backward", check_sortedness=False
    )
    return out.sort("__row")["idx"]


def call_graph(view: pl.DataFrame, *, min_stream: int = 1) -> pl.DataFrame:
    """The call-graph nodes of one rank view (CPU-side events of CPU threads); a thread whose
    events all have a stream >= `min_stream` is a GPU thread (HTA: > 0).

    Columns: idx, thread (row number of the (pid, tid) thread), pos (open position), level (on
    its own thread), depth (HTA's, after hanging the backward thread under the main one),
    offset (depth - level), anchor (idx of the main-thread annotation a backward subtree hangs
    under, else null).
    """
    threads = _stack_threads(view, min_stream).with_row_index("thread")
    cols = [*_THREAD, "idx", "start", "end"]
    nodes = (
        view.filter(hta_stream() == -1)
        .select(cols)
        .join(threads.select(*_THREAD, "thread"), on=_THREAD)
    )
    if nodes.is_empty():
        schema = {
            "idx": pl.UInt32(),
            "thread": pl.UInt32(),
            "pos": pl.Int64(),
            "level": pl.Int32(),
            "depth": pl.Int32(),
            "offset": pl.Int32(),
            "anchor": pl.UInt32(),
        }
        return pl.DataFrame(schema=schema)
    graph = nodes.join(_levels(nodes), on="idx").select(
        "idx", "thread", "pos", "level", "start", "end", "pid", "tid"
    )
    graph = graph.with_columns(
        pl.lit(0, pl.Int32).alias("offset"), pl.lit(None, pl.UInt32).alias("anchor")
    )
    labelled = threads.filter(pl.col("label").is_not_null()).sort(["label", "thread"])
    if labelled.height == 2:
        graph = _hang_backward(view, graph, labelled)
    return graph.with_columns((pl.col("level") + pl.col("offset")).alias("depth")).select(
        "idx", "thread", "pos", "level", "depth", "offset", "anchor"
    )


def _hang_backward(view: pl.DataFrame, graph: pl.DataFrame, labelled: pl.DataFrame) -> pl.DataFrame:
    """HTA's `_link_main_and_bwd_stacks`: see the module doc."""
    bwd_thread, main_thread = labelled["thread"].to_list()
    main = graph.filter(pl.col("thread") == main_thread)
    names = main.join(view.select("idx", "name"), on="idx")
    anns = names.filter(pl.col("name").str.starts_with("## backward ##"))
    if anns.is_empty():
        anns = names.filter(pl.col("name").str.starts_with("ProfilerStep#"))
    if anns.is_empty():
        return graph
    anns = anns.select(
        pl.col("idx").alias("anchor"),
        pl.col("start").alias("a_start"),
        pl.col("end").alias("a_end"),
        (pl.col("level") + 1).alias("a_offset"),
    )
    top = graph.filter((pl.col("thread") == bwd_thread) & (pl.col("level") == 0)).select(
        "idx", "start", "end"
    )
    hung = (
        top.join_where(
            anns,
            pl.col("start") >= pl.col("a_start"),
            pl.col("end") <= pl.col("a_end"),
        )
        .sort("anchor")
        .group_by("idx", maintain_order=True)
        .first()
        .select(pl.col("idx").alias("top"), "anchor", "a_offset")
    )
    if hung.is_empty():
        return graph
    bwd = graph.filter(pl.col("thread") == bwd_thread)
    tops = ancestors_at(graph, bwd.with_columns(pl.lit(0, pl.Int32).alias("level")))
    bwd = (
        bwd.with_columns(tops.alias("top"))
        .drop("offset", "anchor")
        .join(hung, on="top", how="left")
        .with_columns(
            pl.col("a_offset").fill_null(0).cast(pl.Int32).alias("offset"),
            pl.col("anchor").cast(pl.UInt32),
        )
        .select(graph.columns)
    )
    return pl.concat([graph.filter(pl.col("thread") != bwd_thread), bwd])


def ancestor_at_depth(graph: pl.DataFrame, nodes: pl.DataFrame, depth: int) -> pl.Series:
    """For each row of `nodes` (a subset of `graph`, any columns incl. idx, thread, pos, level,
    offset, anchor), the idx of its ancestor (or itself) at HTA depth `depth`; null when the node
    is shallower. Follows backward subtrees up through their anchor annotation."""
    rows = nodes.select("thread", "pos", "level", "offset", "anchor").with_row_index("__row")
    deep = pl.col("level") + pl.col("offset") >= depth
    own = rows.filter(deep & (pl.col("offset") <= depth)).with_columns(
        (depth - pl.col("offset")).cast(pl.Int32).alias("level")
    )
    via = (
        rows.filter(deep & (pl.col("offset") > depth))
        .drop("thread", "pos")
        .join(
            graph.select(pl.col("idx").alias("anchor"), "thread", "pos"),
            on="anchor",
        )
        .with_columns(pl.lit(depth, pl.Int32).alias("level"))
    )
    parts = []
    for part in (own, via):
        if not part.is_empty():
            found = ancestors_at(graph, part)
            parts.append(part.select("__row").with_columns(found.alias("ancestor")))
    result = rows.select("__row").join(
        pl.concat(parts)
        if parts
        else pl.DataFrame(schema={"__row": pl.UInt32, "ancestor": pl.UInt32}),
        on="__row",
        how="left",
    )
    return result.sort("__row")["ancestor"]


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema=COLUMNS)


def pick_rank(ranks: Mapping[int, pl.DataFrame], rank: int | None) -> int | None:
    """The rank to analyse: `rank` when the job has it, the smallest one when None."""
    if rank is None:
        return min(ranks) if ranks else None
    return rank if rank in ranks else None


def frequent_cuda_kernel_sequences(
    ranks: Mapping[int, pl.DataFrame],
    operator_name: str,
    *,
    rank: int | None = None,
    min_pattern_len: int = 3,
    top_k: int = 5,
    hta_compat: bool = False,
) -> pl.DataFrame:
    """HTA's frequent CUDA kernel sequences of `operator_name` on one rank (module doc).

    Columns: pattern, count, GPU kernel duration (us), CPU op duration (us). `top_k` is
    accepted for HTA's signature: HTA's table has every pattern, and so has this one (take
    `.head(top_k)` for HTA's overlay / plot selection).
    """
    del top_k  # HTA uses it only for the overlaid trace file and the plot
    r = pick_rank(ranks, rank)
    if not operator_name or r is None:
        return _empty()
    view = rank_view(
        ranks[r], profiler_step_names(ranks), hta_compat=hta_compat, columns=COLUMNS_NEEDED
    )
    return _sequences(view, operator_name, min_pattern_len, hta_compat=hta_compat)


def _sequences(
    view: pl.DataFrame, operator_name: str, min_pattern_len: int, *, hta_compat: bool = True
) -> pl.DataFrame:
    hit = pl.col("name").str.contains(operator_name, literal=True)
    # HTA links only kernels on streams > 0 (`get_cpu_gpu_correlation`), and a GPU-side
    # `gpu_user_annotation` ProfilerStep (outside the call graph, depth -1) becomes the only
    # root: a ROCm trace (stream-0 kernels, GPU-side steps) has no sequences there.
    # DEVIATION (default mode): every stream, and GPU-side annotations are not operators.
    min_stream = 1 if hta_compat else 0
    if not hta_compat:
        hit = hit & (pl.col("kind") != "gpu_annotation")
    cands = view.filter(hit).select("idx", "name", "dur")
    if cands.is_empty():
        return _empty()
    launches = kernel_links(view, min_stream=min_stream)
    if launches.is_empty() and min_pattern_len >= 1:
        # No kernel launched from any event (a CPU-only trace): every candidate's pattern
        # has no kernel, shorter than asked; the call graph is not worth building.
        return _empty()
    graph = call_graph(view, min_stream=min_stream)
    links = launches.join(graph.select(pl.col("idx").alias("launcher"), "depth"), on="launcher")
    cands = (
        cands.join(graph.select("idx", "depth"), on="idx", how="left")
        .join(links.select("idx", (pl.col("depth") + 1).alias("k_depth")), on="idx", how="left")
        .with_columns(
            pl.coalesce("depth", "k_depth", pl.lit(-1)).cast(pl.Int32).alias("depth"),
            pl.col("k_depth").is_not_null().alias("is_kernel"),
        )
    )
    depth = int(cands["depth"].min())  # type: ignore[arg-type]
    roots = cands.filter(pl.col("depth") == depth)
    gpu = view.select("idx", "name", "start", "dur")
    # Kernels launched from each root's subtree: their launcher's ancestor at the roots' depth.
    launched = links.filter(pl.col("depth") >= depth).join(
        graph.drop("depth"), left_on="launcher", right_on="idx"
    )
    launched = launched.with_columns(ancestor_at_depth(graph, launched, depth).alias("root"))
    per_root = (
        launched.filter(pl.col("root").is_not_null())
        .select("root", "idx")
        .join(gpu, on="idx")
        .sort(["root", "start", "idx"])
        .group_by("root", maintain_order=True)
        .agg(
            pl.len().alias("num_kernels"),
            pl.col("name").alias("kernels"),
            pl.col("dur").sum().alias("kernel_dur"),
        )
        # Joined after the group-by: `str.join` inside one is several times slower.
        .with_columns(pl.col("kernels").list.join("|"))
    )
    nodes = (
        roots.filter(~pl.col("is_kernel") & pl.col("idx").is_in(graph["idx"].implode()))
        .join(per_root, left_on="idx", right_on="root", how="left")
        .with_columns(pl.col("num_kernels").fill_null(0), pl.col("kernel_dur").fill_null(0))
    )
    # A kernel whose name matches is its own stack: HTA's pattern is its name twice.
    kernels = roots.filter("is_kernel").select(
        "idx",
        "name",
        "dur",
        pl.lit(1, pl.UInt32).alias("num_kernels"),
        pl.col("name").alias("kernels"),
        pl.col("dur").alias("kernel_dur"),
    )
    found = pl.concat([nodes.select(kernels.columns), kernels], how="vertical_relaxed")
    found = found.filter(pl.col("num_kernels") >= min_pattern_len)
    if found.is_empty():
        return _empty()
    pattern = pl.when(pl.col("kernels").is_null() | (pl.col("num_kernels") == 0))
    pattern = pattern.then(pl.col("name")).otherwise(pl.col("name") + "|" + pl.col("kernels"))
    return (
        found.group_by(pattern.alias("pattern"))
        .agg(
            pl.len().alias("count"),
            us(pl.col("kernel_dur").sum()).alias("GPU kernel duration (us)"),
            us(pl.col("dur").sum()).alias("CPU op duration (us)"),
        )
        .sort(["count", "pattern"], descending=[True, False])
        .cast(COLUMNS)
    )
