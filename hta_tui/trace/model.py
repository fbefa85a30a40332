"""The loaded trace set: every file's status, the rank and span each one is, and its frames.

One owner of state (the app or a script) applies `LoadResult`s as they land; everything else
asks it for frames. Frames are read from the cache entry on first use and kept, so screens that
never look at flows never read them.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from hta_tui.trace.cache import (
    FILES_KEY,
    never_had,
    note,
    part_name,
    read_at_once,
    read_distinct,
    read_frame,
    read_rows,
    reparse,
)
from hta_tui.trace.checked import DamagedEntry, read_checked, read_checked_rows, write_checked
from hta_tui.trace.discover import TraceFile
from hta_tui.trace.load import LoadResult
from hta_tui.trace.parse import TraceFileError
from hta_tui.trace.ranks import STATED, RankGroup, SpanInfo, assign, own_rank, process_of
from hta_tui.trace.ranks import group as group_of
from hta_tui.trace.schema import FRAME_SCHEMAS


def _write_atomic(df: pl.DataFrame, path: Path) -> None:
    """Best effort: a read-only or vanished cache only costs a recomputation next time."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_checked(df, tmp)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()  # a full disk keeps no half file


#: Events above which a rank's narrow reads (`RankData.columns`) read only their columns
#: from the entry rather than the whole frame (a file parsed in pieces has 2 M per GB).
NARROW_EVENTS = 4_000_000

#: At most this many events over the ranks, and this many ranks, are read ahead of the first
#: view (`TraceSet.read_ahead`): 8 real ranks of 100 MB hold 1.8 M events (~0.6 GB of frames,
#: 0.5-0.8 s of CPU to read); a thousand small ranks are left to the views that ask.
READ_AHEAD_EVENTS = 4_000_000
READ_AHEAD_RANKS = 64

#: The rows a narrow read keeps of a large rank: all (None), an expression, or one made
#: from the rank's metadata (its time bounds, its events).
Rows = pl.Expr | Callable[[dict[str, Any]], pl.Expr | None] | None

STATUSES = ("pending", "loading", "loaded", "incomplete", "not_trace", "error")


