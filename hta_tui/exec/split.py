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

Asked to stream (`run_split(stream=True)`: the report), a rank-wise analysis whose ranks'
parts add up to STREAM_BYTES or more (a row per kernel launch or memory event) is answered
as `parts.RankParts`: each rank's part read when used, one at a time, never concatenated
here, and never kept whole per job. The findings' rules get the tables they read made rank
by rank too, even when `--only` leaves those analyses out (`_findings_inputs`).

Either way an analysis's whole answer is also kept under the cache's `jobs/` folder, keyed
by every rank's file, the options it reads and the code's version: a second report with no
file changed reads it back and reads no frame at all; with one file changed, only that
rank's rank-wise tables are made again.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import logging
import zlib
from collections.abc import Callable, Mapping
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from hta_tui.analysis import overview, registry, steps
from hta_tui.exec.backends import BATCH_BYTES, TEXTS_KEPT, Backend
from hta_tui.exec.blobs import pack, unpack
from hta_tui.exec.parts import Part, RankParts, outline, streamed, whole_frame
from hta_tui.exec.rank_work import (
    ALONE,
    BATCH_RANKS,
    STEPS,
    RankJob,
    Texts,
    _steps_blob,
    _write_atomic,
    batch_paths,
    batch_steps_path,
    batch_tables,
    code_version,
    each_rank,
    options_key,
    rank_tables,
    read_cached,
    result_path,
    steps_path,
    texts_kept,
    unpack_batch_steps,
    unpack_steps,
)
from hta_tui.exec.rank_work import (
    concat_tables as _concat,
)
from hta_tui.trace.cache import JOBS_DIR, DamagedEntry, read_frame
from hta_tui.trace.model import TraceSet

log = logging.getLogger("hta_tui.exec")

#: evaluated last, on the tables the others made
FINDINGS = "findings"
#: every option there is (what the findings' answer depends on)
EVERY_OPTION = tuple(f.name for f in dataclasses.fields(registry.Options))
#: A rank-wise analysis whose ranks' parts add up to this many bytes (of Arrow) is streamed
#: when the caller asks: 64 ranks of 100 MB make 112 MB of kernel launches, 22 MB of memory
#: events, 14 MB of memory curve; every other table of theirs is under 8 MB together.
STREAM_BYTES = 8_000_000
#: A rank's part from this many bytes on is held as the path of its kept file (read again
#: when used), not as its bytes: the client holds the small ones only.
HOLD_BYTES = 65_536
#: `work_ahead` looks at most at this many units' kept steps
AHEAD_LOOKS = 8

#: rank -> kind of steps -> the ProfilerSteps its tables cover (`coverage.ranks_steps`)
Steps = dict[int, dict[str, list[int]]]


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
    #: analyses answered rank part by rank part (`parts.RankParts`)
    streamed: list[str] = field(default_factory=list)
    #: analyses made only because the findings' rules read their tables
    for_findings: list[str] = field(default_factory=list)


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


def _ranks_id(ranks: list[_Rank]) -> bytes:
    """What a job key says of its ranks (each one's rank, entry and file), made once per
    run: every analysis's key hashes the same text (30 analyses x 1,000 ranks of string
    formatting were ~0.1 s of a warm report)."""
    return "".join(f"{r.rank}\0{r.entry.name}\0{r.meta.get('path', '')}\n" for r in ranks).encode()


def _set_id(ts: TraceSet) -> bytes:
    """`_ranks_id(_ranks(ts))`, with no file's metadata copied nor its entry looked at
    (a report asks it for each answer it keeps whole beside the analyses')."""
    loaded = ts.loaded()
    texts = []
    for rank in sorted(loaded):
        entry = ts.selected(rank)
        path = entry.path if entry is not None else ""
        texts.append(f"{rank}\0{loaded[rank].entry.name}\0{path}\n")
    return "".join(texts).encode()


