"""The client's side: the analyses of a loaded trace set, rank-wise ones made rank by rank
on a back-end, the rest over every rank here, each result kept for the next run.

    rank-wise (`scope="rank"`)   every rank's tables: read from beside its frames when
                                 stored, else made by `rank_work.rank_tables` on the back-end
                                 (a failed rank is made here instead: it costs its retry
                                 time, never its numbers); concatenated in rank order
    reducing (`scope="reduce"`)  every rank's summaries (its `rank_part`), made and kept as
                                 the rank-wise tables, concatenated in rank order and
                                 reduced here (`Analysis.reduce`): no frame read here
    job-wide (`scope="job"`)     run here over every rank's frames (not yet distributed)

Either way an analysis's whole answer is also kept under the cache's `jobs/` folder, keyed
by every rank's file, the options it reads and the code's version: a second report with no
file changed reads it back and reads no frame at all; with one file changed, only that
rank's rank-wise tables are made again.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import zlib
from collections.abc import Callable, Mapping
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from hta_tui.analysis import registry, steps
from hta_tui.exec.backends import Backend
from hta_tui.exec.blobs import pack, unpack
from hta_tui.exec.rank_work import (
    ALONE,
    BATCH_BYTES,
    BATCH_RANKS,
    STEPS,
    RankJob,
    _steps_blob,
    _write_atomic,
    batch_path,
    batch_tables,
    code_version,
    each_rank,
    options_key,
    rank_tables,
    read_cached,
    result_path,
    steps_path,
    unpack_steps,
)
from hta_tui.exec.rank_work import (
    concat_tables as _concat,
)
from hta_tui.trace.cache import DamagedEntry, read_frame
from hta_tui.trace.model import TraceSet

log = logging.getLogger("hta_tui.exec")

JOBS_DIR = "jobs"
#: evaluated last, on the tables the others made
FINDINGS = "findings"


@dataclass
class SplitRun:
    """What a run did, for tests and benchmarks: which analyses came from where."""

    job_hits: list[str] = field(default_factory=list)
    rank_hits: int = 0
    rank_tasks: int = 0
    #: of which tasks of several small ranks (`rank_work.batch_tables`)
    batches: int = 0
    #: rank -> the one-line reason its work failed on the back-end (then made here)
    failed: dict[int, str] = field(default_factory=dict)
    here: list[str] = field(default_factory=list)
    #: why the job-wide analyses ran again on every column (`_run_here`), if they did
    wide: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Rank:
    rank: int
    entry: Path
    meta: dict
    size: int
    #: its entry holds its frames (not a trace loaded uncached, whose frames live here only)
    stored: bool


def _ranks(ts: TraceSet) -> list[_Rank]:
    out = []
    meta = registry.trace_meta(ts)
    for rank, data in sorted(ts.loaded().items()):
        entry = ts.selected(rank)
        size = entry.file.size if entry is not None else 0
        out.append(_Rank(rank, data.entry, meta.get(rank, {}), size, data.entry.is_dir()))
    return out


def _job_key(a: registry.Analysis, options: registry.Options, ranks: list[_Rank]) -> str:
    digest = hashlib.sha1(options_key(a, options).encode())
    for r in ranks:
        digest.update(f"{r.rank}\0{r.entry.name}\0{r.meta.get('path', '')}\n".encode())
    return digest.hexdigest()


def job_path(root: Path, key: str) -> Path:
    return root / JOBS_DIR / key[:2] / f"{key}.arrow"


def job_cached(
    ts: TraceSet, cache_root: Path | None, what: str, compute: Callable[[], bytes]
) -> bytes:
    """`compute()` kept under the cache's jobs/ folder, keyed by every rank's file, `what`
    (the options and names it depends on) and the code's version."""
    if cache_root is None:
        return compute()
    digest = hashlib.sha1(f"{code_version()}|{what}".encode())
    for r in _ranks(ts):
        digest.update(f"{r.rank}\0{r.entry.name}\0{r.meta.get('path', '')}\n".encode())
    path = job_path(cache_root, digest.hexdigest())
    try:
        kept = path.read_bytes()
        if len(kept) >= 4 and zlib.crc32(kept[:-4]) == int.from_bytes(kept[-4:], "little"):
            return kept[:-4]
    except OSError:
        pass
    made = compute()  # missing or damaged: made again
    _write_atomic(made + zlib.crc32(made).to_bytes(4, "little"), path)
    return made