@dataclass
class RankData:
    """Frames of one loaded file, read lazily from its cache entry."""

    entry: Path
    meta: dict[str, Any]
    _frames: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)
    _memos: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def memo(self, key: str, compute: Callable[[], pl.DataFrame]) -> pl.DataFrame:
        """A small derived table kept beside the frames in the cache entry, so the next open
        (or the app, after a worker computed it) reads it instead of recomputing.

        `key` must name everything the result depends on besides this file's content
        (analysis version, options); the entry itself is already keyed by the file.
        """
        with self._lock:
            hit = self._memos.get(key)
            if hit is not None:
                return hit
            path = self.memo_path(key)  # (a held one asks no path: 10,000 files' rows)
            try:
                df = read_checked(path)
            except (OSError, DamagedEntry):  # missing or damaged: computed again
                df = None
        if df is None:
            df = compute()
            _write_atomic(df, path)
        with self._lock:
            self._memos[key] = df
        return df

    def hold_memo(self, key: str, df: pl.DataFrame) -> None:
        """`memo(key)`'s table, known already (read with other files' at once): held, as
        if read from the entry; a memo held before stays."""
        with self._lock:
            self._memos.setdefault(key, df)

    def memo_path(self, key: str) -> Path:
        """Where `memo(key, ...)` is kept in the entry."""
        return self.entry / "derived" / f"{key}.parquet"

    def holds_memo(self, key: str) -> bool:
        """Is `memo(key, ...)` held here (computed, or read from the entry already)?"""
        with self._lock:
            return key in self._memos

    def has_memo(self, key: str) -> bool:
        """Is `memo(key, ...)` at hand (held, or kept in the entry) without computing it?"""
        return self.holds_memo(key) or self.memo_path(key).is_file()

    def memos(self) -> dict[str, pl.DataFrame]:
        """The derived tables computed or read so far (a parser worker hands them back)."""
        with self._lock:
            return dict(self._memos)

    def held(self, name: str = "events") -> pl.DataFrame | None:
        """The frame when this process has read it already, else None (nothing read)."""
        with self._lock:
            return self._frames.get(name)

    def frame(self, name: str = "events") -> pl.DataFrame:
        """A damaged cache entry (found when a frame is read) is parsed again; a trace that
        cannot be parsed any more gives empty frames. Either way a notice says so."""
        with self._lock:
            df = self._frames.get(name)
            if df is None and never_had(self.meta, name):  # its file not even opened
                df = self._frames[name] = pl.DataFrame(schema=FRAME_SCHEMAS[name])
            if df is None:
                try:
                    df = read_frame(self.entry, name)
                except (DamagedEntry, OSError) as exc:
                    self._frames.update(self._parse_again(str(exc)))
                    df = self._frames.get(name)
                    if df is None:
                        df = pl.DataFrame(schema=FRAME_SCHEMAS[name])
                self._frames[name] = df
            return df

    def _parse_again(self, problem: str) -> dict[str, pl.DataFrame]:
        trace = self.meta.get("path", "")
        try:
            return reparse(self.entry, trace, problem)
        except (TraceFileError, OSError, ValueError) as exc:
            note(f"{Path(trace).name}: cannot be parsed again ({exc}); its frames are empty")
            return {}

    def _one_piece_rows(self, name: str) -> int | None:
        """The rows of frame `name` when its entry holds it in one file, not read yet: the
        events' count in the meta (None otherwise: read alone, `frame`)."""
        files = self.meta.get(FILES_KEY)
        rows = self.meta.get("n_events")
        if name != "events" or not isinstance(files, dict) or type(rows) is not int:
            return None
        if part_name(name, 0) not in files or part_name(name, 1) in files:
            return None
        with self._lock:
            return None if name in self._frames else rows

    @property
    def events(self) -> pl.DataFrame:
        return self.frame("events")

    def large(self) -> bool:
        """Whether the rank is too large to hold its whole events frame (`columns`)."""
        return "events" not in self._frames and self.meta.get("n_events", 0) > NARROW_EVENTS

    def columns(self, names: Sequence[str], where: pl.Expr | None = None) -> pl.DataFrame:
        """The events frame's `names` columns only. A rank of more than NARROW_EVENTS events
        whose frame is not held reads just those from its entry (a 10 GB rank's whole events
        need more memory than the machine has; the overview's summaries need a fifth of
        them), and only the rows `where` keeps (read a piece at a time), kept for the next
        caller asking the same; any other selects from `events`, every row (`where` only
        saves memory: the caller's numbers must not depend on it)."""
        if not self.large():
            return self.events.select(names)
        key = "events:" + ",".join(names) + ("" if where is None else f" where {where}")

        def read() -> pl.DataFrame:
            if where is None:
                return read_frame(self.entry, "events", list(names))
            return read_rows(self.entry, "events", list(names), where)

        # the last one only: four views' columns would be most of it
        return self._read_kept(key, read, lambda: self.events.select(names), evict="events:")

    def distinct(self, values: Sequence[pl.Expr]) -> pl.DataFrame:
        """The distinct rows of `values` over every event (a large rank's read a piece at a
        time, kept): the timeline of a rank drawn only in part lists every thread and stream
        of it, not only those with events in the part read."""
        whole = lambda: self.events.select(values).unique(maintain_order=True)  # noqa: E731
        if not self.large():
            return whole()
        key = "distinct:" + ",".join(map(str, values))
        return self._read_kept(
            key, lambda: read_distinct(self.entry, "events", list(values)), whole
        )

    def _read_kept(
        self,
        key: str,
        read: Callable[[], pl.DataFrame],
        whole: Callable[[], pl.DataFrame],
        evict: str = "",
    ) -> pl.DataFrame:
        """A narrow read of a large rank's entry, kept under `key` (and, with `evict`, the
        only one kept of the keys starting so); a damaged entry gives `whole()` instead:
        the rank parsed again, with its notice."""
        with self._lock:
            df = self._frames.get(key)
        if df is not None:
            return df
        try:
            df = read()
        except (DamagedEntry, OSError):
            return whole()
        with self._lock:
            if evict:
                for other in [k for k in self._frames if k.startswith(evict)]:
                    del self._frames[other]
            self._frames[key] = df
        return df


