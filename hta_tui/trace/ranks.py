"""Which rank each file is, and which files of a rank are its spans.

A file's rank is `distributedInfo.rank`, else a number in its name (`rank3`, `worker3`), else
the rank of the other files of its worker (`tensorboard_trace_handler` names files
`{worker}.{timestamp}.pt.trace.json`, `worker` = `{hostname}_{pid}` by default), else the next
free number, shared by the files one process wrote under one worker name (or under names that
say nothing). Two files of one worker are two spans of one rank, never two ranks.

The spans of a rank come from one process (host, pid and profiler base time, as the files say
them): a loaded file of another process that says the same rank (a stray copy, another job's
file) is a conflict. The rank shows the process with the most spans (then events) unless the
user picked a file; its newest span by the timestamp in the name (else the file's mtime).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hta_tui.trace.model import FileEntry


@dataclass(frozen=True)
class Process:
    """Who wrote a file, as it says: host name, the pid of its CPU events, the profiler's
    base time (`baseTimeNanoseconds`, fixed for a process). None where the file is silent."""

    host: str | None = None
    pid: int | None = None
    base_ns: int | None = None

    def agrees(self, other: Process) -> bool:
        """The same pid (a file without one is of no known process: only such files agree with
        it), and every other fact both files state the same."""
        pairs = ((self.host, other.host), (self.base_ns, other.base_ns))
        return self.pid == other.pid and all(a is None or b is None or a == b for a, b in pairs)

    @property
    def known(self) -> bool:
        return self.pid is not None

    def text(self) -> str:
        """`pid 6811@vm`, as short as the file allows (a one-line reason must fit 80 columns)."""
        if self.pid is None:
            return "an unknown process" + (f" on {self.host}" if self.host else "")
        return f"pid {self.pid}" + (f"@{self.host}" if self.host else "")


@dataclass(frozen=True)
class SpanInfo:
    """Which file a rank's numbers cover (`TraceSet.span_of`): the file, its worker and
    timestamp as the name gives them, its place among the rank's loaded spans (1 = oldest),
    the process, and the files of other processes that say the same rank."""

    rank: int
    path: Path
    worker: str | None
    timestamp: str | None
    index: int
    count: int
    process: Process
    conflicts: tuple[Path, ...] = ()

    def as_json(self, root: Path | None = None) -> dict[str, object]:
        def rel(p: Path) -> str:
            if root is not None and p.is_relative_to(root):
                return p.relative_to(root).as_posix()
            return str(p)

        return {
            "rank": self.rank,
            "file": rel(self.path),
            "worker": self.worker,
            "timestamp": self.timestamp,
            "span": self.index,
            "spans": self.count,
            "pid": self.process.pid,
            "host": self.process.host,
            "conflicts": [rel(p) for p in self.conflicts],
        }


@dataclass
class RankGroup:
    """One rank: its spans (the shown process's files, newest first, with the rank's files
    that did not load), the file shown, and the conflicting files."""

    spans: list[FileEntry] = field(default_factory=list)
    conflicts: list[FileEntry] = field(default_factory=list)
    shown: FileEntry | None = None


def process_of(entry: FileEntry) -> Process:
    meta = entry.meta
    return Process(meta.get("host_name"), meta.get("process_pid"), meta.get("base_time_ns"))


def _newest_first(entry: FileEntry) -> tuple[int, str]:
    return (-entry.file.order_ns, str(entry.path))


#: How a file states its own rank, needing no other file (`own_rank`).
STATED = frozenset({"distributedInfo", "file name"})


def own_rank(entry: FileEntry) -> tuple[int | None, str]:
    """The rank a file states itself (distributedInfo, else its name) and where from."""
    rank = entry.meta.get("rank_in_file")
    if rank is not None:
        return rank, "distributedInfo"
    if entry.file.rank_hint is not None:
        return entry.file.rank_hint, "file name"
    return None, ""


def _own_ranks(entries: list[FileEntry]) -> None:
    """The rank each file states (distributedInfo, else its name), and its worker's."""
    silent = []
    for entry in entries:
        entry.rank, entry.rank_source = own_rank(entry)
        if entry.rank is None and entry.file.worker is not None:
            silent.append(entry)
    if not silent:
        return
    by_worker: dict[str, set[int]] = {}
    for entry in entries:
        if entry.rank is not None and entry.file.worker is not None:
            by_worker.setdefault(entry.file.worker, set()).add(entry.rank)
    for entry in silent:
        ranks = by_worker.get(entry.file.worker or "", set())
        if len(ranks) == 1:  # a worker whose files disagree lends none
            entry.rank, entry.rank_source = next(iter(ranks)), "worker name"


