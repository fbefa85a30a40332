"""Parquet files that carry their own length and CRC-32, so a reader knows it got exactly
what was written: the cache's frames and derived summaries (`trace/cache.py`).

A full disk, a quota or a writer killed on a network file system leaves a file short, empty or
full of garbage of the right length; Parquet's own footer does not see all of it (polars
checks no page checksums), and a damaged page can read as wrong numbers rather than an error.

Parquet, not Arrow IPC: zstd IPC writes a 100 MB rank's events a third faster (86 ms against
130) and reads them faster, but every analysis ran 5-12% slower on the frames read back from
it (measured on 8 x 100 MB, same frames, same process; the cause was not found).
"""

from __future__ import annotations

import contextlib
import io
import struct
from collections.abc import Sequence
from pathlib import Path

import polars as pl

#: Ends every file: the Parquet bytes' length and CRC-32, and a mark.
_TRAILER = struct.Struct("<QI4s")
_MARK = b"HTAc"

try:  # ISA-L's CRC-32 is 3x zlib's: 7 ms for a 100 MB trace's frames instead of 20
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - isal is a dependency; zlib where it cannot build
    from zlib import crc32


class DamagedEntry(Exception):
    """A file of a cache entry is not what was stored."""


def write_checked(df: pl.DataFrame, path: Path) -> int:
    """`df` as Parquet followed by its length and CRC-32 (`read_checked`); returns the file's
    size. Written in place: callers write into a private folder or file and rename it."""
    buf = io.BytesIO()
    # One row group: polars' default cut a 100 MB rank's events (229k rows) in two, read
    # back as two chunks per column, which every `to_numpy` and many kernels then copy or
    # walk chunk by chunk. ~4 ms more CPU at the write of such a rank, 2% smaller files;
    # files of more row groups (older caches) read as before.
    df.write_parquet(buf, compression="lz4", statistics=False, row_group_size=max(df.height, 1))
    data = buf.getbuffer()
    with path.open("wb") as f:
        f.write(data)
        f.write(_TRAILER.pack(len(data), crc32(data), _MARK))
    return len(data) + _TRAILER.size


def read_checked(path: Path, columns: list[str] | None = None) -> pl.DataFrame:
    """A file of `write_checked`; DamagedEntry when it is shorter, longer or other than what
    was written (OSError when it cannot be read at all)."""
    body = checked_body(path)
    try:
        return pl.read_parquet(body, columns=columns)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise DamagedEntry(f"{path.name} cannot be read ({type(exc).__name__})") from exc


def checked_body(path: Path) -> bytes:
    """The Parquet bytes of a file of `write_checked`, checked (errors as `read_checked`)."""
    data = path.read_bytes()
    if len(data) < _TRAILER.size:
        raise DamagedEntry(f"{path.name} is {len(data)} bytes")
    size, crc, mark = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
    body = data[: -_TRAILER.size]
    if mark != _MARK or size != len(body) or crc32(body) != crc:
        raise DamagedEntry(f"{path.name} does not match its checksum")
    return body


def read_checked_together(paths: Sequence[Path]) -> tuple[pl.DataFrame, list[int]] | None:
    """Files of `write_checked` read in one query (polars' setup of a read is ~0.3 ms, once
    for them all, not once a file): their rows one file after another (a chunk a file), and
    the places in `paths` of the files read; a file missing or damaged is left out (its
    reader reads it alone: `read_checked` says why). None when none is whole, or when they
    do not read as one table (their schemas differ)."""
    bodies: dict[int, bytes] = {}
    for i, path in enumerate(paths):
        with contextlib.suppress(OSError, DamagedEntry):
            bodies[i] = checked_body(path)
    if not bodies:
        return None
    try:
        return pl.read_parquet(list(bodies.values())), list(bodies)
    except (pl.exceptions.PolarsError, OSError, ValueError):
        return None


def read_checked_rows(paths: Sequence[Path]) -> list[pl.DataFrame | None]:
    """Files of `write_checked` of a row each (the overview's per-file summaries), read in
    one query (`read_checked_together`): each file's row, None for a file missing or damaged,
    all None when the files' rows do not make one table of a row each. Read one by one,
    10,000 files' query setup in polars cost ~0.3 ms each (3 s of a first report of 10,000
    tiny ranks); at once, ~0.05 ms."""
    out: list[pl.DataFrame | None] = [None] * len(paths)
    got = read_checked_together(paths)
    if got is None or got[0].height != len(got[1]):
        return out
    table = got[0].rechunk()  # (a chunk a file: each slice would look through them all)
    for row, i in enumerate(got[1]):
        out[i] = table.slice(row, 1)
    return out
