"""Named tables as one run of bytes (Arrow IPC each), the form per-rank results take on the
network and in the cache: self-describing, typed, and read back without the analysis code.
A CRC-32 at the end finds a damaged file (garbage of the right length included), which is
then made again, never misread."""

from __future__ import annotations

import errno
import io
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson
import polars as pl

#: The blob's first bytes: its layout's version, so an old file is a miss, never a misread.
MAGIC = b"HTAR2"


def pack(tables: dict[str, pl.DataFrame]) -> bytes:
    """A header (the names and byte lengths, JSON), each table's Arrow IPC stream, and the
    CRC-32 of everything before it."""
    bodies = []
    for df in tables.values():
        buf = io.BytesIO()
        df.write_ipc_stream(buf)
        bodies.append(buf.getvalue())
    head = orjson.dumps([[name, len(b)] for name, b in zip(tables, bodies, strict=True)])
    body = b"".join([MAGIC, struct.pack("<I", len(head)), head, *bodies])
    return body + struct.pack("<I", zlib.crc32(body))


def whole(blob: bytes) -> bool:
    """Is this a blob of this layout, every byte as written (its CRC-32)? Reading it then
    cannot fail, so a cache read checks this and unpacks once, when the tables are used."""
    if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 8:
        return False
    (crc,) = struct.unpack_from("<I", blob, len(blob) - 4)
    return zlib.crc32(memoryview(blob)[:-4]) == crc


def unpack(blob: bytes) -> dict[str, pl.DataFrame]:
    """`pack` undone; ValueError for bytes that are not a whole blob (a damaged file)."""
    if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 8:
        raise ValueError("not a table blob")
    (crc,) = struct.unpack_from("<I", blob, len(blob) - 4)
    blob = blob[:-4]
    if zlib.crc32(blob) != crc:
        raise ValueError("damaged table blob")
    at = len(MAGIC)
    (size,) = struct.unpack_from("<I", blob, at)
    at += 4
    try:
        head = orjson.loads(blob[at : at + size])
    except orjson.JSONDecodeError as exc:
        raise ValueError("damaged table blob") from exc
    at += size
    out = {}
    for name, length in head:
        if at + length > len(blob):
            raise ValueError("truncated table blob")
        out[name] = pl.read_ipc_stream(io.BytesIO(blob[at : at + length]))
        at += length
    if at != len(blob):
        raise ValueError("table blob has trailing bytes")
    return out


#: A kept text's first bytes (`pack_text`).
TEXT_MAGIC = b"HTAT1"


def pack_text(text: Iterable[bytes], of: bytes) -> Iterator[bytes]:
    """`text` (in pieces) made from the tables of the blob `of`, in pieces: its layout's
    version, the CRC-32 of `of` (its last 4 bytes), the text, and the CRC-32 of everything
    before it."""
    head = TEXT_MAGIC + of[-4:]
    crc = zlib.crc32(head)
    yield head
    for piece in text:
        crc = zlib.crc32(piece, crc)
        yield piece
    yield struct.pack("<I", crc)


#: The bytes around a kept text (`pack_text`): its head (the layout and its tables' CRC-32)
#: and its own CRC-32 at the end.
TEXT_HEAD = len(TEXT_MAGIC) + 4
TEXT_TAIL = 4


def unpack_text(kept: bytes, tail: bytes) -> memoryview | None:
    """The text `pack_text` kept (a view of `kept`), when whole and made from the blob whose
    last 4 bytes are `tail`; else None (made again)."""
    at = TEXT_HEAD
    if len(kept) < at + TEXT_TAIL or kept[:at] != TEXT_MAGIC + tail:
        return None
    (crc,) = struct.unpack_from("<I", kept, len(kept) - TEXT_TAIL)
    if zlib.crc32(memoryview(kept)[:-TEXT_TAIL]) != crc:
        return None
    return memoryview(kept)[at:-TEXT_TAIL]


@dataclass(frozen=True)
class TextFile:
    """A kept text left in its file, `length` bytes from `start` (UTF-8): a text a worker
    made in this very run (`fresh_text`), written to the output as it lies on disk, by the
    kernel (`send`), never read into this process (a report's kernel launches: 65 MB read,
    checked and written again were ~0.15 s of the client's CPU after the last rank)."""

    path: Path
    start: int
    length: int

    def read(self) -> bytes:
        with self.path.open("rb") as fh:
            fh.seek(self.start)
            return fh.read(self.length)

    def send(self, out: BinaryIO) -> None:
        """Its bytes appended to `out` (flushed first): by `os.sendfile` where the output
        takes it (Linux: a file, a pipe), else read and written (macOS's sendfile writes to
        sockets only; Windows has none)."""
        out.flush()
        try:
            fd = out.fileno()
        except (OSError, ValueError):  # (io.UnsupportedOperation: not a file)
            fd = -1
        if fd < 0 or not hasattr(os, "sendfile"):
            out.write(self.read())
            return
        with self.path.open("rb") as src:
            at, left = self.start, self.length
            while left:
                try:
                    sent = os.sendfile(fd, src.fileno(), at, left)
                except OSError as exc:
                    # (an output sendfile cannot write to, O_APPEND say: nothing sent yet)
                    if at != self.start or exc.errno not in _NO_SENDFILE:
                        raise
                    out.write(self.read())
                    return
                if not sent:  # (the file shrank under us: what it holds is not the text)
                    raise OSError(f"{self.path}: shorter than its text")
                at, left = at + sent, left - sent


_NO_SENDFILE = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSOCK}


def fresh_text(path: Path, tail: bytes, size: int) -> TextFile | None:
    """The text `pack_text` kept at `path` in this run, `size` bytes in all as its worker
    said, made from the blob whose last 4 bytes are `tail`: its head checked, not its CRC
    (the worker wrote every byte and renamed it whole a moment ago; a text kept by an
    earlier run is read and checked, `unpack_text`). None when it is not that file."""
    try:
        with path.open("rb") as fh:
            head = fh.read(TEXT_HEAD)
            if os.fstat(fh.fileno()).st_size != size:
                return None
    except OSError:
        return None
    if size < TEXT_HEAD + TEXT_TAIL or head != TEXT_MAGIC + tail:
        return None
    return TextFile(path, TEXT_HEAD, size - TEXT_HEAD - TEXT_TAIL)
