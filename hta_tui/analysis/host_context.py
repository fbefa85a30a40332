"""What the host was doing around an event: the operators, nn.Module frames, Python frames and
user annotations that enclose it on its thread.

A sync, or any CPU event, is "inside" every CPU-side event of its thread that starts no later
and ends no earlier. The threads that hold queries are nested once by time and each query's
ancestors read off that nesting, so tracing a few thousand events back through a rank of
millions costs a few sorts (an inequality join of queries against every event took seconds).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from hta_tui.analysis import nesting
from hta_tui.analysis.sequences import _levels

#: CPU-side kinds that can enclose an event.
CONTEXT_KINDS: tuple[str, ...] = ("cpu_op", "annotation", "python")

#: A Python frame of a source file: "path/file.py(88): forward".
_FRAME_RE = r"^.+\.py\(\d+\): "
#: Frames of libraries and the standard library: a call site is the innermost frame that is
#: none of these, where the user's code called into PyTorch.
_LIBRARY_RE = (
    r"^(torch|torchvision|torchaudio|transformers|lightning|pytorch_lightning|numpy|"
    r"multiprocessing|concurrent|importlib|asyncio|json|logging|collections|unittest)/"
    r"|site-packages/|dist-packages/|^(threading|typing|contextlib|functools|runpy|abc|"
    r"weakref|copy|enum|selectors|queue|socket|warnings|inspect|dataclasses)\.py\("
)
_STEP_RE = r"^ProfilerStep\s*#\s*\d+"
#: Innermost Python frames kept in a stack column.
STACK_DEPTH = 8

CONTEXT_COLUMNS: dict[str, pl.DataType] = {
    "q": pl.UInt32(),  # the query's idx
    "operator": pl.String(),  # innermost enclosing cpu op
    "op_stack": pl.String(),  # enclosing cpu ops, outermost first, " > "
    "module": pl.String(),  # innermost nn.Module frame, without "nn.Module: "
    "module_path": pl.String(),  # enclosing nn.Module frames, outermost first, "/"
    "call_site": pl.String(),  # innermost Python frame of the user's code
    "python_stack": pl.String(),  # innermost STACK_DEPTH source frames, outermost first
    "annotation": pl.String(),  # enclosing user annotations (not ProfilerStep), " > "
    "step": pl.String(),  # the enclosing ProfilerStep#N
}


def rows_at(
    events: pl.DataFrame, idx: pl.Series, columns: Sequence[str] | None = None
) -> pl.DataFrame:
    """The events with these idx, in that order (nulls and unknown idx left out; of an idx
    the frame repeats, its first row); `columns` only (and idx). A parsed frame's idx is its
    row number, so this is a gather, not a join over the whole rank: the gathered rows' idx
    are checked against those asked (a frame of repeated idx still ends at n - 1)."""
    idx = idx.drop_nulls()
    n = events.height
    if columns is not None:
        events = events.select("idx", *(c for c in columns if c != "idx"))
    if n and events["idx"][0] == 0 and events["idx"][n - 1] == n - 1:
        asked = idx.filter(idx < n).cast(pl.UInt32)
        rows = events[asked]
        if (rows["idx"].cast(pl.UInt32) == asked).all():
            return rows
    joined = idx.rename("idx").to_frame().join(events, on="idx", maintain_order="left")
    if joined.height > idx.len():  # an idx the frame repeats: its first row only
        firsts = events.unique("idx", keep="first", maintain_order=True)
        joined = idx.rename("idx").to_frame().join(firsts, on="idx", maintain_order="left")
    return joined


def context_events(events: pl.DataFrame, among: pl.Expr | None = None) -> pl.LazyFrame:
    """The rows that can enclose a query: CPU ops, annotations and Python frames of a thread
    (only those `among` selects, when given)."""
    rows = pl.col("kind").is_in(CONTEXT_KINDS) & pl.col("pid").is_not_null()
    rows = rows & pl.col("tid").is_not_null()
    return (
        events.lazy()
        .filter(rows if among is None else rows & among)
        .select(
            pl.col("idx").alias("c_idx"),
            pl.col("pid").alias("c_pid"),
            pl.col("tid").alias("c_tid"),
            pl.col("ts").alias("c_ts"),
            (pl.col("ts") + pl.col("dur")).alias("c_end"),
            pl.col("name").alias("c_name"),
            pl.col("kind").alias("c_kind"),
            pl.col("python_module_id").alias("c_module_id"),
        )
    )


def enclosing(
    events: pl.DataFrame,
    queries: pl.DataFrame,
    among: pl.Expr | None = None,
    *,
    ordered: bool = True,
) -> pl.DataFrame:
    """Every context event enclosing each query (queries: idx, pid, tid, ts, dur), itself
    excluded; outermost first per query. Columns: q, and the c_* columns of `context_events`.
    `among`: only the context events it selects (a caller that reads only operators and
    modules need not nest every Python frame of the thread around each query). `ordered`
    False: in no particular order (a caller that only sums per query or per container need
    not sort every pair).

    The events that contain some query are nested (`sequences._levels`), then every query's
    ancestors at each of its levels are found by climbing parent links (`_ancestor_pairs`):
    one sort, whatever the number of queries.
    """
    ctx_all = context_events(events, among)
    if queries.is_empty():
        return ctx_all.clear().collect().with_columns(pl.lit(None, pl.UInt32).alias("q"))
    threads = (
        queries.select("pid", "tid")
        .drop_nulls()
        .unique()
        .sort("pid", "tid")
        .with_row_index("thread")
    )
    asked = queries.join(threads, on=["pid", "tid"]).select(
        "thread", "idx", pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur")).alias("end")
    )
    # Times first; the names only of the few events that contain a query.
    times = ctx_all.select("c_idx", "c_pid", "c_tid", "c_ts", "c_end").collect()
    on_thread = _containers(times, threads, asked)
    info = rows_at(events, on_thread["c_idx"], ("name", "kind", "python_module_id")).select(
        pl.col("name").alias("c_name"),
        pl.col("kind").alias("c_kind"),
        pl.col("python_module_id").alias("c_module_id"),
    )
    ctx = pl.concat([on_thread.drop("thread"), info], how="horizontal").select(
        ctx_all.collect_schema().names()
    )
    nodes = pl.concat(
        [
            on_thread.select(
                "thread",
                pl.col("c_idx").alias("idx"),
                pl.col("c_ts").alias("start"),
                pl.col("c_end").alias("end"),
            ),
            asked,
        ]
    ).unique("idx")
    graph = (
        nodes.join(_levels(nodes), on="idx")
        .select("idx", "thread", "pos", "level", "start", "end")
        .sort("pos")
    )
    at, to = _ancestor_pairs(graph, asked["idx"])
    found = _contained(graph, at, to, ctx, queries)
    if ordered:
        found = found.sort(["q", "c_ts", "c_end", "c_idx"], descending=[False, False, True, False])
    return found.select("q", *ctx.columns)


def _ancestor_pairs(graph: pl.DataFrame, asked: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Rows of `graph` (idx, thread, level, in open order): each asked node's and every node
    above it on its thread. The node at level l above a query is the last one opened at level
    l before it (HTA's stack: `sequences.ancestors_at`), which is its parent's at l, and so
    on up: so the pairs come from climbing parent links (`nesting.parents`, numpy), one level
    for every query at a time, not from an as-of join of every (query, level)."""
    level = graph["level"].to_numpy()
    up = nesting.parents(graph["thread"].to_numpy(), level)
    rows = np.flatnonzero(graph["idx"].is_in(asked.implode()).to_numpy() & (level > 0))
    cur = up[rows]
    queries, above = [], []
    while rows.size:
        keep = cur >= 0
        rows, cur = rows[keep], cur[keep]
        queries.append(rows)
        above.append(cur)
        cur = up[cur]
    none = np.zeros(0, dtype=np.int64)
    return (np.concatenate(queries) if queries else none), (
        np.concatenate(above) if above else none
    )