def read_events_at_once(datas: Sequence[RankData]) -> None:
    """The events of these ranks (a batch of small ones) read in one query and held, each
    as `RankData.frame` reads it (`cache.read_at_once`: ~0.2 ms of CPU a tiny rank less);
    a rank whose frame is held already, in pieces, or not read at once is left to read
    its own when used."""
    wanted = [(d, rows) for d in datas if (rows := d._one_piece_rows("events")) is not None]
    if len(wanted) < 2:
        return
    read = read_at_once([d.entry for d, _ in wanted], "events", [rows for _, rows in wanted])
    for (data, _), df in zip(wanted, read, strict=True):
        if df is not None:
            with data._lock:
                data._frames.setdefault("events", df)


def hold_kept_memos(datas: Sequence[RankData], key: str) -> None:
    """Each file's kept `memo(key, ...)` of a row (the overview's summaries) read with the
    others' in one query and held (`read_checked_rows`), not one query a file; a file whose
    memo is held already is not read, one missing or damaged is left to `memo`."""
    todo = [d for d in datas if not d.holds_memo(key)]
    for data, row in zip(todo, read_checked_rows([d.memo_path(key) for d in todo]), strict=True):
        if row is not None:
            data.hold_memo(key, row)


@dataclass
class FileEntry:
    """One file of the set as the user sees it in the overview.

    Its rank, the rank's source and its conflict belong to the set's rank index, which a
    change only marks stale: read here, they bring the index of the set that holds the entry
    (`owner`) up to date first, so no caller (a screen, a worker's snapshot) reads the rank
    of before a change."""

    file: TraceFile
    status: str = "pending"
    error: str | None = None
    data: RankData | None = None
    seconds: float = 0.0
    cached: bool = False
    #: the set whose index assigns the fields below (None: a detached entry)
    owner: TraceSet | None = field(default=None, repr=False, compare=False)
    _rank: int | None = None
    _rank_source: str = ""  # distributedInfo, file name, worker name, order
    #: why this loaded file is not one of its rank's spans: another process says that rank
    _conflict: str = ""

    def _current(self) -> None:
        if self.owner is not None:
            self.owner._index()  # at once when current (and while it is being assigned)

    @property
    def rank(self) -> int | None:
        self._current()
        return self._rank

    @rank.setter
    def rank(self, value: int | None) -> None:
        self._rank = value

    @property
    def rank_source(self) -> str:
        """distributedInfo, file name, worker name or order."""
        self._current()
        return self._rank_source

    @rank_source.setter
    def rank_source(self, value: str) -> None:
        self._rank_source = value

    @property
    def conflict(self) -> str:
        self._current()
        return self._conflict

    @conflict.setter
    def conflict(self, value: str) -> None:
        self._conflict = value

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def meta(self) -> dict[str, Any]:
        return self.data.meta if self.data is not None else {}


