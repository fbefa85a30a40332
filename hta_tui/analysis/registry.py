"""The one door to every analysis: each is declared once here (name, function, the tables
it gives, the options it reads by HTA's names, the frames it reads, its cost class), and the
report, `--only`, `--list`, the Python API and the app's screens all call through it, so
adding an analysis is one `Analysis(...)` in `ANALYSES` (or `declare`) plus its view.

Each entry turns the loaded ranks into named tables; the names are the report's top-level
JSON keys and the CSV file names (HTA's method name without `get_`, plus further names where
HTA returns several tables). A function answers its tables lazily (name -> a function making
it), so one table asked for by the API or a screen costs only that table.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import polars as pl

from hta_tui.analysis.checkpoint import checkpoint
from hta_tui.analysis.lazy import lazy_module
from hta_tui.analysis.rank_column import ranked
from hta_tui.trace.model import TraceSet
from hta_tui.trace.schema import EVENTS_SCHEMA

#: The analyses' modules: each imported when one of its functions is first called, so a
#: report whose every answer is kept, and `--list`, import none of them (nor numpy); the
#: pool's forkserver imports them all once for its workers (exec/backends.WORK_MODULES).
MODULES = (
    "hta_tui.analysis.annotations",
    "hta_tui.analysis.aten_ops",
    "hta_tui.analysis.collective_streams",
    "hta_tui.analysis.collectives",
    "hta_tui.analysis.comm_overview",
    "hta_tui.analysis.comm_plugin",
    "hta_tui.analysis.comm_stats",
    "hta_tui.analysis.comm_topology",
    "hta_tui.analysis.diff",
    "hta_tui.analysis.exposed_comm",
    "hta_tui.analysis.gaps",
    "hta_tui.analysis.gpu_metric_series",
    "hta_tui.analysis.gpu_metrics",
    "hta_tui.analysis.idle",
    "hta_tui.analysis.kernel_detail",
    "hta_tui.analysis.kernel_owners",
    "hta_tui.analysis.kernel_view",
    "hta_tui.analysis.kernels",
    "hta_tui.analysis.launch",
    "hta_tui.analysis.launch_kernels",
    "hta_tui.analysis.memory",
    "hta_tui.analysis.memory_view",
    "hta_tui.analysis.module_view",
    "hta_tui.analysis.operator_stacks",
    "hta_tui.analysis.operators",
    "hta_tui.analysis.overlap",
    "hta_tui.analysis.overview",
    "hta_tui.analysis.overview_rows",
    "hta_tui.analysis.queue",
    "hta_tui.analysis.scheduling",
    "hta_tui.analysis.sequences",
    "hta_tui.analysis.step_breakdown",
    "hta_tui.analysis.step_overview",
    "hta_tui.analysis.step_pairs",
    "hta_tui.analysis.step_time_stats",
    "hta_tui.analysis.steps",
    "hta_tui.analysis.sync_summary",
    "hta_tui.analysis.temporal",
    "hta_tui.analysis.critical_path.tables",
)
annotations = lazy_module("hta_tui.analysis.annotations")
aten_ops = lazy_module("hta_tui.analysis.aten_ops")
collective_streams = lazy_module("hta_tui.analysis.collective_streams")
collectives = lazy_module("hta_tui.analysis.collectives")
comm_overview = lazy_module("hta_tui.analysis.comm_overview")
comm_plugin = lazy_module("hta_tui.analysis.comm_plugin")
comm_stats = lazy_module("hta_tui.analysis.comm_stats")
comm_topology = lazy_module("hta_tui.analysis.comm_topology")
diff = lazy_module("hta_tui.analysis.diff")
exposed_comm = lazy_module("hta_tui.analysis.exposed_comm")
gaps = lazy_module("hta_tui.analysis.gaps")
gpu_metric_series = lazy_module("hta_tui.analysis.gpu_metric_series")
gpu_metrics = lazy_module("hta_tui.analysis.gpu_metrics")
idle = lazy_module("hta_tui.analysis.idle")
kernel_detail = lazy_module("hta_tui.analysis.kernel_detail")
kernel_owners = lazy_module("hta_tui.analysis.kernel_owners")
kernel_view = lazy_module("hta_tui.analysis.kernel_view")
kernels = lazy_module("hta_tui.analysis.kernels")
launch = lazy_module("hta_tui.analysis.launch")
launch_kernels = lazy_module("hta_tui.analysis.launch_kernels")
memory = lazy_module("hta_tui.analysis.memory")
memory_view = lazy_module("hta_tui.analysis.memory_view")
module_view = lazy_module("hta_tui.analysis.module_view")
operator_stacks = lazy_module("hta_tui.analysis.operator_stacks")
operators = lazy_module("hta_tui.analysis.operators")
overlap = lazy_module("hta_tui.analysis.overlap")
overview = lazy_module("hta_tui.analysis.overview")
overview_rows = lazy_module("hta_tui.analysis.overview_rows")
queue = lazy_module("hta_tui.analysis.queue")
scheduling = lazy_module("hta_tui.analysis.scheduling")
sequences = lazy_module("hta_tui.analysis.sequences")
step_breakdown = lazy_module("hta_tui.analysis.step_breakdown")
step_overview = lazy_module("hta_tui.analysis.step_overview")
step_pairs = lazy_module("hta_tui.analysis.step_pairs")
step_time_stats = lazy_module("hta_tui.analysis.step_time_stats")
steps = lazy_module("hta_tui.analysis.steps")
sync_summary = lazy_module("hta_tui.analysis.sync_summary")
temporal = lazy_module("hta_tui.analysis.temporal")
critical_path_tables = lazy_module("hta_tui.analysis.critical_path.tables")


def import_modules() -> None:
    """Every analysis's module imported now: by a front end whose views will use them (the
    app, before its first view, not at it)."""
    for name in MODULES:
        importlib.import_module(name)


T = TypeVar("T")


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
    #: Kernel launch statistics count memcpy / memset launches too (HTA's default).
    include_memory_events: bool = True
    max_queue_length: int = 1024
    #: ATen ops ordered within a rank by these columns, largest first (comma-separated).
    sort_by: str = "occurrence_count"
    #: Frequent kernel sequences need an operator; a ProfilerStep's sequences by default.
    operator_name: str = "ProfilerStep"
    #: ... and on this rank (-1: the smallest, HTA's `rank=None`).
    rank: int = -1
    min_pattern_len: int = 3
    top_k: int = 5
    #: The TensorBoard plugin's own rules, its blind spots included, for its views: the step
    #: breakdown, GPU metrics, kernel and operator views, and the distributed view (its five
    #: collective names, CPU-side timing) instead of with every collective recognised.
    tb_compat: bool = False
    #: The critical path's steps: "first" (HTA's instance 0), "all", "N" or "N-M" (instances
    #: of the ProfilerStep annotation, from 0; a range is one window, as HTA's tuple).
    critical_path_steps: str = "first"
    # a view's window (win26): the memory view's zoom, the timeline's rows over a window
    #: The device a memory window shows ("": the first GPU, else the CPU).
    window_device: str = ""
    #: The window, ms from the origin (`origin_ns`; -1: from the start, to the end).
    window_start_ms: float = -1
    window_end_ms: float = -1
    # screens (door26): the app's views' own parameters, as the API may pass them too
    #: The kernel the kernel-detail tables describe ("": the one with the most GPU time).
    kernel_name: str = ""
    #: The operator whose Python stacks `operator_python_stacks` lists.
    operator: str = ""
    #: Times of the app's tables count from this ns (-1: the ranks' earliest event).
    origin_ns: int = -1
    #: The per-kernel table folds each type's tail as HTA does (the Kernels view's `t`).
    fold_kernels: bool = True
    #: How many of the longest gaps between kernels `longest_gaps` lists.
    top_gaps: int = 200
    #: HTA's ProfilerStep filter off, its left-out last step counted (the overview's temporal
    #: breakdown under the app's `H`).
    every_step: bool = False
    # the diff (path26): each side asked on its own, HTA's TraceDiff's names
    #: A side's iteration(s): "" (HTA's first complete one), "all" (every complete one),
    #: "N" or "N,M" (HTA's `control_iteration` / `test_iteration`).
    iteration: str = ""
    #: "ALL", "CPU" or "GPU": the ops compared (HTA's `device_type`).
    device_type: str = "ALL"
    #: Ops matched on HTA's shortened names (HTA's `use_short_name`).
    use_short_name: bool = False
    #: Counts and durations per iteration, over the iterations given (beyond HTA).
    average_iterations: bool = False
    #: CPU ops count their self time, nested ops' time subtracted (beyond HTA).
    self_time: bool = False
    #: The op or kernel `diff_side_item` describes, and the side asked ("Control", "Test").
    diff_item: str = ""
    diff_side: str = "Control"


#: HTA's keyword where an option's name here differs (ours says its unit): the API takes
#: HTA's keyword (`consecutive_kernel_delay=30`), `--set` and `options_with` take either.
HTA_NAMES: dict[str, str] = {
    "consecutive_kernel_delay_us": "consecutive_kernel_delay",
    "runtime_cutoff_us": "runtime_cutoff",
    "launch_delay_cutoff_us": "launch_delay_cutoff",
}
_FIELD_OF = {hta: field for field, hta in HTA_NAMES.items()}


def parameters() -> dict[str, object]:
    """The analyses' parameters a user sets by name (`options_with`), with their defaults;
    `hta_compat` is a mode of its own."""
    return {k: v for k, v in dataclasses.asdict(Options()).items() if k != "hta_compat"}


def field_name(name: str) -> str:
    """An option's field here, from its name here or HTA's keyword."""
    return _FIELD_OF.get(name, name)


def options_with(settings: Mapping[str, str], base: Options | None = None) -> Options:
    """HTA's defaults (or `base`) with parameters given as text ("top_k" -> "10"), each
    converted to its field's type and named here or as HTA does; ValueError names an unknown
    parameter or a value of the wrong type."""
    fields = {f.name: f for f in dataclasses.fields(Options) if f.name in parameters()}
    changes: dict[str, object] = {}
    for given, text in settings.items():
        name = field_name(given)
        field = fields.get(name)
        if field is None:
            raise ValueError(f"unknown parameter {given!r} (one of: {', '.join(fields)})")
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
            raise ValueError(f"{given} wants {wanted}, not {text!r}") from None
    return dataclasses.replace(base or Options(), **changes)


def options_from(base: Options | None = None, **values: object) -> Options:
    """`base` (HTA's defaults) with typed values by HTA's keywords or ours (the API's door);
    ValueError names an unknown one."""
    known_fields = {f.name for f in dataclasses.fields(Options)}
    unknown = [k for k in values if field_name(k) not in known_fields]
    if unknown:
        raise ValueError(f"unknown parameter {', '.join(map(repr, unknown))}")
    changes = {field_name(k): v for k, v in values.items()}
    return dataclasses.replace(base or Options(), **changes)


Ranks = Mapping[int, pl.DataFrame]
Tables = dict[str, pl.DataFrame]
#: table name -> the function making it: an analysis's answer, made only when asked for
Lazy = dict[str, Callable[[], pl.DataFrame]]
#: a frame name (trace/schema.py) -> that frame of every rank
FrameGetter = Callable[[str], Ranks]
#: rank -> its file's metadata (trace/metadata.py) and "path": for `Analysis.meta`
Metas = Mapping[int, dict[str, Any]]


def trace_frames(ts: TraceSet, ranks: Iterable[int] | None = None) -> FrameGetter:
    """The frames of a trace set's loaded ranks, or of `ranks` only."""
    if ranks is None:
        return ts.frames
    wanted = set(ranks)
    return lambda name: {r: f for r, f in ts.frames(name).items() if r in wanted}


def trace_meta(ts: TraceSet, ranks: Iterable[int] | None = None) -> dict[int, dict[str, Any]]:
    """The file metadata of a trace set's loaded ranks (or of `ranks`), each with its path."""
    out = {}
    for rank, data in ts.loaded().items():
        if ranks is None or rank in ranks:
            entry = ts.selected(rank)
            out[rank] = {**data.meta, "path": str(entry.path) if entry else ""}
    return out


#: `Analysis.scope`'s values: made rank by rank, each rank's summary reduced across ranks,
#: or over every rank at once.
SCOPES = ("rank", "reduce", "job")

#: `Analysis.reduce`: (every rank's summary tables concatenated in rank order, the options,
#: the job's ranks) -> the analysis's tables.
Reduce = Callable[[Mapping[str, pl.DataFrame], "Options", tuple[int, ...]], "Tables"]

#: Cost classes by seconds on 8 ranks of 100 MB (`Analysis.cost`): "light" below the first
#: bound, "heavy" from the second.
COST_CLASSES = ((0.2, "light"), (1.0, "medium"), (float("inf"), "heavy"))


@dataclass(frozen=True)
class Analysis:
    """One analysis, declared once: all the report, `--only`, `--list`, the API and the
    screens know of it."""

    name: str
    title: str
    #: (ranks, options, **frames) -> {table: function making it}; its first table is `name`.
    function: Callable[..., Lazy]
    #: Large per-event outputs (time series) run only when asked for by name.
    default: bool = True
    #: Frames besides events it reads, each passed as a keyword argument.
    frames: tuple[str, ...] = ()
    #: Seconds it takes on 8 ranks of 100 MB (bench/ANALYSES.md, roughly): `run` starts the
    #: longest first, so no long one is left to run alone at the end.
    cost: float = 0.0
    #: Starts from HTA's shared per-rank views (`hta_view`): `run` starts it once the first
    #: such analysis has built them (`scheduling`).
    views: bool = True
    #: The `Options` fields it reads (`--list` shows them by HTA's names).
    options: tuple[str, ...] = ()
    #: The tables it gives besides the one named after it.
    also: tuple[str, ...] = ()
    #: Reads the files' metadata too (`Metas`, keyword `meta`): without it (`run` given
    #: none) the tables made from it come empty.
    meta: bool = False
    #: Which steps its numbers cover (`coverage.STEPS`): HTA's (the last left out), the
    #: plugin's (moved to their GPU work), every ProfilerStep, or the whole trace.
    steps: str = "hta"
    #: Whose definitions it follows (`coverage.DEFINITIONS`): HTA's, the TensorBoard
    #: plugin's, or this project's own.
    definitions: str = "hta"
    #: How it splits over ranks (`SCOPES`): "rank" when its tables are the concatenation, in
    #: rank order, of the same analysis on each rank alone (tests/test_rankwise.py checks
    #: each on real traces), so each rank's part can be made where its file lies and cached
    #: beside its frames (hta_tui/exec); "job" when it reads across ranks (stragglers,
    #: collective matching, top-k over every rank): it runs on the client over all frames;
    #: "reduce" when it has a `rank_part` and a `reduce` (below).
    scope: str = "job"
    #: What it reads that the caller gives (`tables(given=...)`), each passed as a keyword
    #: argument (None when not given): "trace_set", the TraceSet itself (the per-file
    #: summaries the loader kept with each file: the overview's), or what it answered under
    #: `results` last time (so only what changed is made again).
    inputs: tuple[str, ...] = ()
    #: What it answers besides tables: objects for the app (the critical path's paths, the
    #: rows kept for the next call), made only when named at the door (`tables`); never in
    #: the report, `--only`, `--list`'s tables or the API's `get_` methods.
    results: tuple[str, ...] = ()
    #: The events columns it reads (empty: every one). A job-wide analysis run over every
    #: rank in one process (exec/split.py) then reads only these from the cache: a missing
    #: one raises polars' ColumnNotFoundError there, and it runs again on every column.
    columns: tuple[str, ...] = ()
    #: (one rank's events, options, **frames) -> that rank's summary tables: what the job's
    #: tables need of the rank, small (aggregates, not events). Made where the rank's file
    #: lies and kept beside its frames, as a rank-wise analysis's tables (hta_tui/exec).
    rank_part: Callable[..., Tables] | None = None
    #: The cross-rank part, on the client: every rank's `rank_part` tables concatenated in
    #: rank order -> the tables `function` gives over every rank at once, number for number
    #: (tests/test_rankwise.py compares them on real traces and a generated 64-rank job).
    reduce: Reduce | None = None
    #: (options, the job's ranks in order) -> the one rank whose `rank_part` its `reduce`
    #: reads (None: none): every other rank's part is the part of no rank, made once by the
    #: caller, not asked of each unit of work (HTA's kernel sequences are one rank's).
    one_rank: Callable[[Options, tuple[int, ...]], int | None] | None = None

    @property
    def tables(self) -> tuple[str, ...]:
        return (self.name, *self.also)

    @property
    def cost_class(self) -> str:
        return next(label for bound, label in COST_CLASSES if self.cost < bound)

    @property
    def hta_options(self) -> tuple[str, ...]:
        """Its options by HTA's keywords."""
        return tuple(HTA_NAMES.get(o, o) for o in self.options)

    def lazy(self, ranks: Ranks, options: Options | None = None, **frames: Any) -> Lazy:
        """Its tables, each made when called (a function may also answer its tables made
        already: they are wrapped)."""
        answer = self.function(ranks, options or Options(), **frames)
        return {
            name: (functools.partial(_given, made) if isinstance(made, pl.DataFrame) else made)
            for name, made in answer.items()
        }

    def run(self, ranks: Ranks, options: Options | None = None, **frames: Any) -> Tables:
        """Every table it gives (not its `results`)."""
        lazy = self.lazy(ranks, options, **frames)
        return {t: make() for t, make in lazy.items() if t not in self.results}

    def summarise(self, ranks: Ranks, options: Options | None = None, **frames: Any) -> Tables:
        """Its rank part's tables (`scope="reduce"`), else its own: what a rank sends."""
        if self.rank_part is None:
            return self.run(ranks, options, **frames)
        return self.rank_part(ranks, options or Options(), **frames)

    def reduced(
        self, parts: Mapping[str, pl.DataFrame], options: Options, ranks: tuple[int, ...]
    ) -> Tables:
        """Its tables from every rank's `summarise` concatenated in rank order."""
        if self.reduce is None:
            return dict(parts)
        made = self.reduce(parts, options, ranks)
        return {t: made[t] for t in self.tables if t in made}


def _given(table: pl.DataFrame) -> pl.DataFrame:
    return table


def once(make: Callable[[], T]) -> Callable[[], T]:
    """What two tables start from, made the first time one asks for it."""
    return functools.cache(make)


def picked(make: Callable[[], Mapping[str, pl.DataFrame]], names: Iterable[str]) -> Lazy:
    """Lazy tables taken from one function answering several (made once)."""
    made = once(make)
    return {n: functools.partial(lambda n: made()[n], n) for n in names}


def with_rank(per_rank: Mapping[int, pl.DataFrame]) -> pl.DataFrame:
    """rank -> frame (HTA's dict answers) as one frame with a leading rank column."""
    frames = [ranked(r, df) for r, df in sorted(per_rank.items()) if not df.is_empty()]
    if frames:
        return pl.concat(frames, how="diagonal_relaxed")
    first = next(iter(per_rank.values()), pl.DataFrame())
    return first.select(pl.lit(None, pl.Int64).alias("rank"), pl.all()).clear()


def _temporal(r: Ranks, o: Options) -> Lazy:
    return {"temporal_breakdown": lambda: temporal.temporal_breakdown(r, hta_compat=o.hta_compat)}


def _idle(r: Ranks, o: Options) -> Lazy:
    def both() -> dict[str, pl.DataFrame]:
        breakdown, stats = idle.idle_time_breakdown(
            r,
            consecutive_kernel_delay_us=o.consecutive_kernel_delay_us,
            hta_compat=o.hta_compat,
            show_idle_interval_stats=True,
        )
        assert stats is not None
        return {"idle_time_breakdown": breakdown, "idle_interval_stats": stats}

    return picked(both, ("idle_time_breakdown", "idle_interval_stats"))


def _kernels(r: Ranks, o: Options) -> Lazy:
    def both() -> dict[str, pl.DataFrame]:
        kernel_type, per_kernel = kernels.gpu_kernel_breakdown(
            r,
            duration_ratio=o.duration_ratio,
            num_kernels=o.num_kernels,
            include_memory_kernels=o.include_memory_kernels,
            hta_compat=o.hta_compat,
        )
        return {"gpu_kernel_breakdown": per_kernel, "gpu_kernel_type_breakdown": kernel_type}

    return picked(both, ("gpu_kernel_breakdown", "gpu_kernel_type_breakdown"))


def _kernels_part(r: Ranks, o: Options) -> Tables:
    return kernels.breakdown_summary(
        r,
        duration_ratio=o.duration_ratio,
        num_kernels=o.num_kernels,
        include_memory_kernels=o.include_memory_kernels,
        hta_compat=o.hta_compat,
    )


def _kernels_reduce(
    parts: Mapping[str, pl.DataFrame], o: Options, ranks: tuple[int, ...]
) -> Tables:
    kernel_type, per_kernel = kernels.breakdown_reduce(parts, hta_compat=o.hta_compat)
    return {"gpu_kernel_breakdown": per_kernel, "gpu_kernel_type_breakdown": kernel_type}


def _kernel_stats(r: Ranks, o: Options) -> Lazy:
    return {
        "kernel_duration_stats": lambda: kernels.kernel_duration_stats(r, hta_compat=o.hta_compat)
    }


def _overlap(r: Ranks, o: Options) -> Lazy:
    return {"comm_comp_overlap": lambda: overlap.comm_comp_overlap(r, hta_compat=o.hta_compat)}


def _queue_summary(r: Ranks, o: Options) -> Lazy:
    series = once(lambda: queue.queue_length_series(r, hta_compat=o.hta_compat))
    return {
        "queue_length_summary": lambda: queue.queue_length_summary_from_series(series()),
        "time_spent_blocked_on_full_queue": lambda: queue.time_blocked_on_full_queue(
            r, o.max_queue_length, hta_compat=o.hta_compat, series=series()
        ),
    }


def _queue_series(r: Ranks, o: Options) -> Lazy:
    return {
        "queue_length_time_series": lambda: queue.queue_length_series(r, hta_compat=o.hta_compat)
    }


def _memory_summary(r: Ranks, o: Options) -> Lazy:
    return {"memory_bw_summary": lambda: memory.memory_bw_summary(r, hta_compat=o.hta_compat)}


def _memory_series(r: Ranks, o: Options) -> Lazy:
    return {"memory_bw_time_series": lambda: memory.memory_bw_series(r, hta_compat=o.hta_compat)}


def _launch(r: Ranks, o: Options) -> Lazy:
    def table() -> pl.DataFrame:
        # (each rank's launches made once per job and options, `launch` keeps them:
        # `kernel_launch_summary` reads this table too)
        per_rank = launch.cuda_kernel_launch_stats(
            r,
            runtime_cutoff=o.runtime_cutoff_us,
            launch_delay_cutoff=o.launch_delay_cutoff_us,
            include_memory_events=o.include_memory_events,
            hta_compat=o.hta_compat,
        )
        return with_rank(per_rank)

    return {"cuda_kernel_launch_stats": table}


def _launch_summary(r: Ranks, o: Options) -> Lazy:
    from hta_tui.analysis.findings.gpu import launch_summary  # (the rule's own summary)

    made = _launch(r, o)["cuda_kernel_launch_stats"]
    return {"kernel_launch_summary": lambda: launch_summary(made())}


def _sequences(r: Ranks, o: Options) -> Lazy:
    return {
        "frequent_cuda_kernel_sequences": lambda: sequences.frequent_cuda_kernel_sequences(
            r,
            o.operator_name,
            rank=None if o.rank < 0 else o.rank,
            min_pattern_len=o.min_pattern_len,
            top_k=o.top_k,
            hta_compat=o.hta_compat,
        )
    }


def _sequences_part(r: Ranks, o: Options) -> Tables:
    """The sequences of the rank HTA's could be, with its rank to pick it by: HTA's are one
    rank's, the asked one, else the job's smallest, which these ranks alone cannot know;
    but only their smallest can be it (a batch of 64 tiny ranks makes one rank's, not 64)."""
    least = min(r, default=None)
    parts = [
        sequences.frequent_cuda_kernel_sequences(
            {rank: ev},
            o.operator_name,
            rank=rank,
            min_pattern_len=o.min_pattern_len,
            top_k=o.top_k,
            hta_compat=o.hta_compat,
        ).select(pl.lit(rank, pl.Int64).alias("rank"), pl.all())
        for rank, ev in sorted(r.items())
        if rank == (least if o.rank < 0 else o.rank)
    ]
    empty = sequences._empty().select(pl.lit(None, pl.Int64).alias("rank"), pl.all())
    return {"frequent_cuda_kernel_sequences": pl.concat([empty, *parts], how="vertical_relaxed")}


def _sequences_rank(o: Options, ranks: tuple[int, ...]) -> int | None:
    """HTA's rank: the asked one (no rows when the job lacks it), else the smallest."""
    return o.rank if o.rank >= 0 else min(ranks, default=None)


def _sequences_reduce(
    parts: Mapping[str, pl.DataFrame], o: Options, ranks: tuple[int, ...]
) -> Tables:
    picked_rank = _sequences_rank(o, ranks)
    table = parts["frequent_cuda_kernel_sequences"]
    return {
        "frequent_cuda_kernel_sequences": table.filter(pl.col("rank") == picked_rank).drop("rank")
    }


def _aten(r: Ranks, o: Options) -> Lazy:
    return {
        "aten_op_kernels_and_delay": lambda: aten_ops.aten_op_kernels_and_delay(
            r,
            sort_by=tuple(c.strip() for c in o.sort_by.split(",") if c.strip()),
            hta_compat=o.hta_compat,
        )
    }


def _steps(r: Ranks, o: Options) -> Lazy:
    scores = once(lambda: steps.straggler_candidates(r, hta_compat=o.hta_compat))
    return {
        "profiler_steps": lambda: pl.DataFrame(
            {"step": steps.profiler_steps(r)}, schema={"step": pl.Int64()}
        ),
        "iterations": lambda: steps.iterations(r, hta_compat=o.hta_compat),
        "potential_stragglers": lambda: pl.DataFrame(
            {"rank": steps.potential_stragglers(scores())}, schema={"rank": pl.Int64()}
        ),
        "straggler_scores": scores,
    }


def _steps_part(r: Ranks, o: Options) -> Tables:
    """A rank's steps (HTA's and in its file's clock), its first event, its step metrics."""
    origins = sorted(steps.origins(r, hta_compat=o.hta_compat).items())
    return {
        "profiler_steps": pl.DataFrame(
            {"step": steps.profiler_steps(r)}, schema={"step": pl.Int64}
        ),
        "iteration_rows": steps.iteration_rows(r, hta_compat=o.hta_compat),
        "rank_origin": pl.DataFrame(
            origins, schema={"rank": pl.Int64, "origin": pl.Int64}, orient="row"
        ),
        "step_metrics": steps.step_metrics(r, hta_compat=o.hta_compat),
    }


def _steps_reduce(parts: Mapping[str, pl.DataFrame], o: Options, ranks: tuple[int, ...]) -> Tables:
    """The job's steps (every rank's), iterations from the job's first event, and the
    ranks' step metrics compared across ranks."""
    origin = parts["rank_origin"]["origin"].min()
    scores = steps.stragglers_from(parts["step_metrics"])
    return {
        "profiler_steps": parts["profiler_steps"].unique("step").sort("step"),
        "iterations": steps.iterations_from(
            parts["iteration_rows"],
            None if origin is None else int(origin),  # type: ignore[arg-type]
        ),
        "potential_stragglers": pl.DataFrame(
            {"rank": steps.potential_stragglers(scores)}, schema={"rank": pl.Int64()}
        ),
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


def _annotations(r: Ranks, o: Options) -> Lazy:
    return {
        "user_annotation_breakdown": lambda: annotations.user_annotation_breakdown(
            r, gpu=False, hta_compat=o.hta_compat
        ),
        "gpu_user_annotation_breakdown": lambda: annotations.user_annotation_breakdown(
            r, gpu=True, hta_compat=o.hta_compat
        ),
    }


def _step_time(r: Ranks, o: Options) -> Lazy:
    breakdown = once(lambda: step_breakdown.step_time_breakdown(r, tb_compat=o.tb_compat))
    return {
        "step_time_breakdown": breakdown,
        "step_selection": lambda: step_breakdown.step_selection(r, tb_compat=o.tb_compat),
        "step_time_average": lambda: step_time_stats.step_time_average(breakdown()),
        "step_time_stats": lambda: step_time_stats.step_time_stats(breakdown()),
        "outlier_steps": lambda: step_time_stats.outlier_steps(breakdown()),
    }


def _gpu_metrics(r: Ranks, o: Options, meta: Metas | None = None) -> Lazy:
    meta = meta or {}
    metrics = once(lambda: gpu_metrics.gpu_metrics(r, tb_compat=o.tb_compat))
    return {
        "gpu_metrics": metrics,
        "gpu_utilization_series": lambda: gpu_metrics.utilization_series(r, tb_compat=o.tb_compat),
        # the GPUs the ranks ran kernels on, as their files describe them
        "gpu_devices": lambda: gpu_metrics.device_table(
            {k: m for k, m in meta.items() if k in r}, metrics()
        ),
    }


def _metric_series(r: Ranks, o: Options) -> Lazy:
    return {"gpu_metric_series": lambda: gpu_metric_series.metric_series(r, tb_compat=o.tb_compat)}


def _sm_series(r: Ranks, o: Options) -> Lazy:
    return {
        "gpu_sm_efficiency_series": lambda: gpu_metrics.sm_efficiency_series(
            r, tb_compat=o.tb_compat
        )
    }


def _kernel_view(r: Ranks, o: Options) -> Lazy:
    return {"kernel_view": lambda: kernel_view.kernel_table(r, tb_compat=o.tb_compat)}


def _kernel_view_by_op(r: Ranks, o: Options) -> Lazy:
    return {"kernel_view_by_op": lambda: kernel_view.kernel_op_table(r, tb_compat=o.tb_compat)}


def _attribution(r: Ranks, o: Options) -> Lazy:
    return {
        "kernel_attribution": lambda: kernel_owners.kernel_attribution(r),
        "unattributed_kernels": lambda: kernel_owners.unattributed_kernels(r),
        "kernel_backends": lambda: kernel_owners.kernel_backends(r),
        "kernel_modules": lambda: kernel_owners.kernel_modules(r),
    }


def _operators(r: Ranks, o: Options) -> Lazy:
    def three() -> dict[str, pl.DataFrame]:
        t = operators.operator_tables(r, tb_compat=o.tb_compat)
        return {
            "operator_stats": t["name"],
            "operator_stats_by_input_shape": t["shape"],
            "operator_call_stacks": t["stack"],
        }

    return picked(
        three, ("operator_stats", "operator_stats_by_input_shape", "operator_call_stacks")
    )


def _memory_curve(r: Ranks, o: Options, memory: Ranks) -> Lazy:
    return {"memory_curve": lambda: memory_view.curve(r, memory)}


def _memory_events(r: Ranks, o: Options, memory: Ranks) -> Lazy:
    return {"memory_events": lambda: memory_view.event_table(r, memory)}


def _memory_stats(r: Ranks, o: Options, memory: Ranks) -> Lazy:
    return {"memory_stats": lambda: memory_view.stats(r, memory)}


def _memory_peak(r: Ranks, o: Options, memory: Ranks) -> Lazy:
    return {
        "memory_peak": lambda: memory_view.live_at_peak(r, memory),
        "memory_device_peaks": lambda: memory_view.peaks(r, memory),
        "memory_no_curve": lambda: memory_view.no_curve(r, memory),
    }


def _memory_leaks(r: Ranks, o: Options, memory: Ranks) -> Lazy:
    return {"memory_leaks": lambda: memory_view.leaks(r, memory)}


def _memory_step_peaks(r: Ranks, o: Options, memory: Ranks) -> Lazy:
    return {"memory_step_peaks": lambda: memory_view.step_peaks(r, memory)}


_MEM = ("memory",)


def _collectives_table(r: Ranks) -> pl.DataFrame:
    return _collectives_of(collectives.calls(r))


def _collectives_of(calls: pl.DataFrame) -> pl.DataFrame:
    return calls.select(
        *(
            c
            for c in collectives.MATCHED_COLUMNS
            if c not in ("wait", "transfer", "late_by", "on_gpu")
        ),
        (pl.col("wait") / 1000).alias("wait_us"),
        (pl.col("transfer") / 1000).alias("transfer_us"),
        (pl.col("late_by") / 1000).alias("late_by_us"),
    )


def _distributed(r: Ranks, o: Options, meta: Metas | None = None) -> Lazy:
    meta = meta or {}
    return {
        "comm_comp_per_rank": lambda: (
            comm_plugin.overlap(r) if o.tb_compat else comm_overview.comm_comp_per_rank(r)
        ),
        "comm_wait_transfer": lambda: (
            comm_plugin.waittime(r) if o.tb_compat else comm_overview.wait_transfer_per_step(r)
        ),
        "collectives": lambda: _collectives_table(r),
        "collective_instances": lambda: comm_stats.collective_instances(r),
        "comm_ops_stats": lambda: comm_stats.comm_ops_stats(r),
        "collective_stragglers": lambda: comm_stats.collective_stragglers(r),
        # node / process / GPU and process groups: from the files' metadata
        "distributed_hierarchy": lambda: comm_topology.hierarchy(
            {k: (str(m.get("path", "")), m, r[k]) for k, m in meta.items() if k in r}
        ),
        "process_groups": lambda: comm_topology.process_groups(
            {k: m for k, m in meta.items() if k in r}
        ),
    }


def _distributed_part(r: Ranks, o: Options, meta: Metas | None = None) -> Tables:
    """A rank's share of the distributed tables: its own rows (per step, its GPUs), its
    collective calls with their sequence ids (matched across ranks by the reduce), the
    process groups its file lists, and with `tb_compat` the plugin's collectives and their
    ranges (the plugin times a transfer by the shortest range over the ranks)."""
    meta = meta or {}
    own = {k: m for k, m in meta.items() if k in r}
    out: Tables = {
        "comm_comp_per_rank": (
            comm_plugin.overlap(r) if o.tb_compat else comm_overview.comm_comp_per_rank(r)
        ),
        "calls": collectives.ranks_calls(r),  # every rank's at once
        "distributed_hierarchy": comm_topology.hierarchy(
            {k: (str(m.get("path", "")), m, r[k]) for k, m in own.items()}
        ),
        "process_group_rows": comm_topology.process_group_rows(own),
    }
    if o.tb_compat:
        nodes = comm_plugin.nodes(r)
        for i, name in enumerate(("plugin_anchors", "plugin_ranges")):
            out[name] = pl.concat(
                [
                    parts[i].select(pl.lit(rank, pl.Int64).alias("rank"), pl.all())
                    for rank, parts in sorted(nodes.items())
                ],
                how="vertical_relaxed",
            )
    return out


def _distributed_reduce(
    parts: Mapping[str, pl.DataFrame], o: Options, ranks: tuple[int, ...]
) -> Tables:
    """The calls matched across ranks, and every table made from them."""
    calls = collectives.matched(parts["calls"])
    instances = comm_stats.collective_instances_of(calls)
    if o.tb_compat:
        anchors, ranges = (parts[n] for n in ("plugin_anchors", "plugin_ranges"))
        by = [t.partition_by("rank", as_dict=True, include_key=False) for t in (anchors, ranges)]
        nodes = {
            rank: tuple(
                b.get((rank,), t.drop("rank").clear())
                for b, t in zip(by, (anchors, ranges), strict=True)
            )
            for rank in ranks
        }
        wait_transfer = comm_plugin.waittime_of(nodes)  # type: ignore[arg-type]
    else:
        wait_transfer = comm_overview.wait_transfer_of(calls)
    return {
        "comm_comp_per_rank": parts["comm_comp_per_rank"],
        "comm_wait_transfer": wait_transfer,
        "collectives": _collectives_of(calls),
        "collective_instances": instances,
        "comm_ops_stats": comm_stats.comm_ops_stats_of(calls),
        "collective_stragglers": comm_stats.collective_stragglers_of(instances),
        "distributed_hierarchy": parts["distributed_hierarchy"],
        "process_groups": comm_topology.process_groups_of(parts["process_group_rows"]),
    }


def _collectives_hidden(r: Ranks, o: Options) -> Lazy:
    return {
        "collectives_hidden": lambda: collective_streams.collectives_hidden(r),
        "collective_streams": lambda: collective_streams.collective_streams(r),
    }


_SYNC_TABLES = ("syncs", "sync_summary", "sync_verdict")


def _syncs(r: Ranks, o: Options, flows: Ranks) -> Lazy:
    return picked(lambda: sync_summary.sync_tables(r, flows, tb_compat=o.tb_compat), _SYNC_TABLES)


_PATH_TABLES = ("critical_path", "critical_path_edges", "critical_path_what_if")


def _critical_path(r: Ranks, o: Options) -> Lazy:
    @functools.cache
    def made() -> tuple[Mapping[str, pl.DataFrame], Mapping[tuple[int, int], Any]]:
        steps_asked = critical_path_tables.critical_path_instances(o.critical_path_steps)
        return critical_path_tables.critical_path_result(
            r, instances=steps_asked, hta_compat=o.hta_compat
        )

    lazy: Lazy = {n: functools.partial(lambda n: made()[0][n], n) for n in _PATH_TABLES}
    # (rank, instance) -> its path (critical_path.path.RankPath): the app's overlay export
    lazy["critical_path_paths"] = lambda: made()[1]  # type: ignore[assignment,return-value]
    return lazy


def _critical_path_part(r: Ranks, o: Options) -> Tables:
    steps_asked = critical_path_tables.critical_path_instances(o.critical_path_steps)
    return critical_path_tables.critical_path_summary(
        r, instances=steps_asked, hta_compat=o.hta_compat
    )


def _critical_path_reduce(
    parts: Mapping[str, pl.DataFrame], o: Options, ranks: tuple[int, ...]
) -> Tables:
    return critical_path_tables.critical_path_reduce(parts)


def _modules(r: Ranks, o: Options) -> Lazy:
    return {"module_stats": lambda: module_view.module_view(r)}


_H = ("hta_compat",)
#: The events columns job-wide analyses read (`Analysis.columns`). Those on HTA's views: what
#: the views keep (hta_view.CACHED_COLUMNS and the columns they are made from).
_VIEW_COLUMNS = (
    *("idx", "ts", "dur", "name", "cat", "kind", "pid", "tid", "stream", "correlation"),
    *("external_id", "bytes", "bandwidth", "input_dims"),
)
#: The collectives' and the critical path's: every column but the kernels' launch figures,
#: the syncs', the Python frames' and the call stacks.
_JOB_COLUMNS = (
    *("idx", "ts", "dur", "name", "cat", "kind", "pid", "tid", "stream", "device"),
    *("correlation", "external_id", "bytes", "bandwidth", "input_dims", "input_type", "seq"),
    *("coll_name", "in_nelems", "out_nelems", "group_size", "dtype", "pg_name", "pg_ranks"),
    *("comm_seq", "annotation"),
)
_TB = ("tb_compat",)

#: Every analysis, in the report's order.
ANALYSES: list[Analysis] = [
    Analysis(
        "temporal_breakdown", "Temporal breakdown", _temporal, cost=0.4, options=_H, scope="rank"
    ),
    Analysis(
        "idle_time_breakdown",
        "Idle time breakdown",
        _idle,
        cost=0.2,
        options=("consecutive_kernel_delay_us", *_H),
        also=("idle_interval_stats",),
        scope="rank",
    ),
    Analysis(
        "gpu_kernel_breakdown",
        "GPU kernel breakdown",
        _kernels,
        cost=0.15,
        options=("duration_ratio", "num_kernels", "include_memory_kernels", *_H),
        also=("gpu_kernel_type_breakdown",),
        columns=_VIEW_COLUMNS,
        scope="reduce",
        rank_part=_kernels_part,
        reduce=_kernels_reduce,
    ),
    Analysis(
        "kernel_duration_stats",
        "Kernel duration statistics",
        _kernel_stats,
        options=_H,
        scope="rank",
    ),
    Analysis(
        "comm_comp_overlap",
        "Communication / computation overlap",
        _overlap,
        options=_H,
        scope="rank",
    ),
    Analysis(
        "queue_length_summary",
        "Queue length per stream",
        _queue_summary,
        cost=0.2,
        options=("max_queue_length", *_H),
        also=("time_spent_blocked_on_full_queue",),
        scope="rank",
    ),
    Analysis(
        "queue_length_time_series",
        "Queue length over time",
        _queue_series,
        False,
        options=_H,
        scope="rank",
    ),
    Analysis("memory_bw_summary", "Memory bandwidth", _memory_summary, options=_H, scope="rank"),
    Analysis(
        "memory_bw_time_series",
        "Memory bandwidth over time",
        _memory_series,
        False,
        options=_H,
        scope="rank",
    ),
    Analysis(
        "cuda_kernel_launch_stats",
        "Kernel launch statistics",
        _launch,
        options=("runtime_cutoff_us", "launch_delay_cutoff_us", "include_memory_events", *_H),
        scope="rank",
    ),
    # what the findings' launch.bound reads of the launches: a row per rank, not per launch
    Analysis(
        "kernel_launch_summary",
        "Kernel launches per rank: those shorter on the GPU than their launch call",
        _launch_summary,
        False,
        options=("runtime_cutoff_us", "launch_delay_cutoff_us", "include_memory_events", *_H),
        scope="rank",
        definitions="own",
    ),
    Analysis(
        "frequent_cuda_kernel_sequences",
        "Frequent kernel sequences",
        _sequences,
        cost=0.15,
        options=("operator_name", "rank", "min_pattern_len", "top_k", *_H),
        columns=_VIEW_COLUMNS,
        scope="reduce",
        rank_part=_sequences_part,
        reduce=_sequences_reduce,
        one_rank=_sequences_rank,
    ),
    Analysis(
        "aten_op_kernels_and_delay",
        "ATen ops: kernels and delays",
        _aten,
        cost=0.3,
        options=("sort_by", *_H),
        scope="rank",
    ),
    Analysis(
        "profiler_steps",
        "Profiler steps and straggler candidates",
        _steps,
        cost=0.15,
        options=_H,
        also=("iterations", "potential_stragglers", "straggler_scores"),
        columns=_VIEW_COLUMNS,
        scope="reduce",
        rank_part=_steps_part,
        reduce=_steps_reduce,
    ),
    Analysis(
        "user_annotation_breakdown",
        "User annotations",
        _annotations,
        options=_H,
        also=("gpu_user_annotation_breakdown",),
        scope="rank",
    ),
    Analysis(
        "step_time_breakdown",
        "Step time: where it goes (TensorBoard Overview)",
        _step_time,
        cost=0.8,
        views=False,
        options=_TB,
        also=("step_selection", "step_time_average", "step_time_stats", "outlier_steps"),
        steps="plugin",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "gpu_metrics",
        "GPU utilization, SM efficiency, occupancy (TensorBoard)",
        _gpu_metrics,
        cost=0.6,
        views=False,
        meta=True,
        options=_TB,
        also=("gpu_utilization_series", "gpu_devices"),
        steps="plugin",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "kernel_view",
        "Kernels: tensor cores, blocks per SM, occupancy (TensorBoard)",
        _kernel_view,
        cost=0.1,
        views=False,
        options=_TB,
        steps="whole",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "gpu_sm_efficiency_series",
        "Est. SM efficiency over time",
        _sm_series,
        False,
        views=False,
        options=_TB,
        steps="plugin",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "gpu_metric_series",
        "The four GPU metrics per time bucket",
        _metric_series,
        cost=0.1,
        views=False,
        options=_TB,
        steps="plugin",
        definitions="plugin",
        scope="rank",
    ),
    # These two share the plugin's operator tree (op_tree.build, built once per rank)
    Analysis(
        "kernel_view_by_op",
        "Kernels by launching op (TensorBoard)",
        _kernel_view_by_op,
        cost=0.2,
        views=False,
        options=_TB,
        steps="whole",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "operator_stats",
        "Operators: host and device time (TensorBoard)",
        _operators,
        cost=0.8,
        views=False,
        options=_TB,
        also=("operator_stats_by_input_shape", "operator_call_stacks"),
        steps="whole",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "memory_curve",
        "Memory curve (downsampled)",
        _memory_curve,
        frames=_MEM,
        views=False,
        steps="whole",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "kernel_attribution",
        "Kernel time with no operator, graph launches, backends, modules (and why)",
        _attribution,
        cost=0.2,
        views=False,
        also=("unattributed_kernels", "kernel_backends", "kernel_modules"),
        steps="whole",
        definitions="own",
        scope="rank",
    ),
    Analysis(
        "memory_events",
        "Memory events: allocation / free pairs",
        _memory_events,
        frames=_MEM,
        views=False,
        steps="whole",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "memory_stats",
        "Memory statistics per operator",
        _memory_stats,
        frames=_MEM,
        views=False,
        steps="whole",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "memory_peak",
        "Memory alive at each device's peak",
        _memory_peak,
        frames=_MEM,
        views=False,
        also=("memory_device_peaks", "memory_no_curve"),
        steps="whole",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "memory_leaks",
        "Memory never freed (leak candidates)",
        _memory_leaks,
        frames=_MEM,
        views=False,
        steps="whole",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "memory_step_peaks",
        "Memory peak per step",
        _memory_step_peaks,
        frames=_MEM,
        views=False,
        steps="whole",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "comm_comp_per_rank",
        "Distributed: collectives, waits, stragglers",
        _distributed,
        cost=0.3,
        views=False,
        meta=True,
        options=_TB,
        also=(
            "comm_wait_transfer",
            "collectives",
            "collective_instances",
            "comm_ops_stats",
            "collective_stragglers",
            "distributed_hierarchy",
            "process_groups",
        ),
        steps="every",
        definitions="plugin",
        columns=_JOB_COLUMNS,
        scope="reduce",
        rank_part=_distributed_part,
        reduce=_distributed_reduce,
    ),
    Analysis(
        "collectives_hidden",
        "Collectives per process group, stream, step and layer: hidden, exposed, serialised",
        _collectives_hidden,
        cost=0.2,
        views=False,
        also=("collective_streams",),
        steps="every",
        definitions="own",
        scope="rank",
    ),
    Analysis(
        "syncs",
        "Host-device syncs and who caused them",
        _syncs,
        frames=("flows",),
        cost=0.5,
        views=False,
        options=_TB,
        also=_SYNC_TABLES[1:],
        steps="whole",
        definitions="own",
        scope="rank",
    ),
    Analysis(
        "module_stats",
        "nn.Module view",
        _modules,
        views=False,
        steps="whole",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "critical_path",
        "Critical path per rank and step, and across ranks (HTA 0.6)",
        _critical_path,
        cost=4.0,  # the first step of 8 ranks, what-ifs included (bench/CRITICAL_PATH.md)
        views=False,
        options=("critical_path_steps", *_H),
        also=_PATH_TABLES[1:],
        results=("critical_path_paths",),
        steps="every",  # the ProfilerSteps critical_path_steps names, as on the host
        definitions="hta",
        columns=_JOB_COLUMNS,
        scope="reduce",
        rank_part=_critical_path_part,
        reduce=_critical_path_reduce,
    ),
    # findings (rules28)
    Analysis(
        "findings",
        "Findings: what to fix first, with its evidence",
        lambda *a, **k: _findings(*a, **k),
        frames=("memory", "flows"),
        # its rank part: each rank's first event; the rules run on the client, on the
        # tables the others made (hta_tui/exec/split.py), so no reduce of its own
        rank_part=lambda *a, **k: _findings_part(*a, **k),
        cost=0.1,  # its own share: the rules; the tables they read cost their analyses
        views=False,
        meta=True,
        also=("finding_evidence",),
        steps="every",
        definitions="own",
    ),
]

# screens (door26): what the app's views show besides the tables above, declared here so
# every view's numbers come through this door too (tests/test_registry.py); app-only tables
# are `default=False` (the report makes them only when named).


def _origin(o: Options) -> int | None:
    return None if o.origin_ns < 0 else o.origin_ns


def _verdict(text: str | None) -> pl.DataFrame:
    """A sentence as a one-row table (none: no row), so it goes through the door too."""
    return pl.DataFrame({"verdict": [text] if text else []}, schema={"verdict": pl.String})


def _kernel_table(r: Ranks, o: Options) -> Lazy:
    def table() -> pl.DataFrame:
        return kernel_detail.kernel_table(
            r,
            fold=o.fold_kernels,
            duration_ratio=o.duration_ratio,
            num_kernels=o.num_kernels,
            hta_compat=o.hta_compat,
        )

    return {
        "kernel_table": table,
        "kernel_view_job": lambda: kernel_view.job_kernel_table(r, tb_compat=o.tb_compat),
        "kernel_view_job_by_op": lambda: kernel_view.job_kernel_table(
            r, by_operator=True, tb_compat=o.tb_compat
        ),
        "kernel_backend_by_name": lambda: kernel_owners.backend_by_name(r),
        "kernel_verdict": lambda: _verdict(kernel_owners.job_verdict(r)),
    }


def _kernel_detail(r: Ranks, o: Options) -> Lazy:
    @functools.cache
    def name() -> str | None:
        if o.kernel_name:
            return o.kernel_name
        top = kernel_detail.kernel_table(r, fold=False, hta_compat=o.hta_compat)
        return None if top.is_empty() else str(top["name"][0])

    def of_name(make: Callable[[str], pl.DataFrame]) -> Callable[[], pl.DataFrame]:
        return lambda: make(name()) if name() is not None else pl.DataFrame()

    spread = once(
        lambda: kernels.kernel_duration_distribution(r, name() or "", hta_compat=o.hta_compat)
    )
    hc, origin = o.hta_compat, _origin(o)
    return {
        "kernel_detail": lambda: pl.DataFrame(
            {"name": [name()], "auto": [not o.kernel_name]},
            schema={"name": pl.String, "auto": pl.Boolean},
        ),
        "kernel_duration_summary": of_name(lambda n: spread()[0]),
        "kernel_duration_histogram": of_name(lambda n: spread()[1]),
        "kernel_occurrences": of_name(
            lambda n: kernel_detail.kernel_occurrences(r, n, hta_compat=hc, origin_ns=origin)
        ),
        "kernel_launchers": of_name(lambda n: kernel_detail.kernel_launchers(r, n, hta_compat=hc)),
        "kernel_streams": of_name(lambda n: kernel_detail.kernel_streams(r, n, hta_compat=hc)),
        "kernel_runs": of_name(
            lambda n: kernel_detail.kernel_runs(r, n, hta_compat=hc, origin_ns=origin)
        ),
    }


def _launching_operators(r: Ranks, o: Options) -> Lazy:
    return {
        "launching_operators": lambda: kernel_detail.launching_operators(r, hta_compat=o.hta_compat)
    }


def _kernel_launches(r: Ranks, o: Options) -> Lazy:
    table = once(
        lambda: launch_kernels.launch_table(
            r,
            runtime_cutoff=o.runtime_cutoff_us,
            launch_delay_cutoff=o.launch_delay_cutoff_us,
            include_memory_events=o.include_memory_events,
        )
    )
    return {
        "kernel_launches": table,
        "short_gpu_kernels": lambda: launch.short_gpu_kernels(table(), o.runtime_cutoff_us),
        "runtime_outliers": lambda: launch.runtime_outliers(table(), o.runtime_cutoff_us),
        "launch_delay_outliers": lambda: launch.launch_delay_outliers(
            table(), o.launch_delay_cutoff_us
        ),
    }


def _longest_gaps(r: Ranks, o: Options) -> Lazy:
    return {
        "longest_gaps": lambda: gaps.longest_gaps(
            r,
            consecutive_kernel_delay_us=o.consecutive_kernel_delay_us,
            n=o.top_gaps,
            hta_compat=o.hta_compat,
            origin_ns=_origin(o),
        )
    }


def _exposed_comm(r: Ranks, o: Options) -> Lazy:
    hc = o.hta_compat
    return {
        "exposed_comm_per_rank": lambda: exposed_comm.exposed_comm_per_rank(r, hta_compat=hc),
        "comm_kernels_exposed": lambda: exposed_comm.comm_kernels_exposed(r, hta_compat=hc),
    }


def _last_calls(r: Ranks, o: Options) -> Lazy:
    return {"collective_last_calls": lambda: comm_stats.collective_last_calls(r)}


def _job_operators(r: Ranks, o: Options) -> Lazy:
    calls = once(lambda: operators.job_operator_calls(r, tb_compat=o.tb_compat))
    return {  # each table made only when asked: the view shows one grouping at a time
        "job_operator_stats": lambda: operators.job_operator_table(calls(), "name"),
        "job_operator_stats_by_input_shape": lambda: operators.job_operator_table(calls(), "shape"),
        "job_operator_call_stacks": lambda: operators.job_operator_table(calls(), "stack"),
        "operator_python_stacks": lambda: operator_stacks.python_stacks(r, o.operator),
    }


ANALYSES += [
    Analysis(
        "kernel_table",
        "Kernels of the ranks together: statistics, the plugin's columns, backends (the app)",
        _kernel_table,
        default=False,
        options=("duration_ratio", "num_kernels", "fold_kernels", "tb_compat", *_H),
        also=(
            "kernel_view_job",
            "kernel_view_job_by_op",
            "kernel_backend_by_name",
            "kernel_verdict",
        ),
        steps="hta",
        definitions="own",
    ),
    Analysis(
        "kernel_detail",
        "One kernel: durations, runs, launchers, streams (the app's kernel detail)",
        _kernel_detail,
        default=False,
        options=("kernel_name", "origin_ns", *_H),
        also=(
            "kernel_duration_summary",
            "kernel_duration_histogram",
            "kernel_occurrences",
            "kernel_launchers",
            "kernel_streams",
            "kernel_runs",
        ),
        definitions="own",
    ),
    Analysis(
        "launching_operators",
        "Operators by the GPU time they launch (the app's kernel sequences)",
        _launching_operators,
        default=False,
        options=_H,
        definitions="own",
    ),
    Analysis(
        "kernel_launches",
        "Every kernel launch with its outliers (the app's kernel launches)",
        _kernel_launches,
        default=False,
        options=("runtime_cutoff_us", "launch_delay_cutoff_us", "include_memory_events"),
        also=("short_gpu_kernels", "runtime_outliers", "launch_delay_outliers"),
    ),
    Analysis(
        "longest_gaps",
        "The longest gaps between a stream's kernels (the app's idle time)",
        _longest_gaps,
        default=False,
        options=("consecutive_kernel_delay_us", "top_gaps", "origin_ns", *_H),
    ),
    Analysis(
        "exposed_comm_per_rank",
        "Communication no computation hides, per rank and kernel (the app's overlap)",
        _exposed_comm,
        default=False,
        options=_H,
        also=("comm_kernels_exposed",),
        definitions="own",
    ),
    Analysis(
        "collective_last_calls",
        "Each collective's last-arriving call (the app's distributed view)",
        _last_calls,
        default=False,
        views=False,
        steps="every",
        definitions="own",
    ),
    Analysis(
        "job_operator_stats",
        "Operators of the ranks together, Python stacks (the app's operators)",
        _job_operators,
        default=False,
        views=False,
        options=("operator", *_TB),
        also=(
            "job_operator_stats_by_input_shape",
            "job_operator_call_stacks",
            "operator_python_stacks",
        ),
        steps="whole",
        definitions="plugin",
    ),
]

# the overview (path26): the per-file summaries the loader made while parsing, read from the
# trace set (`inputs`), so a file landing among many costs its own row only


def _no_set(schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=dict(schema))


def _overview_files(
    r: Ranks,
    o: Options,
    trace_set: TraceSet | None = None,
    overview_kept_rows: overview_rows.KeptRows | None = None,
) -> Lazy:
    @functools.cache
    def made() -> tuple[pl.DataFrame, overview_rows.KeptRows | None]:
        if trace_set is None:  # (no set given: the report's `files` is its own)
            return _no_set(overview.FILE_COLUMNS), None
        # rows made again only for the files whose row changed since `overview_kept_rows`
        return overview_rows.update_file_table(trace_set, overview_kept_rows)

    return {
        "overview_files": lambda: made()[0],
        "overview_kept_rows": lambda: made()[1],  # type: ignore[dict-item,return-value]
    }


def _overview_temporal(r: Ranks, o: Options, trace_set: TraceSet | None = None) -> Lazy:
    def table() -> pl.DataFrame:
        if trace_set is None:
            return temporal.temporal_breakdown({}, hta_compat=o.hta_compat)
        return overview.temporal_table(trace_set, hta_compat=o.hta_compat, every_step=o.every_step)

    return {"overview_temporal": table}


def _overview_steps(r: Ranks, o: Options, trace_set: TraceSet | None = None) -> Lazy:
    def table() -> pl.DataFrame:
        if trace_set is None:
            return _no_set(step_breakdown.COLUMNS)
        return step_overview.step_table(trace_set, tb_compat=o.tb_compat)

    return {"overview_steps": table}


ANALYSES += [
    Analysis(
        "overview_files",
        "The files: rank, span, status, size, GPU busy time (the app's overview)",
        _overview_files,
        default=False,
        views=False,
        inputs=("trace_set", "overview_kept_rows"),
        results=("overview_kept_rows",),
        steps="whole",
        definitions="own",
        scope="rank",
    ),
    Analysis(
        "overview_temporal",
        "Temporal breakdown from the per-file summaries (the app's overview)",
        _overview_temporal,
        default=False,
        views=False,
        inputs=("trace_set",),
        options=("every_step", *_H),
        scope="rank",
    ),
    Analysis(
        "overview_steps",
        "Step time per rank from the per-file summaries (the app's overview)",
        _overview_steps,
        default=False,
        views=False,
        inputs=("trace_set",),
        options=_TB,
        steps="plugin",
        definitions="plugin",
        scope="rank",
    ),
]

# the diff (path26): one side of a comparison, asked once per side (`set_tables` with that
# side's trace set and rank); the diff puts the two sides together (analysis/diff.py)


def _one_side(r: Ranks) -> pl.DataFrame | None:
    """The side's events: the diff compares one rank per side (the smallest given)."""
    return r[min(r)] if r else None


def _diff_side(r: Ranks, o: Options) -> Lazy:
    ev = _one_side(r)
    events = ev if ev is not None else pl.DataFrame(schema=EVENTS_SCHEMA)
    chosen = once(lambda: diff.side_iterations(events, o.iteration, o.average_iterations))
    return {
        "diff_side_ops": lambda: diff.side_summary(
            events,
            chosen(),
            device_type=o.device_type,
            use_short_name=o.use_short_name,
            average_iterations=o.average_iterations,
            match_shapes=False,
            hta_compat=o.hta_compat,
            self_time=o.self_time,
        ).sort("total_duration", "name", descending=[True, False]),  # most time first
        "diff_side_temporal": lambda: diff.side_temporal(events, hta_compat=o.hta_compat),
        "diff_side_iterations": lambda: diff.side_iteration_table(
            events, chosen(), o.average_iterations
        ),
        "diff_side_steps": lambda: step_pairs.step_lengths(events, tb_compat=o.tb_compat),
    }


def _diff_side_item(r: Ranks, o: Options) -> Lazy:
    def made() -> dict[str, pl.DataFrame]:
        ev = _one_side(r)
        events = ev if ev is not None else pl.DataFrame(schema=EVENTS_SCHEMA)
        part = diff.item_side(
            events,
            o.diff_item,
            o.diff_side,
            iteration=diff.side_iterations(events, o.iteration, False),
            use_short_name=o.use_short_name,
            hta_compat=o.hta_compat,
        )
        return {
            "diff_side_item": part["stats"],
            "diff_side_item_kernels": part["launched"].sort(
                "sum", "name", descending=[True, False]
            ),
            "diff_side_item_ops": part["ops"],
        }

    return picked(made, ("diff_side_item", "diff_side_item_kernels", "diff_side_item_ops"))


_DIFF = ("iteration", "device_type", "use_short_name", "average_iterations", "self_time")

ANALYSES += [
    Analysis(
        "diff_side_ops",
        "One side of a trace diff: its ops, temporal breakdown, iterations, steps (the diff)",
        _diff_side,
        default=False,
        options=(*_DIFF, *_TB, *_H),
        also=("diff_side_temporal", "diff_side_iterations", "diff_side_steps"),
        steps="every",
    ),
    Analysis(
        "diff_side_item",
        "One side of a trace diff's op or kernel: durations, kernels launched (the diff)",
        _diff_side_item,
        default=False,
        options=("diff_item", "diff_side", "iteration", "use_short_name", *_H),
        also=("diff_side_item_kernels", "diff_side_item_ops"),
        steps="every",
    ),
]

#: name -> its declaration; table -> the analysis giving it (every key the report prints is a
#: name `--only` accepts). Both follow `ANALYSES` (`declare`, `withdraw`), changed in place.
BY_NAME: dict[str, Analysis] = {}
TABLE_OWNER: dict[str, str] = {}
#: result (`Analysis.results`) -> the analysis giving it: known to the door only.
RESULT_OWNER: dict[str, str] = {}


def _index() -> None:
    BY_NAME.clear()
    TABLE_OWNER.clear()
    RESULT_OWNER.clear()
    for a in ANALYSES:
        BY_NAME[a.name] = a
        TABLE_OWNER.update(dict.fromkeys(a.also, a.name))
        RESULT_OWNER.update(dict.fromkeys(a.results, a.name))


_index()


def declare(analysis: Analysis) -> Analysis:
    """Add an analysis (a plugin, a test): from then on the report, `--only`, `--list` and
    the API know it. ValueError when a name it gives is taken."""
    taken = [t for t in (*analysis.tables, *analysis.results) if known(t) or t in RESULT_OWNER]
    if taken:
        raise ValueError(f"already declared: {', '.join(taken)}")
    ANALYSES.append(analysis)
    _index()
    return analysis


def withdraw(name: str) -> None:
    """Remove a declared analysis (`declare` undone)."""
    ANALYSES[:] = [a for a in ANALYSES if a.name != name]
    _index()


def known(name: str) -> bool:
    """Is `name` an analysis or a table of one?"""
    return name in BY_NAME or name in TABLE_OWNER


def owner(table_name: str) -> Analysis:
    """The analysis giving a table or a result (KeyError for an unknown name)."""
    name = RESULT_OWNER.get(table_name) or TABLE_OWNER.get(table_name, table_name)
    return BY_NAME[name]


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
    owner_of = {t: TABLE_OWNER.get(t, t) for t in tables}
    return {t: df for t, df in tables.items() if t in names or owner_of[t] in asked_analyses}


#: The polars engine the analyses run on (`run`).
ENGINE = "in-memory"


def _inputs(
    a: Analysis,
    frames: FrameGetter | None,
    meta: Metas | None,
    given: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What an analysis reads besides the events, as keyword arguments."""
    out: dict[str, Any] = {f: frames(f) if frames is not None else {} for f in a.frames}
    if a.meta:
        out["meta"] = meta or {}
    for name in a.inputs:
        out[name] = (given or {}).get(name)
    return out


def tables(
    ranks: Ranks,
    names: Iterable[str],
    options: Options | None = None,
    *,
    frames: FrameGetter | None = None,
    meta: Metas | None = None,
    given: Mapping[str, Any] | None = None,
) -> Tables:
    """The named tables only, in the order asked: each analysis set up once, and only the
    tables asked for made (the door of the API and the screens: one table costs one table).
    A name of an analysis's `results` answers that object in a table's place; `given`: the
    inputs analyses declare (`Analysis.inputs`). KeyError for an unknown name, or a table
    only the report makes (from file metadata)."""
    names = list(names)
    unknown = [n for n in names if not known(n) and n not in RESULT_OWNER]
    if unknown:
        raise KeyError(", ".join(unknown))
    lazies: dict[str, Lazy] = {}
    out: Tables = {}
    for n in names:  # on the caller's polars engine (`run` sets the report's)
        a = owner(n)
        if a.name not in lazies:
            lazies[a.name] = a.lazy(ranks, options, **_inputs(a, frames, meta, given))
        if n not in lazies[a.name]:
            raise KeyError(f"{a.name} did not give {n}")
        checkpoint()  # a view left behind stops here (analysis/checkpoint.py)
        out[n] = lazies[a.name][n]()
    return out


def table(
    ranks: Ranks,
    name: str,
    options: Options | None = None,
    *,
    frames: FrameGetter | None = None,
    meta: Metas | None = None,
) -> pl.DataFrame:
    """One table by its name (`tables`)."""
    return tables(ranks, [name], options, frames=frames, meta=meta)[name]


class LazyEvents(Mapping[int, pl.DataFrame]):
    """rank -> its events frame (or the frame `name`), read when an analysis asks for it:
    what reads the set's per-file summaries (the overview) or needs the ranks but not their
    frames (the report's scope of a whole-trace table, the findings on tables made already)
    reads no frame."""

    def __init__(
        self, ts: TraceSet, ranks: Iterable[int] | None = None, *, name: str = "events"
    ) -> None:
        loaded = ts.loaded()
        wanted = set(loaded) if ranks is None else set(ranks)
        self._data = {r: d for r, d in sorted(loaded.items()) if r in wanted}
        self._name = name

    def __getitem__(self, rank: int) -> pl.DataFrame:
        return self._data[rank].frame(self._name)

    def __iter__(self) -> Iterator[int]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def set_tables(
    ts: TraceSet,
    names: Iterable[str],
    options: Options | None = None,
    *,
    ranks: Iterable[int] | None = None,
    given: Mapping[str, Any] | None = None,
) -> Tables:
    """`tables` of one trace set (the app's, or one side of the diff, asked once per side):
    its loaded ranks (or `ranks`), their frames and metadata, and the set itself for the
    analyses reading it (`inputs`: "trace_set"); a frame is read only when asked for."""
    names = list(names)
    ranks = None if ranks is None else list(ranks)
    unknown = [n for n in names if not known(n) and n not in RESULT_OWNER]
    if unknown:
        raise KeyError(", ".join(unknown))
    meta = trace_meta(ts, ranks) if any(owner(n).meta for n in names) else None
    return tables(
        LazyEvents(ts, ranks),
        names,
        options,
        frames=trace_frames(ts, ranks),
        meta=meta,
        given={"trace_set": ts, **(given or {})},
    )


def run(
    ranks: Ranks,
    names: list[str] | None = None,
    options: Options | None = None,
    *,
    threads: int = 2,
    frames: FrameGetter | None = None,
    meta: Metas | None = None,
    given: Mapping[str, Any] | None = None,
) -> Tables:
    """Run the selected analyses over the loaded ranks; tables in declaration order.

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
        return a.run(ranks, options, **_inputs(a, frames, meta, given))

    with pl.Config(engine_affinity=ENGINE):
        results = scheduling.run_all(chosen, call, threads)
    out: Tables = {}
    for a in chosen:
        out.update(results[a.name])
    return out


def rank_parts(
    ranks: Ranks,
    names: list[str],
    options: Options | None = None,
    *,
    threads: int = 1,
    frames: FrameGetter | None = None,
    meta: Metas | None = None,
) -> dict[str, Tables]:
    """analysis -> what it needs of these ranks: a rank-wise analysis's tables, a reducing
    one's summaries (`Analysis.summarise`); the back-ends' unit of work."""
    options = options or Options()
    whole = [n for n in names if BY_NAME[n].rank_part is None]
    made = run(ranks, whole, options, threads=threads, frames=frames, meta=meta) if whole else {}
    out: dict[str, Tables] = {}
    for n in names:
        a = BY_NAME[n]
        if a.rank_part is None:
            out[n] = {t: made[t] for t in a.tables if t in made}
        else:
            with pl.Config(engine_affinity=ENGINE):
                out[n] = a.summarise(ranks, options, **_inputs(a, frames, meta))
    return out


# -- findings (rules28) -------------------------------------------------------------------

FINDING_TABLES = ("findings", "finding_evidence")


def table_getter(
    ranks: Ranks,
    options: Options | None = None,
    *,
    frames: FrameGetter | None = None,
    meta: Metas | None = None,
    made: Mapping[str, pl.DataFrame] | None = None,
) -> Callable[[str], pl.DataFrame]:
    """name -> table, each analysis set up once and each table made once, on first asking;
    tables in `made` (a report's run) are taken as they are."""
    lazies: dict[str, Lazy] = {}

    @functools.cache
    def get(name: str) -> pl.DataFrame:
        if made is not None and name in made:
            return made[name]
        a = owner(name)
        if a.name not in lazies:
            lazies[a.name] = a.lazy(ranks, options, **_inputs(a, frames, meta))
        return lazies[a.name][name]()

    return get


def findings_tables(
    ranks: Ranks,
    options: Options | None = None,
    *,
    frames: FrameGetter | None = None,
    meta: Metas | None = None,
    made: Mapping[str, pl.DataFrame] | None = None,
    config: Any = None,
    origin_us: float | None = None,
) -> Tables:
    """The findings and their evidence (analysis/findings), the rules reading the other
    analyses' tables through `table_getter`: only the tables the rules turned on need. On
    the report's polars engine (`ENGINE`) whoever asks (`check`, the API, the app): on
    polars' default one the tables they read cost 5-20% more CPU (bench/FINDINGS.md).
    `origin_us`: the job's clock origin when known (`findings_origin_us`), else read from
    the ranks' events."""
    from hta_tui.analysis import findings  # (kept here: the top belongs to the analyses)

    get = table_getter(ranks, options, frames=frames, meta=meta, made=made)
    if origin_us is None:  # (given: the caller knows it without reading every column)
        origin_us = steps.job_origin_us(ranks)
    with pl.Config(engine_affinity=ENGINE):
        context = {"meta": dict(meta or {}), "origin_us": origin_us}
        found, evidence = findings.evaluate_all(get, config, context=context)
    return {"findings": found, "finding_evidence": evidence}


def _findings(r: Ranks, o: Options, memory: Ranks, flows: Ranks, meta: Metas | None = None) -> Lazy:
    given = {"memory": memory, "flows": flows}
    frames: FrameGetter = lambda name: given.get(name, {})  # noqa: E731
    return picked(lambda: findings_tables(r, o, frames=frames, meta=meta), FINDING_TABLES)


def _findings_part(r: Ranks, o: Options, **_: Any) -> Tables:
    """What the findings need of a rank besides the other analyses' tables: its first
    event (the job's clock origin is the smallest, `findings_origin_us`)."""
    rows = sorted(steps.origins(r).items())
    schema = {"rank": pl.Int64, "origin": pl.Int64}
    return {"job_origin": pl.DataFrame(rows, schema=schema, orient="row")}


def findings_origin_us(parts: Mapping[str, pl.DataFrame]) -> float:
    """`steps.job_origin_us` from every rank's `_findings_part`."""
    origin = parts["job_origin"]["origin"].min()
    return float(origin) / 1000 if origin is not None else 0.0  # type: ignore[arg-type]


_run_analyses = run


def _run_then_findings(
    ranks: Ranks,
    names: list[str] | None = None,
    options: Options | None = None,
    *,
    made: Mapping[str, pl.DataFrame] | None = None,
    origin_us: float | None = None,
    **kw: Any,
) -> Tables:
    """`run`, with `findings` (when selected) evaluated last on the tables the others made
    and on `made` (tables made elsewhere: a split run's rank-wise or kept ones), instead of
    making them again (the rules read only tables); `origin_us`, the job's first moment when
    the caller knows it without reading every rank's events. The one place findings are
    evaluated after other analyses: the split run (exec/split.py) comes through here too."""
    chosen = [a.name for a in select(names)]
    if "findings" not in chosen:
        return _run_analyses(ranks, names, options, **kw)
    others = [n for n in chosen if n != "findings"]
    out = _run_analyses(ranks, others, options, **kw) if others else {}
    found = findings_tables(
        ranks,
        options,
        frames=kw.get("frames"),
        meta=kw.get("meta"),
        made={**(made or {}), **out},
        origin_us=origin_us,
    )
    return {**out, **found}


run = _run_then_findings


# a view's window (win26): what the memory view's zoom keys and the timeline show, declared
# here with the window as options (`window_*`, `origin_ns`), so the screens ask this door too.


def _window(o: Options) -> tuple[float, float] | None:
    return (
        None
        if min(o.window_start_ms, o.window_end_ms) < 0
        else (o.window_start_ms, o.window_end_ms)
    )


def _memory_window(r: Ranks, o: Options, memory: Ranks) -> Lazy:
    """Each file's memory in a window (`window_*`: its device, ms from `origin_ns`): the
    curve, what the window is and its steps cost no operator attribution (a zoom key draws
    them first); what is alive at its peak, its events and statistics do."""
    from hta_tui.analysis import memory_window as mw  # (the memory view's windows only)

    have = memory_view.ranks_with_memory(r, memory)
    device, view, origin = o.window_device or None, _window(o), _origin(o)

    @functools.cache
    def curves() -> dict[int, Any]:  # rank -> its `MemoryWindow`, curve only
        return {k: mw.curve_window(r[k], memory[k], device, view, origin) for k in have}

    @functools.cache
    def wholes() -> dict[int, Any]:  # ... with its tables (the same objects, filled in)
        files = {k: memory_view.FileMemory(r[k], memory[k], origin) for k in have}
        return {k: mw.memory_window(files[k], curve=w) for k, w in curves().items()}

    def part(name: str) -> Callable[[], pl.DataFrame]:
        made = curves if name in mw.CURVE_TABLES else wholes
        return lambda: with_rank({k: mw.window_table(w, name) for k, w in made().items()})

    return {n: part(n) for n in mw.WINDOW_TABLES}


def _timeline_rows(
    r: Ranks,
    o: Options,
    threads: Ranks,
    flows: Ranks,
    memory: Ranks,
    every_row: tuple[Ranks, int] | None = None,
    timeline_first_rows: int | None = None,
    timeline_model: Any = None,
) -> Lazy:
    """The timeline's rows (`timeline_model`, a result: numpy arrays per thread, stream and
    counter, which the app's view slices and searches per key) and, as a table, each row's
    events and busy time in the window. `every_row` (an input: a large rank drawn from a part
    of its events): each such rank's distinct row keys over all its events and their last
    end, so every row is listed, empty where the part has none, and the span is whole.
    `timeline_first_rows` (an input): only the ranks of about that many rows first (the
    rows on screen), the others pending; `timeline_model` (an input: that partial model
    given back): its rows kept, its pending ranks made (`build_timeline`)."""
    from hta_tui.analysis import timeline_rows  # (numpy: the timeline's views only)

    @functools.cache
    def model() -> Any:
        tl = timeline_rows.build_timeline(
            dict(r),
            _origin(o),
            dict(threads),
            dict(flows),
            dict(memory),
            first_rows=timeline_first_rows,
            made=timeline_model,
        )
        if every_row is None:
            return tl
        keys, end_ns = every_row
        keys = {k: v for k, v in keys.items() if k not in tl.pending}  # theirs come later
        return timeline_rows.with_every_row(tl, keys, dict(threads), end_ns)

    def table() -> pl.DataFrame:
        w = _window(o)
        ns = (w[0] * 1e6, w[1] * 1e6) if w else (None, None)
        return timeline_rows.lane_table(model(), *ns)

    return {"timeline_rows": table, "timeline_model": model}


for _window_analysis in (
    Analysis(
        "memory_window",
        "One file's memory in a window: curve, peak, live, events, statistics (the app's memory)",
        _memory_window,
        default=False,
        views=False,
        frames=_MEM,
        options=("window_device", "window_start_ms", "window_end_ms", "origin_ns"),
        also=(
            "memory_window_summary",
            "memory_window_steps",
            "memory_window_peak",
            "memory_window_events",
            "memory_window_stats",
        ),
        steps="whole",
        definitions="plugin",
        scope="rank",
    ),
    Analysis(
        "timeline_rows",
        "The timeline's rows (threads, streams, counters): events and busy time in a window",
        _timeline_rows,
        default=False,
        cost=1.3,  # the rows of 8 ranks of 100 MB (bench/TIMELINE.md)
        frames=("threads", "flows", "memory"),
        options=("origin_ns", "window_start_ms", "window_end_ms"),
        steps="whole",
        definitions="own",
        results=("timeline_model",),
        inputs=("every_row", "timeline_first_rows", "timeline_model"),
    ),
):
    declare(_window_analysis)
