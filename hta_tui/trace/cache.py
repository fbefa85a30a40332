"""Parsed frames as Parquet under the user cache dir, so a second open reads no JSON.

Keyed by absolute path, size, mtime and parser version: any change to the file, or to what the
parser produces, misses. Entries are written to a temporary folder and renamed into place, so
a crash or a concurrent writer never leaves a half entry. Nothing is ever written beside the
traces. The cache is kept under a size limit (`prune`): GPU boxes often have small home quotas.

Entries are still checked when read: a full disk, a quota, a writer killed on a network file
system or a user's `rm` can damage one after it was stored. `meta.json` lists the size of every
frame file (a lookup compares them: missing, truncated and empty files are found before any
frame is read), and every Parquet file of the entry ends with its own length and CRC-32
(checked when it is read, which finds garbage of the right length). A damaged entry is moved
out of the way in one rename and the trace parsed again; `take_notices()` says which.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from hta_tui.trace import cache_meta
from hta_tui.trace.cache_root import default_root
from hta_tui.trace.cache_root import entry_name as _digest
from hta_tui.trace.checked import DamagedEntry, read_checked, read_checked_together, write_checked
from hta_tui.trace.discover import TraceFile, describe
from hta_tui.trace.parse import PARSER_VERSION, ParsedTrace, parse_file
from hta_tui.trace.schema import FRAME_SCHEMAS

META_FILE = "meta.json"
#: The key of meta.json listing the entry's frame files: {file name: size in bytes}.
FILES_KEY = "cache_files"
#: The layout of an entry (its files, checked.py's trailer); part of the cache folder's name.
#: 3: an entry may hold a frame in pieces (`EntryWriter`), which a reader of format 2 would
#: take for the whole frame.
CACHE_FORMAT = 3

#: Size of the cache above which the least recently used entries go (GB); $HTA_TUI_CACHE_MAX_GB.
DEFAULT_MAX_GB = 10.0
#: Entries used this recently are never pruned: an open app may still read their frames (s).
KEEP_RECENT_S = 3600.0
#: The cache's folder of the report's whole answers (exec/split.py keeps them there).
JOBS_DIR = "jobs"


def max_cache_bytes() -> int:
    try:
        gb = float(os.environ.get("HTA_TUI_CACHE_MAX_GB", DEFAULT_MAX_GB))
    except ValueError:
        gb = DEFAULT_MAX_GB
    return int(gb * 2**30)


class Cache:
    """Where parsed frames live. With `enabled=False` (--no-cache) a private temporary folder
    is used instead, never read back by a later run and removed at exit."""

    def __init__(self, root: str | Path | None = None, *, enabled: bool = True) -> None:
        self.enabled = enabled
        if enabled:
            self.root = Path(root) if root is not None else default_root()
        else:
            self.root = Path(tempfile.mkdtemp(prefix="hta-tui-nocache-"))
            atexit.register(shutil.rmtree, self.root, True)
        self.root = self.root / f"v{PARSER_VERSION}-c{CACHE_FORMAT}"

    def entry_dir(self, tf: TraceFile) -> Path:
        digest = _digest(tf)
        return self.root / digest[:2] / digest

    def lookup(self, tf: TraceFile, entry: Path | None = None) -> dict[str, Any] | None:
        """The cached metadata when this exact version of the file was parsed before and its
        entry is whole; a damaged entry is discarded (with a notice) and None returned.
        `entry`: `entry_dir(tf)`, when the caller has it (it resolves the path: a few system
        calls per file, which add up at 10,000 files)."""
        if not self.enabled:
            return None
        entry = entry if entry is not None else self.entry_dir(tf)
        meta_path = entry / META_FILE
        try:
            meta = orjson.loads(meta_path.read_bytes())
        except FileNotFoundError:
            if entry.is_dir():  # a renamed-in entry always has its meta.json
                discard(entry, tf.path, f"{META_FILE} is missing")
            return None
        except OSError:
            return None
        except orjson.JSONDecodeError:
            discard(entry, tf.path, f"{META_FILE} is damaged")
            return None
        problem = cache_meta.problem(meta) or _check_sizes(entry, meta)
        if problem is not None:
            discard(entry, tf.path, problem)
            return None
        with contextlib.suppress(OSError):  # the mtime says when it was last used (prune)
            os.utime(meta_path)
        return meta

    def store(self, tf: TraceFile, parsed: ParsedTrace) -> Path:
        """Write the entry; `parsed.meta` gets the list of its files (FILES_KEY)."""
        final = self.entry_dir(tf)
        final.parent.mkdir(parents=True, exist_ok=True)
        write_entry(final, parsed)
        return final

    def writer(self, tf: TraceFile) -> EntryWriter:
        """A writer of this file's entry, for frames that come in pieces (`stream`)."""
        return EntryWriter(self.entry_dir(tf))

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def prune(self, max_bytes: int | None = None, *, now: float | None = None) -> int:
        """Remove what a later open cannot use (other parser versions, abandoned temporary
        folders), then the least recently used entries until the cache fits `max_bytes`
        (default: `max_cache_bytes()`). Entries used within KEEP_RECENT_S stay whatever the
        size. Returns the bytes freed."""
        if not self.enabled:
            return 0
        limit = max_cache_bytes() if max_bytes is None else max_bytes
        now = time.time() if now is None else now
        freed = 0
        for other in self.root.parent.glob("v*"):
            if other.is_dir() and other != self.root:
                freed += _tree_bytes(other)
                shutil.rmtree(other, ignore_errors=True)
        entries: list[tuple[float, int, Path]] = []
        for shard in self.root.glob("??"):
            for entry in shard.iterdir():
                size = _tree_bytes(entry)
                if entry.name.startswith(".tmp-"):
                    if now - _mtime(entry) > KEEP_RECENT_S:  # a writer died
                        shutil.rmtree(entry, ignore_errors=True)
                        freed += size
                    continue
                entries.append((_mtime(entry / META_FILE), size, entry))
        # the report's whole answers: one per set of files and options, so a folder that
        # grows leaves one behind per report; aged by when they were written
        for kept in (self.root / JOBS_DIR).glob("??/*"):
            size = _tree_bytes(kept)
            if kept.name.startswith("."):
                if now - _mtime(kept) > KEEP_RECENT_S:  # a writer died
                    _remove(kept)
                    freed += size
                continue
            entries.append((_mtime(kept), size, kept))
        total = sum(size for _, size, _ in entries)
        for used, size, entry in sorted(entries, key=lambda e: e[0]):
            if total <= limit or now - used < KEEP_RECENT_S:
                break
            _remove(entry)
            total -= size
            freed += size
        return freed


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _tree_bytes(path: Path) -> int:
    """The bytes of the files under `path` (a file: its own)."""
    if path.is_file():
        with contextlib.suppress(OSError):
            return path.stat().st_size
    total = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(dirpath, name)).st_size
    return total


