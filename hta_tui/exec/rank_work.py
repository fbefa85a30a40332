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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from hta_tui.analysis import registry
from hta_tui.exec.blobs import pack, unpack, whole
from hta_tui.trace.model import RankData

RESULTS_DIR = "results"


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
    values = dataclasses.asdict(options)
    said = "|".join(f"{o}={values[o]!r}" for o in sorted(analysis.options))
    return hashlib.sha1(f"{code_version()}|{analysis.name}|{said}".encode()).hexdigest()[:20]


def result_path(entry: Path, analysis: registry.Analysis, options: registry.Options) -> Path:
    return entry / RESULTS_DIR / f"{analysis.name}-{options_key(analysis, options)}.arrow"


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


def read_cached(path: Path) -> bytes | None:
    """A stored result, or None when missing or damaged (it is made again)."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    return blob if whole(blob) else None  # a truncated or garbled file is a miss


def _write_atomic(blob: bytes, path: Path) -> None:
    """Best effort: a read-only cache only costs a recomputation next time."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(blob)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


#: Not an analysis: the steps each kind of table covers on this rank (`coverage`), for the
#: report's scope section, made with the rank's tables and kept beside them.
STEPS = "steps_covered"


def steps_path(entry: Path, options: registry.Options) -> Path:
    said = f"{code_version()}|{STEPS}|{options.tb_compat!r}"
    return entry / RESULTS_DIR / f"{STEPS}-{hashlib.sha1(said.encode()).hexdigest()[:20]}.arrow"


def _steps_blob(rank: int, events: pl.DataFrame, options: registry.Options) -> bytes:
    from hta_tui.analysis import coverage

    rows = [
        (kind, step)
        for kind in coverage.RANK_KINDS
        for step in (coverage.steps_covered(kind, {rank: events}, options) or {}).get(str(rank), [])
    ]
    table = pl.DataFrame(rows, schema={"kind": pl.String, "step": pl.Int64}, orient="row")
    return pack({STEPS: table})


def unpack_steps(blob: bytes) -> dict[str, list[int]]:
    """kind -> this rank's steps, from `_steps_blob`."""
    table = unpack(blob)[STEPS]
    return {
        kind: table.filter(pl.col("kind") == kind)["step"].to_list()
        for kind in table["kind"].unique().to_list()
    }


def rank_tables(job: RankJob, data: RankData | None = None) -> dict[str, bytes]:
    """analysis -> its tables on this rank (`blobs.pack`), read back when stored, else made
    and stored. `data`: the rank's frames when this process has them already (the
    in-process back-end: nothing read twice). Raises what an analysis raises: the caller
    says which rank it cost."""
    entry = Path(job.entry)
    chosen = [registry.BY_NAME[n] for n in job.analyses if n != STEPS]
    out: dict[str, bytes] = {}
    if STEPS in job.analyses:
        blob = read_cached(steps_path(entry, job.options))
        if blob is None:
            data = data or RankData(entry, job.meta)
            blob = _steps_blob(job.rank, data.events, job.options)
            if job.store:
                _write_atomic(blob, steps_path(entry, job.options))
        out[STEPS] = blob
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
    return {n: out[n] for n in job.analyses}