def run_split(
    ts: TraceSet,
    names: list[str] | None,
    options: registry.Options,
    backend: Backend | None = None,
    *,
    cache_root: Path | None = None,
    stats: SplitRun | None = None,
) -> registry.Tables:
    """Every table of the selected analyses (`registry.select(names)`), in declaration
    order, the same numbers as `registry.run` over every rank. `cache_root`: where whole
    answers are kept (None: not kept)."""
    backend = backend or Backend()
    stats = stats if stats is not None else SplitRun()
    chosen = registry.select(names)
    ranks = _ranks(ts)
    answers: dict[str, registry.Tables] = {}
    keys = {a.name: _job_key(a, options, ranks) for a in chosen}
    if cache_root is not None:
        for a in chosen:
            blob = read_cached(job_path(cache_root, keys[a.name]))
            if blob is not None:
                answers[a.name] = unpack(blob)
                stats.job_hits.append(a.name)
    left = [a for a in chosen if a.name not in answers]
    # (what reads the trace set itself, the overview's summaries, runs here, where it is)
    rankwise = [a for a in left if a.scope in ("rank", "reduce") and not a.inputs] if ranks else []
    # the findings' rank part (each rank's first event) in the same round of work
    finding = [a for a in left if a.name == FINDINGS and a.rank_part is not None and ranks]
    parts: dict[str, registry.Tables] = {}
    if rankwise or finding:
        parts = _rankwise(ts, rankwise + finding, options, ranks, backend, stats)
        answers.update({a.name: parts[a.name] for a in rankwise})
    # here: the job-wide analyses, and findings last (registry.run evaluates them on the
    # tables made here and above: rank-wise, reduced, or kept)
    here = [a for a in left if a not in rankwise]
    if here:
        stats.here += [a.name for a in here]
        done = {t: table for answer in answers.values() for t, table in answer.items()}
        jobwide = [a for a in here if a.name != FINDINGS]
        made = _run_here(ts, jobwide, options, ranks, stats) if jobwide else {}
        for a in jobwide:
            answers[a.name] = {t: made[t] for t in a.tables if t in made}
        if len(jobwide) < len(here):  # the findings, through the registry's one path
            # the rules read tables; a rank's frames only when a rule asks for a table the
            # others did not make (LazyEvents); the origin from each rank's first event
            origin = (
                registry.findings_origin_us(parts[FINDINGS])
                if FINDINGS in parts
                else steps.job_origin_us(_narrow_frames(ts, ranks, ("ts", "cat")))
            )
            answers[FINDINGS] = registry.run(
                registry.LazyEvents(ts),
                [FINDINGS],
                options,
                frames=lambda name: registry.LazyEvents(ts, name=name),
                meta=registry.trace_meta(ts),
                made={**done, **made},
                origin_us=origin,
            )
    if cache_root is not None:
        for a in left:
            _write_atomic(pack(answers[a.name]), job_path(cache_root, keys[a.name]))
    out: registry.Tables = {}
    for a in chosen:
        out.update(answers[a.name])
    return out


def _run_here(
    ts: TraceSet,
    here: list[registry.Analysis],
    options: registry.Options,
    ranks: list[_Rank],
    stats: SplitRun,
) -> registry.Tables:
    """The job-wide analyses over every rank, here. Those declaring the events columns they
    read (`Analysis.columns`) run on every rank's events read with those only, one group of
    analyses reading the same columns after another: the process holds a part of each
    rank's frame at a time, not all of it. A column one needs but did not declare (polars'
    ColumnNotFoundError) costs its group a second run on the whole frames, never its
    numbers."""
    meta = registry.trace_meta(ts)
    given = {"trace_set": ts}  # what an analysis reading the trace set itself is given
    groups: dict[tuple[str, ...], list[str]] = {}  # analyses reading the same columns
    for a in here:
        groups.setdefault(a.columns, []).append(a.name)
    made: registry.Tables = {}
    for columns, names in groups.items():  # one group's frames at a time
        if columns:
            narrow = _narrow_frames(ts, ranks, columns)
            getter = functools.partial(_events_or, narrow, ts)
            try:
                made.update(
                    registry.run(narrow, names, options, frames=getter, meta=meta, given=given)
                )
                continue
            except pl.exceptions.ColumnNotFoundError as exc:
                stats.wide.append(_one_line(exc))
                log.warning("%s: %s; run again on every column", ", ".join(names), _one_line(exc))
            finally:
                del narrow, getter
        made.update(
            registry.run(ts.frames(), names, options, frames=ts.frames, meta=meta, given=given)
        )
    return made


def _events_or(events: registry.Ranks, ts: TraceSet, name: str) -> registry.Ranks:
    """A frame getter: these events, the trace set's other frames."""
    return events if name == "events" else ts.frames(name)