def _number_the_rest(entries: list[FileEntry]) -> None:
    """The next free number, in path order, per process: files of one worker, or whose names
    say nothing, that one process wrote share it; nothing in such files says a rank, so
    another process is another rank, not a conflict. Stable as files come and go. A number is
    given once a file is known to be a trace; a worker's files still loading (or broken) then
    share its number when it has one."""
    taken = {e.rank for e in entries if e.rank is not None}
    numbers: dict[object, list[tuple[Process, int]]] = {}
    nxt = 0
    for entry in entries:
        if entry.rank is not None or entry.status != "loaded":
            continue
        proc = process_of(entry)
        known = numbers.setdefault(_unranked_key(entry, proc), [])
        number = next((n for p, n in known if p.agrees(proc)), None)
        if number is None:
            while nxt in taken:
                nxt += 1
            number = nxt
            known.append((proc, number))
            taken.add(number)
        entry.rank, entry.rank_source = number, "order"
    for entry in entries:
        if entry.rank is None and entry.file.worker is not None:
            known = numbers.get(entry.file.worker, [])
            if len({n for _, n in known}) == 1:
                entry.rank, entry.rank_source = known[0][1], "order"


def _unranked_key(entry: FileEntry, proc: Process) -> object:
    """Files without a rank share one within their worker, else within their process (a file
    that names neither is alone)."""
    if entry.file.worker is not None:
        return entry.file.worker
    return ("process",) if proc.known else ("file", entry.path)


def group(members: list[FileEntry], chosen: Path | None) -> RankGroup:
    """One rank's group from its files in path order (their conflicts set): what `assign`
    makes of each rank, for a set that changed only that rank's files."""
    for entry in members:
        entry.conflict = ""
    return _group(members, chosen)


def _group(members: list[FileEntry], chosen: Path | None) -> RankGroup:
    """One rank's files split by process; the shown process's files are its spans."""
    if len(members) == 1:  # most ranks: nothing to split (and this runs on every change)
        only = members[0]
        return RankGroup(spans=[only], shown=only if only.data is not None else None)
    loaded = sorted((e for e in members if e.data is not None), key=_newest_first)
    others = [e for e in members if e.data is None]
    processes: list[tuple[Process, list[FileEntry]]] = []
    for entry in loaded:
        proc = process_of(entry)
        home = next((files for p, files in processes if p.agrees(proc)), None)
        if home is None:
            processes.append((proc, [entry]))
        else:
            home.append(entry)
    shown_files: list[FileEntry] = []
    if processes:
        picked = [files for _, files in processes if any(e.path == chosen for e in files)]
        shown_files = (
            picked[0]
            if picked
            else max(
                (files for _, files in processes),
                key=lambda files: (len(files), sum(e.meta.get("n_events") or 0 for e in files)),
            )
        )
    group = RankGroup(spans=sorted(shown_files + others, key=_newest_first))
    group.shown = next((e for e in shown_files if e.path == chosen), None) or next(
        iter(shown_files), None
    )
    shown_proc = process_of(group.shown) if group.shown is not None else Process()
    shown_ids = {id(e) for e in shown_files}
    for entry in loaded:
        if id(entry) not in shown_ids:
            group.conflicts.append(entry)
            entry.conflict = (
                f"conflict: {process_of(entry).text()} says rank {entry.rank}; "
                f"shown: {shown_proc.text()}"
            )
    return group


def _path_text(entry: FileEntry) -> str:
    return str(entry.path)


def assign(entries: Iterable[FileEntry], chosen: dict[int, Path]) -> dict[int, RankGroup]:
    """Set every entry's rank (and conflict), and return each rank's group."""
    ordered = sorted(entries, key=_path_text)
    _own_ranks(ordered)
    _number_the_rest(ordered)
    members: dict[int, list[FileEntry]] = {}
    for entry in ordered:
        entry.conflict = ""
        if entry.rank is not None:
            members.setdefault(entry.rank, []).append(entry)
    return {rank: _group(files, chosen.get(rank)) for rank, files in sorted(members.items())}
