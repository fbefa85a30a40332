"""HTA's view of a job's events: which rows its analyses see, and with which timestamps.

HTA (0.5) does four things to a trace before any analysis, and every number it reports
depends on them, so they live here once:

1. Rounding (`trace_parser.round_down_time_stamps`): when a file has fractional-microsecond
   timestamps, start is rounded up and end down to whole microseconds (a sub-microsecond event
   can end up with a zero or negative duration); the end from HTA's float64 `ts + dur`
   (`with_times`). Only with `hta_compat=True`; by default the
   exact nanoseconds are kept. DEVIATION (default mode): exact timestamps, so durations of
   ns-resolution traces differ from HTA's by up to 2 us per event.
2. Dropping rows without a category and the profiler's own "Trace" span (`_compress_df`).
3. The profiler-step filter (`Trace._filter_irrelevant_gpu_kernels`): when the job has at least
   two distinct names containing "ProfilerStep", each rank keeps only the CPU events that start
   before its last ProfilerStep starts, and the GPU events launched by one of those (matched on
   `correlation`). A rank without any ProfilerStep then keeps nothing, as in HTA. A GPU-side
   `gpu_user_annotation` ProfilerStep has no stream, so it takes part in "last ProfilerStep
   start" as in HTA (both modes: the ROCm breakdowns then equal HTA's); it is never a step of
   its own (`steps`).
   DEVIATION (both modes): HTA inner-joins on correlation, so a GPU event whose correlation
   matches k kept CPU events would be counted k times; we keep it once (semi join). No
   reference trace has such duplicates, so the numbers agree.
4. GPU events (`trace_df["stream"].ne(-1)` in every breakdown): any event with an integer
   stream, so kernels, memcpy, memset, `cuda_sync` spans and even a CPU op that carries a
   `stream` arg (Triton launches do). DEVIATION (default mode only): CPU-side kinds (cpu_op,
   runtime, driver, annotations, python) are not GPU events even with a stream arg; with
   `hta_compat=True` they count, as in HTA.

Kernel types follow `hta.utils.utils.get_kernel_type`. Times stay integer nanoseconds in
`start`/`end`/`dur`; analyses convert to float microseconds (`us`) at the end.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
import polars as pl

from hta_tui.analysis import interval_arrays
from hta_tui.analysis.checkpoint import checkpoint, none_inside
from hta_tui.analysis.rank_column import parts, tagged, untagged

#: HTA's KernelType names, in its enum order.
KERNEL_TYPES: tuple[str, ...] = ("COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER")
KERNEL_TYPE = pl.Enum(KERNEL_TYPES)

#: Categories HTA's idle-time breakdown treats as kernels (it leaves `cuda_sync` out).
HTA_KERNEL_CATS: tuple[str, ...] = (
    "kernel",
    "Kernel",
    "gpu_memset",
    "Memset",
    "gpu_memcpy",
    "Memcpy",
    "mtia_ccp_events",
)

#: Kinds that run on the CPU even when the event carries a `stream` arg.
CPU_KINDS: tuple[str, ...] = ("runtime", "driver", "cpu_op", "annotation", "python", "trace_span")

#: Device-level syncs HTA's GPUKernelFilter treats as GPU events whatever their stream.
_DEVICE_SYNC_NAMES = ("Event Sync", "Context Sync")

_NS_PER_US = 1000


def us(expr: pl.Expr) -> pl.Expr:
    """Nanoseconds -> float microseconds, the unit of every HTA output."""
    return expr.cast(pl.Float64) / _NS_PER_US


def kernel_type(name: pl.Expr | None = None) -> pl.Expr:
    """HTA's `get_kernel_type` as an expression over kernel names.

    COMMUNICATION `^nccl.*Kernel`; MEMORY `^Memcpy|^Memset|^dma`; OTHER when HTA's
    "not compute" regex `(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)` matches at the start,
    which with Python's `re.match` means: contains "Memcpy", starts with "Memset", or
    contains "Sync" (Stream Sync, Event Sync ...); COMPUTATION otherwise.
    """
    n = pl.col("name") if name is None else name
    n = n.fill_null("")
    # Literal matching is several times faster than the regexes on long C++ kernel names.
    comm = n.str.starts_with("nccl") & n.str.slice(4).str.contains("Kernel", literal=True)
    memory = n.str.starts_with("Memcpy") | n.str.starts_with("Memset") | n.str.starts_with("dma")
    other = n.str.contains("Memcpy", literal=True) | n.str.contains("Sync", literal=True)
    return (
        pl.when(comm)
        .then(pl.lit("COMMUNICATION"))
        .when(memory)
        .then(pl.lit("MEMORY"))
        .when(other)
        .then(pl.lit("OTHER"))
        .otherwise(pl.lit("COMPUTATION"))
        .cast(KERNEL_TYPE)
    )


def _hta_kernel_filter() -> pl.Expr:
    """HTA's GPUKernelFilter: stream >= 0 and correlation >= 0, or a device-level sync."""
    return (
        (pl.col("stream").fill_null(-1) >= 0) & (pl.col("correlation").fill_null(-1) >= 0)
    ) | pl.col("name").is_in(_DEVICE_SYNC_NAMES)