def _narrow_frames(
    ts: TraceSet, ranks: list[_Rank], columns: tuple[str, ...]
) -> dict[int, pl.DataFrame]:
    """rank -> its events, these columns only: taken from the frame this process holds
    already, else read from the rank's cache entry (and not kept in the trace set, whose
    frames stay whole for the app). A column the frame lacks raises ColumnNotFoundError."""
    loaded = ts.loaded()
    out = {}
    for r in ranks:
        data = loaded[r.rank]
        held = data.held("events")
        if held is None and r.stored:
            try:
                out[r.rank] = read_frame(r.entry, "events", list(columns))
                continue
            except (DamagedEntry, OSError):  # RankData says why, and parses it again
                pass
        out[r.rank] = (held if held is not None else data.events).select(columns)
    return out


def _units(ranks: list[_Rank]) -> list[_Unit]:
    """The ranks in units of work, in rank order: consecutive ranks whose file is under
    BATCH_BYTES (and stored) together, up to BATCH_RANKS; any other rank alone."""
    units: list[_Unit] = []
    for r in ranks:
        small = r.stored and r.size < BATCH_BYTES
        last = units[-1] if units else None
        if small and last is not None and last.small and len(last) < BATCH_RANKS:
            last.append(r)
        else:
            units.append(_Unit([r], small))
    return units


class _Unit(list):
    """A unit of work's ranks; `small`: it may take more (its ranks are batched)."""

    def __init__(self, ranks: list[_Rank], small: bool) -> None:
        super().__init__(ranks)
        self.small = small


def _rankwise(
    ts: TraceSet,
    chosen: list[registry.Analysis],
    options: registry.Options,
    ranks: list[_Rank],
    backend: Backend,
    stats: SplitRun,
) -> dict[str, registry.Tables]:
    """Each unit's tables (stored, or made on the back-end: a rank alone, or a batch of
    small ranks together), concatenated in rank order (and reduced across ranks, for an
    analysis that reduces). A batch whose work failed is made here rank by rank: a rank
    that fails costs only itself."""
    units: list[list[_Rank]] = []
    parts: list[dict[str, bytes]] = []
    jobs: list[tuple[int, tuple[RankJob, ...]]] = []  # (unit, its ranks' jobs)
    for unit in _units(ranks):
        if len(unit) > 1:
            every = tuple(a.name for a in chosen)
            rank_jobs = tuple(RankJob(r.rank, str(r.entry), r.meta, every, options) for r in unit)
            found = {a.name: read_cached(batch_path(rank_jobs, a)) for a in chosen}
            have = {n: b for n, b in found.items() if b is not None}
            stats.rank_hits += len(have) * len(unit)
            wanted = tuple(a.name for a in chosen if a.name not in have)
            if wanted:
                jobs.append((len(units), tuple(replace(j, analyses=wanted) for j in rank_jobs)))
            units.append(unit)
            parts.append(have)
            continue
        r = unit[0]
        units.append(unit)
        if not r.stored:  # frames only this process has
            parts.append({})
            continue
        found = {a.name: read_cached(result_path(r.entry, a, options)) for a in chosen}
        have = {n: b for n, b in found.items() if b is not None}
        stats.rank_hits += len(have)
        parts.append(have)
        wanted = tuple(a.name for a in chosen if a.name not in have)
        if wanted:
            jobs.append((len(units) - 1, (RankJob(r.rank, str(r.entry), r.meta, wanted, options),)))
    remote = sum(r.size for r in ranks) >= backend.remote_bytes
    runner = backend if remote else Backend()
    for i, got in _gather_units(runner, jobs, stats, ts).items():
        parts[i].update(got)
    pieces: dict[str, list[registry.Tables]] = {a.name: [] for a in chosen}
    for unit, have in zip(units, parts, strict=True):
        if len(have) < len(chosen):
            # a rank alone whose work failed or whose frames are here only; a failed
            # batch's ranks one by one (what was found kept for the batch is left)
            for r in unit:
                made = _here(ts, r, chosen, options, have if len(unit) == 1 else {})
                for a in chosen:
                    pieces[a.name].append(unpack(made[a.name]))
            continue
        for a in chosen:
            tables = unpack(have[a.name])
            alone = len(unit) > 1 and a.name in ALONE
            pieces[a.name] += each_rank(tables) if alone else [tables]
    order = tuple(r.rank for r in ranks)
    return {a.name: a.reduced(_concat(pieces[a.name]), options, order) for a in chosen}