def write_entry(final: Path, parsed: ParsedTrace) -> None:
    """Every frame and meta.json into a private folder, renamed into place as `final` at
    once: a reader sees the whole entry or none. When `final` exists, a whole entry written
    by another process meanwhile, theirs is kept."""
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
    try:
        parsed.meta[FILES_KEY] = {
            f"{name}.parquet": write_checked(frame, tmp / f"{name}.parquet")
            for name, frame in parsed.frames.items()
            if not _as_never_had(name, frame)
        }
        (tmp / META_FILE).write_bytes(orjson.dumps(parsed.meta, default=str))
        try:
            os.rename(tmp, final)
        except OSError:  # another process stored it first: theirs is as good
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _as_never_had(name: str, frame: pl.DataFrame) -> bool:
    """Is `frame` what `read_frame` gives for a frame the entry never had (no rows, the
    frame's own schema)? Then it gets no file: three of a tiny rank's four frames are
    empty, and reading their files was much of a batch's CPU on 10,000 tiny ranks."""
    return frame.height == 0 and frame.schema == FRAME_SCHEMAS.get(name)


def never_had(meta: dict[str, Any], name: str) -> bool:
    """Does an entry's meta say it has no file for frame `name` (so the frame is empty)?
    False when the meta lists no files (read from the entry, as before)."""
    files = meta.get(FILES_KEY)
    return isinstance(files, dict) and part_name(name, 0) not in files


class CacheWriteError(OSError):
    """The cache could not take a piece of an entry (full, read-only, over quota)."""