def _job_key(a: registry.Analysis, options: registry.Options, ranks: bytes) -> str:
    """`ranks`: `_ranks_id` of the job's ranks."""
    # the findings' rules read the other analyses' tables, each made with the options it
    # reads: their answer depends on every option (`--hta-compat` too), not on none
    read = a if a.name != FINDINGS else dataclasses.replace(a, options=EVERY_OPTION)
    digest = hashlib.sha1(options_key(read, options).encode())
    digest.update(ranks)
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
    digest.update(_set_id(ts))
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


def keep_summaries(ts: TraceSet, cache_root: Path | None) -> None:
    """Every file's overview summary (what the files table and the temporal breakdown
    read) from one table kept per job (`job_cached`), held by each file's frames: one read
    for the job, not one per file (`overview.summaries_frame`)."""
    if cache_root is None or not ts.loaded():
        return

    def made() -> bytes:
        table = overview.summaries_frame(ts)
        if table is None:
            return b""
        out = io.BytesIO()
        table.write_ipc(out)
        return out.getvalue()

    blob = job_cached(ts, cache_root, f"summaries|{overview.summaries_id(ts)}", made)
    if not blob:
        return
    try:
        table = pl.read_ipc(io.BytesIO(blob))
    except (pl.exceptions.PolarsError, OSError, ValueError):  # each file's own, then
        return
    overview.hold_summaries(ts, table)


