"""Every analysis by its report name, with the options it takes: one list that the report
command, the Python API and the app all read, so adding an analysis is one entry here.

Each entry turns the loaded ranks into named tables; the names are the report's top-level
JSON keys and the CSV file names (HTA's method name without `get_`, plus a second name where
HTA returns two tables).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import polars as pl

from hta_tui.analysis import (
    annotations,
    aten_ops,
    collective_streams,
    collectives,
    comm_overview,
    comm_plugin,
    comm_stats,
    gpu_metric_series,
    gpu_metrics,
    idle,
    kernel_owners,
    kernel_view,
    kernels,
    launch,
    memory,
    memory_view,
    module_view,
    operators,
    overlap,
    queue,
    scheduling,
    sequences,
    step_breakdown,
    step_time_stats,
    steps,
    sync_summary,
    temporal,
)
from hta_tui.analysis.critical_path.tables import critical_path_instances, critical_path_tables

Ranks = Mapping[int, pl.DataFrame]
Tables = dict[str, pl.DataFrame]
#: a frame name (trace/schema.py) -> that frame of every rank
FrameGetter = Callable[[str], Ranks]


@dataclass(frozen=True)
class Options:
    """HTA's parameters, with HTA's defaults."""

    hta_compat: bool = False
    consecutive_kernel_delay_us: float = 30
    duration_ratio: float = 0.8
    num_kernels: int = 10
    include_memory_kernels: bool = True
    runtime_cutoff_us: float = 50
    launch_delay_cutoff_us: float = 100
    max_queue_length: int = 1024
    #: Frequent kernel sequences need an operator; a ProfilerStep's sequences by default.
    operator_name: str = "ProfilerStep"
    min_pattern_len: int = 3
    top_k: int = 5
    #: The TensorBoard plugin's own rules, its blind spots included, for its views: the step
    #: breakdown, GPU metrics, kernel and operator views, and the distributed view (its five
    #: collective names, CPU-side timing) instead of with every collective recognised.
    tb_compat: bool = False
    #: The critical path's steps: "first" (HTA's instance 0), "all", "N" or "N-M" (instances
    #: of the ProfilerStep annotation, from 0; a range is one window, as HTA's tuple).
    critical_path_steps: str = "first"


def parameters() -> dict[str, object]:
    """The analyses' parameters a user sets by name (`options_with`), with their defaults;
    `hta_compat` is a mode of its own."""
    return {k: v for k, v in dataclasses.asdict(Options()).items() if k != "hta_compat"}


def options_with(settings: Mapping[str, str]) -> Options:
    """HTA's defaults with parameters given as text ("top_k" -> "10"), each converted to its
    field's type; ValueError names an unknown parameter or a value of the wrong type."""
    fields = {f.name: f for f in dataclasses.fields(Options) if f.name in parameters()}
    changes: dict[str, object] = {}
    for name, text in settings.items():
        field = fields.get(name)
        if field is None:
            raise ValueError(f"unknown parameter {name!r} (one of: {', '.join(fields)})")
        kind = {"bool": bool, "int": int, "float": float}.get(str(field.type), str)
        try:
            if kind is bool:
                if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(text)
                changes[name] = text.lower() in ("true", "1", "yes")
            else:
                changes[name] = kind(text)
        except ValueError:
            wanted = {int: "an integer", float: "a number", bool: "true or false"}.get(kind, "text")
            raise ValueError(f"{name} wants {wanted}, not {text!r}") from None
    return dataclasses.replace(Options(), **changes)


@dataclass(frozen=True)
class Analysis:
    name: str
    title: str
    run: Callable[..., Tables]  # (ranks, options, **frames) -> tables
    #: Large per-event outputs (time series) run only when asked for by name.
    default: bool = True
    #: Frames besides events it reads, each passed as a keyword argument (`run`).
    frames: tuple[str, ...] = ()
    #: Seconds it takes on 8 ranks of 100 MB (bench/ANALYSES.md, roughly): `run` starts the
    #: longest first, so no long one is left to run alone at the end.
    cost: float = 0.0
    #: Starts from HTA's shared per-rank views (`hta_view`): `run` starts it once the first
    #: such analysis has built them (`scheduling`).
    views: bool = True
    #: Which steps its numbers cover (`coverage.STEPS`): HTA's (the last left out), the
    #: plugin's (moved to their GPU work), every ProfilerStep, or the whole trace.
    steps: str = "hta"
    #: Whose definitions it follows (`coverage.DEFINITIONS`): HTA's, the TensorBoard
    #: plugin's, or this project's own.
    definitions: str = "hta"