class EntryWriter:
    """A cache entry written piece by piece (`stream.FrameSink`): each piece of a frame is a
    file of its own, `events.parquet` then `events.1.parquet`, `events.2.parquet` ...
    (`read_frame` reads them as one frame, in order), written into a private folder as it
    comes; `commit` renames the folder into place as `write_entry` does. Nothing is created
    until the first piece comes."""

    def __init__(self, final: Path) -> None:
        self.final = final
        self.tmp: Path | None = None
        self.files: dict[str, int] = {}  # FILES_KEY: file name -> size
        self.parts: dict[str, int] = {}  # frame -> pieces so far

    def add(self, name: str, frame: pl.DataFrame) -> None:
        try:
            self._add(name, frame)
        except OSError as exc:
            raise CacheWriteError(exc.errno, exc.strerror) from exc

    def _add(self, name: str, frame: pl.DataFrame) -> None:
        tmp = self._folder()
        k = self.parts.get(name, 0)
        file = part_name(name, k)
        self.files[file] = write_checked(frame, tmp / file)
        self.parts[name] = k + 1

    def add_file(self, name: str, path: Path, size: int) -> None:
        """The next piece of frame `name`, written already (`write_checked`, `size` bytes)
        as `path` inside `folder()` by a parser worker: renamed into its place."""
        try:
            k = self.parts.get(name, 0)
            file = part_name(name, k)
            os.rename(path, self._folder() / file)
        except OSError as exc:
            raise CacheWriteError(exc.errno, exc.strerror) from exc
        self.files[file] = size
        self.parts[name] = k + 1

    def folder(self) -> Path:
        """The private folder the entry is written into (parser workers write there)."""
        try:
            return self._folder()
        except OSError as exc:
            raise CacheWriteError(exc.errno, exc.strerror) from exc

    def _folder(self) -> Path:
        if self.tmp is None:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.final.parent))
        return self.tmp

    def commit(self, meta: dict[str, Any]) -> Path:
        """meta.json (no file for a frame no piece came for: it reads empty), renamed into place;
        `meta` gets the list of the entry's files (FILES_KEY)."""
        try:
            tmp = self._folder()
            meta[FILES_KEY] = self.files  # a frame no piece came for: never had (empty)
            (tmp / META_FILE).write_bytes(orjson.dumps(meta, default=str))
            try:
                os.rename(tmp, self.final)
            except OSError:  # another process stored it first: theirs is as good
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError as exc:
            self.abort()
            raise CacheWriteError(exc.errno, exc.strerror) from exc
        except BaseException:
            self.abort()
            raise
        self.tmp = None
        return self.final

    def abort(self) -> None:
        """Remove what was written (the file is parsed another way, or not at all)."""
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp, self.files, self.parts = None, {}, {}


def part_name(frame: str, k: int) -> str:
    """The file of a frame's k-th piece: the first is the frame's file of any entry."""
    return f"{frame}.parquet" if k == 0 else f"{frame}.{k}.parquet"


def _check_sizes(entry: Path, meta: Any) -> str | None:
    """What is wrong with the entry's frame files, by their sizes; None when nothing."""
    files = meta.get(FILES_KEY) if isinstance(meta, dict) else None
    if not isinstance(files, dict):
        return f"{META_FILE} lists no files"
    for name, size in files.items():
        try:
            actual = os.stat(entry / name).st_size
        except FileNotFoundError:
            return f"{name} is missing"
        except OSError as exc:
            return f"{name} cannot be read ({exc.strerror or exc})"
        if actual != size:
            return f"{name} is {actual:,} bytes, {size:,} were stored"
    return None


_notices: list[str] = []
_notices_lock = threading.Lock()


def take_notices() -> list[str]:
    """What was found damaged in the cache since the last call (front ends show it)."""
    with _notices_lock:
        out, _notices[:] = list(_notices), []
    return out


def discard(entry: Path, trace: Path | str, problem: str) -> None:
    """Move a damaged entry out of the way in one rename (a reader or a writer of the same
    entry sees it whole or not at all), then delete it; note it for the front ends."""
    dead = entry.with_name(f".tmp-damaged-{uuid.uuid4().hex}")
    try:
        os.rename(entry, dead)
    except OSError:
        pass  # gone already (another process discarded it)
    else:
        shutil.rmtree(dead, ignore_errors=True)
    note(f"{Path(trace).name}: cache entry damaged ({problem}); parsed again")