def _contained(
    graph: pl.DataFrame, at: np.ndarray, to: np.ndarray, ctx: pl.DataFrame, queries: pl.DataFrame
) -> pl.DataFrame:
    """The pairs (graph rows `at` below `to`) whose upper node is a context event (`ctx`'s
    rows) that truly contains the query (nesting by time assumes well-formed threads): q and
    the c_* columns. Gathers by row where the ids allow it (distinct query ids, no null
    time, `ctx` in id order), else joins."""
    q = graph["idx"].gather(at).alias("q")
    c_idx = graph["idx"].gather(to).alias("c_idx")
    ids = ctx["c_idx"]
    plain = (
        queries["idx"].n_unique() == queries.height
        and not graph.select(pl.col("start", "end").null_count().sum()).row(0)[0]
        and ids.is_sorted()
    )
    if not plain:
        spans = queries.select(
            pl.col("idx").alias("q"),
            pl.col("ts").alias("q_ts"),
            (pl.col("ts") + pl.col("dur")).alias("q_end"),
        )
        return (
            pl.DataFrame([q, c_idx])
            .join(ctx, on="c_idx")
            .join(spans, on="q")
            .filter(
                (pl.col("c_ts") <= pl.col("q_ts"))
                & (pl.col("c_end") >= pl.col("q_end"))
                & (pl.col("c_idx") != pl.col("q"))
            )
            .select("q", *ctx.columns)
        )
    # a query's span is its node's (an event both asked and a container: the same times)
    start, end = graph["start"].to_numpy(), graph["end"].to_numpy()
    keys = ids.cast(pl.Int64).to_numpy()
    want = c_idx.cast(pl.Int64).to_numpy()
    row = np.minimum(np.searchsorted(keys, want), max(keys.size - 1, 0))
    ok = (keys[row] == want) if keys.size else np.zeros(want.size, dtype=bool)
    ok &= (start[to] <= start[at]) & (end[to] >= end[at]) & (to != at)
    return pl.concat([q.filter(pl.Series(ok)).to_frame(), ctx[row[ok]]], how="horizontal")