def with_rank(per_rank: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """rank -> frame (HTA's dict answers) as one frame with a leading rank column."""
    frames = [
        df.select(pl.lit(rank, pl.Int64).alias("rank"), pl.all())
        for rank, df in sorted(per_rank.items())
        if not df.is_empty()
    ]
    if frames:
        return pl.concat(frames, how="diagonal_relaxed")
    first = next(iter(per_rank.values()), pl.DataFrame())
    return first.select(pl.lit(None, pl.Int64).alias("rank"), pl.all()).clear()


def _temporal(r: Ranks, o: Options) -> Tables:
    return {"temporal_breakdown": temporal.temporal_breakdown(r, hta_compat=o.hta_compat)}


def _idle(r: Ranks, o: Options) -> Tables:
    breakdown, stats = idle.idle_time_breakdown(
        r,
        consecutive_kernel_delay_us=o.consecutive_kernel_delay_us,
        hta_compat=o.hta_compat,
        show_idle_interval_stats=True,
    )
    assert stats is not None
    return {"idle_time_breakdown": breakdown, "idle_interval_stats": stats}


def _kernels(r: Ranks, o: Options) -> Tables:
    kernel_type, per_kernel = kernels.gpu_kernel_breakdown(
        r,
        duration_ratio=o.duration_ratio,
        num_kernels=o.num_kernels,
        include_memory_kernels=o.include_memory_kernels,
        hta_compat=o.hta_compat,
    )
    return {"gpu_kernel_breakdown": per_kernel, "gpu_kernel_type_breakdown": kernel_type}


def _kernel_stats(r: Ranks, o: Options) -> Tables:
    return {"kernel_duration_stats": kernels.kernel_duration_stats(r, hta_compat=o.hta_compat)}


def _overlap(r: Ranks, o: Options) -> Tables:
    return {"comm_comp_overlap": overlap.comm_comp_overlap(r, hta_compat=o.hta_compat)}


def _queue_summary(r: Ranks, o: Options) -> Tables:
    series = queue.queue_length_series(r, hta_compat=o.hta_compat)
    return {
        "queue_length_summary": queue.queue_length_summary_from_series(series),
        "time_spent_blocked_on_full_queue": queue.time_blocked_on_full_queue(
            r, o.max_queue_length, hta_compat=o.hta_compat, series=series
        ),
    }


def _queue_series(r: Ranks, o: Options) -> Tables:
    return {"queue_length_time_series": queue.queue_length_series(r, hta_compat=o.hta_compat)}


def _memory_summary(r: Ranks, o: Options) -> Tables:
    return {"memory_bw_summary": memory.memory_bw_summary(r, hta_compat=o.hta_compat)}


def _memory_series(r: Ranks, o: Options) -> Tables:
    return {"memory_bw_time_series": memory.memory_bw_series(r, hta_compat=o.hta_compat)}


def _launch(r: Ranks, o: Options) -> Tables:
    per_rank = launch.cuda_kernel_launch_stats(
        r,
        runtime_cutoff=o.runtime_cutoff_us,
        launch_delay_cutoff=o.launch_delay_cutoff_us,
        hta_compat=o.hta_compat,
    )
    return {"cuda_kernel_launch_stats": with_rank(per_rank)}


def _sequences(r: Ranks, o: Options) -> Tables:
    table = sequences.frequent_cuda_kernel_sequences(
        r,
        o.operator_name,
        min_pattern_len=o.min_pattern_len,
        top_k=o.top_k,
        hta_compat=o.hta_compat,
    )
    return {"frequent_cuda_kernel_sequences": table}


def _aten(r: Ranks, o: Options) -> Tables:
    table = aten_ops.aten_op_kernels_and_delay(r, hta_compat=o.hta_compat)
    return {"aten_op_kernels_and_delay": table}


def _steps(r: Ranks, o: Options) -> Tables:
    numbers = pl.DataFrame({"step": steps.profiler_steps(r)}, schema={"step": pl.Int64()})
    scores = steps.straggler_candidates(r, hta_compat=o.hta_compat)
    ranks = pl.DataFrame({"rank": steps.potential_stragglers(scores)}, schema={"rank": pl.Int64()})
    return {
        "profiler_steps": numbers,
        "iterations": steps.iterations(r, hta_compat=o.hta_compat),
        "potential_stragglers": ranks,
        "straggler_scores": scores,
    }


#: Tables that HTA answers with a list: the report's JSON writes them as a list of that column
#: (`"potential_stragglers": [3]`), the text and CSV outputs as one-column tables.
LIST_KEYS: dict[str, str] = {"potential_stragglers": "rank"}


def json_value(name: str, table: pl.DataFrame) -> list[object]:
    """A table as the report's JSON writes it: records, or a list for `LIST_KEYS`."""
    if name in LIST_KEYS:
        return table[LIST_KEYS[name]].to_list()
    return table.to_dicts()


def _annotations(r: Ranks, o: Options) -> Tables:
    return {
        "user_annotation_breakdown": annotations.user_annotation_breakdown(
            r, gpu=False, hta_compat=o.hta_compat
        ),
        "gpu_user_annotation_breakdown": annotations.user_annotation_breakdown(
            r, gpu=True, hta_compat=o.hta_compat
        ),
    }


def _step_time(r: Ranks, o: Options) -> Tables:
    breakdown = step_breakdown.step_time_breakdown(r, tb_compat=o.tb_compat)
    return {
        "step_time_breakdown": breakdown,
        "step_selection": step_breakdown.step_selection(r, tb_compat=o.tb_compat),
        "step_time_average": step_time_stats.step_time_average(breakdown),
        "step_time_stats": step_time_stats.step_time_stats(breakdown),
        "outlier_steps": step_time_stats.outlier_steps(breakdown),
    }


def _gpu_metrics(r: Ranks, o: Options) -> Tables:
    return {
        "gpu_metrics": gpu_metrics.gpu_metrics(r, tb_compat=o.tb_compat),
        "gpu_utilization_series": gpu_metrics.utilization_series(r, tb_compat=o.tb_compat),
    }


def _metric_series(r: Ranks, o: Options) -> Tables:
    return {"gpu_metric_series": gpu_metric_series.metric_series(r, tb_compat=o.tb_compat)}


def _sm_series(r: Ranks, o: Options) -> Tables:
    return {"gpu_sm_efficiency_series": gpu_metrics.sm_efficiency_series(r, tb_compat=o.tb_compat)}


def _kernel_view(r: Ranks, o: Options) -> Tables:
    return {"kernel_view": kernel_view.kernel_table(r, tb_compat=o.tb_compat)}


def _kernel_view_by_op(r: Ranks, o: Options) -> Tables:
    return {"kernel_view_by_op": kernel_view.kernel_op_table(r, tb_compat=o.tb_compat)}


def _attribution(r: Ranks, o: Options) -> Tables:
    return {
        "kernel_attribution": kernel_owners.kernel_attribution(r),
        "unattributed_kernels": kernel_owners.unattributed_kernels(r),
        "kernel_backends": kernel_owners.kernel_backends(r),
    }


def _operators(r: Ranks, o: Options) -> Tables:
    tables = operators.operator_tables(r, tb_compat=o.tb_compat)
    return {
        "operator_stats": tables["name"],
        "operator_stats_by_input_shape": tables["shape"],
        "operator_call_stacks": tables["stack"],
    }


def _memory_curve(r: Ranks, o: Options, memory: Ranks) -> Tables:
    return {"memory_curve": memory_view.curve(r, memory)}


def _memory_events(r: Ranks, o: Options, memory: Ranks) -> Tables:
    return {"memory_events": memory_view.event_table(r, memory)}


def _memory_stats(r: Ranks, o: Options, memory: Ranks) -> Tables:
    return {"memory_stats": memory_view.stats(r, memory)}


def _memory_peak(r: Ranks, o: Options, memory: Ranks) -> Tables:
    return {
        "memory_peak": memory_view.live_at_peak(r, memory),
        "memory_device_peaks": memory_view.peaks(r, memory),
    }


def _memory_leaks(r: Ranks, o: Options, memory: Ranks) -> Tables:
    return {"memory_leaks": memory_view.leaks(r, memory)}


def _memory_step_peaks(r: Ranks, o: Options, memory: Ranks) -> Tables:
    return {"memory_step_peaks": memory_view.step_peaks(r, memory)}


_MEM = ("memory",)


def _distributed(r: Ranks, o: Options) -> Tables:
    return {
        "comm_comp_per_rank": (
            comm_plugin.overlap(r) if o.tb_compat else comm_overview.comm_comp_per_rank(r)
        ),
        "comm_wait_transfer": (
            comm_plugin.waittime(r) if o.tb_compat else comm_overview.wait_transfer_per_step(r)
        ),
        "collectives": collectives.calls(r).select(
            *(
                c
                for c in collectives.MATCHED_COLUMNS
                if c not in ("wait", "transfer", "late_by", "on_gpu")
            ),
            (pl.col("wait") / 1000).alias("wait_us"),
            (pl.col("transfer") / 1000).alias("transfer_us"),
            (pl.col("late_by") / 1000).alias("late_by_us"),
        ),
        "collective_instances": comm_stats.collective_instances(r),
        "comm_ops_stats": comm_stats.comm_ops_stats(r),
        "collective_stragglers": comm_stats.collective_stragglers(r),
    }


def _collectives_hidden(r: Ranks, o: Options) -> Tables:
    return {
        "collectives_hidden": collective_streams.collectives_hidden(r),
        "collective_streams": collective_streams.collective_streams(r),
    }


def _syncs(r: Ranks, o: Options, flows: Ranks) -> Tables:
    return sync_summary.sync_tables(r, flows, tb_compat=o.tb_compat)


def _critical_path(r: Ranks, o: Options) -> Tables:
    return critical_path_tables(
        r, instances=critical_path_instances(o.critical_path_steps), hta_compat=o.hta_compat
    )


def _modules(r: Ranks, o: Options) -> Tables:
    return {"module_stats": module_view.module_view(r)}


ANALYSES: tuple[Analysis, ...] = (
    Analysis("temporal_breakdown", "Temporal breakdown", _temporal, cost=0.4),
    Analysis("idle_time_breakdown", "Idle time breakdown", _idle, cost=0.2),
    Analysis("gpu_kernel_breakdown", "GPU kernel breakdown", _kernels, cost=0.15),
    Analysis("kernel_duration_stats", "Kernel duration statistics", _kernel_stats),
    Analysis("comm_comp_overlap", "Communication / computation overlap", _overlap),
    Analysis("queue_length_summary", "Queue length per stream", _queue_summary, cost=0.2),
    Analysis("queue_length_time_series", "Queue length over time", _queue_series, False),
    Analysis("memory_bw_summary", "Memory bandwidth", _memory_summary),
    Analysis("memory_bw_time_series", "Memory bandwidth over time", _memory_series, False),
    Analysis("cuda_kernel_launch_stats", "Kernel launch statistics", _launch),
    Analysis("frequent_cuda_kernel_sequences", "Frequent kernel sequences", _sequences, cost=0.15),
    Analysis("aten_op_kernels_and_delay", "ATen ops: kernels and delays", _aten, cost=0.3),
    Analysis("profiler_steps", "Profiler steps and straggler candidates", _steps, cost=0.15),
    Analysis("user_annotation_breakdown", "User annotations", _annotations),
    Analysis(
        "step_time_breakdown",
        "Step time: where it goes (TensorBoard Overview)",
        _step_time,
        cost=0.8,
        views=False,
        steps="plugin",
        definitions="plugin",
    ),
    Analysis(
        "gpu_metrics",
        "GPU utilization, SM efficiency, occupancy (TensorBoard)",
        _gpu_metrics,
        cost=0.6,
        views=False,
        steps="plugin",
        definitions="plugin",
    ),
    Analysis(
        "kernel_view",
        "Kernels: tensor cores, blocks per SM, occupancy (TensorBoard)",
        _kernel_view,
        cost=0.1,
        views=False,
        steps="whole",
        definitions="plugin",
    ),
    Analysis(
        "gpu_sm_efficiency_series",
        "Est. SM efficiency over time",
        _sm_series,
        False,
        views=False,
        steps="plugin",
        definitions="plugin",
    ),
    Analysis(
        "gpu_metric_series",
        "The four GPU metrics per time bucket",
        _metric_series,
        cost=0.1,
        views=False,
        steps="plugin",
        definitions="plugin",
    ),
    # These two share the plugin's operator tree (op_tree.build, built once per rank)
    Analysis(
        "kernel_view_by_op",
        "Kernels by launching op (TensorBoard)",
        _kernel_view_by_op,
        cost=0.2,
        views=False,
        steps="whole",
        definitions="plugin",
    ),
    Analysis(
        "operator_stats",
        "Operators: host and device time (TensorBoard)",
        _operators,
        cost=0.8,
        views=False,
        steps="whole",
        definitions="plugin",
    ),
    Analysis(
        "memory_curve",
        "Memory curve (downsampled)",
        _memory_curve,
        frames=_MEM,
        views=False,
        steps="whole",
        definitions="plugin",
    ),
    Analysis(
        "kernel_attribution",
        "Kernel time with no operator, graph launches, backends (and why)",
        _attribution,
        cost=0.2,
        views=False,
        steps="whole",
        definitions="own",
    ),
    Analysis(
        "memory_events",
        "Memory events: allocation / free pairs",
        _memory_events,
        frames=_MEM,
        views=False,
        steps="whole",
        definitions="plugin",
    ),
    Analysis(
        "memory_stats",
        "Memory statistics per operator",
        _memory_stats,
        frames=_MEM,
        views=False,
        steps="whole",
        definitions="plugin",
    ),
    Analysis(
        "memory_peak",
        "Memory alive at each device's peak",
        _memory_peak,
        frames=_MEM,
        views=False,
        steps="whole",
        definitions="plugin",
    ),
    Analysis(
        "memory_leaks",
        "Memory never freed (leak candidates)",
        _memory_leaks,
        frames=_MEM,
        views=False,
        steps="whole",
        definitions="plugin",
    ),
    Analysis(
        "memory_step_peaks",
        "Memory peak per step",
        _memory_step_peaks,
        frames=_MEM,
        views=False,
        steps="whole",
        definitions="plugin",
    ),
    Analysis(
        "comm_comp_per_rank",
        "Distributed: collectives, waits, stragglers",
        _distributed,
        cost=0.3,
        views=False,
        steps="every",
        definitions="plugin",
    ),
    Analysis(
        "collectives_hidden",
        "Collectives per process group, stream, step and layer: hidden, exposed, serialised",
        _collectives_hidden,
        cost=0.2,
        views=False,
        steps="every",
        definitions="own",
    ),
    Analysis(
        "syncs",
        "Host-device syncs and who caused them",
        _syncs,
        frames=("flows",),
        cost=0.5,
        views=False,
        steps="whole",
        definitions="own",
    ),
    Analysis(
        "module_stats", "nn.Module view", _modules, views=False, steps="whole", definitions="plugin"
    ),
    Analysis(
        "critical_path",
        "Critical path per rank and step, and across ranks (HTA 0.6)",
        _critical_path,
        cost=4.0,  # the first step of 8 ranks, what-ifs included (bench/CRITICAL_PATH.md)
        views=False,
        steps="every",  # the ProfilerSteps critical_path_steps names, as on the host
        definitions="hta",
    ),
)

BY_NAME: dict[str, Analysis] = {a.name: a for a in ANALYSES}

#: Tables an analysis gives besides the one named after it, and that analysis: every key the
#: report prints is a name `--only` accepts.
TABLE_OWNER: dict[str, str] = {
    "idle_interval_stats": "idle_time_breakdown",
    "gpu_kernel_type_breakdown": "gpu_kernel_breakdown",
    "time_spent_blocked_on_full_queue": "queue_length_summary",
    "iterations": "profiler_steps",
    "potential_stragglers": "profiler_steps",
    "straggler_scores": "profiler_steps",
    "gpu_user_annotation_breakdown": "user_annotation_breakdown",
    "memory_device_peaks": "memory_peak",
    "comm_wait_transfer": "comm_comp_per_rank",
    "collectives": "comm_comp_per_rank",
    "collective_instances": "comm_comp_per_rank",
    "comm_ops_stats": "comm_comp_per_rank",
    "collective_stragglers": "comm_comp_per_rank",
    "distributed_hierarchy": "comm_comp_per_rank",
    "process_groups": "comm_comp_per_rank",
    "step_selection": "step_time_breakdown",
    "step_time_average": "step_time_breakdown",
    "step_time_stats": "step_time_breakdown",
    "outlier_steps": "step_time_breakdown",
    "gpu_utilization_series": "gpu_metrics",
    "gpu_devices": "gpu_metrics",
    "unattributed_kernels": "kernel_attribution",
    "kernel_backends": "kernel_attribution",
    "operator_stats_by_input_shape": "operator_stats",
    "operator_call_stacks": "operator_stats",
    "collective_streams": "collectives_hidden",
    "sync_summary": "syncs",
    "sync_verdict": "syncs",
    "critical_path_edges": "critical_path",
    "critical_path_what_if": "critical_path",
}


def known(name: str) -> bool:
    """Is `name` an analysis or a table of one?"""
    return name in BY_NAME or name in TABLE_OWNER


def select(names: list[str] | None) -> list[Analysis]:
    """The analyses to run: the named ones, or those giving the named tables (KeyError names
    an unknown one), else defaults."""
    if not names:
        return [a for a in ANALYSES if a.default]
    unknown = [n for n in names if not known(n)]
    if unknown:
        raise KeyError(", ".join(unknown))
    owners = dict.fromkeys(TABLE_OWNER.get(n, n) for n in names)
    return [BY_NAME[n] for n in owners]


def wanted_tables(names: list[str] | None, tables: Tables) -> Tables:
    """The tables asked for: all of a named analysis, only the named table of the others."""
    if not names:
        return tables
    asked_analyses = {n for n in names if n in BY_NAME}
    owner = {t: TABLE_OWNER.get(t, t) for t in tables}
    return {t: df for t, df in tables.items() if t in names or owner[t] in asked_analyses}


#: The polars engine the analyses run on (`run`).
ENGINE = "in-memory"


def run(
    ranks: Ranks,
    names: list[str] | None = None,
    options: Options | None = None,
    *,
    threads: int = 2,
    frames: FrameGetter | None = None,
) -> Tables:
    """Run the selected analyses over the loaded ranks; tables in catalog order.

    They run `threads` at a time (`scheduling`): most of their queries are small and
    single-threaded inside polars, which releases the GIL, so two cores finish them sooner.
    The first analysis on HTA's views builds them while analyses that need none run beside
    it; then the longest first. Queries run on polars' in-memory engine: its default since
    2.0, the streaming engine, costs more on these many small queries (bench/ANALYSES.md).
    """
    options = options or Options()
    chosen = select(names)
    if not chosen:
        return {}

    def call(a: Analysis) -> Tables:
        extra = {f: frames(f) if frames is not None else {} for f in a.frames}
        return a.run(ranks, options, **extra)  # type: ignore[call-arg]

    with pl.Config(engine_affinity=ENGINE):
        results = scheduling.run_all(chosen, call, threads)
    out: Tables = {}
    for a in chosen:
        out.update(results[a.name])
    return out