def note(text: str) -> None:
    with _notices_lock:
        _notices.append(text)


_noted_once: set[str] = set()


def note_once(text: str) -> None:
    """A notice given once per process, however many files meet the same problem."""
    with _notices_lock:
        if text in _noted_once:
            return
        _noted_once.add(text)
        _notices.append(text)


def uncached_entry(tf: TraceFile) -> Path:
    """The entry of a trace the cache could not take: under the null device, so nothing is
    ever written there (a summary's write fails quietly) and nothing read back."""
    return Path(os.devnull) / _digest(tf)


def unwritable(cache: Cache, exc: OSError) -> str:
    """The notice for a cache that cannot take an entry: read-only, full, over quota, or a
    file where its folder should be. The traces load without it."""
    why = exc.strerror or type(exc).__name__
    return f"the cache {cache.root.parent} cannot be written ({why}): traces load uncached"


def reparse(entry: Path, trace: str | Path, problem: str) -> dict[str, pl.DataFrame]:
    """A frame of `entry` was found damaged while being read: discard the entry, parse the
    trace again and return its frames; the entry is written again when the trace is still
    the version it was for (a changed trace gets its own entry when it is loaded again).
    Raises TraceFileError or OSError when the trace cannot be parsed now."""
    discard(entry, trace, problem)
    parsed = parse_file(trace)
    with contextlib.suppress(OSError):
        if _digest(describe(Path(trace))) == entry.name:
            write_entry(entry, parsed)
    return parsed.frames


def read_frame(entry: Path, name: str, columns: list[str] | None = None) -> pl.DataFrame:
    """One frame of a cache entry (only the named columns, when given), of every piece of it
    for an entry written in pieces (`EntryWriter`). A frame the entry never had is empty;
    DamagedEntry when its file is missing or damaged."""
    first = _first_piece(entry, name, columns)
    if first is None:
        return pl.DataFrame(schema=FRAME_SCHEMAS[name]).select(columns or pl.all())
    if not (entry / part_name(name, 1)).exists():
        return _nulls_as_one(first)
    whole = pl.concat([first, *_more_parts(entry, name, columns)], rechunk=False)
    if "idx" in whole.columns:  # each piece numbers its own rows (pieces parsed at once)
        whole = whole.with_columns(pl.int_range(whole.height, dtype=pl.UInt32).alias("idx"))
    return _nulls_as_one(whole)


def read_at_once(entries: list[Path], name: str, rows: list[int]) -> list[pl.DataFrame | None]:
    """Frame `name` of several entries, each in one piece of `rows[i]` rows (its meta's
    count), read in one query (`read_checked_together`): `read_frame` of each, but a tiny
    rank's read (~0.35 ms of fixed cost) at ~0.14 ms. None for an entry whose file is
    missing or damaged, and for every one when fewer than two read or the files do not read
    as one (their schemas differ, the counts are not their rows): `read_frame` of it then
    (which says why)."""
    out: list[pl.DataFrame | None] = [None] * len(entries)
    got = read_checked_together([entry / part_name(name, 0) for entry in entries])
    if got is None or len(got[1]) < 2:
        return out
    whole, read = got
    if whole.height != sum(rows[i] for i in read):
        return out
    at = 0
    for i in read:  # (each file's rows are one chunk of the whole: a slice each, no copy)
        out[i] = _nulls_as_one(whole.slice(at, rows[i]))
        at += rows[i]
    return out