def context(
    events: pl.DataFrame, queries: pl.DataFrame, around: pl.DataFrame | None = None
) -> pl.DataFrame:
    """One row per query (in `CONTEXT_COLUMNS`): its operator stack, module, call site, Python
    stack, annotations and step; nulls where the trace does not say (no `with_stack`, no
    `with_modules`, no enclosing op). `around`: `enclosing(events, queries)` if known."""
    if around is None:
        around = enclosing(events, queries)
    kind, name = pl.col("c_kind"), pl.col("c_name")
    # The patterns on the distinct names only: names repeat across queries.
    names = (
        around.lazy()
        .select(name.unique())
        .with_columns(
            name.str.contains(_FRAME_RE).alias("__frame"),
            name.str.contains(_LIBRARY_RE).alias("__library"),
            name.str.contains(_STEP_RE).alias("__step"),
        )
    )
    is_module = (kind == "python") & pl.col("c_module_id").is_not_null()
    is_frame = (kind == "python") & ~is_module & pl.col("__frame")
    is_user = is_frame & ~pl.col("__library")
    is_step = (kind != "python") & pl.col("__step")
    module_name = name.str.strip_prefix("nn.Module: ")
    rows = (
        around.lazy()
        .join(names, on="c_name", how="left", maintain_order="left", nulls_equal=True)
        .group_by("q", maintain_order=True)
        .agg(
            name.filter(kind == "cpu_op").last().alias("operator"),
            name.filter(kind == "cpu_op").alias("op_stack"),
            module_name.filter(is_module).last().alias("module"),
            module_name.filter(is_module).alias("module_path"),
            name.filter(is_user).last().alias("call_site"),
            name.filter(is_frame).tail(STACK_DEPTH).alias("python_stack"),
            name.filter((kind == "annotation") & ~is_step).alias("annotation"),
            name.filter(is_step).last().alias("step"),
        )
        # Lists joined after the group-by: a string join inside one costs several times more.
        .with_columns(
            _joined("op_stack", " > "),
            _joined("module_path", "/"),
            _joined("python_stack", " > "),
            _joined("annotation", " > "),
        )
    )
    out = queries.lazy().select(pl.col("idx").alias("q")).join(rows, on="q", how="left")
    return out.collect().cast(CONTEXT_COLUMNS).select(list(CONTEXT_COLUMNS))


def _joined(column: str, sep: str) -> pl.Expr:
    """A list column of names as one string; null when empty."""
    text = pl.col(column).list.join(sep)
    return pl.when(text != "").then(text).alias(column)


def _containers(ctx: pl.DataFrame, threads: pl.DataFrame, asked: pl.DataFrame) -> pl.DataFrame:
    """The context events that contain some query, with their `thread`.

    Only those can enclose one: each event looks at the first query of its thread starting at
    or after it (the shortest of equal starts; queries of a thread do not overlap unless
    nested), so the nesting that follows sorts a query's few ancestors, not the whole thread.
    A binary search of each event's start among its thread's few queries: no sort or join of
    the thread's events.
    """
    pids, tids = ctx["c_pid"].to_numpy(), ctx["c_tid"].to_numpy()
    starts, ends = ctx["c_ts"].to_numpy(), ctx["c_end"].to_numpy()
    keep = np.zeros(ctx.height, dtype=bool)
    thread_of = np.zeros(ctx.height, dtype=np.uint32)
    for thread, pid, tid in threads.iter_rows():
        mine = asked.filter(pl.col("thread") == thread).sort("start", "end")
        q_start, q_end = mine["start"].to_numpy(), mine["end"].to_numpy()
        rows = np.flatnonzero((pids == pid) & (tids == tid))
        first = np.searchsorted(q_start, starts[rows], side="left")
        inside = first < len(q_start)
        rows, first = rows[inside], first[inside]
        rows = rows[q_end[first] <= ends[rows]]
        keep[rows] = True
        thread_of[rows] = thread
    rows = np.flatnonzero(keep)  # (a gather of the few kept, not a filter of every row)
    return ctx[rows].with_columns(pl.Series("thread", thread_of[rows]))