def run_split(
    ts: TraceSet,
    names: list[str] | None,
    options: registry.Options,
    backend: Backend | None = None,
    *,
    cache_root: Path | None = None,
    stats: SplitRun | None = None,
    stream: bool = False,
    covered: Steps | None = None,
    texts: Texts | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """Every table of the selected analyses (`registry.select(names)`), in declaration
    order, the same numbers as `registry.run` over every rank. `cache_root`: where whole
    answers are kept (None: not kept). `stream`: long rank-wise tables answered as
    `parts.RankParts` (module docstring), the others as frames. `covered`: given each
    rank's steps covered that the rank-wise work handed back with its tables
    (`rank_steps` then reads nothing for them); `texts`: what the workers make of the
    long ones besides (`rank_work.Texts`: the rank parts' text, read by `RankParts`).
    `meanwhile()` is called once, as soon as the rank-wise work is ready to go out to the
    back-end's workers, before the first of it goes (which waits for the forkserver's
    imports when they are not done: ~0.1 s this process did nothing in), else before the
    work made here: what the caller starts to do while the workers work, not before (it
    would delay their start)."""
    begin = _once(meanwhile)
    backend = backend or Backend()
    stats = stats if stats is not None else SplitRun()
    chosen = registry.select(names)
    ranks = _ranks(ts)
    answers: dict[str, dict[str, Any]] = {}
    ranks_id = _ranks_id(ranks)
    keys = {a.name: _job_key(a, options, ranks_id) for a in chosen}
    _kept(cache_root, chosen, keys, stream, answers, stats)
    # findings to make: the tables their rules read, made rank by rank with the others
    extra = _findings_inputs(chosen) if ranks and FINDINGS not in answers else []
    if extra:
        stats.for_findings += [a.name for a in extra]
        keys.update({a.name: _job_key(a, options, ranks_id) for a in extra})
        _kept(cache_root, extra, keys, stream, answers, stats)
    left = [a for a in chosen + extra if a.name not in answers]
    # (what reads the trace set itself, the overview's summaries, runs here, where it is)
    rankwise = [a for a in left if a.scope in ("rank", "reduce") and not a.inputs] if ranks else []
    # the findings' rank part (each rank's first event) in the same round of work
    finding = [a for a in left if a.name == FINDINGS and a.rank_part is not None and ranks]
    parts: dict[str, dict[str, Any]] = {}
    if rankwise or finding:
        held = covered if covered is not None else {}
        parts = _rankwise(
            ts, rankwise + finding, options, ranks, backend, stats, stream, held, texts, begin
        )
        answers.update({a.name: parts[a.name] for a in rankwise})
    begin()  # (when no work went out)
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
            read = set(needed_tables())  # a streamed table only if a rule reads it, whole
            given = {
                t: whole_frame(v)
                for t, v in {**done, **made}.items()
                if t in read or not isinstance(v, RankParts)
            }
            answers[FINDINGS] = registry.run(
                registry.LazyEvents(ts),
                [FINDINGS],
                options,
                frames=lambda name: registry.LazyEvents(ts, name=name),
                meta=registry.trace_meta(ts),
                made=given,
                origin_us=origin,
            )
    if cache_root is not None:
        for a in left:
            answer = answers[a.name]
            if not any(isinstance(t, RankParts) for t in answer.values()):
                _write_atomic(pack(answer), job_path(cache_root, keys[a.name]))
    out: dict[str, Any] = {}
    for a in chosen:
        out.update(answers[a.name])
    return out


def _kept(
    cache_root: Path | None,
    analyses: list[registry.Analysis],
    keys: Mapping[str, str],
    stream: bool,
    answers: dict[str, dict[str, Any]],
    stats: SplitRun,
) -> None:
    """The whole answers kept per job (`answers` given them); not a long rank-wise one
    when streaming: that one comes from its ranks' parts, never read back whole."""
    if cache_root is None:
        return
    for a in analyses:
        path = job_path(cache_root, keys[a.name])
        if stream and a.scope == "rank" and _size(path) >= STREAM_BYTES:
            continue
        blob = read_cached(path)
        if blob is not None:
            answers[a.name] = unpack(blob)
            stats.job_hits.append(a.name)


def _findings_inputs(chosen: list[registry.Analysis]) -> list[registry.Analysis]:
    """The analyses whose tables the findings' rules read, when the findings are chosen and
    they are not (`--only findings`): made rank by rank with the others, where the rules
    would otherwise make them from every rank's frames here (8.2 GB at 64 x 100 MB)."""
    if not any(a.name == FINDINGS for a in chosen):
        return []
    have = {a.name for a in chosen}
    owners = dict.fromkeys(registry.owner(t).name for t in needed_tables() if registry.known(t))
    return [
        registry.BY_NAME[n]
        for n in owners
        if n not in have
        and registry.BY_NAME[n].scope in ("rank", "reduce")
        and not registry.BY_NAME[n].inputs
    ]


def needed_tables() -> list[str]:
    """The tables the findings' rules read (their default configuration, as the report's)."""
    from hta_tui.analysis.findings.engine import needed_tables as needed

    return needed()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _part(blob: bytes, kept: Path | None) -> Part:
    """A rank's tables of an analysis, held as bytes when small (or not kept on disk), else
    as the path of the file they were kept in (its size tells it holds them)."""
    if kept is not None and len(blob) >= HOLD_BYTES and _size(kept) == len(blob):
        return Part(len(blob), path=kept, tail=blob[-4:])
    return Part(len(blob), blob=blob)


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


def _units(ranks: list[_Rank]) -> list[list[_Rank]]:
    """The ranks in units of work, in rank order: consecutive ranks whose file is under
    BATCH_BYTES (and stored) together, in batches of even sizes (200 ranks: four of 50, not
    three of 64 and one of 8, so two workers end together): batches of at most BATCH_RANKS
    up to BATCHES of them, then bigger ones up to BATCH_MOST (`_batches`); any other rank
    alone."""
    units: list[list[_Rank]] = []
    run: list[_Rank] = []  # consecutive small ranks not yet in a unit
    for r in [*ranks, None]:
        if r is not None and r.stored and r.size < BATCH_BYTES:
            run.append(r)
            continue
        count = _batches(len(run))
        for i in range(count):
            units.append(run[i * len(run) // count : (i + 1) * len(run) // count])
        run = []
        if r is not None:
            units.append([r])
    return units


#: A run of small ranks is cut in at least this many batches while they hold at most
#: BATCH_RANKS ranks (the workers' balance: a batch's ~0.6 s the most one waits for
#: another at the end), then in bigger ones up to BATCH_MOST: a tiny rank costs ~10% less
#: in a batch of 256 than of 64 (~9.6 ms against 10.9), and the client reads and
#: concatenates a part per batch and analysis (40 batches at 10,000 files, not 157).
BATCHES = 16
BATCH_MOST = 256


def _batches(ranks: int) -> int:
    """How many batches a run of `ranks` small ranks makes (`_units`)."""
    return max(-(-ranks // BATCH_MOST), min(-(-ranks // BATCH_RANKS), BATCHES))


def _rankwise(
    ts: TraceSet,
    chosen: list[registry.Analysis],
    options: registry.Options,
    ranks: list[_Rank],
    backend: Backend,
    stats: SplitRun,
    stream: bool = False,
    held: Steps | None = None,
    texts: Texts | None = None,
    submitted: Callable[[], object] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each unit's tables (stored, or made on the back-end: a rank alone, or a batch of
    small ranks together), concatenated in rank order (and reduced across ranks, for an
    analysis that reduces); a long rank-wise one, when `stream`, as its units' parts
    (`parts.RankParts`; `texts`: a rank alone's made by its task too, from its even share
    of STREAM_BYTES). A batch whose work failed is made here rank by rank: a rank that
    fails costs only itself. Each rank's steps covered that the work hands back go into
    `held`. `submitted()`: called once the work is out."""
    held = held if held is not None else {}
    units: list[list[_Rank]] = []
    parts: list[dict[str, Part]] = []
    jobs: list[tuple[int, tuple[RankJob, ...]]] = []  # (unit, its ranks' jobs)
    order = tuple(r.rank for r in ranks)
    spare = _spare_parts(chosen, options, order)
    if texts is not None and stream:
        texts = replace(texts, least=max(HOLD_BYTES, STREAM_BYTES // max(len(ranks), 1)))
    else:
        texts = None
    for unit in _units(ranks):
        # (a unit without the one rank such an analysis reads gives the part of no rank)
        given = {n: p for n, (rank, p) in spare.items() if all(r.rank != rank for r in unit)}
        if len(unit) > 1:
            rank_jobs = _jobs(unit, tuple(a.name for a in chosen), options)
            have = dict(given)
            paths = batch_paths(rank_jobs, chosen)
            for a in chosen:
                path = paths[a.name]
                blob = read_cached(path) if a.name not in have else None
                if blob is not None:
                    have[a.name] = _part(blob, path)
            stats.rank_hits += (len(have) - len(given)) * len(unit)
            wanted = tuple(a.name for a in chosen if a.name not in have)
            if wanted:
                # every rank's steps covered too, made with its tables (or read, kept for
                # the batch) and handed back with them: the report's scope reads them next
                # (`rank_steps`: made apart, they cost ~5x as much)
                wanted += (STEPS,)
                jobs.append((len(units), tuple(replace(j, analyses=wanted) for j in rank_jobs)))
            units.append(unit)
            parts.append(have)
            continue
        r = unit[0]
        units.append(unit)
        if not r.stored:  # frames only this process has
            parts.append({})
            continue
        have = dict(given)
        for a in chosen:
            path = result_path(r.entry, a, options)
            blob = read_cached(path) if a.name not in have else None
            if blob is not None:
                have[a.name] = _part(blob, path)
        stats.rank_hits += len(have) - len(given)
        parts.append(have)
        wanted = tuple(a.name for a in chosen if a.name not in have)
        if wanted:
            if read_cached(steps_path(r.entry, options)) is None:  # (as a batch's, above)
                wanted += (STEPS,)
            job = RankJob(r.rank, str(r.entry), r.meta, wanted, options, texts=texts)
            jobs.append((len(units) - 1, (job,)))
    jobs = _largest_first(jobs, ranks)
    runner = _runner(backend, ranks, jobs)

    # (an analysis whose batches keep their ranks apart is never streamed: concatenated)
    batched = any(len(unit) > 1 for unit in units)
    apart = ALONE if batched else frozenset()
    landed = _Landed({a.name for a in chosen if stream and a.scope == "rank"} - apart)

    def keep(batch: tuple[RankJob, ...], got: dict[str, bytes]) -> dict[str, Part]:
        """A worker's answer as it lands, read at once while the others still work
        (`_Landed.part`): a long part kept by the worker (beside the frames) held as its
        path from here on when not held read."""
        job = batch[0]
        if STEPS in got:  # (held for the report's scope, `rank_steps`)
            held.update(_unit_steps(got[STEPS], [j.rank for j in batch]))
        made = [registry.BY_NAME[n] for n in got if n not in (STEPS, TEXTS_KEPT)]
        kept: dict[str, Path] = {}
        if job.store and len(batch) > 1:
            kept = batch_paths(batch, made)
        elif job.store:
            kept = {a.name: result_path(Path(job.entry), a, options) for a in made}
        fresh = texts_kept(got)
        return {
            a.name: landed.part(a.name, got[a.name], kept.get(a.name), fresh.get(a.name))
            for a in made
        }

    for i, got in _gather(runner, jobs, stats, ts, keep, submitted).items():
        parts[i].update(got)
    runner.rest()  # (the reduction below: workers that only hold memory may end)
    # each analysis's parts in rank order: (part, whether it holds a batch's ranks kept apart)
    pieces: dict[str, list[tuple[Part, bool]]] = {a.name: [] for a in chosen}
    for unit, have in zip(units, parts, strict=True):
        if len(have) < len(chosen):
            # a rank alone whose work failed or whose frames are here only; a failed
            # batch's ranks one by one (what was found kept for the batch is left)
            for r in unit:
                found = have if len(unit) == 1 else {n: have[n] for n in have if n in spare}
                made = _here(ts, r, chosen, options, found)
                done = {**found, **{n: Part(len(b), blob=b) for n, b in made.items()}}
                for a in chosen:
                    pieces[a.name].append((done[a.name], False))
            continue
        for a in chosen:
            pieces[a.name].append((have[a.name], len(unit) > 1 and a.name in ALONE))
    out: dict[str, dict[str, Any]] = {}
    for a in chosen:
        got = pieces[a.name]
        long = sum(p.size for p, _ in got) >= STREAM_BYTES
        if stream and a.scope == "rank" and long and not any(apart for _, apart in got):
            out[a.name] = dict(streamed(a.tables, [p for p, _ in got]))
            stats.streamed.append(a.name)
            continue
        tables: list[registry.Tables] = []
        for p, apart in got:
            tables += each_rank(p.tables()) if apart else [p.tables()]
        out[a.name] = a.reduced(_concat(tables), options, order)
    return out


class _Landed:
    """The workers' answers read as they land (`_rankwise`), so what the client does with
    them after the last one lands is their concatenation only (10,000 tiny ranks: ~1.5 s
    of reading 200 MB of parts after the workers' last batch, when this process worked
    alone). A part's tables are held, read, unless its analysis may be streamed and its
    parts so far add up to STREAM_BYTES (at most that much is held of it): such a part
    keeps only its tables' heights and columns (what `parts.streamed` reads of every
    part), its rows read again when used."""

    def __init__(self, streams: set[str]) -> None:
        """`streams`: the analyses that may be streamed."""
        self._streams = streams
        self._sizes: dict[str, int] = {}

    def part(
        self, name: str, blob: bytes, kept: Path | None, fresh: Mapping[str, int] | None = None
    ) -> Part:
        """The part of analysis `name` in `blob` (ValueError for a damaged one: its unit is
        then made here, as a failed one); `fresh`: its tables' texts the worker kept now
        (`rank_work.texts_kept`: a streamed table's rank part written as it lies, held read
        or not)."""
        tables = unpack(blob)
        size = self._sizes.get(name, 0) + len(blob)
        self._sizes[name] = size
        if name not in self._streams:
            return Part(len(blob), path=kept, held=tables)
        part = replace(_part(blob, kept), fresh=fresh or {})
        if size < STREAM_BYTES:  # (held read, not as bytes; its texts by its file still)
            return replace(part, blob=None, path=kept, held=tables)
        return replace(part, outline=outline(tables))


def _spare_parts(
    chosen: list[registry.Analysis], options: registry.Options, order: tuple[int, ...]
) -> dict[str, tuple[int | None, Part]]:
    """analysis -> (the one rank whose part it reads, the part of no rank) for those that
    read one rank's part only (`Analysis.one_rank`), made here once: the units without that
    rank are not asked for it (HTA's kernel sequences were made for each batch's smallest
    rank, 16 times at 1,000 tiny files, for the job's smallest). Not when they are all a
    unit would make (`--only` them): its task makes each rank's steps covered too."""
    ones = [a for a in chosen if a.one_rank is not None]
    if not ones or len(ones) == len(chosen):
        return {}
    out = {}
    for a in ones:
        blob = pack(registry.rank_parts({}, [a.name], options)[a.name])
        out[a.name] = (a.one_rank(options, order), Part(len(blob), blob=blob))
    return out


def _gather(
    backend: Backend,
    jobs: list[tuple[int, tuple[RankJob, ...]]],
    stats: SplitRun,
    ts: TraceSet,
    keep: Callable[[tuple[RankJob, ...], dict[str, bytes]], Any] | None = None,
    submitted: Callable[[], object] | None = None,
) -> dict[int, Any]:
    """Every unit's answer, under the key `jobs` gives it (`rank_tables` for a rank alone,
    `batch_tables` for a batch; `keep(batch, answer)` of it as it lands); a unit whose work
    failed (after the back-end's retry) is logged and left out, to be made here. In this
    process the work reads the frames `ts` holds. `submitted()`: called once before the
    first answer is waited for: on a back-end of other processes before the first unit's
    work goes (the pool's first task waits for its forkserver to be ready, the caller's
    work runs meanwhile), in this process once every unit's work is done."""
    stats.rank_tasks += len(jobs)
    stats.batches += sum(len(batch) > 1 for _, batch in jobs)
    futures: dict[Future[dict[str, bytes]], tuple[int, tuple[RankJob, ...]]] = {}
    out = {}
    here = backend.kind == "inline"
    loaded = ts.loaded() if here else {}
    if submitted is not None and not here and jobs:
        submitted()
        submitted = None
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
    if submitted is not None:
        submitted()
    for fut in as_completed(futures):
        unit, batch = futures.pop(fut)  # (its answer let go once kept)
        try:
            got = fut.result()
            out[unit] = keep(batch, got) if keep is not None else got
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


def _here(
    ts: TraceSet,
    r: _Rank,
    chosen: list[registry.Analysis],
    options: registry.Options,
    have: Mapping[str, Part],
) -> dict[str, bytes]:
    """A rank's missing tables made in this process from its frames here (those only)."""
    wanted = [a for a in chosen if a.name not in have]
    frames: Callable[[str], registry.Ranks] = registry.trace_frames(ts, [r.rank])
    made = registry.rank_parts(
        frames("events"), [a.name for a in wanted], options, frames=frames, meta={r.rank: r.meta}
    )
    return {a.name: pack(made[a.name]) for a in wanted}


def _largest_first(
    jobs: list[tuple[int, tuple[RankJob, ...]]], ranks: list[_Rank]
) -> list[tuple[int, tuple[RankJob, ...]]]:
    """Units of work in the order they go out: the most bytes of trace files first (in rank
    order among equals), so a large rank is not the last one left while the other workers
    idle (each worker takes the next unit as it ends one)."""
    sizes = {r.rank: r.size for r in ranks}
    return sorted(jobs, key=lambda unit: -sum(sizes[job.rank] for job in unit[1]))


def _runner(
    backend: Backend, ranks: list[_Rank], jobs: list[tuple[int, tuple[RankJob, ...]]]
) -> Backend:
    """`backend` when the ranks `jobs` make are worth its workers (their count and bytes,
    `Backend.worth_workers`), else this process."""
    sizes = {r.rank: r.size for r in ranks}
    to_make = [job.rank for _, batch in jobs for job in batch]
    remote = backend.worth_workers(len(to_make), sum(sizes[rank] for rank in to_make))
    return backend if remote else Backend()


def _jobs(
    unit: list[_Rank], names: tuple[str, ...], options: registry.Options
) -> tuple[RankJob, ...]:
    """A unit's ranks' jobs, each asking for `names`."""
    return tuple(RankJob(r.rank, str(r.entry), r.meta, names, options) for r in unit)


def _steps_kept(unit: list[_Rank], options: registry.Options) -> Path:
    """Where a unit's steps covered are kept: a batch's in one file, a rank alone's
    beside its frames."""
    if len(unit) > 1:
        return batch_steps_path(_jobs(unit, (STEPS,), options))
    return steps_path(unit[0].entry, options)


def _unit_steps(blob: bytes, ranks: list[int]) -> Steps:
    """A unit's steps covered as kept (a batch's `unpack_batch_steps`, a rank's own)."""
    if len(ranks) > 1:
        return unpack_batch_steps(blob, ranks)
    return {ranks[0]: unpack_steps(blob)}


def work_ahead(ts: TraceSet, options: registry.Options, backend: Backend) -> bool:
    """Whether rank-wise work will likely go to `backend`'s workers: the files are worth
    them (`Backend.worth_workers`: their bytes, their count) and a unit's steps covered are
    not kept for these options and this code (every unit's task keeps them: a report whose
    results are kept has them all). A guess made before any result is read, to start the
    workers early (`Backend.warm`), from at most `AHEAD_LOOKS` units spread over the set (a
    stat each: a warm report of 10,000 ranks looks at 8 files); a wrong one costs a start
    or the wait it would have saved, never a number."""
    loaded = ts.loaded()
    ranks = sorted(loaded)
    total = 0
    for rank in ranks:  # (until there is enough: no file's metadata copied)
        if backend.worth_workers(len(ranks), total):
            break
        entry = ts.selected(rank)
        total += entry.file.size if entry is not None else 0
    if not backend.worth_workers(len(ranks), total):
        return False
    units = [u for u in _units(_ranks(ts)) if u[0].stored]
    looked = units[:: -(-len(units) // AHEAD_LOOKS)] if units else []
    return any(not _steps_kept(unit, options).is_file() for unit in looked)


def rank_steps(
    ts: TraceSet,
    options: registry.Options,
    backend: Backend | None = None,
    held: Steps | None = None,
) -> Steps:
    """rank -> (kind of steps -> the ProfilerSteps its tables cover, `coverage`): those
    `held` (handed back with a run's tables, `run_split(covered=)`), else read where a unit
    keeps them (a batch's in one file, a rank alone's beside its frames), else made on the
    back-end a unit at a time and kept (`coverage.merge_steps` makes the job's)."""
    backend = backend or Backend()
    held = held or {}
    ranks = _ranks(ts)
    out: Steps = {}
    jobs = []
    for unit in _units(ranks):
        if all(r.rank in held for r in unit):
            out.update({r.rank: held[r.rank] for r in unit})
            continue
        if not unit[0].stored:  # frames only here: made here, below
            continue
        blob = read_cached(_steps_kept(unit, options))
        if blob is None:
            jobs.append((len(jobs), _jobs(unit, (STEPS,), options)))
        else:
            out.update(_unit_steps(blob, [r.rank for r in unit]))
    runner = _runner(backend, ranks, jobs)
    units = dict(jobs)
    for i, got in _gather(runner, _largest_first(jobs, ranks), SplitRun(), ts).items():
        if STEPS in got:  # (not when a rank's failed in its batch: made here, below)
            out.update(_unit_steps(got[STEPS], [job.rank for job in units[i]]))
    for r in ranks:
        if r.rank not in out:  # frames only here, or its work failed: made here
            out[r.rank] = unpack_steps(_steps_blob(r.rank, ts.loaded()[r.rank].events, options))
    return out


def _once(fn: Callable[[], object] | None) -> Callable[[], None]:
    """`fn()` on the first call only (none: nothing)."""
    done: list[bool] = []

    def call() -> None:
        if fn is not None and not done:
            done.append(True)
            fn()

    return call


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]