def gpu_mask(*, hta_compat: bool) -> pl.Expr:
    """Rows HTA's breakdowns count as GPU events (`stream != -1`); see module point 4."""
    has_stream = pl.col("stream").is_not_null() & (pl.col("stream") != -1)
    if hta_compat:
        return has_stream
    return has_stream & ~pl.col("kind").is_in(CPU_KINDS)


def has_fractional_us(events: pl.DataFrame) -> bool:
    """Whether any timestamp has a sub-microsecond part (HTA's float64 `ts` column)."""
    if events.is_empty():
        return False
    return bool(events.select((pl.col("ts") % _NS_PER_US != 0).any()).item())


def f64_us(ns: pl.Expr) -> pl.Expr:
    """Integer ns -> the float64 microseconds HTA's JSON parse holds for the same number.

    The whole and fractional microseconds are added in float64: each part is exact or
    correctly rounded, so the sum is the double nearest to the decimal in the file (at epoch
    scale, ~1.7e15 us, a float64 resolves only 0.25 us).
    """
    return (ns // _NS_PER_US).cast(pl.Float64) + (ns % _NS_PER_US).cast(pl.Float64) / _NS_PER_US


def with_times(events: pl.DataFrame, *, hta_compat: bool) -> pl.DataFrame:
    """Add `start`, `end` (int ns) and set `dur = end - start`.

    With `hta_compat` and fractional timestamps in this file, start is rounded up and end down
    to whole microseconds, like HTA; otherwise they are exact. HTA rounds only when the `ts`
    column is float, i.e. when some `ts` is fractional: a file with whole `ts` but fractional
    `dur` keeps its fractional durations there too. HTA's end is `floor(ts + dur)` computed in
    float64 (`round_down_time_stamps`): at epoch-microsecond scale that sum is already on a
    0.25 us grid, so the end is floored from the same float64 sum, not from the exact one.
    """
    if hta_compat and has_fractional_us(events):
        start = f64_us(pl.col("ts")).ceil().cast(pl.Int64) * _NS_PER_US
        end_us = f64_us(pl.col("ts")) + f64_us(pl.col("dur"))
        end = end_us.floor().cast(pl.Int64) * _NS_PER_US
    else:
        start = pl.col("ts")
        end = pl.col("ts") + pl.col("dur")
    return events.with_columns(start.alias("start"), end.alias("end")).with_columns(
        (pl.col("end") - pl.col("start")).alias("dur")
    )


def profiler_step_names(ranks: Mapping[int, pl.DataFrame]) -> set[str]:
    """Distinct event names containing "ProfilerStep" over all ranks (HTA's symbol table)."""
    names: set[str] = set()
    if at_once() and len(ranks) > 1:
        _step_names_at_once(ranks)
    for events in ranks.values():
        key = (id(events), "step_names")
        with _views_lock:
            hit = _views.get(key)
        if hit is None:
            # Distinct names first: far fewer strings to search than events.
            hit = events.select(pl.col("name").unique().drop_nulls())
            hit = hit.filter(pl.col("name").str.contains("ProfilerStep", literal=True))
            hit = _remember(events, key, hit)
        names.update(hit["name"].to_list())
    return names


def _step_names_at_once(ranks: Mapping[int, pl.DataFrame]) -> None:
    """Inside a batch of small ranks, the ranks' step names (`profiler_step_names`' per-rank
    table, kept as each rank's) found in one query over the ranks whose names are not kept
    yet (two queries a rank alone); ranks of another name type find their own."""
    todo = []
    for rank, events in sorted(ranks.items()):
        with _views_lock:
            kept = (id(events), "step_names") in _views
        if not kept and events.schema.get("name") == pl.String:
            todo.append((rank, events))
    if len(todo) < 2:
        return
    every = tagged([(rank, events[["name"]]) for rank, events in todo], "__rank")  # (picks)
    found = parts(
        every.filter(pl.col("name").str.contains("ProfilerStep", literal=True)).unique(
            ["__rank", "name"], maintain_order=True
        ),
        "__rank",
    )
    empty = pl.DataFrame(schema={"name": pl.String})
    for rank, events in todo:
        _remember(events, (id(events), "step_names"), found.get((rank,), empty))


def _filter_profiler_steps(events: pl.DataFrame, step_names: set[str]) -> pl.DataFrame:
    """Keep CPU events before the last ProfilerStep start and the GPU events they launched."""
    # the GPU test once, as a column (it matches names); dropped again at the end
    events = events.with_columns(_hta_kernel_filter().alias("__on_gpu"))
    on_gpu = pl.col("__on_gpu")
    is_step = pl.col("name").is_in(sorted(step_names))
    steps = events.lazy()
    # A cheap prefix match narrows the rows first (a substring search costs 4x more).
    if all(n.startswith("ProfilerStep") for n in step_names):
        steps = steps.filter(pl.col("name").str.starts_with("ProfilerStep"))
    elif all("ProfilerStep" in n for n in step_names):
        steps = steps.filter(pl.col("name").str.contains("ProfilerStep", literal=True))
    last_start = steps.select(pl.col("start").filter(~on_gpu & is_step).max()).collect().item()
    if last_start is None:  # HTA compares with NaN: nothing survives
        return events.drop("__on_gpu").clear()
    kept_cpu = ~on_gpu & (pl.col("start") < last_start)
    # HTA merges on correlation with its default -1 for "none"; keep that matching rule.
    corr = pl.col("correlation").fill_null(-1)
    launched = events.select(corr.filter(kept_cpu).unique()).to_series()
    kept = events.filter(kept_cpu | (on_gpu & corr.is_in(launched.implode())))
    return kept.drop("__on_gpu")


#: The columns the view itself needs; analyses that need no more pass these as `columns`.
CORE_COLUMNS: tuple[str, ...] = (
    "idx",
    "ts",
    "dur",
    "name",
    "cat",
    "kind",
    "stream",
    "correlation",
)


#: Input columns the shared, cached views carry: the union of what the analyses ask for.
CACHED_COLUMNS: tuple[str, ...] = ("pid", "tid", "external_id", "bytes", "bandwidth", "input_dims")
_ADDED = ("start", "end", "gpu", "kernel_type")
_views: dict[tuple[object, ...], pl.DataFrame] = {}
#: frame id -> the keys of what is kept for it (a job's values under each of its frames), so
#: a frame's finalizer drops its own values without looking at every key: a job of 1,000
#: ranks freed its frames in time quadratic in the ranks
_keys_of: dict[int, set[tuple[object, ...]]] = {}
_views_lock = threading.RLock()  # a finalizer may run while its thread holds it
#: key -> the lock its first builder holds while it builds (`job_cached`)
_building: dict[tuple[object, ...], threading.RLock] = {}


def _watch(frame: pl.DataFrame, key: tuple[object, ...]) -> None:
    """Drop `key` when `frame` goes (the caller holds the lock)."""
    keys = _keys_of.get(id(frame))
    if keys is None:
        keys = _keys_of[id(frame)] = set()
        weakref.finalize(frame, _forget, id(frame))
    keys.add(key)


def _remember(events: pl.DataFrame, key: tuple[object, ...], value: pl.DataFrame) -> pl.DataFrame:
    """Keep `value` for as long as `events` lives (keys start with id(events))."""
    with _views_lock:
        _watch(events, key)
        _views[key] = value
    return value


def _forget(frame_id: int) -> None:
    with _views_lock:
        keys = _keys_of.pop(frame_id, set())
        dropped = [_views.pop(k) for k in keys if k in _views]
    # Freed here, outside the lock: a dropped value can be a frame other values are kept for
    # (memory records -> their prefix sums), whose own finalizer calls `_forget` again.
    del dropped


#: original frame id -> its every-step clone, and the clones' ids (see `every_step`).
_every_step_clones: dict[int, pl.DataFrame] = {}
_every_step_ids: set[int] = set()


def every_step(events: pl.DataFrame) -> pl.DataFrame:
    """`events` as a frame HTA's ProfilerStep filter leaves whole (the last step included):
    a clone (it shares the data) marked by its id, so its views and derived tables are
    cached apart from the original's; the same clone while the original lives."""
    with _views_lock:
        clone = _every_step_clones.get(id(events))
        if clone is not None:
            return clone
        clone = events.clone()
        _every_step_clones[id(events)] = clone
        _every_step_ids.add(id(clone))
    weakref.finalize(events, _every_step_clones.pop, id(events), None)
    weakref.finalize(clone, _every_step_ids.discard, id(clone))
    return clone


def keeps_every_step(events: pl.DataFrame) -> bool:
    """Is `events` an `every_step` clone (its ProfilerStep filter off)?"""
    return id(events) in _every_step_ids


def _job_key(
    ranks: Mapping[int, pl.DataFrame], name: str, args: tuple[object, ...]
) -> tuple[object, ...]:
    """`job_cached`'s key: the frames' identities, the ranks, the name and the arguments."""
    frames = [ranks[r] for r in sorted(ranks)]
    return ("job", tuple(id(f) for f in frames), tuple(sorted(ranks)), name, *args)


def job_kept(ranks: Mapping[int, pl.DataFrame], name: str, *args: object) -> object | None:
    """What `job_cached` keeps for these frames, `name` and `args`, or None: nothing built
    (and nothing waited for: one being built is not there yet)."""
    key = _job_key(ranks, name, args)
    with _views_lock:
        return _views.get(key)


def made_ahead(
    ranks: Mapping[int, pl.DataFrame],
    name: str,
    build: Callable[[], object],
    *args: object,
) -> None:
    """`job_cached(ranks, name, build, *args)` for work ahead of any view (the app's
    read-ahead, on a thread of lower priority): built outside the lock `job_cached` holds
    while it builds, and kept unless one was kept meanwhile. A view asking for the same
    table then makes its own rather than wait for a thread every other thread comes before
    (issue 27: the read-ahead goes on through a walk of keys, and the view at its end must
    never wait for a piece of it)."""
    checkpoint()
    if job_kept(ranks, name, *args) is not None:
        return
    value = build()
    with none_inside():  # kept as it is: a checkpoint there (stopped) left a lock behind
        job_cached(ranks, name, lambda: value, *args)  # type: ignore[arg-type, return-value]


def job_cached(
    ranks: Mapping[int, pl.DataFrame],
    name: str,
    build: Callable[[], pl.DataFrame],
    *args: object,
) -> pl.DataFrame:
    """`build()` once per job (the same events frames) and `name`/`args`: several analyses
    share intermediates (GPU tables, kernel launches), kept while every frame lives.

    Once, even when analyses on two threads ask at the same time (`scheduling` runs the
    memory analyses side by side): the second waits for the first one's build instead of
    making the same table beside it."""
    if not ranks:
        return build()
    frames = [ranks[r] for r in sorted(ranks)]
    key = _job_key(ranks, name, args)
    with _views_lock:
        hit = _views.get(key)
    if hit is not None:
        return hit
    # not under the lock: work that waited there would hold up the view shown; before the
    # build's lock is made: work stopped there (cancelled) left it behind
    checkpoint()
    with _views_lock:
        hit = _views.get(key)
        if hit is not None:
            return hit
        building = _building.setdefault(key, threading.RLock())
    with building:
        with _views_lock:
            hit = _views.get(key)
        if hit is not None:
            return hit
        try:
            with none_inside():
                value = build()
            with _views_lock:
                for f in frames:
                    _watch(f, key)
                _views[key] = value
        finally:
            with _views_lock:
                _building.pop(key, None)
    return value


def _shared(columns: Sequence[str] | None) -> bool:
    """Whether the shared, cached view holds every column asked for (the core ones and
    `CACHED_COLUMNS`): kernel detail's runs asked for `ts`, a core column, and built an
    uncached view of every rank on each visit."""
    return columns is not None and set(columns) <= {*CORE_COLUMNS, *CACHED_COLUMNS}


def rank_view(
    events: pl.DataFrame,
    step_names: set[str],
    *,
    hta_compat: bool = False,
    columns: Sequence[str] | None = None,
    step_filter: bool | None = None,
) -> pl.DataFrame:
    """One rank's events as HTA's analyses see them; see `build_rank_view`.

    Every analysis starts from this view, so it is built once per events frame and mode and
    shared (dropped when the frame is); callers get the columns they asked for.
    """
    if step_filter is None:
        step_filter = len(step_names) >= 2 and not keeps_every_step(events)
    if not _shared(columns):
        return build_rank_view(
            events, step_names, hta_compat=hta_compat, columns=columns, step_filter=step_filter
        )
    key = (id(events), hta_compat, step_filter, frozenset(step_names) if step_filter else None)
    with _views_lock:
        view = _views.get(key)
    if view is None:
        checkpoint()
        view = build_rank_view(
            events,
            step_names,
            hta_compat=hta_compat,
            columns=CACHED_COLUMNS,
            step_filter=step_filter,
        )
        view = _remember(events, key, view)
    keep = {*CORE_COLUMNS, *columns, *_ADDED}
    picked = tuple(c for c in view.columns if c in keep)
    # the same pick for the same columns: what is kept for a view (`job_cached({0: view})`,
    # the step rows three analyses ask for) then serves every asker, not one
    with _views_lock:
        hit = _views.get((*key, picked))
    if hit is None:
        hit = _remember(events, (*key, picked), view[list(picked)])  # (a pick: no query)
    return hit


def build_rank_view(
    events: pl.DataFrame,
    step_names: set[str],
    *,
    hta_compat: bool = False,
    columns: Sequence[str] | None = None,
    step_filter: bool | None = None,
) -> pl.DataFrame:
    """One rank's events as HTA's analyses see them (module points 1-4).

    HTA applies its ProfilerStep filter when the whole job has >= 2 step names; `step_filter`
    says so explicitly when `step_names` holds only this rank's names (per-file summaries).

    Adds `start`, `end` (int ns), `gpu` (bool) and `kernel_type` (null off the GPU); `dur`
    becomes `end - start`. Rows keep file order (`idx`). `columns` keeps only those input
    columns (plus `CORE_COLUMNS`): copying the wide frame is most of the cost otherwise.
    """
    if columns is not None:
        keep = [*CORE_COLUMNS, *(c for c in columns if c not in CORE_COLUMNS)]
        events = events.select(keep)
    ev = events.filter(
        pl.col("cat").is_not_null() & (pl.col("cat") != "Trace") & pl.col("ts").is_not_null()
    )
    ev = with_times(ev, hta_compat=hta_compat)
    if step_filter is None:
        step_filter = len(step_names) >= 2 and not keeps_every_step(events)
    if step_filter:
        ev = _filter_profiler_steps(ev, step_names)
    ev = ev.with_columns(gpu_mask(hta_compat=hta_compat).alias("gpu"))
    # Classify each distinct GPU event name once (names repeat thousands of times), and look
    # the GPU rows' names up only: a lookup costs a string hash per row.
    name = pl.col("name").fill_null("")
    gpu_names = ev.select(name.filter(pl.col("gpu")))
    types = gpu_names.unique().with_columns(kernel_type().alias("t"))
    typed = gpu_names.select(
        name.replace_strict(types["name"], types["t"], default=None, return_dtype=KERNEL_TYPE)
    ).to_series()
    at = ev.select(pl.arg_where(pl.col("gpu"))).to_series()
    kinds = pl.repeat(None, ev.height, dtype=KERNEL_TYPE, eager=True).scatter(at, typed)
    # One chunk per column: every later query on a view with misaligned chunks rechunks it.
    return ev.with_columns(kinds.alias("kernel_type")).rechunk()


def hta_view(
    ranks: Mapping[int, pl.DataFrame],
    *,
    hta_compat: bool = False,
    columns: Sequence[str] | None = None,
) -> dict[int, pl.DataFrame]:
    """`rank_view` of every rank; the ProfilerStep rule looks at all ranks at once, as HTA.
    Inside a batch (`views_at_once`) the views of the shared columns are picked once a batch
    and columns asked (~15 analyses ask, and a pick a rank cost ~25 us: ~0.3 ms a tiny
    rank), the same frames each time (what is kept for a view then serves every asker)."""
    batch = at_once() and len(ranks) > 1
    if batch and _shared(columns):
        key = tuple(columns)  # type: ignore[arg-type]
        made = job_cached(
            ranks, "hta views", lambda: _pick_views(ranks, hta_compat, key), hta_compat, key
        )
        return dict(made)  # type: ignore[call-overload]
    return _pick_views(ranks, hta_compat, columns)


def _pick_views(
    ranks: Mapping[int, pl.DataFrame], hta_compat: bool, columns: Sequence[str] | None
) -> dict[int, pl.DataFrame]:
    """`hta_view`'s answer, made."""
    steps = profiler_step_names(ranks)
    if at_once() and len(ranks) > 1 and _shared(columns):
        _views_at_once(ranks, steps, hta_compat=hta_compat)
    return {
        int(r): rank_view(ev, steps, hta_compat=hta_compat, columns=columns)
        for r, ev in sorted(ranks.items())
    }


#: `views_at_once` is on in this thread
_at_once = threading.local()


def at_once() -> bool:
    """Is `views_at_once` on in this thread (a report's batch task making small ranks)?"""
    return bool(getattr(_at_once, "on", False))


@contextlib.contextmanager
def views_at_once() -> Iterator[None]:
    """Meanwhile, in this thread, `hta_view` builds the ranks' missing views together
    (`_views_at_once`): for a batch of small ranks made in one task (`rank_work`), not for
    the app, whose read-ahead builds them rank by rank with a checkpoint between."""
    before = getattr(_at_once, "on", False)
    _at_once.on = True
    try:
        yield
    finally:
        _at_once.on = before


def _views_at_once(
    ranks: Mapping[int, pl.DataFrame], step_names: set[str], *, hta_compat: bool
) -> None:
    """The shared views (`rank_view`'s cached ones) of the ranks that have none yet, built
    over them at once: one query set over their events one after another with a rank column
    (a tiny rank's alone cost ~16 queries), each rank's rows and columns as its own build.
    Ranks of one schema together (a concatenation would cast a column another rank holds in
    another type); a rank alone, or one whose batch fails, builds its own when asked."""
    keep = [*CORE_COLUMNS, *(c for c in CACHED_COLUMNS if c not in CORE_COLUMNS)]
    groups: dict[tuple[object, ...], list[tuple[int, pl.DataFrame, tuple[object, ...]]]] = {}
    for rank, events in sorted(ranks.items()):
        step_filter = len(step_names) >= 2 and not keeps_every_step(events)
        key = (id(events), hta_compat, step_filter, frozenset(step_names) if step_filter else None)
        with _views_lock:
            if key in _views:
                continue
        if not set(keep) <= set(events.columns):
            continue
        picked = events[keep]  # (a pick: no query)
        groups.setdefault((step_filter, *picked.dtypes), []).append((rank, events, key))
    for (step_filter, *_), members in groups.items():
        if len(members) < 2:
            continue
        try:
            built = _build_views(
                [(r, ev[keep]) for r, ev, _ in members],
                step_names,
                hta_compat=hta_compat,
                step_filter=bool(step_filter),
            )
        except Exception:  # (each rank builds its own, and says what is wrong with it)
            continue
        for rank, events, key in members:
            _remember(events, key, built[rank])


def _build_views(
    frames: list[tuple[int, pl.DataFrame]],
    step_names: set[str],
    *,
    hta_compat: bool,
    step_filter: bool,
) -> dict[int, pl.DataFrame]:
    """`build_rank_view` of each rank (frames of one schema, `CACHED_COLUMNS` picked),
    made over them at once; rank -> its view."""
    every = tagged(frames, "__rank")
    ev = every.filter(
        pl.col("cat").is_not_null() & (pl.col("cat") != "Trace") & pl.col("ts").is_not_null()
    )
    start, end = pl.col("ts"), pl.col("ts") + pl.col("dur")
    if hta_compat:  # rounded on the ranks whose timestamps have fractional microseconds
        fractional = (
            ev.group_by("__rank")
            .agg((pl.col("ts") % _NS_PER_US != 0).any().alias("__frac"))
            .filter("__frac")["__rank"]
        )
        if fractional.len():
            rounded = pl.col("__rank").is_in(fractional.implode())
            up = f64_us(pl.col("ts")).ceil().cast(pl.Int64) * _NS_PER_US
            down = (f64_us(pl.col("ts")) + f64_us(pl.col("dur"))).floor().cast(pl.Int64)
            start = pl.when(rounded).then(up).otherwise(start)
            end = pl.when(rounded).then(down * _NS_PER_US).otherwise(end)
    ev = ev.with_columns(start.alias("start"), end.alias("end")).with_columns(
        (pl.col("end") - pl.col("start")).alias("dur")
    )
    if step_filter:  # `_filter_profiler_steps` per rank
        on_gpu = _hta_kernel_filter()
        is_step = pl.col("name").is_in(sorted(step_names))
        last_start = pl.col("start").filter(~on_gpu & is_step).max().over("__rank")
        kept_cpu = ~on_gpu & (pl.col("start") < last_start)
        corr = pl.col("correlation").fill_null(-1)
        ev = ev.with_columns(kept_cpu.alias("__cpu"), corr.alias("__corr"))
        launched = (
            ev.filter("__cpu")
            .select("__rank", "__corr")
            .unique()
            .with_columns(pl.lit(True).alias("__l"))
        )
        ev = (
            ev.join(launched, on=["__rank", "__corr"], how="left", maintain_order="left")
            .filter(pl.col("__cpu") | (on_gpu & pl.col("__l").fill_null(False)))
            .drop("__cpu", "__corr", "__l")
        )
    ev = ev.with_columns(gpu_mask(hta_compat=hta_compat).alias("gpu"))
    name = pl.col("name").fill_null("")
    types = ev.select(name.filter(pl.col("gpu")).unique()).with_columns(kernel_type().alias("t"))
    typed = name.replace_strict(types["name"], types["t"], default=None, return_dtype=KERNEL_TYPE)
    ev = ev.with_columns(
        pl.when(pl.col("gpu")).then(typed).otherwise(None).cast(KERNEL_TYPE).alias("kernel_type")
    )
    mine = untagged(ev, [rank for rank, _ in frames], "__rank")
    return {rank: view.rechunk() for rank, view in mine.items()}


def gpu_events(view: pl.DataFrame) -> pl.DataFrame:
    """The rows of a rank view that HTA's breakdowns count as GPU events."""
    return view.filter(pl.col("gpu"))


def launch_start(view: pl.DataFrame) -> pl.DataFrame:
    """Start of the CPU event that launched each row (`launch_start`, null when unknown).

    HTA's `index_correlation`: the GPU-side row (GPUKernelFilter) is matched to the CPU-side
    rows with the same correlation, and the last one in file order wins. DEVIATION: HTA points
    an unmatched kernel at event index 0 (`min(correlation, 0)`) and so reads the first
    event's timestamp; we leave it null. In the reference traces every unmatched kernel is
    removed by the ProfilerStep filter first, so this never shows in the numbers.
    """
    return _with_launch_start(view.lazy(), view.lazy()).collect()


def _with_launch_start(
    rows: pl.LazyFrame, view: pl.LazyFrame, by: Sequence[str] = ()
) -> pl.LazyFrame:
    """`rows` with `launch_start`; `by`: keys before the correlation (`rank`: a batch's
    views one after another)."""
    # The start of the correlation's last CPU-side row in file order: no sort needed.
    keys = [*by, "correlation"]
    cpu = (
        view.filter(~_hta_kernel_filter() & pl.col("correlation").is_not_null())
        .group_by(keys)
        .agg(pl.col("start").get(pl.col("idx").arg_max()).alias("launch_start"))
    )
    return rows.join(cpu, on=keys, how="left", maintain_order="left")


def gpu_launches(ranks: Mapping[int, pl.DataFrame], *, hta_compat: bool = False) -> pl.DataFrame:
    """Every rank's GPU events (`gpu_events` of its view, CORE columns) with `launch_start`
    (see `launch_start`) and a leading `rank` column.

    The idle breakdown and the straggler metrics both start from it: built once per job, the
    ranks in one batch of queries.
    """

    def build() -> pl.DataFrame:
        views = hta_view(ranks, hta_compat=hta_compat, columns=())
        if at_once() and len(views) > 1:
            made = _launches_at_once(views)
            if made is not None:
                return made
        made = {rank: _launches_sorted(view) for rank, view in views.items()}
        queries = [
            _with_launch_start(view.lazy().filter(pl.col("gpu")), view.lazy())
            for rank, view in views.items()
            if made[rank] is None
        ]
        found = iter(pl.collect_all(queries))
        tables = [
            (made[rank] if made[rank] is not None else next(found)).select(
                pl.lit(rank, pl.Int64).alias("rank"), pl.all()
            )
            for rank in views
        ]
        return pl.concat(tables) if tables else pl.DataFrame()

    return job_cached(ranks, "gpu_launches", build, hta_compat)


def _launches_sorted(view: pl.DataFrame) -> pl.DataFrame | None:
    """`_with_launch_start` of a view's GPU rows by a sort of the CPU rows' correlations
    (numpy's stable sort: they come nearly in order) and a binary search, where the group-by
    and the join hashed them (~3 ms of ~6 a 100 MB rank); the CPU rows' name test (the device
    syncs) made on them alone. None (the query's way) for a view whose rows are not in `idx`
    order, or of other types."""
    ints = all(view.schema[c] == pl.Int64 for c in ("start", "correlation", "stream"))
    if not ints or view["start"].null_count():
        return None
    launched = pl.col("correlation").is_not_null()
    on_stream = (pl.col("stream").fill_null(-1) >= 0) & (pl.col("correlation") >= 0)
    cpu = (
        view.lazy()
        .filter(launched & ~on_stream)
        .select("correlation", "start", "idx", "name")
        .collect()
        .filter(~pl.col("name").is_in(_DEVICE_SYNC_NAMES))  # `_hta_kernel_filter`'s rest
    )
    idx = cpu["idx"].to_numpy()
    if (idx[1:] <= idx[:-1]).any():  # (the last one in file order is the last in the view)
        return None
    corr = cpu["correlation"].to_numpy()
    order = np.argsort(corr, kind="stable")
    corr = corr[order]
    last = interval_arrays.run_bounds(corr)[1] - 1  # (each correlation's last row)
    keys, starts = corr[last], cpu["start"].to_numpy()[order][last]
    gpu = view.filter(pl.col("gpu"))
    asked = gpu["correlation"]
    at = np.searchsorted(keys, asked.fill_null(0).to_numpy())
    at = np.minimum(at, max(keys.size - 1, 0))
    if keys.size:
        found = (keys[at] == asked.fill_null(0).to_numpy()) & asked.is_not_null().to_numpy()
        start = pl.Series(np.where(found, starts[at], 0), dtype=pl.Int64)
    else:
        found, start = np.zeros(gpu.height, dtype=bool), pl.zeros(gpu.height, pl.Int64, eager=True)
    kept = pl.when(pl.Series(found)).then(start).otherwise(None)
    return gpu.with_columns(kept.alias("launch_start"))


def _launches_at_once(views: Mapping[int, pl.DataFrame]) -> pl.DataFrame | None:
    """`gpu_launches`' table of a batch's views (ranks in order) in one query over them one
    after another, `rank` in the correlation's key (a query a tiny rank alone); None when
    the views differ in columns or types (rank by rank then)."""
    frames = sorted(views.items())
    columns, dtypes = frames[0][1].columns, frames[0][1].dtypes
    if any(v.columns != columns or v.dtypes != dtypes for _, v in frames):
        return None  # (~15 us a view: a schema's equality cost ten times that)
    every = tagged(frames).lazy()
    made = _with_launch_start(every.filter(pl.col("gpu")), every, by=("rank",)).collect()
    return made.with_columns(made["rank"].set_sorted())  # (as the ranks' literals concatenated)