def _gather_units(
    backend: Backend, jobs: list[tuple[int, tuple[RankJob, ...]]], stats: SplitRun, ts: TraceSet
) -> dict[int, dict[str, bytes]]:
    """Every unit's answer (`rank_tables` for a rank alone, `batch_tables` for a batch); a
    unit whose work failed (after the back-end's retry) is logged and left out, to be made
    here. In this process the work reads the frames `ts` holds."""
    stats.rank_tasks += len(jobs)
    stats.batches += sum(len(batch) > 1 for _, batch in jobs)
    futures: dict[Future[dict[str, bytes]], tuple[int, tuple[RankJob, ...]]] = {}
    out = {}
    here = backend.kind == "inline"
    loaded = ts.loaded() if here else {}
    for unit, batch in jobs:
        try:
            if len(batch) == 1:
                args: tuple = (batch[0], loaded[batch[0].rank]) if here else (batch[0],)
                futures[backend.submit(rank_tables, *args)] = (unit, batch)
            else:
                data = {j.rank: loaded[j.rank] for j in batch} if here else None
                futures[backend.submit(batch_tables, batch, data)] = (unit, batch)
        except Exception as exc:  # a cluster that would not start: made here
            for job in batch:
                stats.failed[job.rank] = _one_line(exc)
    for fut in as_completed(futures):
        unit, batch = futures[fut]
        try:
            out[unit] = fut.result()
        except Exception as exc:  # a worker that died, a file a worker cannot read
            reason = _one_line(exc)
            for job in batch:
                stats.failed[job.rank] = reason
            which = (
                f"rank {batch[0].rank}"
                if len(batch) == 1
                else (f"ranks {batch[0].rank}-{batch[-1].rank}")
            )
            log.warning("%s: work failed on %s (%s); made here", which, backend.describe(), reason)
    return out


def _gather(
    backend: Backend, jobs: list[RankJob], stats: SplitRun, ts: TraceSet
) -> dict[int, dict[str, bytes]]:
    """Every job's answer; a job that failed (after the back-end's retry) is logged and
    left out, to be made here. In this process a rank's work reads the frames `ts` holds."""
    stats.rank_tasks += len(jobs)
    futures: dict[Future[dict[str, bytes]], RankJob] = {}
    out = {}
    here = backend.kind == "inline"
    for job in jobs:
        try:
            if here:
                futures[backend.submit(rank_tables, job, ts.loaded()[job.rank])] = job
            else:
                futures[backend.submit(rank_tables, job)] = job
        except Exception as exc:  # a cluster that would not start: made here
            stats.failed[job.rank] = _one_line(exc)
    for fut in as_completed(futures):
        job = futures[fut]
        try:
            out[job.rank] = fut.result()
        except Exception as exc:  # a worker that died, a file a worker cannot read
            reason = _one_line(exc)
            stats.failed[job.rank] = reason
            log.warning(
                "rank %s: work failed on %s (%s); made here", job.rank, backend.describe(), reason
            )
    return out


def _here(
    ts: TraceSet,
    r: _Rank,
    chosen: list[registry.Analysis],
    options: registry.Options,
    have: Mapping[str, bytes],
) -> dict[str, bytes]:
    """A rank's missing tables made in this process from its frames here."""
    wanted = [a for a in chosen if a.name not in have]
    frames: Callable[[str], registry.Ranks] = registry.trace_frames(ts, [r.rank])
    made = registry.rank_parts(
        frames("events"), [a.name for a in wanted], options, frames=frames, meta={r.rank: r.meta}
    )
    return {**have, **{a.name: pack(made[a.name]) for a in wanted}}


def rank_steps(
    ts: TraceSet, options: registry.Options, backend: Backend | None = None
) -> dict[int, dict[str, list[int]]]:
    """rank -> (kind of steps -> the ProfilerSteps its tables cover, `coverage`), each rank's
    made on the back-end and kept beside its frames (`coverage.merge_steps` makes the job's)."""
    backend = backend or Backend()
    ranks = _ranks(ts)
    out: dict[int, dict[str, list[int]]] = {}
    jobs = []
    for r in ranks:
        blob = read_cached(steps_path(r.entry, options)) if r.stored else None
        if blob is not None:
            out[r.rank] = unpack_steps(blob)
        elif r.stored:
            jobs.append(RankJob(r.rank, str(r.entry), r.meta, (STEPS,), options))
    remote = sum(r.size for r in ranks) >= backend.remote_bytes
    for rank, got in _gather(backend if remote else Backend(), jobs, SplitRun(), ts).items():
        out[rank] = unpack_steps(got[STEPS])
    for r in ranks:
        if r.rank not in out:  # frames only here, or its work failed: made here
            out[r.rank] = unpack_steps(_steps_blob(r.rank, ts.loaded()[r.rank].events, options))
    return out


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]
