"""The per-file summaries (the overview's row, the step breakdown) of a file parsed in pieces,
made where each piece's events are parsed and merged from the pieces' small parts at the end.

Reading a 10 GB rank's events back for them cost 35-40 s of one core after the parse, alone,
and set the open's peak (14 columns of 22.6 M events, 3.8 GB). Here each piece worker
reduces its events to what the summaries depend on, and the parent merges those parts.
Where a reduction could change a number it is not made: what depends on rows of other
pieces travels as rows (only the few columns used), and only what merges exactly is reduced:
- the overview: the GPU work (kernels, memcpy, memset: stream, start, duration), for the
  busy time and the ops overlapping on a stream; the GPU events of HTA's view (start, end,
  kernel type) and, for HTA's ProfilerStep filter, whether the filter sees each on the GPU
  and its correlation, the latest step start (a max) and each correlation's earliest start
  on the CPU (a min per correlation);
- the step breakdown: the rows its steps are made of (steps, GPU work, runtime calls, and
  the two host rows that bound a trace without steps), in file order; each role's
  intervals merged into their union (the union of unions is the union); kernels whose role
  (communication or computation) a collective op of another piece may decide, as rows with
  their external id, and the collectives' external ids.
The merged numbers equal the whole rank's (tests/test_stream.py checks every field).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from hta_tui.analysis import interval_arrays, tb_roles, tb_steps
from hta_tui.analysis.hta_view import _hta_kernel_filter, gpu_mask, kernel_type
from hta_tui.analysis.step_breakdown import breakdown_table
from hta_tui.trace.schema import GPU_WORK_KINDS

#: The events' columns the step breakdown's steps read (`tb_steps.profiler_steps`), the
#: name last.
_STEP_ROW_COLUMNS = ("ts", "dur", "kind", "cat", "correlation", "name")


@dataclass
class Part:
    """One piece's share of the summaries (see the module docstring)."""

    work: pl.DataFrame  # kind, stream, ts, dur of its GPU work
    gpu: pl.DataFrame  # start, end, kernel_type, on_gpu, corr of its HTA GPU events
    cpu_corr: pl.DataFrame  # corr, start: each correlation's earliest CPU-side start
    last_step: int | None  # the latest ProfilerStep start on the CPU side
    step_rows: pl.DataFrame | None = None  # the rows the steps are made of
    roles: pl.DataFrame | None = None  # role, start, end: each role's union
    open_kernels: pl.DataFrame | None = None  # external_id, start, end
    comm_ids: pl.Series | None = None


def overview_part(events: pl.DataFrame) -> Part:
    """A piece's share of the overview's row (`overview.rank_summary`, exact timestamps).
    Lazy queries: each reads only its columns of the rows it keeps."""
    lf = events.lazy()
    work = lf.filter(pl.col("kind").is_in(GPU_WORK_KINDS)).select("kind", "stream", "ts", "dur")
    # as `hta_view.build_rank_view`: its rows, its times (exact: start = ts), its GPU test,
    # and `_filter_profiler_steps`' GPU test
    seen = pl.col("cat").is_not_null() & (pl.col("cat") != "Trace") & pl.col("ts").is_not_null()
    on_gpu = _hta_kernel_filter()
    corr = pl.col("correlation").fill_null(-1)
    gpu = lf.filter(seen & gpu_mask(hta_compat=False)).select(
        pl.col("ts").alias("start"),
        (pl.col("ts") + pl.col("dur")).alias("end"),
        kernel_type().alias("kernel_type"),
        on_gpu.alias("on_gpu"),
        corr.alias("corr"),
    )
    cpu = lf.filter(seen & ~on_gpu)
    cpu_corr = cpu.group_by(corr.alias("corr")).agg(pl.col("ts").min().alias("start"))
    step = pl.col("name").str.contains("ProfilerStep", literal=True).fill_null(False)
    last = cpu.select(pl.col("ts").filter(step).max())
    work_df, gpu_df, cpu_df, last_df = pl.collect_all([work, gpu, cpu_corr, last])
    return Part(work_df, gpu_df, cpu_df, last_df.item())


def summary_part(events: pl.DataFrame) -> Part:
    """A piece's share of the overview's row and of the step breakdown (the app's)."""
    part = overview_part(events)
    part.step_rows = _step_rows(events)
    part.roles, part.open_kernels, part.comm_ids = _roles(events)
    return part


