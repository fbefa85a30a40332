"""Named tables as one run of bytes (Arrow IPC each), the form per-rank results take on the
network and in the cache: self-describing, typed, and read back without the analysis code.
A CRC-32 at the end finds a damaged file (garbage of the right length included), which is
then made again, never misread."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterable, Iterator

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


def unpack_text(kept: bytes, tail: bytes) -> memoryview | None:
    """The text `pack_text` kept (a view of `kept`), when whole and made from the blob whose
    last 4 bytes are `tail`; else None (made again)."""
    at = len(TEXT_MAGIC) + 4
    if len(kept) < at + 4 or not kept.startswith(TEXT_MAGIC) or kept[len(TEXT_MAGIC) : at] != tail:
        return None
    (crc,) = struct.unpack_from("<I", kept, len(kept) - 4)
    if zlib.crc32(memoryview(kept)[:-4]) != crc:
        return None
    return memoryview(kept)[at:-4]
