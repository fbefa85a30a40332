"""The Python front end: HTA's `TraceAnalysis` method names and parameters on polars.

    from hta_tui import TraceAnalysis
    ta = TraceAnalysis("traces/")
    ta.get_temporal_breakdown()

A notebook written for HTA needs little change: the methods answer polars DataFrames with
HTA's column names (`.to_pandas()` where pandas is wanted). Differences on purpose: `ranks=None`
means every rank (HTA's `[0]` fails when rank 0 is absent), `visualize` is accepted and ignored
(plots live in the terminal app), and nothing raises for ranks without GPU kernels: their
tables are empty.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from hta_tui.analysis import (
    collectives,
    diff,
    kernels,
    queue,
    registry,
    steps,
)
from hta_tui.analysis.counters_export import CountersWritten, write_counters_trace
from hta_tui.analysis.overview import file_table, precompute
from hta_tui.api_critical_path import CriticalPathMethods
from hta_tui.api_kernels import KernelOwnerMethods
from hta_tui.api_memory import MemoryMethods
from hta_tui.api_syncs import SyncFinderMethods
from hta_tui.exec import Backend, open_backend
from hta_tui.exec.split import run_split
from hta_tui.session import LiveSession, open_session
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import TraceSet


class TraceAnalysis(MemoryMethods, SyncFinderMethods, CriticalPathMethods, KernelOwnerMethods):
    """Every loaded rank of a trace folder (or file), analysed like HTA's TraceAnalysis.

    `hta_compat=True` reproduces HTA's rounding of fractional timestamps (see README);
    `cache=False` parses afresh and keeps nothing. `dask`: a Dask scheduler's address
    ("tcp://host:8786"), "local[:N]", or a back-end of hta_tui.exec already open: files are
    parsed there, and `tables()` over every rank makes the rank-wise analyses there, rank by
    rank (their results cached beside the frames); `close()` stops a cluster it started.
    """

    def __init__(
        self,
        trace_dir: str | Path,
        *,
        hta_compat: bool = False,
        cache: bool | Cache = True,
        workers: int | None = None,
        dask: str | Backend | None = None,
    ) -> None:
        cache_obj = cache if isinstance(cache, Cache) else Cache(enabled=bool(cache))
        self.trace_dir = Path(trace_dir)
        self.hta_compat = hta_compat
        self.cache = cache_obj
        #: where work runs: None (the process pool for parsing, analyses here), or Dask
        self.backend: Backend | None = (
            open_backend(dask, lazy=True) if isinstance(dask, str) else dask
        )
        self._own_backend = isinstance(dask, str)
        #: the files, opened through the session the app and the report use
        self.session: LiveSession = open_session(
            self.trace_dir,
            cache_obj,
            workers=workers,
            after_parse=precompute,
            backend=self.backend,
        )
        self.trace_set: TraceSet = self.session.trace_set

    # -- what was loaded ---------------------------------------------------------------------
    @property
    def ranks(self) -> list[int]:
        return sorted(self.trace_set.loaded())

    def files(self) -> pl.DataFrame:
        """Every file with its rank, status and one-line error."""
        return file_table(self.trace_set)

    def events(self, rank: int) -> pl.DataFrame:
        """One rank's raw events frame (see hta_tui/trace/schema.py)."""
        return self.trace_set.loaded()[rank].events

    def _ranks(self, ranks: Iterable[int] | None = None) -> dict[int, pl.DataFrame]:
        frames = self.trace_set.frames()
        if ranks is None:
            return frames
        return {r: frames[r] for r in ranks if r in frames}

    # -- the registry's door -----------------------------------------------------------------
    def options(self, **values: Any) -> registry.Options:
        """The analyses' options: HTA's defaults, this object's `hta_compat`, and `values` by
        HTA's keywords (`consecutive_kernel_delay=30`) or the report's (`--set` names)."""
        return registry.options_from(registry.Options(hta_compat=self.hta_compat), **values)

    def tables(
        self, *names: str, ranks: Iterable[int] | None = None, **options: Any
    ) -> dict[str, pl.DataFrame]:
        """Any tables the report gives, by name (`hta-tui report --list`), through the one
        registry of analyses; only the tables named are made."""
        if self.backend is not None and ranks is None:
            cache_root = self.cache.root if self.cache.enabled else None
            made = run_split(
                self.trace_set,
                list(names),
                self.options(**options),
                self.backend,
                cache_root=cache_root,
            )
            return {n: made[n] for n in names}
        events = self._ranks(ranks)
        frames = registry.trace_frames(self.trace_set, events)
        meta = registry.trace_meta(self.trace_set, events)
        given = {"trace_set": self.trace_set}  # (the overview's tables read the summaries)
        return registry.tables(
            events, names, self.options(**options), frames=frames, meta=meta, given=given
        )

    def close(self) -> None:
        """Stop the Dask cluster this object started (`dask="local..."` or an address)."""
        if self._own_backend and self.backend is not None:
            self.backend.close()
            self.backend = None

    def __enter__(self) -> TraceAnalysis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def table(self, name: str, ranks: Iterable[int] | None = None, **options: Any) -> pl.DataFrame:
        """One table by name (`tables`)."""
        return self.tables(name, ranks=ranks, **options)[name]

    def __getattr__(self, attr: str) -> Any:
        """`get_<table>` for every declared table without a method of its own: an analysis
        added to the registry is in the API at once."""
        name = attr.removeprefix("get_")
        if attr.startswith("get_") and registry.known(name):
            return functools.partial(self.table, name)
        raise AttributeError(attr)

    def _per_rank(
        self, table: pl.DataFrame, ranks: Iterable[int] | None
    ) -> dict[int, pl.DataFrame]:
        """A table with a rank column as HTA's dict: every rank asked, empty where it has none."""
        chosen = sorted(self._ranks(ranks))
        body = table.drop("rank") if "rank" in table.columns else table
        if "rank" not in table.columns:
            return {r: body.clear() for r in chosen}
        return {r: table.filter(pl.col("rank") == r).drop("rank") for r in chosen}

    # -- HTA's methods -----------------------------------------------------------------------
    def get_temporal_breakdown(self, visualize: bool = True) -> pl.DataFrame:
        return self.table("temporal_breakdown")

    def get_idle_time_breakdown(
        self,
        ranks: list[int] | None = None,
        streams: list[int] | None = None,
        visualize: bool = True,
        visualize_pctg: bool = True,
        show_idle_interval_stats: bool = False,
        consecutive_kernel_delay: int = 30,
    ) -> tuple[pl.DataFrame, pl.DataFrame | None]:
        names = ["idle_time_breakdown"] + (
            ["idle_interval_stats"] if show_idle_interval_stats else []
        )
        got = self.tables(*names, ranks=ranks, consecutive_kernel_delay=consecutive_kernel_delay)
        breakdown, stats = got["idle_time_breakdown"], got.get("idle_interval_stats")
        if streams is not None:
            breakdown = breakdown.filter(pl.col("stream").is_in(streams))
            if stats is not None:
                stats = stats.filter(pl.col("stream").is_in(streams))
        return breakdown, stats

    def get_gpu_kernel_breakdown(
        self,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 10,
        include_memory_kernels: bool = True,
        image_renderer: str | None = None,
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        got = self.tables(
            "gpu_kernel_type_breakdown",
            "gpu_kernel_breakdown",
            duration_ratio=duration_ratio,
            num_kernels=num_kernels,
            include_memory_kernels=include_memory_kernels,
        )
        return got["gpu_kernel_type_breakdown"], got["gpu_kernel_breakdown"]

    def get_kernel_duration_stats(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """count, sum, mean, std, min, median, max of every GPU event name (beyond HTA)."""
        return self.table("kernel_duration_stats", ranks)

    def get_kernel_duration_distribution(
        self, name: str, ranks: list[int] | None = None, bins: int = 30
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """One kernel's duration per rank (percentiles) and a shared histogram (beyond HTA;
        a lookup of one kernel, not a table of the report)."""
        return kernels.kernel_duration_distribution(
            self._ranks(ranks), name, bins=bins, hta_compat=self.hta_compat
        )

    def get_comm_comp_overlap(self, visualize: bool = True) -> pl.DataFrame:
        return self.table("comm_comp_overlap")

    def get_queue_length_time_series(self, ranks: list[int] | None = None) -> pl.DataFrame:
        return self.table("queue_length_time_series", ranks)

    def get_queue_length_summary(self, ranks: list[int] | None = None) -> pl.DataFrame:
        return self.table("queue_length_summary", ranks)

    def get_time_spent_blocked_on_full_queue(
        self,
        queue_length_dict: Mapping[int, pl.DataFrame] | pl.DataFrame | None = None,
        max_queue_length: int = 1024,
    ) -> pl.DataFrame:
        """Per rank and stream (HTA keeps only one stream per rank). `queue_length_dict` may
        be the frame `get_queue_length_time_series` returned, to reuse it."""
        series = queue_length_dict
        if series is None:
            return self.table("time_spent_blocked_on_full_queue", max_queue_length=max_queue_length)
        if isinstance(series, Mapping):
            series = pl.concat(list(series.values()), how="diagonal_relaxed") if series else None
        return queue.time_blocked_on_full_queue(
            self._ranks(), max_queue_length, hta_compat=self.hta_compat, series=series
        )

    def get_memory_bw_time_series(self, ranks: list[int] | None = None) -> pl.DataFrame:
        return self.table("memory_bw_time_series", ranks)

    def get_memory_bw_summary(self, ranks: list[int] | None = None) -> pl.DataFrame:
        return self.table("memory_bw_summary", ranks)

    def get_cuda_kernel_launch_stats(
        self,
        ranks: list[int] | None = None,
        runtime_cutoff: int = 50,
        launch_delay_cutoff: int = 100,
        include_memory_events: bool = True,
        visualize: bool = True,
    ) -> dict[int, pl.DataFrame]:
        table = self.table(
            "cuda_kernel_launch_stats",
            ranks,
            runtime_cutoff=runtime_cutoff,
            launch_delay_cutoff=launch_delay_cutoff,
            include_memory_events=include_memory_events,
        )
        return self._per_rank(table, ranks)

    def get_frequent_cuda_kernel_sequences(
        self,
        operator_name: str,
        output_dir: str | Path | None = None,
        min_pattern_len: int = 3,
        rank: int | None = None,
        top_k: int = 5,
        visualize: bool = False,
        compress_other_kernels: bool = True,
    ) -> pl.DataFrame:
        """Every kernel pattern the operator launches (HTA too returns all; `top_k` only
        limited its trace overlay, which is not written). `rank=None`: the smallest rank."""
        return self.table(
            "frequent_cuda_kernel_sequences",
            operator_name=operator_name,
            rank=-1 if rank is None else rank,
            min_pattern_len=min_pattern_len,
            top_k=top_k,
        )

    def get_aten_op_kernels_and_delay(
        self, ranks: list[int] | None = None, sort_by: list[str] | None = None
    ) -> dict[int, pl.DataFrame]:
        table = self.table(
            "aten_op_kernels_and_delay",
            ranks,
            sort_by=",".join(sort_by) if sort_by else "occurrence_count",
        )
        return {
            int(key[0]): part.drop("rank")
            for key, part in table.partition_by("rank", as_dict=True, maintain_order=True).items()
        }

    def get_profiler_steps(self) -> list[int]:
        return self.table("profiler_steps")["step"].to_list()

    def get_iterations(self) -> pl.DataFrame:
        """Start, end and duration of every ProfilerStep on every rank."""
        return self.table("iterations")

    # -- the TensorBoard plugin's views (beyond HTA) ---------------------------------------
    def get_step_time_breakdown(
        self, ranks: list[int] | None = None, *, tb_compat: bool = False
    ) -> pl.DataFrame:
        """Per rank and used step: Kernel, Memcpy, Memset, Communication, Runtime, DataLoader,
        CPU Exec, Other (us), adding up to the step time (the plugin's Overview)."""
        return self.table("step_time_breakdown", ranks, tb_compat=tb_compat)

    def get_step_selection(
        self, ranks: list[int] | None = None, *, tb_compat: bool = False
    ) -> pl.DataFrame:
        """Every step, whether the breakdown uses it, and why not."""
        return self.table("step_selection", ranks, tb_compat=tb_compat)

    def get_step_time_stats(
        self, ranks: list[int] | None = None, *, tb_compat: bool = False
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(per-rank mean, p50, p95, max, jitter; outlier steps with their cause)."""
        got = self.tables("step_time_stats", "outlier_steps", ranks=ranks, tb_compat=tb_compat)
        return got["step_time_stats"], got["outlier_steps"]

    def get_step_time_average(
        self, ranks: list[int] | None = None, *, tb_compat: bool = False
    ) -> pl.DataFrame:
        """Per rank, the plugin's "Average Step Time" row: the mean step and each category's
        mean (us) and share (%)."""
        return self.table("step_time_average", ranks, tb_compat=tb_compat)

    def get_gpu_metrics(
        self, ranks: list[int] | None = None, *, tb_compat: bool = False
    ) -> pl.DataFrame:
        """Per rank and GPU: utilization, est. SM efficiency, est. achieved occupancy and
        kernel time on tensor cores (modern and plugin lists), over the used steps."""
        return self.table("gpu_metrics", ranks, tb_compat=tb_compat)

    def get_gpu_utilization_series(
        self, ranks: list[int] | None = None, *, tb_compat: bool = False
    ) -> pl.DataFrame:
        """The plugin's bucketed GPU utilization (0-1) over the whole trace."""
        return self.table("gpu_utilization_series", ranks, tb_compat=tb_compat)

    def get_gpu_sm_efficiency_series(
        self, ranks: list[int] | None = None, *, tb_compat: bool = False
    ) -> pl.DataFrame:
        """The plugin's est. SM efficiency counter: one row per stretch between kernel edges."""
        return self.table("gpu_sm_efficiency_series", ranks, tb_compat=tb_compat)

    def get_gpu_metric_series(
        self, ranks: list[int] | None = None, *, tb_compat: bool = False
    ) -> pl.DataFrame:
        """Utilization, est. SM efficiency, est. achieved occupancy and tensor-core share (%)
        per rank, GPU and bucket of the plugin's utilization counter."""
        return self.table("gpu_metric_series", ranks, tb_compat=tb_compat)

    def get_gpu_devices(self) -> pl.DataFrame:
        """The GPUs each rank ran kernels on, as its trace describes them (deviceProperties)."""
        return self.table("gpu_devices")

    def get_kernel_view(
        self, ranks: list[int] | None = None, *, by_operator: bool = False, tb_compat: bool = False
    ) -> pl.DataFrame:
        """The plugin's Kernel view: per kernel (or kernel + launching op + launch properties),
        tensor cores (both lists), mean blocks per SM, mean est. achieved occupancy."""
        name = "kernel_view_by_op" if by_operator else "kernel_view"
        return self.table(name, ranks, tb_compat=tb_compat)

    def get_operator_stats(
        self,
        ranks: list[int] | None = None,
        *,
        by_input_shape: bool = False,
        tb_compat: bool = False,
    ) -> pl.DataFrame:
        """The plugin's Operator view: calls, device and host self/total, tensor cores."""
        name = "operator_stats_by_input_shape" if by_input_shape else "operator_stats"
        return self.table(name, ranks, tb_compat=tb_compat)

    def get_operator_call_stacks(
        self, ranks: list[int] | None = None, *, tb_compat: bool = False
    ) -> pl.DataFrame:
        """Operator rows per recorded `Call stack` (traces made `with_stack`, PyTorch < 2)."""
        return self.table("operator_call_stacks", ranks, tb_compat=tb_compat)

    def get_potential_stragglers(
        self,
        profiler_steps: list[int] | None = None,
        num_candidates: int = 2,
        visualize: bool = False,
    ) -> list[int]:
        """The ranks most likely to hold the others back, most suspicious first (at most
        `num_candidates`); `get_straggler_candidates` gives the table behind the answer."""
        table = self.get_straggler_candidates(profiler_steps)
        return steps.potential_stragglers(table, num_candidates)

    def get_straggler_candidates(self, profiler_steps: list[int] | None = None) -> pl.DataFrame:
        if profiler_steps is None:
            return self.table("straggler_scores")
        return steps.straggler_candidates(  # steps chosen by the caller: beyond the report
            self._ranks(), steps=profiler_steps, hta_compat=self.hta_compat
        )

    def get_comm_comp_per_rank(self, tb_compat: bool = False) -> pl.DataFrame:
        """Computation / overlapping / communication / other per rank and step (and "all"):
        the TensorBoard plugin's Distributed view, with every collective recognised, or
        exactly the plugin's with `tb_compat`."""
        return self.table("comm_comp_per_rank", tb_compat=tb_compat)

    def get_comm_wait_transfer(self, tb_compat: bool = False) -> pl.DataFrame:
        """Transfer vs synchronizing (waiting) time per rank and step; `tb_compat`: the
        plugin's definition (shortest duration of any rank = transfer)."""
        return self.table("comm_wait_transfer", tb_compat=tb_compat)

    def get_collectives(self) -> pl.DataFrame:
        """Every collective call of every rank, matched across ranks by process group and
        sequence, with each rank's wait and transfer time (ns; the report's `collectives`
        table gives them in us)."""
        return collectives.calls(self._ranks())

    def get_comm_ops_stats(self) -> pl.DataFrame:
        """Calls, bytes, latency, wait, transfer and algorithm / bus bandwidth per rank and
        collective kind."""
        return self.table("comm_ops_stats")

    def get_collective_stragglers(self) -> pl.DataFrame:
        """The ranks the others wait for at collectives, costliest first, each with why."""
        return self.table("collective_stragglers")

    def get_distributed_hierarchy(self) -> pl.DataFrame:
        """Node, process and GPU (name, memory, compute capability) of every rank."""
        return self.table("distributed_hierarchy")

    def get_process_groups(self) -> pl.DataFrame:
        """The job's process groups (distributedInfo.pg_config) and the ranks that list them."""
        return self.table("process_groups")

    def get_gpu_user_annotation_breakdown(
        self, use_gpu_annotation: bool = True, visualize: bool = True, **_: Any
    ) -> pl.DataFrame:
        name = (
            "gpu_user_annotation_breakdown" if use_gpu_annotation else "user_annotation_breakdown"
        )
        return self.table(name)

    def generate_trace_with_counters(
        self,
        time_series: Any = None,
        ranks: list[int] | None = None,
        output_suffix: str = "_with_counters",
        output_dir: str | Path | None = None,
    ) -> list[CountersWritten]:
        """A copy of each rank's trace with queue-length and bandwidth counter tracks.

        Unlike HTA, never beside the traces unless asked: files go to `output_dir`
        (default: the current directory), named `<trace name><output_suffix>.json[.gz]`.
        """
        out_dir = Path(output_dir) if output_dir is not None else Path.cwd()
        written = []
        loaded = self.trace_set.loaded()
        for rank in ranks if ranks is not None else self.ranks:
            entry = self.trace_set.selected(rank)
            if entry is None or rank not in loaded:
                continue
            name = entry.path.name
            stem, dot, ext = name.partition(".json")
            out = out_dir / f"{stem}{output_suffix}{dot}{ext}"
            written.append(
                write_counters_trace(
                    entry.path,
                    loaded[rank].events,
                    out,
                    rank=rank,
                    hta_compat=self.hta_compat,
                    allow_in_trace_dir=output_dir is not None,
                )
            )
        return written


def _side_events(side: str | Path | TraceAnalysis, rank: int | None) -> pl.DataFrame:
    """One rank's events of a diff side: the named rank, else the side's smallest rank."""
    ta = side if isinstance(side, TraceAnalysis) else TraceAnalysis(side)
    if not ta.ranks:
        raise ValueError(f"{ta.trace_dir}: no trace loaded")
    if rank is None:
        rank = ta.ranks[0]
    if isinstance(rank, (list, tuple)):
        raise ValueError("one rank per side: several ranks are not merged (correlation ids clash)")
    if rank not in ta.ranks:
        raise ValueError(f"{ta.trace_dir}: no rank {rank} (ranks: {ta.ranks})")
    return ta.events(rank)


class TraceDiff:
    """HTA's `TraceDiff` on polars: what changed between a control and a test run.

    A side is a trace folder, a file, or a loaded `TraceAnalysis`; its rank defaults to the
    smallest loaded one, and its iteration to the first complete ProfilerStep, as in HTA.
    `device_type` is "ALL", "CPU" or "GPU" (HTA's DeviceType names work too).
    """

    @classmethod
    def compare_traces(
        cls,
        control: str | Path | TraceAnalysis,
        test: str | Path | TraceAnalysis,
        control_rank: int | None = None,
        test_rank: int | None = None,
        control_iteration: int | list[int] | None = None,
        test_iteration: int | list[int] | None = None,
        device_type: str = "ALL",
        use_short_name: bool = False,
        *,
        average_iterations: bool = False,
        match_shapes: bool = False,
        hta_compat: bool = False,
    ) -> pl.DataFrame:
        return diff.compare_traces(
            _side_events(control, control_rank),
            _side_events(test, test_rank),
            control_iteration=control_iteration,
            test_iteration=test_iteration,
            device_type=str(device_type),
            use_short_name=use_short_name,
            average_iterations=average_iterations,
            match_shapes=match_shapes,
            hta_compat=hta_compat,
        )

    @classmethod
    def ops_diff(
        cls,
        control: str | Path | TraceAnalysis,
        test: str | Path | TraceAnalysis,
        control_rank: int | None = None,
        test_rank: int | None = None,
        control_iteration: int | list[int] | None = None,
        test_iteration: int | list[int] | None = None,
        device_type: str = "ALL",
        *,
        use_short_name: bool = False,
        hta_compat: bool = False,
    ) -> dict[str, list[str]]:
        return diff.ops_diff(
            _side_events(control, control_rank),
            _side_events(test, test_rank),
            control_iteration=control_iteration,
            test_iteration=test_iteration,
            device_type=str(device_type),
            use_short_name=use_short_name,
            hta_compat=hta_compat,
        )

    @classmethod
    def breakdown_diff(
        cls,
        control: str | Path | TraceAnalysis,
        test: str | Path | TraceAnalysis,
        control_rank: int | None = None,
        test_rank: int | None = None,
        *,
        hta_compat: bool = False,
    ) -> dict[str, pl.DataFrame]:
        """Temporal, kernel-type and per-kernel statistics of both sides (beyond HTA)."""
        return diff.breakdown_diff(
            _side_events(control, control_rank),
            _side_events(test, test_rank),
            hta_compat=hta_compat,
        )


def findings(
    source: str | Path | TraceSet | TraceAnalysis,
    *,
    config: Any = None,
    **options: Any,
) -> pl.DataFrame:
    """What to fix first (analysis/findings): one row per rule, worst first, for a trace
    folder or file, a loaded `TraceSet` or a `TraceAnalysis`. `options` are the analyses'
    (HTA's keywords), `config` a `findings.RuleConfig` (thresholds, rules turned off). The
    evidence rows: `TraceAnalysis(...).table("finding_evidence")`."""
    if isinstance(source, TraceAnalysis):
        ts, opts = source.trace_set, source.options(**options)
    elif isinstance(source, TraceSet):
        ts, opts = source, registry.options_from(**options)
    else:
        ta = TraceAnalysis(source)
        ts, opts = ta.trace_set, ta.options(**options)
    made = registry.findings_tables(
        ts.frames(), opts, frames=ts.frames, meta=registry.trace_meta(ts), config=config
    )
    return made["findings"]