def read_rows(entry: Path, name: str, columns: list[str], where: pl.Expr) -> pl.DataFrame:
    """The rows of one frame that `where` keeps, only `columns`, read a piece at a time: the
    memory held is the rows kept plus one piece, not the whole frame (the kernels view of a
    10 GB rank needs its GPU work, launches and operators, not its Python functions). `idx`
    numbers the rows as `read_frame` does, before any is left out. Errors as `read_frame`."""
    wanted = list(dict.fromkeys([*columns, *where.meta.root_names()]))
    first = _first_piece(entry, name, wanted)
    if first is None:
        return pl.DataFrame(schema=FRAME_SCHEMAS[name]).select(columns)
    if not (entry / part_name(name, 1)).exists():
        return first.filter(where).select(columns)
    kept, offset = [], 0
    for part in itertools.chain([first], _more_parts(entry, name, wanted)):  # one at a time
        if "idx" in wanted:  # each piece numbers its own rows: numbered over the pieces
            renumbered = pl.int_range(offset, offset + part.height, dtype=pl.UInt32)
            part = part.with_columns(renumbered.alias("idx"))
        offset += part.height
        kept.append(part.filter(where).select(columns))
        del part
    out = pl.concat(kept, rechunk=False)
    del kept
    # One chunk per column, made a column at a time (the memory held is the rows plus one
    # column): a frame of a chunk per piece is copied whole by the first filter or join on
    # it (the HTA view of the rank), a frame of one chunk is shared by the views made of it.
    out = pl.DataFrame([out.drop_in_place(c).rechunk() for c in list(out.columns)])
    return _nulls_as_one(out)


#: `_nulls_as_one` leaves a frame of fewer rows as read: its null columns hold at most
#: ~1 kB each (measured: 24 of a tiny rank's 38 events columns, 155 B a row together; 40 kB
#: at 256 rows), and the query that holds them as one costs ~0.65 ms whatever the rows
#: (4.5 s of a report's 53 s of workers' CPU at 10,000 ranks of a few dozen events).
NULLS_AS_ONE_ROWS = 256


def _nulls_as_one(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with each column that has no value (a CPU-only trace's streams, kernel shapes
    and collectives' sizes; a trace's kernels with no registers or occupancy) held as one
    null, not a null per row: 19 such columns were 50 of the 76 MB of a 100 MB CPU rank's
    events, in each worker; 0.5 GB of the 10 GB rank's kernels. A frame of fewer than
    NULLS_AS_ONE_ROWS rows is left as it is: it would save nothing that counts."""
    if df.height < NULLS_AS_ONE_ROWS:
        return df
    empty = [
        c for c, n in zip(df.columns, df.null_count().row(0), strict=True) if n and n == df.height
    ]
    return df.with_columns(pl.lit(None, df.schema[c]).alias(c) for c in empty) if empty else df


def read_distinct(entry: Path, name: str, values: list[pl.Expr]) -> pl.DataFrame:
    """The distinct rows of `values` over one frame, read a piece at a time (a 10 GB rank's
    threads and streams from a few of its columns; the memory held is one piece's columns
    and the distinct rows). Errors as `read_frame`."""
    wanted = list(dict.fromkeys(n for v in values for n in v.meta.root_names()))
    first = _first_piece(entry, name, wanted)
    if first is None:
        return pl.DataFrame(schema=FRAME_SCHEMAS[name]).select(values).clear()
    seen = [first.select(values).unique()]
    del first
    for part in _more_parts(entry, name, wanted):  # one at a time
        seen.append(part.select(values).unique())
        del part
    return pl.concat(seen).unique(maintain_order=True)


def _first_piece(entry: Path, name: str, columns: list[str] | None) -> pl.DataFrame | None:
    """A frame's first (or only) piece, only `columns` when given; None for a frame the entry
    never had (it is empty); DamagedEntry when its file is missing or damaged."""
    path = entry / f"{name}.parquet"
    try:
        return read_checked(path, columns)
    except FileNotFoundError:
        meta = _read_meta(entry)
        if meta is not None and f"{name}.parquet" not in meta.get(FILES_KEY, {}):
            return None
        raise DamagedEntry(f"{path.name} is missing") from None


def _more_parts(entry: Path, name: str, columns: list[str] | None) -> Iterator[pl.DataFrame]:
    """A frame's pieces after the first, as many as the entry lists (FILES_KEY)."""
    meta = _read_meta(entry)
    files = meta.get(FILES_KEY, {}) if meta is not None else {}
    k = 1
    while (file := part_name(name, k)) in files:
        try:
            yield read_checked(entry / file, columns)
        except FileNotFoundError:
            raise DamagedEntry(f"{file} is missing") from None
        k += 1


def _read_meta(entry: Path) -> dict[str, Any] | None:
    try:
        meta = orjson.loads((entry / META_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return meta if isinstance(meta, dict) else None
