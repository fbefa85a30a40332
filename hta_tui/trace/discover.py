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


@dataclass(frozen=True)
class TraceFile:
    """A candidate file with what its name and stat say."""

    path: Path
    size: int
    mtime_ns: int
    rank_hint: int | None  # from the file name
    span_hint: str  # the part of the name telling spans of one worker apart

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
    return TraceFile(
        path=path,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        rank_hint=rank_from_name(path.name),
        span_hint=span_from_name(path.name),
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
