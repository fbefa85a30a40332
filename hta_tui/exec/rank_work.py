"""The unit of work: one rank's file -> the tables of the rank-wise analyses on it and the
summaries of the reducing ones, as bytes.

Runs wherever the back-end puts it (this process, a pool worker, a Dask worker that can read
the cache): it reads the rank's frames from its cache entry, runs the analyses declared
`scope="rank"` on that rank alone and the `rank_part` of those declared `scope="reduce"`
(`registry.rank_parts`), and keeps each analysis's tables beside the frames
(`<entry>/results/<analysis>-<key>.arrow`), keyed by the options the analysis reads and the
code's version, so a second report reads them back instead of computing them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from hta_tui.analysis import hta_view, registry
from hta_tui.analysis.rank_column import runs
from hta_tui.exec.backends import RESULTS_DIR, STEPS, TEXTS_KEPT
from hta_tui.exec.blobs import pack, pack_text, unpack, whole
from hta_tui.trace.model import RankData, read_events_at_once


@functools.cache
def code_version() -> str:
    """What the results depend on besides the file and the options: the source of the
    analyses and of the parser (every .py under analysis/ and trace/) and polars' version."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha1(pl.__version__.encode())
    for folder in ("analysis", "trace", "exec"):
        for path in sorted((root / folder).rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def options_key(analysis: registry.Analysis, options: registry.Options) -> str:
    """The options an analysis reads, with the code's version, as a short key."""
    return _options_key(analysis.name, tuple(sorted(analysis.options)), options)


@functools.lru_cache(maxsize=4096)
def _options_key(name: str, read: tuple[str, ...], options: registry.Options) -> str:
    """(once per analysis and options: a batch's paths ask it for every analysis, and
    `dataclasses.asdict` copies every option each time)"""
    values = dataclasses.asdict(options)
    said = "|".join(f"{o}={values[o]!r}" for o in read)
    return hashlib.sha1(f"{code_version()}|{name}|{said}".encode()).hexdigest()[:20]


def result_path(entry: Path, analysis: registry.Analysis, options: registry.Options) -> Path:
    return entry / RESULTS_DIR / f"{analysis.name}-{options_key(analysis, options)}.arrow"


@dataclass(frozen=True)
class Texts:
    """A front end's text of a rank's long tables (the report's JSON of a row per kernel
    launch), made by the worker that made their rows, where that rank's work runs (both
    cores), not by the client once every rank is in (one core, the others idle). Kept
    beside the rank's results (`text_path`), with the CRC of the tables it was made from."""

    #: (table, its rows on this rank) -> their text in pieces (written as they come: a
    #: rank's text is ~8 MB), or None (no text for that table); module-level: it crosses
    #: to the worker by name
    make: Callable[[str, pl.DataFrame], Iterable[str] | None]
    #: of the code that makes it (in the kept file's name)
    version: str
    #: the tables of a rank-wise analysis whose rank part is this many bytes or more (of
    #: Arrow, `blobs.pack`): those the client will likely stream (`split.STREAM_BYTES`)
    least: int = 0


def text_path(result: Path, table: str, version: str) -> Path:
    """Where the text of `table` made by `version` is kept, beside the result it is of."""
    return result.with_name(f"{result.stem}.{table}.{version}.text")


@dataclass(frozen=True)
class RankJob:
    """One rank's work as it crosses to a worker: small and picklable."""

    rank: int
    #: the file's cache entry (its frames); on a cluster, a path every worker can read
    entry: str
    #: the file's metadata, with its "path" (what `Analysis.meta` analyses read)
    meta: dict[str, Any]
    analyses: tuple[str, ...]
    options: registry.Options
    #: keep the results in the entry (False: an entry that cannot be written)
    store: bool = True
    #: its long tables' text too (kept, not answered: the client reads it when it writes)
    texts: Texts | None = None


def read_cached(path: Path) -> bytes | None:
    """A stored result, or None when missing or damaged (it is made again)."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    return blob if whole(blob) else None  # a truncated or garbled file is a miss


def _write_atomic(blob: bytes | Iterable[bytes], path: Path) -> int | None:
    """Best effort: a read-only cache only costs a recomputation next time. `blob` may come
    in pieces, written as they come. The folder is made when the write finds it missing (a
    mkdir per write was a failed system call and an exception each time: every write but an
    entry's first finds it there). The bytes written, None when the write failed (a file
    already at `path` is then an earlier run's, not this one's)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        try:
            fh = tmp.open("wb")
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fh = tmp.open("wb")
        with fh:
            size = sum(fh.write(piece) for piece in ([blob] if isinstance(blob, bytes) else blob))
        os.replace(tmp, path)
    except Exception as exc:  # (a piece that failed to be made: raised, nothing left)
        with contextlib.suppress(OSError):
            tmp.unlink()
        if not isinstance(exc, OSError):
            raise
        return None
    return size


def steps_path(entry: Path, options: registry.Options) -> Path:
    return entry / RESULTS_DIR / _steps_name(options.tb_compat)


@functools.lru_cache(maxsize=4)
def _steps_name(tb_compat: bool) -> str:
    """(hashed once, not once a rank: the report's scope asks for every rank's)"""
    said = f"{code_version()}|{STEPS}|{tb_compat!r}"
    return f"{STEPS}-{hashlib.sha1(said.encode()).hexdigest()[:20]}.arrow"


def _steps_blob(rank: int, events: pl.DataFrame, options: registry.Options) -> bytes:
    from hta_tui.analysis import coverage

    return _steps_packed(coverage.ranks_steps({rank: events}, options)[rank])


def _steps_packed(kinds: dict[str, list[int]]) -> bytes:
    """One rank's steps covered (kind -> steps, `coverage.ranks_steps`) as kept."""
    from hta_tui.analysis import coverage

    rows = [(kind, step) for kind in coverage.RANK_KINDS for step in kinds.get(kind, [])]
    table = pl.DataFrame(rows, schema={"kind": pl.String, "step": pl.Int64}, orient="row")
    return pack({STEPS: table})


def unpack_steps(blob: bytes) -> dict[str, list[int]]:
    """kind -> this rank's steps, from `_steps_blob`, in their order (a few rows: read as
    lists, no query a kind: those were most of the report's scope at 1,000 tiny ranks)."""
    table = unpack(blob)[STEPS]
    out: dict[str, list[int]] = {}
    for kind, step in zip(table["kind"].to_list(), table["step"].to_list(), strict=True):
        out.setdefault(kind, []).append(step)
    return out


def _batch_steps_packed(made: dict[int, dict[str, list[int]]]) -> bytes:
    """A batch's steps covered (rank -> kind -> steps, every rank of the batch) as kept:
    `_steps_packed`'s rows of each rank one after another, with their rank."""
    from hta_tui.analysis import coverage

    rows = [
        (rank, kind, step)
        for rank, kinds in made.items()
        for kind in coverage.RANK_KINDS
        for step in kinds.get(kind, [])
    ]
    schema = {"rank": pl.Int64, "kind": pl.String, "step": pl.Int64}
    return pack({STEPS: pl.DataFrame(rows, schema=schema, orient="row")})


def unpack_batch_steps(blob: bytes, ranks: list[int]) -> dict[int, dict[str, list[int]]]:
    """rank -> `unpack_steps` of it, for each of `ranks` (the batch's), from
    `_batch_steps_packed`: a rank with no row has no step (the batch kept every rank's)."""
    table = unpack(blob)[STEPS]
    out: dict[int, dict[str, list[int]]] = {rank: {} for rank in ranks}
    columns = (table[c].to_list() for c in ("rank", "kind", "step"))
    for rank, kind, step in zip(*columns, strict=True):
        out[rank].setdefault(kind, []).append(step)
    return out


def rank_tables(job: RankJob, data: RankData | None = None) -> dict[str, bytes]:
    """analysis -> its tables on this rank (`blobs.pack`), read back when stored, else made
    and stored. `data`: the rank's frames when this process has them already (the
    in-process back-end: nothing read twice). With `STEPS` among them, the rank's steps
    covered too, made after its tables (sharing their step tables: ~2 ms of CPU on a 100 MB
    rank, ~40 ms on its own) and kept. Raises what an analysis raises: the caller says
    which rank it cost."""
    entry = Path(job.entry)
    chosen = [registry.BY_NAME[n] for n in job.analyses if n != STEPS]
    out: dict[str, bytes] = {}
    missing = []
    for a in chosen:
        blob = read_cached(result_path(entry, a, job.options))
        if blob is None:
            missing.append(a)
        else:
            out[a.name] = blob
    if missing:
        data = data or RankData(entry, job.meta)
        parts = registry.rank_parts(
            {job.rank: data.events},
            [a.name for a in missing],
            job.options,
            threads=1,
            frames=lambda name: {job.rank: data.frame(name)},
            meta={job.rank: job.meta},
        )
        for a in missing:
            blob = pack(parts[a.name])
            if job.store:
                _write_atomic(blob, result_path(entry, a, job.options))
            out[a.name] = blob
        if job.store and job.texts is not None:
            kept: dict[str, dict[str, int]] = {}
            for a in missing:
                if a.scope == "rank" and len(out[a.name]) >= job.texts.least:
                    made = _keep_texts(job.texts, parts[a.name], out[a.name], entry, a, job.options)
                    if made:
                        kept[a.name] = made
            if kept:  # (said to the client, which then writes them as they lie: `fresh_text`)
                out[TEXTS_KEPT] = orjson.dumps(kept)
    if STEPS in job.analyses:  # after the tables: their step tables and views are kept
        blob = read_cached(steps_path(entry, job.options))
        if blob is None:
            data = data or RankData(entry, job.meta)
            blob = _steps_blob(job.rank, data.events, job.options)
            if job.store:
                _write_atomic(blob, steps_path(entry, job.options))
        out[STEPS] = blob
    return {n: out[n] for n in (*job.analyses, TEXTS_KEPT) if n in out}


def texts_kept(answer: dict[str, bytes]) -> dict[str, dict[str, int]]:
    """analysis -> table -> the size of the text of it `rank_tables` kept in this run (none
    for an answer without)."""
    said = answer.get(TEXTS_KEPT)
    return orjson.loads(said) if said is not None else {}


def _keep_texts(
    texts: Texts,
    tables: registry.Tables,
    blob: bytes,
    entry: Path,
    analysis: registry.Analysis,
    options: registry.Options,
) -> dict[str, int]:
    """Each table's text (`Texts`), kept beside its analysis's result (`blob`): table -> the
    size of the file of those kept. Best effort: a text not made or not kept is made by the
    client, as before."""
    result = result_path(entry, analysis, options)
    kept = {}
    for name, frame in tables.items():
        try:
            text = texts.make(name, frame)
            if text is not None:
                path = text_path(result, name, texts.version)
                pieces = (piece.encode() for piece in text)
                size = _write_atomic(pack_text(pieces, blob), path)
                if size is not None:  # (a failed write leaves an earlier run's file: not fresh)
                    kept[name] = size
        except Exception:  # (a piece that failed: the file is not kept)
            continue
    return kept


#: Small ranks (`backends.BATCH_BYTES`) run in batches of up to this many per task.
BATCH_RANKS = 64


def batch_paths(
    jobs: tuple[RankJob, ...], analyses: Iterable[registry.Analysis]
) -> dict[str, Path]:
    """analysis -> where a batch's tables of it are kept: beside the first rank's frames,
    keyed by the options it reads, the code's version and every rank of the batch (its
    rank, entry and path), so a batch that differs in any rank is a miss. The batch's ranks
    said once for every analysis (once per analysis was ~0.2 s of CPU for the client's 40
    batches of 10,000 tiny ranks)."""
    said = _said(jobs)
    return {
        a.name: _batch_file(jobs, a.name, options_key(a, jobs[0].options), said) for a in analyses
    }


def batch_steps_path(jobs: tuple[RankJob, ...]) -> Path:
    """Where a batch keeps every rank's steps covered (`STEPS`), in one file beside its
    tables, keyed as they are (the steps' options and the code's version, `_steps_name`)."""
    return _batch_file(jobs, STEPS, _steps_name(jobs[0].options.tb_compat), _said(jobs))


def _said(jobs: tuple[RankJob, ...]) -> bytes:
    """Every rank of a batch (its rank, entry and path), as its files' keys hash them."""
    # (the entry's name as a string: a Path per rank and analysis cost ~0.1 ms each)
    return "".join(
        f"{job.rank}\0{os.path.basename(job.entry)}\0{job.meta.get('path', '')}\n" for job in jobs
    ).encode()


def _batch_file(jobs: tuple[RankJob, ...], name: str, key: str, said: bytes) -> Path:
    digest = hashlib.sha1(key.encode())
    digest.update(said)
    return Path(jobs[0].entry) / RESULTS_DIR / f"batch-{name}-{digest.hexdigest()[:20]}.arrow"


def batch_tables(
    jobs: tuple[RankJob, ...], data: dict[int, RankData] | None = None
) -> dict[str, bytes]:
    """analysis -> its tables on these ranks together (`blobs.pack`: the ranks' rows one
    after another, in the jobs' order, as `rank_tables` of each would give them), read back
    when stored, else made in one call over every rank and stored in one file per analysis.
    Every job asks for the same analyses; with `STEPS` among them, every rank's steps
    covered too (`_batch_steps_packed`, kept in one file for the batch, `batch_steps_path`),
    made after the tables (sharing their step tables), left out of the answer when a rank's
    fail (its scope then asks for them alone). `data`: the ranks' frames when this process
    has them. Raises what an analysis raises (the caller makes the batch's ranks one by
    one)."""
    first = jobs[0]
    names = [n for n in first.analyses if n != STEPS]
    paths = batch_paths(jobs, [registry.BY_NAME[n] for n in names])
    out: dict[str, bytes] = {}
    missing = []
    for name in names:
        a = registry.BY_NAME[name]
        blob = read_cached(paths[name])
        if blob is None:
            missing.append(a)
        else:
            out[name] = blob
    store = all(j.store for j in jobs)
    datas: dict[int, RankData] = {}
    if missing:
        datas = _datas(jobs, data)
        parts = _batch_parts(jobs, datas, missing)
        for a in missing:
            blob = pack(parts[a.name])
            if store:
                _write_atomic(blob, paths[a.name])
            out[a.name] = blob
    if STEPS in first.analyses:  # after the tables: their step tables and views are kept
        path = batch_steps_path(jobs)
        steps = read_cached(path)
        if steps is None:
            steps = _batch_steps(jobs, datas or _datas(jobs, data))
            if steps is not None and store:
                _write_atomic(steps, path)
        if steps is not None:
            out[STEPS] = steps
    return {n: out[n] for n in first.analyses if n in out}


def _datas(jobs: tuple[RankJob, ...], data: dict[int, RankData] | None) -> dict[int, RankData]:
    """The batch's ranks' frames: those this process has, the others read when used, but
    the events of those whose entry holds them in one file, read at once now."""
    have = data or {}
    datas = {j.rank: have.get(j.rank) or RankData(Path(j.entry), j.meta) for j in jobs}
    read_events_at_once(list(datas.values()))
    return datas


def _batch_steps(jobs: tuple[RankJob, ...], datas: dict[int, RankData]) -> bytes | None:
    """Every rank's steps covered (`STEPS`) as one blob, made while the batch's per-rank
    step tables are at hand (~2 ms of CPU a tiny rank here, ~11 made later on their own:
    the report's scope asks for them next, `split.rank_steps`). None when a rank's fail:
    the scope makes them again, rank by rank."""
    from hta_tui.analysis import coverage

    options = jobs[0].options
    try:  # every rank at once (the plugin's steps in one query set)
        made = coverage.ranks_steps({j.rank: datas[j.rank].events for j in jobs}, options)
    except Exception:
        made = {}
    try:
        for job in jobs:  # (a rank the batch's call left out, or all when it failed)
            if job.rank not in made:
                events = {job.rank: datas[job.rank].events}
                made[job.rank] = coverage.ranks_steps(events, options)[job.rank]
    except Exception:
        return None
    return _batch_steps_packed({j.rank: made[j.rank] for j in jobs})


#: Analyses whose tables a batch keeps rank by rank ("<i>\t<table>", `each_rank`), so the
#: report concatenates them rank by rank as when each rank was made alone: a sum over the
#: concatenation (the straggler scores' figures) then adds the same chunks in the same
#: order, to the bit. They are made over the batch at once with the others (sharing the
#: batch's step tables and views: ~40 ms of CPU a tiny rank made alone) and split by rank
#: after (`_apart`).
ALONE = frozenset({"profiler_steps", "syncs"})


def _batch_parts(
    jobs: tuple[RankJob, ...], datas: dict[int, RankData], missing: list[registry.Analysis]
) -> dict[str, registry.Tables]:
    """The batch's tables of `missing`, every rank at once; ALONE's kept apart by rank."""
    options = jobs[0].options
    meta = {j.rank: j.meta for j in jobs}
    with hta_view.views_at_once():  # HTA's views of the batch's ranks made together
        out = registry.rank_parts(
            {rank: d.events for rank, d in datas.items()},
            [a.name for a in missing],
            options,
            threads=1,
            frames=lambda name: {rank: d.frame(name) for rank, d in datas.items()},
            meta=meta,
        )
    for a in missing:
        if a.name in ALONE:
            out[a.name] = _apart(out[a.name], [j.rank for j in jobs])
    return out


def _apart(tables: registry.Tables, ranks: list[int]) -> registry.Tables:
    """A batch's tables as each rank's ("<i>\t<table>", i: the rank's place in the batch):
    its rows (an empty table of the same columns when it has none); a table without a
    `rank` column (the steps every rank saw, reduced to the distinct ones) goes whole to
    the first."""
    out: registry.Tables = {}
    for name, df in tables.items():
        if "rank" in df.columns:
            mine = _runs(df) or {
                key[0]: part
                for key, part in df.partition_by("rank", as_dict=True, maintain_order=True).items()
            }
            pieces = [mine.get(rank, df.clear()) for rank in ranks]
        else:
            pieces = [df, *(df.clear() for _ in ranks[1:])]
        for i, piece in enumerate(pieces):
            out[f"{i}\t{name}"] = piece
    return out


def _runs(df: pl.DataFrame) -> dict[object, pl.DataFrame] | None:
    """rank -> its rows, when each rank's rows are one run (the batch's tables are its ranks'
    one after another): slices, each made one chunk as `partition_by` makes its parts, with
    no query (`partition_by` is ~4 queries a tiny rank over a batch's tables). None when a
    rank's rows are apart or a rank is null (`partition_by` then)."""
    return runs(df, "rank")


def each_rank(tables: registry.Tables) -> list[registry.Tables]:
    """An ALONE analysis's batch tables back into each rank's (`_batch_parts` names them
    "<i>\t<table>"): the report concatenates them as it does ranks run alone, chunk for
    chunk, so even a sum over the concatenation is the same to the bit."""
    ranks: dict[int, dict[str, pl.DataFrame]] = {}
    for key, df in tables.items():
        i, name = key.split("\t", 1)
        ranks.setdefault(int(i), {})[name] = df
    return [ranks[i] for i in sorted(ranks)]


def concat_tables(parts: list[registry.Tables]) -> registry.Tables:
    """Tables of each rank, one after another in rank order (empty ones keep the schema)."""
    out = {}
    for name in parts[0]:
        frames = [p[name] for p in parts if name in p]
        full = [f for f in frames if f.height]
        out[name] = pl.concat(full, how="diagonal_relaxed") if full else frames[0]
    return out
