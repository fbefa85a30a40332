"""Which files in a folder are traces, and which rank and span each one probably is.

Discovery only looks at names and stat(); the rank in `distributedInfo` (known after parsing)
wins over the name. Nothing here opens a file, so listing 1,000 ranks is instant.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

TRACE_SUFFIXES = (".json", ".json.gz")
#: Compressed files of other names are sniffed too, so e.g. a `memory_timeline.raw.gz` is
#: reported as "not a Kineto trace" instead of silently ignored.
OTHER_CANDIDATES = (".gz",)

_RANK_RE = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)
_SPAN_RE = re.compile(r"(\d{10,}(?:_\d+)?|[A-Z][a-z]{2}_\d{1,2}_\d{2}_\d{2}_\d{2}(?:\.\d+)?)")
#: `tensorboard_trace_handler`'s `{worker}.{timestamp}.pt.trace.json[.gz]`: the timestamp is
#: time.time_ns() (PyTorch >= 2.0) or milliseconds (older); some tools write a date instead.
_HANDLER_RE = re.compile(
    r"^(?P<worker>.+?)\.(?P<stamp>\d{10,}|[A-Z][a-z]{2}_\d{1,2}_\d{2}_\d{2}_\d{2}(?:\.\d+)?)"
    r"(?:\.\d+)?\.pt\.trace\.json(?:\.gz)?$"
)


@dataclass(frozen=True)
class TraceFile:
    """A candidate file with what its name and stat say."""

    path: Path
    size: int
    mtime_ns: int
    rank_hint: int | None  # from the file name
    span_hint: str  # the part of the name telling spans of one worker apart
    #: the profiler handler's worker name (`{hostname}_{pid}` by default), when the name has one
    worker: str | None = None
    #: the name's timestamp as written (digits), and as ns since the epoch to order spans by
    stamp: str | None = None
    stamp_ns: int | None = None

    @property
    def order_ns(self) -> int:
        """When this span was written: the name's timestamp, else the file's mtime (both ns
        since the epoch, so a folder mixing the two still sorts)."""
        return self.stamp_ns if self.stamp_ns is not None else self.mtime_ns

    @property
    def key(self) -> tuple[str, int, int]:
        """Identity of this version of the file: a change gives a new key."""
        return (str(self.path), self.size, self.mtime_ns)


#: A rank from a file name must be below this, as one from `distributedInfo` must
#: (`rank99999999999999999999999.json` names no rank: no integer column holds it).
MAX_RANK = 2**31


def rank_from_name(name: str) -> int | None:
    """`rank-3`, `rank_3`, `rank3`, `worker3` anywhere in the name; None for a number no
    rank can be (the file then gets its rank as a file without one does)."""
    m = _RANK_RE.search(name)
    if m is None or len(m.group(1)) > 10:
        return None
    rank = int(m.group(1))
    return rank if rank < MAX_RANK else None


def span_from_name(name: str) -> str:
    """A profiler-schedule span label: the timestamp-like part of the name, else the name."""
    m = _SPAN_RE.search(name)
    return m.group(1) if m else name


def handler_name(name: str) -> tuple[str, str] | None:
    """(worker, timestamp) of a `{worker}.{timestamp}.pt.trace.json[.gz]` name, else None."""
    m = _HANDLER_RE.match(name)
    return (m.group("worker"), m.group("stamp")) if m else None


def stamp_ns(stamp: str) -> int | None:
    """A name's epoch timestamp in ns, whatever its unit (s, ms, us or ns by its digits); None
    for a date without a year, which cannot be placed against a file's mtime."""
    if not stamp.isdigit():
        return None
    digits = len(stamp)
    if digits > 19:
        return None
    scale = 10 ** (9 - 3 * min(3, max(0, (digits - 10 + 1) // 3)))
    return int(stamp) * scale


def is_candidate(path: Path) -> bool:
    name = path.name.lower()
    if name.startswith("."):
        return False  # editors' and rsync's temporary files
    return name.endswith(TRACE_SUFFIXES) or name.endswith(OTHER_CANDIDATES)


#: What a name in a trace folder can be besides a regular file: none of them is ever read (a
#: FIFO or a terminal never ends, /dev/zero is endless, a socket cannot be opened).
_SPECIAL = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def not_regular(mode: int) -> str | None:
    """Why a file of this `st_mode` is not read ("not a regular file (a FIFO)"), or None for
    a regular file. Symbolic links are judged by what they point to."""
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _SPECIAL if test(mode)), "special")
    return f"not a regular file ({kind})"


def describe(path: Path) -> TraceFile:
    """What stat() says of `path`; a symbolic link to nothing, or in a loop of links, is
    described by the link itself (so it is listed, and its load says why it is not a trace)."""
    try:
        st = path.stat()
    except OSError:  # a link to nothing, a loop of links
        st = path.lstat()  # raises when the link is gone too
    worker, stamp = handler_name(path.name) or (None, None)
    return TraceFile(
        path=path,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        rank_hint=rank_from_name(path.name),
        span_hint=span_from_name(path.name),
        worker=worker,
        stamp=stamp,
        stamp_ns=stamp_ns(stamp) if stamp else None,
    )


def discover(root: str | Path) -> list[TraceFile]:
    """Trace candidates under `root` (a folder, searched recursively, or one file), sorted."""
    root = Path(root)
    if root.is_file():
        return [describe(root)]
    found: list[TraceFile] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        # a link to a folder is not followed, but one named like a trace is listed (its
        # load says it is a folder) rather than silently left out
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for fn in sorted([*filenames, *links]):
            p = Path(dirpath) / fn
            if is_candidate(p):
                try:
                    found.append(describe(p))
                except OSError:
                    continue  # vanished between listing and stat
    return found
