"""Kernels of a launch: every GPU op joined to the CPU call that launched it and to the
operator, nn.Module and step around that call, and what that says about the kernel time that
belongs to no operator.

A launch call (runtime or driver event) and its GPU work share a `correlation`. A CUDA / HIP
graph launch (`cudaGraphLaunch`, `hipGraphLaunch`, `cuGraphLaunch`) runs a whole graph under
one correlation, so one call owns many kernels: `kernel_owners` joins many to one, and every
kernel of a graph gets the launch's operator and module (tools that join one to one, or that
key the launch's row by its own duration, put a graph-heavy trace's GPU time in one row or
nowhere). Where several CPU calls share a correlation (a runtime call and the driver call it
makes), the earliest owns the work, as in the operator view (op_tree).

The operator is the innermost `cpu_op` around the launch on its thread (not a ProfilerStep),
the module the innermost `nn.Module` frame; a kernel with none says why (`owner`):
- `operator`: an operator encloses its launch;
- `launch outside any operator`: the launch runs with no operator around it (a graph replay
  called straight from Python, as vLLM and SGLang do, or a Triton launch);
- `no launch event`: no CPU call has the kernel's correlation (launched before the profiler
  started, or CPU activities not recorded);
- `no correlation`: the kernel has no correlation id at all.

Each kernel also gets its backend (cuBLAS, Triton, NCCL, MIOpen...: `kernel_backend`) and the
outermost compiled region around its launch (`Torch-Compiled Region: 0/1`,
`CompiledFunction`, `CompiledFunctionBackward`; `kernel_backends` sums kernel time by both).

Where PyTorch wrote CUDA-graph kernel annotations (`export_chrome_trace(...,
cuda_graph_annotations=...)`, torchtitan's module FQN labels; the events frame's
`annotation`), a graph kernel's `module` is its annotation, not the module around the launch:
one replay runs every layer's kernels, and only the annotation tells the layers apart
(`module_from` says which it is; `kernel_modules` sums kernel time by module).

`kernel_attribution` sums this per rank, with a one-line verdict, and counts graph launches
that have no GPU events (a graph replayed while the profiler recorded no kernels: only the
launch's CPU time is known). The critical path and any other analysis that needs "which
launch, operator or module ran this kernel" should read `kernel_owners`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import polars as pl

from hta_tui.analysis import kernel_backend, nesting
from hta_tui.analysis.hta_view import job_cached, us
from hta_tui.analysis.per_rank import divided_as_alone, tagged
from hta_tui.analysis.rank_column import untagged
from hta_tui.trace.schema import GPU_WORK_KINDS, LAUNCH_KINDS

OWNED = "operator"
OUTSIDE = "launch outside any operator"
NO_LAUNCH = "no launch event"
NO_CORRELATION = "no correlation"
ANNOTATED = "graph annotation"
AROUND = "nn.Module around the launch"

OWNER_COLUMNS: dict[str, pl.DataType] = {
    "idx": pl.UInt32(),  # the GPU op's row in its events frame
    "name": pl.String(),
    "kind": pl.String(),
    "stream": pl.Int64(),
    "ts": pl.Int64(),
    "dur": pl.Int64(),
    "correlation": pl.Int64(),
    "launch_idx": pl.UInt32(),  # the launch call's row (null: no launch event)
    "launch": pl.String(),  # its name: cudaLaunchKernel, cudaGraphLaunch, cuLaunchKernel...
    "launch_dur": pl.Int64(),
    "graph": pl.Boolean(),  # launched by a CUDA / HIP graph launch
    "launch_ops": pl.UInt32(),  # GPU ops of that launch (a graph's kernels, memcpys...)
    "operator": pl.String(),  # innermost cpu_op around the launch
    # a graph kernel's CUDA-graph annotation (module FQN or name), else the innermost
    # nn.Module frame around the launch
    "module": pl.String(),
    "module_from": pl.String(),  # ANNOTATED, AROUND, or null (no module)
    "annotation": pl.String(),  # the kernel's CUDA-graph annotation, as written
    "step": pl.String(),
    "owner": pl.String(),  # OWNED, OUTSIDE, NO_LAUNCH or NO_CORRELATION
    "backend": pl.String(),  # cuBLAS, cuDNN, Triton, NCCL, MIOpen... (kernel_backend)
    "compiled_region": pl.String(),  # outermost torch.compile region around the launch
}

ATTRIBUTION_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "kernels": pl.UInt32(),
    "kernel_time (us)": pl.Float64(),
    "no_operator (us)": pl.Float64(),
    "no_operator_pct": pl.Float64(),
    "outside_any_operator (us)": pl.Float64(),
    "no_launch_event (us)": pl.Float64(),
    "graph_launches": pl.UInt32(),
    "graph_kernels": pl.UInt32(),
    "graph_kernel_time (us)": pl.Float64(),
    "graph_kernels_annotated": pl.UInt32(),  # their module is their CUDA-graph annotation
    "graph_launches_without_kernels": pl.UInt32(),
    "graph_launch_cpu_without_kernels (us)": pl.Float64(),
    "overlapping_on_stream": pl.UInt32(),
    "verdict": pl.String(),
}


def is_graph_launch(name: pl.Expr | None = None) -> pl.Expr:
    """A CUDA or HIP graph launch (runtime or driver API, any version suffix)."""
    name = pl.col("name") if name is None else name
    return name.str.contains(r"^(cuda|hip|cu)GraphLaunch").fill_null(False)


def _launches(events: pl.DataFrame, by: list[str] | None = None) -> pl.DataFrame:
    """The earliest CPU call of each correlation: idx, pid, tid, ts, dur, name (by time);
    per `by` group (`rank`, or none for one rank), `by` leading."""
    by = by or []
    calls = (
        events.lazy()
        .filter(pl.col("kind").is_in(LAUNCH_KINDS) & pl.col("correlation").is_not_null())
        .select(*by, "idx", "pid", "tid", "ts", "dur", "name", "correlation")
        .sort(*by, "ts", "idx")
        .collect()
    )
    if not by and calls["correlation"].n_unique() == calls.height:  # (most: one call each)
        return calls
    return calls.unique([*by, "correlation"], keep="first", maintain_order=True)


def thread_order(
    thread: np.ndarray, start: np.ndarray, end: np.ndarray, last: np.ndarray
) -> np.ndarray:
    """`np.lexsort((last, -end, start, thread))` (ranges by thread, start, longer first,
    then `last`; equal keys in row order), as one stable sort of thread and start in one
    integer (rows mostly in time order: a few runs to merge) and a sort of the few ties
    only; four full passes cost several times more. `thread`: codes >= 0; null times (NaN)
    or a span too long for one integer: the four passes."""
    n = start.size
    whole = start.dtype.kind in "iu" and thread.dtype.kind in "iu"  # (no null time: NaN)
    span = int(start.max()) - int(start.min()) + 1 if n and whole else 1
    if not n or not whole or thread.min() < 0 or (int(thread.max()) + 1) * span >= 2**62:
        return np.lexsort((last, -end, start, thread))
    key = thread.astype(np.int64) * span + (start - start.min())
    order = np.argsort(key, kind="stable")
    key = key[order]
    tied = np.flatnonzero(key[1:] == key[:-1])
    if tied.size:
        members = np.union1d(tied, tied + 1)  # positions in runs of equal keys
        sub = order[members]
        run = np.cumsum(np.concatenate([[0], key[members[1:]] != key[members[:-1]]]))
        order[members] = sub[np.lexsort((last[sub], -end[sub], run))]
    return order


_STEP_RE = r"^ProfilerStep\s*#\s*\d+"


def _around(
    events: pl.DataFrame, launches: pl.DataFrame, by: list[str] | None = None
) -> pl.DataFrame:
    """Per launch (`launch_idx`): the innermost cpu op (`operator`), nn.Module frame
    (`module`, without "nn.Module: ") and ProfilerStep (`step`) around it on its thread, and
    the outermost compiled region (`Torch-Compiled Region: 0/1` rather than the inductor graph
    it calls; `CompiledFunctionBackward` in the backward pass). The launches and the host
    ranges that can name these are nested once per thread (`nesting`, numpy), then every
    launch climbs its parents level by level together: a few vectorised steps per level, no
    loop over events. No launch (a rank without GPU ops): nothing to nest, every host range
    of the rank left as it is (nesting them cost a CPU-only rank 0.05-0.1 s). `by`: the
    ranks' column of several ranks' events and launches (`rank` in the threads' key)."""
    by = by or []
    if launches.is_empty():
        return pl.DataFrame(
            schema={
                **{c: launches.schema[c] for c in by},
                "launch_idx": launches.schema["idx"],
                **{k: pl.String() for k in ("operator", "module", "step", "compiled_region")},
            }
        )
    is_module = (pl.col("kind") == "python") & pl.col("python_module_id").is_not_null()
    holders = events.lazy().filter(
        pl.col("kind").is_in(["cpu_op", "annotation"]) | is_module
    ).select(
        *by, "pid", "tid", "ts", "dur", "name",
        pl.when(pl.col("kind") == "cpu_op").then(1).when(is_module).then(3).otherwise(2)
        .cast(pl.Int8).alias("type"),
    ).collect()  # fmt: skip
    rows = pl.concat(
        [
            launches.select(
                *by,
                "pid",
                "tid",
                "ts",
                "dur",
                pl.lit(None, pl.String).alias("name"),
                pl.lit(0, pl.Int8).alias("type"),
            ),
            holders,
        ]
    ).with_columns(
        pl.struct(*by, pl.col("pid").fill_null(0), pl.col("tid").fill_null(0))
        .rank("dense")
        .alias("thread"),
        pl.col("name").str.contains(_STEP_RE).fill_null(False).alias("is_step"),
        pl.col("name")
        .str.contains(kernel_backend.COMPILED_RE)
        .fill_null(False)
        .alias("is_compiled"),
    )
    n_launch = launches.height
    thread = rows["thread"].to_numpy().astype(np.int64)
    start = rows["ts"].to_numpy()
    end = start + rows["dur"].to_numpy()
    kind = rows["type"].to_numpy()
    # by thread, start, longer first; at equal extents a range encloses a launch
    order = thread_order(thread, start, end, kind == 0)
    parent_sorted = nesting.parents(
        thread[order], nesting.depths(thread[order], start[order], end[order])
    )
    where = np.empty_like(order)
    where[order] = np.arange(order.size)
    parent = np.where(parent_sorted >= 0, order[np.maximum(parent_sorted, 0)], -1)[where]
    is_step = rows["is_step"].to_numpy()
    is_compiled = rows["is_compiled"].to_numpy()
    wanted = {
        "operator": (kind == 1) & ~is_step,  # a ProfilerStep cpu op (older traces) is none
        "module": kind == 3,
        "step": (kind != 3) & is_step,
        "compiled_region": (kind != 3) & is_compiled,
    }
    found = {k: np.full(n_launch, -1, dtype=np.int64) for k in wanted}
    cur = parent[:n_launch]
    active = np.flatnonzero(cur >= 0)
    while active.size:
        at = cur[active]
        for key, mask in wanted.items():
            hit = mask[at]
            if key != "compiled_region":  # the innermost, but the outermost region
                hit &= found[key][active] < 0
            found[key][active[hit]] = at[hit]
        cur[active] = parent[at]
        active = active[cur[active] >= 0]
    names = rows["name"]

    def named(key: str) -> pl.Series:
        picked = found[key]
        return (
            names.gather(np.maximum(picked, 0))
            .set(pl.Series(picked < 0), None)  # type: ignore[arg-type]
            .alias(key)
        )

    return pl.DataFrame(
        [
            *(launches[c] for c in by),
            launches["idx"].alias("launch_idx"),
            named("operator"),
            named("module").str.strip_prefix("nn.Module: "),
            named("step"),
            named("compiled_region"),
        ]
    )


def kernel_owners(events: pl.DataFrame) -> pl.DataFrame:
    """One row per GPU op (kernel, memcpy, memset) with its launch and that launch's operator,
    module and step (`OWNER_COLUMNS`, in file order). Built once per events frame."""
    return job_cached({0: events}, "kernel_owners", lambda: _owners(events))


def ranks_owners(ranks: Mapping[int, pl.DataFrame]) -> None:
    """Every rank's `kernel_owners` made at once (one query set over the ranks' events with
    `rank` in every key: a tiny rank's alone cost ~26 queries) and kept as each rank's
    own (a rank's kept already keeps its own); nothing when one rank or when the ranks
    differ in schema (a concatenation would cast a column)."""
    todo = dict(ranks)
    if len(todo) < 2 or len({tuple(ev.schema.items()) for ev in todo.values()}) > 1:
        return
    made = untagged(_owners(tagged(sorted(todo.items())), ["rank"]), sorted(todo))
    for rank, events in todo.items():
        job_cached({0: events}, "kernel_owners", lambda mine=made[rank]: mine)


def _owners(events: pl.DataFrame, by: list[str] | None = None) -> pl.DataFrame:
    by = by or []
    gpu = events.lazy().filter(pl.col("kind").is_in(GPU_WORK_KINDS)).select(
        *by, "idx", "name", pl.col("kind").cast(pl.String), "stream", "ts", "dur",
        "correlation", "annotation",
    ).collect()  # fmt: skip
    launches = _launches(events, by)
    key = [*by, "correlation"]
    ops = gpu.group_by(key).agg(pl.len().cast(pl.UInt32).alias("launch_ops"))
    used = launches.join(ops.drop_nulls(), on=key, how="semi", maintain_order="left")
    around = _around(events, used.select(*by, "idx", "pid", "tid", "ts", "dur"), by)
    owner = (
        pl.when(pl.col("correlation").is_null())
        .then(pl.lit(NO_CORRELATION))
        .when(pl.col("launch_idx").is_null())
        .then(pl.lit(NO_LAUNCH))
        .when(pl.col("operator").is_null())
        .then(pl.lit(OUTSIDE))
        .otherwise(pl.lit(OWNED))
    )
    out = (
        gpu.join(
            used.select(
                *key,
                pl.col("idx").alias("launch_idx"),
                pl.col("name").alias("launch"),
                pl.col("dur").alias("launch_dur"),
            ),
            on=key,
            how="left",
            maintain_order="left",
        )
        .join(ops, on=key, how="left", maintain_order="left")
        .join(around, on=[*by, "launch_idx"], how="left", maintain_order="left")
        .with_columns(is_graph_launch(pl.col("launch")).alias("graph"), owner.alias("owner"))
        .with_columns(_module_of_graph_kernels())
    )
    # the backend of each distinct (name, launch): a few hundred, not a row per kernel
    names = (
        out.select("name", "launch")
        .unique()
        .with_columns(kernel_backend.backend(pl.col("name"), pl.col("launch")).alias("backend"))
    )
    out = out.join(
        names, on=["name", "launch"], how="left", nulls_equal=True, maintain_order="left"
    )
    return out.select(*by, *OWNER_COLUMNS).cast(OWNER_COLUMNS)  # type: ignore[arg-type]


def _module_of_graph_kernels() -> list[pl.Expr]:
    """`module` and `module_from`: a graph kernel's annotation wins over the module around
    its launch (that module runs the whole graph, every layer of it)."""
    annotated = pl.col("graph") & pl.col("annotation").is_not_null()
    return [
        pl.when(annotated).then(pl.col("annotation")).otherwise(pl.col("module")).alias("module"),
        pl.when(annotated)
        .then(pl.lit(ANNOTATED))
        .when(pl.col("module").is_not_null())
        .then(pl.lit(AROUND))
        .alias("module_from"),
    ]


def _verdict(row: dict[str, object], outside_by: Iterable[tuple]) -> str:
    """One line: the share of kernel time with no operator, and why."""
    if not row["kernels"]:
        return "no GPU kernels"
    pct = row["no_operator_pct"] or 0.0
    parts = []
    if pct == 0:
        parts.append("every kernel's time belongs to an operator")
    else:
        share = f"{pct:.1f}%" if pct >= 0.1 else "<0.1%"
        parts.append(
            f"{share} of kernel time ({row['no_operator (us)']:,.0f} us) belongs to no operator"
        )
        why = []
        for launch, calls, _time in outside_by:
            why.append(f"{calls} {launch} call{'s' if calls != 1 else ''} outside any operator")
        if row["no_launch_event (us)"]:
            why.append(f"{row['no_launch_event (us)']:,.0f} us of kernels with no launch event")
        if why:
            parts[-1] += ": " + "; ".join(why)
    if row["graph_kernels_annotated"]:
        n = row["graph_kernels_annotated"]
        parts.append(
            f"{n:,} graph kernel{'s' if n != 1 else ''} in modules by their CUDA-graph "
            "annotation (not the module around the launch)"
        )
    if row["graph_launches_without_kernels"]:
        n = row["graph_launches_without_kernels"]
        parts.append(
            f"{n} graph launch{'es' if n != 1 else ''} with no kernel events "
            f"({row['graph_launch_cpu_without_kernels (us)']:,.0f} us on the CPU): "
            "profiled without the graph's kernels"
        )
    if row["overlapping_on_stream"]:
        n = row["overlapping_on_stream"]
        parts.append(
            f"{n} GPU op{'s overlap' if n != 1 else ' overlaps'} an earlier one on "
            f"{'their' if n != 1 else 'its'} stream "
            "(the timeline shows them in lanes; Perfetto drops those not nested)"
        )
    return "; ".join(parts)


def _graph_launches(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A rank's graph launch calls, and those of them with no GPU op (their kernels were not
    recorded): `dur` only."""
    return _graph_launch_rows(events, [])


def overlapping_on_stream(events: pl.DataFrame) -> int:
    """GPU ops (kernels, memcpys, memsets) that start before an earlier op of their stream
    ended: what a timeline that nests a stream's events by time hides, and what Perfetto
    drops when they are not nested (the app's timeline packs them into lanes, `lanes`)."""
    return _overlapping(events, []).select(pl.col("o").sum()).collect().item()


def _graph_launch_rows(events: pl.DataFrame, by: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The graph launch calls of `events` and those of them with no GPU op of the same `by`
    keys (`rank`, or none for one rank): `by` and `dur`. Lazy: the few columns read, not
    every column of the GPU ops."""
    launch = pl.col("kind").is_in(LAUNCH_KINDS)
    # the pattern on the distinct launch names only, not on every call
    names = events.lazy().filter(launch).select(pl.col("name").unique()).collect()
    graph_names = names.filter(is_graph_launch())["name"]
    if graph_names.is_empty():  # most ranks: no graph launch, no GPU op to look for
        none = events.select(*by, "dur").clear()
        return none, none
    graphs = (
        events.lazy()
        .filter(launch & pl.col("name").is_in(graph_names.implode()))
        .select(*by, "correlation", "dur")
        .collect()
    )
    gpu = (
        events.lazy()
        .filter(pl.col("kind").is_in(GPU_WORK_KINDS) & pl.col("correlation").is_not_null())
        .select(*by, "correlation")
        .unique()
        .collect()
    )
    bare = graphs.join(gpu, on=[*by, "correlation"], how="anti", maintain_order="left")
    return graphs.select(*by, "dur"), bare.select(*by, "dur")


def _overlapping(events: pl.DataFrame, by: list[str]) -> pl.LazyFrame:
    """Each GPU op on a stream with `o`: it starts before an earlier op of its stream (within
    its `by` keys) ended."""
    keys = [*by, "stream"]
    return (
        events.lazy()
        .filter(pl.col("kind").is_in(GPU_WORK_KINDS) & pl.col("stream").is_not_null())
        .select(*keys, "ts", (pl.col("ts") + pl.col("dur")).alias("end"))
        .sort([*keys, "ts", "end"], descending=[*(False for _ in keys), False, True])
        .with_columns((pl.col("ts") < pl.col("end").cum_max().shift(1).over(keys)).alias("o"))
    )


def _summary(
    owners: pl.DataFrame, graphs: pl.DataFrame, bare: pl.DataFrame, overlapping: int
) -> dict:
    """`ATTRIBUTION_COLUMNS` (but rank) of these kernels (`kernel_owners` rows, `launch_idx`
    unique per launch), graph launches and overlapping GPU ops, as one dict."""
    dur = pl.col("dur")
    none = pl.col("owner") != OWNED
    row = owners.select(
        pl.len().cast(pl.UInt32).alias("kernels"),
        us(dur.sum()).alias("kernel_time (us)"),
        us(dur.filter(none).sum()).alias("no_operator (us)"),
        us(dur.filter(pl.col("owner") == OUTSIDE).sum()).alias("outside_any_operator (us)"),
        us(dur.filter(pl.col("owner").is_in([NO_LAUNCH, NO_CORRELATION])).sum()).alias(
            "no_launch_event (us)"
        ),
        pl.col("graph").sum().cast(pl.UInt32).alias("graph_kernels"),
        us(dur.filter("graph").sum()).alias("graph_kernel_time (us)"),
        (pl.col("module_from") == ANNOTATED).sum().cast(pl.UInt32).alias("graph_kernels_annotated"),
    ).row(0, named=True)
    total = row["kernel_time (us)"]
    row["no_operator_pct"] = 100 * row["no_operator (us)"] / total if total else 0.0
    row["graph_launches"] = graphs.height
    row["graph_launches_without_kernels"] = bare.height
    row["graph_launch_cpu_without_kernels (us)"] = float(bare["dur"].sum()) / 1000
    row["overlapping_on_stream"] = overlapping
    outside_by = (
        owners.filter(pl.col("owner") == OUTSIDE)
        .group_by("launch")
        .agg(pl.col("launch_idx").n_unique().alias("calls"), dur.sum().alias("t"))
        .sort("t", "launch", descending=[True, False])
        .select("launch", "calls", "t")
        .head(3)
    )
    row["verdict"] = _verdict(row, outside_by.iter_rows())
    return row


def rank_attribution(events: pl.DataFrame) -> pl.DataFrame:
    """One rank's row of `kernel_attribution` (no `rank` column)."""
    return kernel_attribution({0: events}).drop("rank")


def job_verdict(ranks: Mapping[int, pl.DataFrame]) -> str | None:
    """The verdict over the ranks together (a launch is told apart by rank), or None when
    every kernel's time belongs to an operator and no graph launch lacks its kernels: the
    app's views say it only when there is something to say."""
    owners, graphs, bare = [], [], []
    overlapping = 0
    for rank, events in sorted(ranks.items()):
        overlapping += overlapping_on_stream(events)
        owners.append(
            kernel_owners(events)
            .filter(pl.col("kind") == "kernel")
            .with_columns(pl.struct(pl.lit(rank), "launch_idx").alias("launch_idx"))
        )
        g, b = _graph_launches(events)
        graphs.append(g)
        bare.append(b)
    if not owners:
        return None
    row = _summary(pl.concat(owners), pl.concat(graphs), pl.concat(bare), overlapping)
    quiet = not (
        row["no_operator (us)"]
        or row["graph_kernels_annotated"]
        or row["graph_launches_without_kernels"]
        or row["overlapping_on_stream"]
    )
    if not row["kernels"] or quiet:
        return None
    verdict: str = row["verdict"]
    return verdict[:1].upper() + verdict[1:]


def kernel_attribution(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Per rank (`ATTRIBUTION_COLUMNS`): kernel time, the time and share that belongs to no
    operator (outside any operator, no launch event), graph launches and their kernels, graph
    launches with no kernel events and their CPU time, and a one-line verdict. Every rank's
    figures in a few queries over the ranks' kernels together (`rank` in every key), then
    each rank's row as `rank_attribution` makes it (the shares and verdict in Python)."""
    if not ranks:
        return pl.DataFrame(schema=ATTRIBUTION_COLUMNS)
    every = pl.DataFrame({"rank": sorted(ranks)}, schema={"rank": pl.Int64()})
    owners = owned_kernels(ranks)
    dur = pl.col("dur")
    none = pl.col("owner") != OWNED
    # ns here, us below (each rank's figures were one row: divided exactly, as in Python)
    times = {
        "kernel_time (us)": dur.sum(),
        "no_operator (us)": dur.filter(none).sum(),
        "outside_any_operator (us)": dur.filter(pl.col("owner") == OUTSIDE).sum(),
        "no_launch_event (us)": dur.filter(
            pl.col("owner").is_in([NO_LAUNCH, NO_CORRELATION])
        ).sum(),
        "graph_kernel_time (us)": dur.filter("graph").sum(),
    }
    sums = every.join(
        owners.group_by("rank").agg(
            pl.len().cast(pl.UInt32).alias("kernels"),
            *(t.alias(c) for c, t in times.items()),
            pl.col("graph").sum().cast(pl.UInt32).alias("graph_kernels"),
            (pl.col("module_from") == ANNOTATED)
            .sum()
            .cast(pl.UInt32)
            .alias("graph_kernels_annotated"),
        ),
        on="rank",
        how="left",
    ).fill_null(0)  # a rank without kernels: what the sums of none are
    events = tagged([(r, ev) for r, ev in sorted(ranks.items())])
    graphs, bare = _ranks_graph_launches(events)
    launches = every.join(
        graphs.group_by("rank").agg(pl.len().alias("graph_launches")), on="rank", how="left"
    ).join(
        bare.group_by("rank").agg(pl.len().alias("bare"), dur.sum().alias("bare_dur")),
        on="rank",
        how="left",
    )
    # (the GPU ops of `kernel_owners`, kept: the events' GPU ops, in their order)
    gpu_ops = tagged([(r, kernel_owners(ev)) for r, ev in sorted(ranks.items())])
    overlapping = _overlapping_on_stream(gpu_ops)
    outside = (
        owners.filter(pl.col("owner") == OUTSIDE)
        .group_by("rank", "launch")
        .agg(pl.col("launch_idx").n_unique().alias("calls"), dur.sum().alias("t"))
        .sort(["rank", "t", "launch"], descending=[False, True, False])
        .group_by("rank", maintain_order=True)
        .head(3)
    )
    outside_by: dict[int, list[tuple]] = {}
    for rank, launch, calls, t in outside.select("rank", "launch", "calls", "t").iter_rows():
        outside_by.setdefault(rank, []).append((launch, calls, t))
    rows = []
    for row, extra in zip(
        sums.sort("rank").iter_rows(named=True),
        launches.sort("rank").iter_rows(named=True),
        strict=True,
    ):
        rank = row["rank"]
        row.update({c: float(row[c]) / 1000 for c in times})
        total = row["kernel_time (us)"]
        row["no_operator_pct"] = 100 * row["no_operator (us)"] / total if total else 0.0
        row["graph_launches"] = extra["graph_launches"] or 0
        row["graph_launches_without_kernels"] = extra["bare"] or 0
        row["graph_launch_cpu_without_kernels (us)"] = float(extra["bare_dur"] or 0) / 1000
        row["overlapping_on_stream"] = overlapping.get(rank, 0)
        row["verdict"] = _verdict(row, outside_by.get(rank, []))
        rows.append({k: row[k] for k in ATTRIBUTION_COLUMNS})
    return pl.DataFrame(rows, schema=ATTRIBUTION_COLUMNS)


def owned_kernels(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Every rank's kernels (`kernel_owners`, kind "kernel"), `rank` first, in one frame:
    once per job (the attribution's tables read it)."""
    return job_cached(ranks, "owned_kernels", lambda: _owned_kernels(ranks))


def _owned_kernels(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    ranks_owners(ranks)
    owners = tagged([(r, kernel_owners(ev)) for r, ev in sorted(ranks.items())])
    if owners.is_empty():
        return pl.DataFrame(schema={"rank": pl.Int64(), **OWNER_COLUMNS})
    return owners.filter(pl.col("kind") == "kernel")


def _ranks_graph_launches(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`_graph_launches` of every rank at once (`rank` first in `events` and the answers)."""
    if events.is_empty():
        empty = pl.DataFrame(schema={"rank": pl.Int64(), "dur": pl.Int64()})
        return empty, empty
    return _graph_launch_rows(events, ["rank"])


def _overlapping_on_stream(events: pl.DataFrame) -> dict[int, int]:
    """rank -> `overlapping_on_stream` of its events (or its GPU ops), every rank at once
    (`rank` first)."""
    if events.is_empty():
        return {}
    per = _overlapping(events, ["rank"]).group_by("rank").agg(pl.col("o").sum()).collect()
    return dict(per.iter_rows())


def unattributed_kernels(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """The kernel time that belongs to no operator per rank, reason and launch: kernels,
    time (us), share of the rank's kernel time (%); costliest first."""
    owners = _owned_with_total(ranks)
    table = (
        owners.filter(pl.col("owner") != OWNED)
        .group_by("rank", "owner", "launch")
        .agg(
            pl.len().cast(pl.UInt32).alias("kernels"),
            pl.col("launch_idx").drop_nulls().n_unique().cast(pl.UInt32).alias("launches"),
            pl.col("dur").sum().alias("__t"),
            pl.col("__total").first(),
        )
        .select(
            "rank",
            pl.col("owner").alias("reason"),
            "launch",
            "launches",
            "kernels",
            *_time_and_share(),
        )
    )
    schema = {
        "rank": pl.Int64(), "reason": pl.String(), "launch": pl.String(),
        "launches": pl.UInt32(), "kernels": pl.UInt32(), "time (us)": pl.Float64(),
        "share_pct": pl.Float64(),
    }  # fmt: skip
    return table.cast(schema).sort(
        ["rank", "time (us)", "reason", "launch"], descending=[False, True, False, False]
    )


def _owned_with_total(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """`owned_kernels` with `__total`, its rank's kernel time (ns), once per job (three
    tables read it)."""
    owners = owned_kernels(ranks)
    return job_cached(ranks, "owned_kernels_total", lambda: _with_total(owners))


def _with_total(owners: pl.DataFrame) -> pl.DataFrame:
    """`owners` with `__total`, its rank's kernel time (ns)."""
    return owners.with_columns(pl.col("dur").sum().over("rank").alias("__total"))


def _time_and_share() -> list[pl.Expr]:
    """`time (us)` of `__t` (ns) and `share_pct`, 100 x `__t` / `__total` (its rank's kernel
    time; 0 without any), divided as each rank's table alone was (`divided_as_alone`)."""
    alone = pl.len().over("rank") == 1
    share = divided_as_alone(100 * pl.col("__t"), pl.col("__total"), alone)
    return [
        divided_as_alone(pl.col("__t"), 1000, alone).alias("time (us)"),
        pl.when(pl.col("__total") != 0).then(share).otherwise(0.0).alias("share_pct"),
    ]


MODULE_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "module": pl.String(),  # null: launched outside any nn.Module, with no annotation
    "module_from": pl.String(),  # ANNOTATED or AROUND
    "kernels": pl.UInt32(),
    "time (us)": pl.Float64(),
    "share_pct": pl.Float64(),  # of the rank's kernel time
}


def kernel_modules(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Kernel time per rank and module, costliest first: a graph kernel in the module its
    CUDA-graph annotation names (`module_from` ANNOTATED), any other kernel in the
    innermost nn.Module around its launch (AROUND)."""
    return _kernel_time_by(ranks, ("module", "module_from"), MODULE_COLUMNS)


BACKEND_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "backend": pl.String(),
    "compiled_region": pl.String(),  # null: launched outside any compiled region
    "kernels": pl.UInt32(),
    "time (us)": pl.Float64(),
    "share_pct": pl.Float64(),  # of the rank's kernel time
}


def kernel_backends(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """Kernel time per rank, backend (cuBLAS, Triton, NCCL, MIOpen...) and the compiled
    region that launched it (`CompiledFunction`, `Torch-Compiled Region: 0/0`; null for
    eager code): where compiled and library code spend the GPU's time, costliest first."""
    return _kernel_time_by(ranks, ("backend", "compiled_region"), BACKEND_COLUMNS)


def _kernel_time_by(
    ranks: Mapping[int, pl.DataFrame], keys: tuple[str, str], schema: dict[str, pl.DataType]
) -> pl.DataFrame:
    """Kernel count, time and share of the rank's kernel time per rank and `keys` (columns
    of `kernel_owners`), costliest first within each rank."""
    table = (
        _owned_with_total(ranks)
        .group_by("rank", *keys)
        .agg(pl.len().alias("kernels"), pl.col("dur").sum().alias("__t"), pl.col("__total").first())
        .select("rank", *keys, "kernels", *_time_and_share())
    )
    return table.cast(schema).sort(
        ["rank", "time (us)", *keys],
        descending=[False, True, False, False],
        nulls_last=True,
    )


def backend_by_name(ranks: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """`name` -> `backend` of every kernel name of the ranks (the backend most of its kernels
    have, where launches differ): for the views that list kernels by name."""
    parts = [
        kernel_owners(events).filter(pl.col("kind") == "kernel").select("name", "backend")
        for _, events in sorted(ranks.items())
    ]
    if not parts:
        return pl.DataFrame(schema={"name": pl.String, "backend": pl.String})
    return (
        pl.concat(parts)
        .group_by("name", "backend")
        .len()
        .sort(["name", "len", "backend"], descending=[False, True, False])
        .unique("name", keep="first", maintain_order=True)
        .select("name", "backend")
    )