def _step_rows(events: pl.DataFrame) -> pl.DataFrame:
    """The rows `tb_steps.profiler_steps` reads, in file order: its steps, the GPU work, the
    runtime calls with a correlation, and of the rows bounding a trace without steps only
    the earliest start and the latest end."""
    bounds = (
        events.lazy()
        .with_row_index("i")
        .filter(tb_roles.host_span_rows())
        .select("i", "ts", (pl.col("ts") + pl.col("dur")).alias("end"))
        .collect()
    )
    at = [
        bounds["i"][k] for k in (bounds["ts"].arg_min(), bounds["end"].arg_max()) if k is not None
    ]
    keep = (
        tb_roles.step_rows(tb_compat=False)
        | tb_roles.device_rows(tb_compat=False)
        | (tb_roles.runtime_rows(tb_compat=False) & pl.col("correlation").is_not_null())
        | pl.int_range(pl.len(), dtype=pl.UInt32).is_in(pl.Series(at, dtype=pl.UInt32).implode())
    )
    # a name is read only where it makes a step (long kernel names would be most of it)
    step_name = pl.when(tb_roles.STEP_NAME).then(pl.col("name"))
    rows = events.lazy().filter(keep)
    return rows.select(*_STEP_ROW_COLUMNS[:-1], step_name.alias("name")).collect()


def _roles(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """Each role's intervals merged (`tb_roles.role_of`, default rules), but the kernels
    whose role an other piece's collective may decide; those kernels; the collectives'
    external ids."""
    lf = tb_roles.role_flags(events, tb_compat=False)
    flags = lf.filter(pl.col("__comm") | pl.col("__kernel")).collect()
    comm = tb_roles.comm_ids(flags)
    # a kernel is communication when its name says so or its launch is a collective's
    local = tb_roles.comm_kernels(flags, comm, tb_compat=False)
    undecided = pl.col("__kernel") & pl.col("external_id").is_not_null() & ~local.fill_null(False)
    undecided = undecided.fill_null(False)
    open_kernels, roles = pl.collect_all(
        [
            lf.filter(undecided).select(
                "external_id",
                pl.col("ts").alias("start"),
                (pl.col("ts") + pl.col("dur")).alias("end"),
            ),
            lf.filter(~undecided).select(
                tb_roles.role_rule(local, tb_compat=False).alias("role"),
                pl.col("ts").alias("start"),
                (pl.col("ts") + pl.col("dur")).alias("end"),
            ),
        ]
    )
    return _merged(roles.drop_nulls()), open_kernels.drop_nulls(["start", "end"]), comm


def _merged(roles: pl.DataFrame) -> pl.DataFrame:
    """Each role's intervals as their union (sorted, disjoint)."""
    role, start, end = (roles[c].to_numpy() for c in ("role", "start", "end"))
    order = np.lexsort((start, role))
    role, start, end = role[order], start[order], end[order]
    bounds = np.searchsorted(role, np.arange(len(tb_roles.ROLES) + 1))
    out = []
    for r in range(len(tb_roles.ROLES)):
        a, b = bounds[r], bounds[r + 1]
        s, e = interval_arrays.union(start[a:b], end[a:b], ordered=True)
        out.append(np.full(s.size, r, dtype=np.int8))
        out.append(s)
        out.append(e)
    return pl.DataFrame(
        {
            "role": np.concatenate(out[0::3]),
            "start": np.concatenate(out[1::3]),
            "end": np.concatenate(out[2::3]),
        },
        schema={"role": pl.Int8(), "start": pl.Int64(), "end": pl.Int64()},
    )


def overview_inputs(parts: list[Part], *, step_filter: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    """What `overview.summary_row` makes the overview's row of (exact timestamps), for the
    whole rank, from its pieces' parts: its GPU work, and the GPU events of its HTA view."""
    work = pl.concat([p.work for p in parts])
    gpu = pl.concat([p.gpu for p in parts])
    if step_filter:  # HTA's ProfilerStep filter (`hta_view._filter_profiler_steps`)
        starts = [p.last_step for p in parts if p.last_step is not None]
        if not starts:
            gpu = gpu.clear()
        else:
            last = max(starts)
            cpu = pl.concat([p.cpu_corr for p in parts]).group_by("corr").agg(pl.col("start").min())
            launched = cpu.filter(pl.col("start") < last)["corr"]
            on_gpu = pl.col("on_gpu")
            gpu = gpu.filter(
                (~on_gpu & (pl.col("start") < last))
                | (on_gpu & pl.col("corr").is_in(launched.implode()))
            )
    return work, gpu.select("start", "end", "kernel_type")


def breakdown(parts: list[Part]) -> pl.DataFrame:
    """`step_breakdown.rank_breakdown` of the whole rank (default rules), from its pieces'
    parts (`summary_part`)."""
    rows = pl.concat([p.step_rows for p in parts if p.step_rows is not None])
    steps = tb_steps.profiler_steps(rows, tb_compat=False).filter("used")

    def roles() -> pl.DataFrame:
        comm = pl.concat([p.comm_ids for p in parts if p.comm_ids is not None]).unique()
        kernels = pl.concat([p.open_kernels for p in parts if p.open_kernels is not None])
        is_comm = pl.col("external_id").is_in(comm.implode())
        decided = kernels.select(
            pl.when(is_comm).then(3).otherwise(0).cast(pl.Int8).alias("role"), "start", "end"
        )
        return pl.concat([*(p.roles for p in parts if p.roles is not None), decided])

    return breakdown_table(steps, roles)