class TraceSet:
    """Files of one folder (or one file) grouped into ranks and spans.

    Not thread-safe by design: one owner mutates it (the app's main thread, a script); workers
    get the frames they need and never touch the set.

    Cheap at thousands of files: a change only marks the ranks stale (and bumps the
    generation); the rank index (rank -> its files, `ranks.assign`) is brought up to date when
    something next asks: when every file states its rank (distributedInfo, its name), only the
    ranks the changed files left or joined are grouped again, else every file is assigned
    once. What the set answers about all ranks (`ranks`, `loaded`, `origin_ns`, `counts`,
    `step_names`) is kept until the next change. Loading N files and asking after each one is
    then linear in the files, not N times a sort of every file.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        #: every file by path (changed only through the methods below)
        self.entries: dict[Path, FileEntry] = {}
        self._chosen_span: dict[int, Path] = {}
        self._ranks: dict[int, RankGroup] = {}
        self._stale = False  # entries changed since the ranks were last assigned
        #: the files changed since, when only they need a new rank (None: every file does);
        #: however many they are: 1,000 files landing at once among 10,000 cost their own
        #: ranks' grouping, not a sort and assignment of all 10,000 (0.16 s on a UI thread)
        self._dirty: set[Path] | None = set()
        #: the index by rank and by file, kept for changing it file by file (`_update`)
        self._members: dict[int, dict[Path, FileEntry]] = {}
        self._rank_of: dict[Path, int] = {}
        #: every file states its own rank (none yet: so do they all): a change of one file
        #: changes its ranks alone
        self._stated = True
        self._memo: dict[str, Any] = {}  # answers about every rank, for this generation
        #: a snapshot's index as its owner had it (groups, and what makes owner entry id ->
        #: copy, in the snapshot's reader)
        self._carried: tuple[dict[int, RankGroup], Callable[[], dict[int, FileEntry]]] | None = None
        #: detached copies of the entries for snapshots (`snapshot`), each made once with its
        #: rank current and shared by every snapshot until its file or its rank's group
        #: changes (`_stale_twins`: the paths to copy again; None: every one)
        self._twins: dict[Path, FileEntry] = {}
        self._stale_twins: set[Path] | None = None
        #: files came or went since the copies were last made: their order is made again
        #: (else `_twins` holds the paths of `entries` in its order: copied as one dict)
        self._files_moved = True
        #: a snapshot whose entries are shared copies: copied again before it changes
        self._shares_twins = False
        self.generation = 0  # bumps on every change; lets consumers drop stale results

    def files(self) -> dict[Path, FileEntry]:
        """Every file by path with its rank and conflict up to date (as `entries`: an entry's
        rank brings the index up to date when read)."""
        self._index()
        return self.entries

    # -- mutation ----------------------------------------------------------------------------
    def add_pending(self, tf: TraceFile) -> FileEntry:
        self.add_pending_many([tf])
        return self.entries[tf.path]

    def add_pending_many(self, files: list[TraceFile]) -> None:
        """Files about to load (new, or a new version of a known one); ranks are reassigned
        once for the whole batch, so listing 1,000 files stays linear."""
        fresh = []
        for tf in files:
            entry = self.entries.get(tf.path)
            if entry is None or entry.file.key != tf.key:
                if entry is not None:
                    entry.owner = None  # an older version: keeps the rank it had
                else:
                    self._files_moved = True
                self.entries[tf.path] = FileEntry(tf, owner=self)
                fresh.append(tf.path)
        self._changed(fresh)

    def snapshot(self) -> TraceSet:
        """A copy a worker can read while the owner keeps changing this one: entries are
        copied, the frames (read-only, lock-guarded) are shared. A current rank index is
        carried over, translated to the copies when the copy is first asked (in the worker
        that reads it); a stale one is left for the copy to rebuild there.

        When the index can be brought up to date file by file (`_update`), the copies are
        detached ones kept from the last snapshot, made again only for the files changed
        since: a snapshot per overview and per view while 10,000 files land cost 10,000
        copies each (10-80 ms of the owner's thread, and young collections of them)."""
        if not self._stale or self._updatable():
            self._index()  # file by file: the changed files' ranks only
            return self._shared_snapshot()
        snap = TraceSet(self.root)
        copies: dict[int, FileEntry] = {}
        entries: dict[Path, FileEntry] = {}
        for path, entry in self.entries.items():
            # its ranks, when stale, are the copy's to assign
            copies[id(entry)] = entries[path] = _detached(entry, owner=snap)
        snap.entries = entries
        snap._chosen_span = dict(self._chosen_span)
        snap.generation = self.generation
        if self._stale:  # assigned in full in the copy, when first asked there
            snap._stale, snap._dirty = True, None
        else:  # the owner's groups are never changed, only replaced: safe to read later
            snap._carried = (dict(self._ranks), lambda: copies)
        return snap

    def update_ranks(self) -> None:
        """Bring the rank index up to date now when that goes file by file (`_update`): an
        owner that applies files in turns (the app's UI thread) pays each turn's files then,
        not every turn's at once when something next asks (5,000 files: 0.17 s). An index
        that needs every file assigned again is left for whoever asks (a snapshot assigns
        in its worker)."""
        if self._stale and self._updatable():
            self._index()

    def _updatable(self) -> bool:
        """The stale index can be brought up to date file by file (`_update`)."""
        if not self._stated or self._dirty is None:
            return False
        changed = (self.entries.get(path) for path in self._dirty)
        return all(e is None or own_rank(e)[0] is not None for e in changed)

    def _shared_snapshot(self) -> TraceSet:
        """A snapshot of a current index whose entries are the kept detached copies."""
        stale = self._stale_twins
        if stale is None or self._files_moved:  # in the order of `entries`, kept copies
            old = self._twins
            self._twins = {
                path: _detached(entry)
                if stale is None or path in stale or path not in old
                else old[path]
                for path, entry in self.entries.items()
            }
            self._files_moved = False
        else:  # the same files in the same order: each changed one copied in its place
            for path in stale:
                self._twins[path] = _detached(self.entries[path])
        self._stale_twins = set()
        snap = TraceSet(self.root)
        snap.entries = dict(self._twins)  # one C copy: no path hashed
        snap._shares_twins = True
        snap._chosen_span = dict(self._chosen_span)
        snap.generation = self.generation
        owner = dict(self.entries)
        copies = snap.entries

        def pairs() -> dict[int, FileEntry]:  # in the snapshot's reader: the index's entries
            return {id(entry): copies[path] for path, entry in owner.items()}

        snap._carried = (dict(self._ranks), pairs)
        return snap

    def _translate(self) -> None:
        """The index a snapshot carried over, made of its own copies of the entries."""
        if self._carried is None:
            return
        groups, pairs = self._carried
        self._carried = None
        copies = pairs()
        self._ranks = {
            rank: RankGroup(
                spans=[copies[id(e)] for e in group.spans],
                conflicts=[copies[id(e)] for e in group.conflicts],
                shown=copies[id(group.shown)] if group.shown is not None else None,
            )
            for rank, group in groups.items()
        }

    def apply(self, result: LoadResult) -> FileEntry:
        entry = self._apply_one(result)
        self._changed([entry.path])
        return entry

    def apply_many(self, results: list[LoadResult]) -> None:
        """Several results at once, ranks reassigned once for the batch: a session applies
        whatever landed since its last turn together (one generation, not one per file)."""
        paths = [self._apply_one(result).path for result in results]
        if paths:
            self._changed(paths)

    def _unshare(self) -> bool:
        """A snapshot about to change (tests do): its entries made its own first, as the
        copies it shares with other snapshots never change. Whether it had to."""
        if not self._shares_twins:
            return False
        self._index()
        self._shares_twins = False
        self.entries = {path: _detached(twin, owner=self) for path, twin in self.entries.items()}
        self._dirty = None
        return True

    def _apply_one(self, result: LoadResult) -> FileEntry:
        self._unshare()
        entry = self.entries.get(result.file.path)
        if entry is None or entry.file.key != result.file.key:
            if entry is not None:
                entry.owner = None  # an older version: keeps the rank it had
            else:
                self._files_moved = True
            entry = FileEntry(result.file, owner=self)
            self.entries[result.file.path] = entry
        entry.status = result.status
        entry.error = result.error
        entry.seconds = result.seconds
        entry.cached = result.cached
        entry.data = None
        if result.ok and result.entry:  # frames kept in memory when the cache took none
            entry.data = RankData(
                result.entry,
                result.meta,
                _frames=dict(result.frames or {}),
                _memos=dict(result.memos or {}),  # what the parser worker computed
            )
        return entry

    def remove(self, path: Path) -> None:
        entry = self.entries.pop(path, None)
        if entry is not None:
            self._files_moved = True
            entry.owner = None  # keeps the rank it had
            self._changed([path])

    def select_span(self, rank: int, path: Path) -> None:
        """Show `path` for `rank`: an older span, or a conflicting file (its process's spans
        become the rank's)."""
        self._chosen_span[rank] = path
        self._changed()

    def _changed(self, paths: list[Path] | None = None) -> None:
        """Bump the generation; the ranks of `paths` (of every file when None) are assigned
        again when next asked."""
        if self._unshare():
            paths = None  # assigned in full, over its own copies
        self.generation += 1
        self._stale = True
        self._memo.clear()
        if paths is None or self._dirty is None:
            self._dirty = None
        else:
            self._dirty.update(paths)

    # -- ranks and spans ---------------------------------------------------------------------
    def _index(self) -> dict[int, RankGroup]:
        """Each file's rank, then each rank's spans (files of one process) and conflicts (files
        of another process that say the same rank); see `ranks.assign`. Rebuilt only after a
        change."""
        if self._carried is not None:
            self._translate()
        if self._stale:
            self._stale = False
            dirty, self._dirty = self._dirty, set()
            if dirty is None or not self._update(dirty):
                self._ranks = assign(self.entries.values(), self._chosen_span)
                self._reindex()
                self._stale_twins = None
        return self._ranks

    def _reindex(self) -> None:
        """The index by rank and by file, after a full assignment."""
        self._members = {}
        self._rank_of = {}
        self._stated = True
        for path, entry in self.entries.items():
            self._stated = self._stated and entry.rank_source in STATED
            if entry.rank is not None:
                self._members.setdefault(entry.rank, {})[path] = entry
                self._rank_of[path] = entry.rank

    def _update(self, dirty: set[Path]) -> bool:
        """Assign the ranks of the changed files alone, and group again only the ranks they
        left or joined: possible when every file states its own rank (no file borrows its
        worker's rank or takes the next free number, which depend on other files). False
        when the whole set must be assigned."""
        if not self._stated:
            return False
        moves: list[tuple[Path, FileEntry | None, int | None]] = []
        for path in dirty:
            entry = self.entries.get(path)
            rank, source = own_rank(entry) if entry is not None else (None, "")
            if entry is not None and rank is None:
                return False  # a file that says no rank: its rank depends on the others
            if entry is not None:
                entry.rank, entry.rank_source = rank, source
            moves.append((path, entry, rank))
        touched: set[int] = set()
        for path, entry, rank in moves:
            old = self._rank_of.pop(path, None)
            if old is not None:
                self._members[old].pop(path, None)
                touched.add(old)
            if entry is not None and rank is not None:
                self._members.setdefault(rank, {})[path] = entry
                self._rank_of[path] = rank
                touched.add(rank)
        if self._stale_twins is not None:
            self._stale_twins.update(dirty)
        for rank in touched:
            members = self._members.get(rank)
            if not members:
                self._members.pop(rank, None)
                self._ranks.pop(rank, None)
                continue
            if self._stale_twins is not None:  # their conflicts and spans are made again
                self._stale_twins.update(members)
            ordered = sorted(members.values(), key=lambda e: str(e.path))
            self._ranks[rank] = group_of(ordered, self._chosen_span.get(rank))
        return True

    def _remember(self, key: str, compute: Callable[[], Any]) -> Any:
        """`compute()`'s answer, kept until the set next changes (`_changed` forgets it)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def spans(self, rank: int) -> list[FileEntry]:
        """Files of one rank written by the process it shows, newest first (a profiler
        schedule writes one per span), with its files that did not load."""
        group = self._index().get(rank)
        return list(group.spans) if group else []

    def conflicts(self, rank: int) -> list[FileEntry]:
        """Loaded files that say they are `rank` but come from another process than the one
        shown, newest first: the user picks (`select_span`)."""
        group = self._index().get(rank)
        return list(group.conflicts) if group else []

    def files_of(self, rank: int) -> int:
        """How many files say `rank` (its spans, its files that did not load, its conflicts),
        without copying them."""
        group = self._index().get(rank)
        return len(group.spans) + len(group.conflicts) if group else 0

    def ranks(self) -> list[int]:
        return list(self._remember("ranks", lambda: sorted(self._index())))

    def selected(self, rank: int) -> FileEntry | None:
        """The span shown for a rank: the user's choice, else the newest loaded one of the
        process with the most data."""
        group = self._index().get(rank)
        return group.shown if group else None

    def span_of(self, rank: int) -> SpanInfo | None:
        """Which file a rank's numbers cover, and what it says of itself: for front ends that
        print it (`report --json`'s files, titles)."""
        group = self._index().get(rank)
        if group is None or group.shown is None:
            return None
        shown = group.shown
        spans = [e for e in group.spans if e.data is not None]
        index = len(spans) - next(i for i, e in enumerate(spans) if e is shown)
        return SpanInfo(
            rank=rank,
            path=shown.path,
            worker=shown.file.worker,
            timestamp=shown.file.stamp,
            index=index,
            count=len(spans),
            process=process_of(shown),
            conflicts=tuple(e.path for e in group.conflicts),
        )

    def _loaded(self) -> dict[int, RankData]:
        out: dict[int, RankData] = {}
        for rank, group in sorted(self._index().items()):
            entry = group.shown
            if entry is not None and entry.data is not None:
                out[rank] = entry.data
        return out

    def loaded(self) -> dict[int, RankData]:
        """Rank -> frames of the selected span, for every rank with a loaded file (a copy:
        callers may change it)."""
        return dict(self._remember("loaded", self._loaded))

    def frames(self, name: str = "events") -> dict[int, pl.DataFrame]:
        return {rank: data.frame(name) for rank, data in self.loaded().items()}

    def reads_ahead(self) -> bool:
        """Whether `read_ahead` reads this set's frames (few ranks, few events)."""
        data = self.loaded()
        total = sum(d.meta.get("n_events") or 0 for d in data.values())
        return len(data) <= READ_AHEAD_RANKS and total <= READ_AHEAD_EVENTS

    def read_ahead(self, between: Callable[[], None] = lambda: None) -> int:
        """Read every rank's frames now, so the first view visited finds them held (`frames`
        then returns these very frames: the views' per-frame caches see one frame per
        rank; the events are what every view reads, the others are small, ~5% of them,
        and the timeline and memory views read them). Only when the views would hold them
        all anyway and they are few (`READ_AHEAD_EVENTS`, `READ_AHEAD_RANKS`; so no rank too
        large to hold whole, which the views read narrow): nothing is held that a view
        would not hold. Last rank first, so a view reading its frames meanwhile (first rank
        first) shares the ranks out rather than waiting on each one. `between` runs before
        each rank (a checkpoint: it may wait, or raise to stop).
        Returns how many ranks' frames it read."""
        if not self.reads_ahead():
            return 0
        data = self.loaded()
        read = 0
        for rank in sorted(data, reverse=True):
            if any(data[rank].held(name) is None for name in FRAME_SCHEMAS):
                between()
                for name in FRAME_SCHEMAS:
                    data[rank].frame(name)
                read += 1
        return read

    def columns(
        self, names: Sequence[str], *, large_only: bool = False, where: Rows = None
    ) -> dict[int, pl.DataFrame]:
        """Rank -> its events' `names` columns (`RankData.columns`; a large rank's only the
        rows `where` keeps, or `where(meta)` of the rank's metadata); `large_only`: the
        whole events of every rank small enough to hold them."""
        out = {}
        for rank, data in self.loaded().items():
            if data.large() or not large_only:
                rows = where if where is None or isinstance(where, pl.Expr) else where(data.meta)
                out[rank] = data.columns(names, rows)
            else:
                out[rank] = data.events
        return out

    @property
    def origin_ns(self) -> int | None:
        """Common time origin: the earliest event of all selected spans (HTA's alignment)."""

        def compute() -> int | None:
            starts = [d.meta.get("min_ts") for d in self._remember("loaded", self._loaded).values()]
            starts = [s for s in starts if s is not None]
            return min(starts) if starts else None

        return self._remember("origin_ns", compute)

    def step_names(self) -> frozenset[str]:
        """Every ProfilerStep name of the selected spans (from the files' metadata): HTA's
        step filter asks whether there are two of them, once per change, not once per file."""

        def compute() -> frozenset[str]:
            names: set[str] = set()
            for data in self._remember("loaded", self._loaded).values():
                names.update(data.meta.get("step_names", ()))
            return frozenset(names)

        return self._remember("step_names", compute)

    def counts(self) -> dict[str, int]:
        def compute() -> dict[str, int]:
            out = dict.fromkeys(STATUSES, 0)
            for e in self.entries.values():
                out[e.status] = out.get(e.status, 0) + 1
            return out

        return dict(self._remember("counts", compute))


def _detached(entry: FileEntry, owner: TraceSet | None = None) -> FileEntry:
    """A copy of `entry` (no __init__: its fields as they are). No `owner`: its rank fields
    are read as they are (its set's index current); else that set assigns them."""
    twin = FileEntry.__new__(FileEntry)
    twin.__dict__.update(entry.__dict__)
    twin.owner = owner
    return twin


def open_set(
    root: str | Path,
    cache: Any = None,
    *,
    workers: int | None = None,
    after_parse: Any = None,
) -> TraceSet:
    """Discover and load everything under `root`, synchronously (report, scripts, tests)."""
    from hta_tui.trace.cache import Cache
    from hta_tui.trace.discover import discover
    from hta_tui.trace.load import load_files

    cache = cache if cache is not None else Cache()
    ts = TraceSet(root)
    files = discover(root)
    ts.add_pending_many(files)
    for result in load_files(files, cache, workers=workers, after_parse=after_parse):
        ts.apply(result)
    return ts
