"""A trace file too large to hold at once, parsed in pieces whose frames are written as they
fill.

A rank of 10 GB of JSON held whole (its bytes, then its frames) needed three times its size in
memory. Here the JSON is read (and gunzipped) a block at a time; every PIECE_BYTES of the
traceEvents array, cut between two events, become frames (`columns.build_frames`, the same
code as a whole file's) handed to a sink (the cache entry being written), so the memory a
file costs depends on the piece size, not on the file's size.

A file is split like this only when its layout allows it: the events array found in its
first bytes, no piece cut after its end (the keys after it are held back, TAIL_WINDOW bytes,
and a cut falls between two objects: log arrays of strings longer than that are passed over,
an array of other objects is not), every piece valid JSON on its own. Anything else (and a
piece that does not decode, as a cut inside a string would not) raises `CannotSplit`; the
caller then parses the whole file at once, as before, within the byte limit
(`Limits.max_bytes`, which thus guards the memory of what cannot be split rather than any
file's size). The frames are those of the whole-file parse, row for row: what depends on
more than one row (ids first seen in an earlier piece, the per-file facts) is carried from
piece to piece.
"""

from __future__ import annotations

import gc
import gzip
import logging
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

import msgspec
import polars as pl

from hta_tui.trace import parse
from hta_tui.trace.columns import build_frames
from hta_tui.trace.limits import Limits
from hta_tui.trace.quality import checked_events
from hta_tui.trace.schema import FRAME_SCHEMAS

log = logging.getLogger("hta_tui.load")

#: JSON (after gunzip) above which a file is read in pieces: below it, the whole file at
#: once (the faster way, one piece). Never above the byte limit: a file over it is split.
STREAM_BYTES = 512_000_000
#: The events array's JSON per piece (at most the byte limit, `Limits.max_bytes`). 128 MB:
#: about 300k events, under 1 GB of memory in all (the bytes, a chunk's structs, the piece's
#: columns).
PIECE_BYTES = 128_000_000
#: Read (or inflated) from the file at a time.
BLOCK_BYTES = 16_000_000


class FrameSink(Protocol):
    """Where a split file's frames go, piece by piece (the cache entry being written)."""

    def add(self, name: str, frame: pl.DataFrame) -> None: ...

    def abort(self) -> None:
        """Forget the pieces added so far (the file is parsed whole after all)."""


class CannotSplit(Exception):
    """The file's layout does not allow reading it in pieces (the reason is the message)."""


def whole_limit(limits: Limits) -> int:
    """The most JSON a file may have to be parsed whole (`parse.parse_file`); a larger one
    is parsed in pieces (`parse_in_pieces`)."""
    return min(STREAM_BYTES, limits.max_bytes)


def parse_in_pieces(
    path: str | Path, sink: FrameSink, limits: Limits | None = None
) -> parse.ParsedTrace:
    """A file of more JSON than `whole_limit`, in pieces into `sink`: the result's `frames`
    are empty (the sink has them) and its `streamed` true. A file that cannot be split is
    parsed whole after all, within the byte limit (too big beyond it, with the reason it
    could not be split)."""
    limits = limits or Limits.from_env()
    try:
        parsed = _in_pieces(path, sink, min(PIECE_BYTES, limits.max_bytes))
    except CannotSplit as why:
        sink.abort()
        log.info("%s: parsed whole: %s", path, why)
        return parse.parse_file(path, limits)
    parsed.meta["path"] = str(path)
    return parsed


def _in_pieces(path: str | Path, sink: FrameSink, piece: int) -> parse.ParsedTrace:
    was_enabled = gc.isenabled()
    gc.disable()  # as `parse._parse_owned`: millions of small structs, no cycles
    try:
        return _split(json_blocks(path, min(BLOCK_BYTES, piece)), sink, piece)
    except RecursionError as exc:
        raise parse.TraceFileError("invalid JSON (nested too deeply)") from exc
    finally:
        if was_enabled:
            gc.enable()


#: The first event of the array (or its end), after the opening bracket.
_FIRST = re.compile(rb"\s*([{\]])")


def _split(blocks: Iterator[bytes], sink: FrameSink, piece: int) -> parse.ParsedTrace:
    """Read the blocks, cutting the events array into pieces of about `piece` bytes; the
    document around the array (its other keys) is decoded at the end, as
    `parse._find_events` does."""
    data, ended = _fill(b"", blocks, piece)
    key = data.find(parse._EVENTS_KEY)
    opening = parse._ARRAY_START.match(data, key + len(parse._EVENTS_KEY)) if key >= 0 else None
    first = _FIRST.match(data, opening.end()) if opening is not None else None
    if first is None or first.group(1) != b"{":
        raise CannotSplit("no events array in its first bytes")
    head = data[: opening.end() - 1]  # type: ignore[union-attr]
    data = data[first.start(1) :]  # from the first event's "{"
    pieces = _Pieces(sink)
    while not ended:
        data, ended = _fill(data, blocks, piece + parse.TAIL_WINDOW)
        if ended:
            break
        # a piece cut before the last TAIL_WINDOW bytes holds events only when what follows
        # the array is shorter, or has no place to cut (strings); else it cannot decode
        edge = parse._EDGE.search(data, piece, len(data) - parse.TAIL_WINDOW)
        if edge is None:
            if len(data) > 4 * piece + parse.TAIL_WINDOW:
                raise CannotSplit("no place to cut between two events")
            data, ended = _fill(data, blocks, len(data) + piece)
            continue
        pieces.add(memoryview(data)[: edge.start() + 1])
        data = data[edge.end() - 1 :]
    framed = b"[" + data  # the "[" stands for everything before
    closing = parse._events_end(framed, 0)
    if closing is None:
        raise CannotSplit("the events array's end is not among the file's last bytes")
    rest = b"".join((head, b"null", framed[closing + 1 :]))
    try:
        trace = parse._DECODER.decode(rest)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise CannotSplit("the keys around the events do not decode") from exc
    pieces.add(memoryview(framed)[1:closing])
    del data, framed
    return pieces.finish(trace)


def _fill(data: bytes, blocks: Iterator[bytes], size: int) -> tuple[bytes, bool]:
    """`data` and the next blocks, to at least `size` bytes unless the file ends first;
    whether it did."""
    parts = [data]
    have = len(data)
    for block in blocks:
        parts.append(block)
        have += len(block)
        if have >= size:
            return b"".join(parts), False
    return b"".join(parts), True


class _Pieces:
    """The frames of each piece into the sink, with what crosses pieces: the row numbers
    (`idx`), the ids of earlier pieces (`quality`), the counts and the per-file facts."""

    def __init__(self, sink: FrameSink) -> None:
        self.sink = sink
        self.dropped: Counter[str] = Counter()
        self.exact = [False]  # once a chunk needed its numbers' text, every later one does
        self.seen: dict[str, pl.Series] = {}
        self.n = 0  # events so far
        self.flows = 0
        self.facts: list[pl.DataFrame] = []
        self.steps: set[str] = set()
        self.pids: list[pl.DataFrame] = []

    def add(self, events_json: memoryview) -> None:
        """The events `events_json` (objects separated by commas, no brackets)."""
        text = memoryview(b"".join((b"[", events_json, b"]")))
        try:
            frames = build_frames(parse._chunks(text, self.dropped, self.exact), self.dropped)
        except msgspec.DecodeError as exc:  # a cut inside a string, or not JSON at all
            raise CannotSplit("a piece does not decode on its own") from exc
        del text
        events = checked_events(frames["events"], self.dropped, self.seen)
        events = events.with_columns(
            pl.int_range(self.n, self.n + events.height, dtype=pl.UInt32).alias("idx")
        )
        frames["events"] = events
        self._facts(events)
        self.n += events.height
        self.flows += frames["flows"].height
        for name, frame in frames.items():
            if not frame.is_empty():
                self.sink.add(name, frame)

    def _facts(self, events: pl.DataFrame) -> None:
        """This piece's share of `parse._frame_facts`."""
        if events.is_empty():
            return
        self.facts.append(
            events.select(
                pl.col("ts").min().alias("min_ts"),
                (pl.col("ts") + pl.col("dur")).max().alias("max_end"),
                (pl.col("kind") == "kernel").sum().alias("n_kernels"),
            )
        )
        steps = events.filter(pl.col("name").str.contains("ProfilerStep", literal=True))
        self.steps.update(steps["name"].unique().drop_nulls().to_list())
        self.pids.append(
            events.filter(pl.col("pid").is_not_null())
            .group_by("pid")
            .agg(pl.len().alias("all"), pl.col("stream").is_null().sum().alias("cpu"))
        )

    def finish(self, trace: parse._Trace) -> parse.ParsedTrace:
        """The file's metadata, as `parse._parsed` gives it for the whole file."""
        if self.dropped and self.n == 0 and self.flows == 0:
            raise parse.TraceFileError(f"no usable event: {parse.dropped_text(self.dropped)}")
        meta = parse._meta(trace, self.dropped)
        meta.update(self._file_facts())
        meta["dropped_events"] = dict(self.dropped.most_common())
        return parse.ParsedTrace(meta=meta, frames={}, streamed=True)

    def _file_facts(self) -> dict[str, object]:
        if not self.n:
            return parse._frame_facts(pl.DataFrame(schema=FRAME_SCHEMAS["events"]))
        row = pl.concat(self.facts).select(
            pl.col("min_ts").min(), pl.col("max_end").max(), pl.col("n_kernels").sum()
        )
        facts = row.row(0, named=True)
        out = {
            "min_ts": facts["min_ts"],
            "max_end": facts["max_end"],
            "n_events": self.n,
            "n_kernels": facts["n_kernels"],
            "step_names": sorted(self.steps),
            "process_pid": _process_pid(self.pids),
        }
        return out


def _process_pid(parts: list[pl.DataFrame]) -> int | None:
    """`parse._process_pid` from each piece's counts: the most common pid of the CPU-side
    events, else of any event; the smallest on a tie."""
    if not parts:
        return None
    counts = pl.concat(parts).group_by("pid").agg(pl.col("all").sum(), pl.col("cpu").sum())
    by = "cpu" if counts["cpu"].sum() else "all"
    counts = counts.filter(pl.col(by) > 0)
    if counts.is_empty():
        return None
    return int(counts.sort([by, "pid"], descending=[True, False])["pid"][0])


# ---------------------------------------------------------------------------------------------
# the file's JSON, a block at a time


def json_blocks(path: str | Path, block: int | None = None) -> Iterator[bytes]:
    """The file's JSON in blocks of about `block` bytes (BLOCK_BYTES), gunzipped when
    compressed (by magic, not by name), member after member."""
    size = block or BLOCK_BYTES
    with parse.open_regular(path) as f:
        # what the file held when opened: a writer that never stops cannot keep it going
        f = _Bounded(f, os.fstat(f.fileno()).st_size)
        first = f.read(size)
        if first[:2] == b"\x1f\x8b":
            yield from _inflated(f, first, size)
            return
        while first:
            yield first
            first = f.read(size)


class _Bounded:
    """A file read no further than `left` bytes."""

    def __init__(self, f: BinaryIO, left: int) -> None:
        self.f, self.left = f, left

    def read(self, n: int) -> bytes:
        out = self.f.read(min(n, self.left)) if self.left > 0 else b""
        self.left -= len(out)
        return out


def _inflated(f: _Bounded, data: bytes, size: int) -> Iterator[bytes]:
    """Each gzip member's output in turn, at most `size` bytes at a time; padding zeros
    between members skipped. isal's inflate when installed (2-3x faster than zlib)."""
    try:
        from isal import isal_zlib as fast
    except ImportError:  # pragma: no cover - isal is a dependency
        fast = zlib  # type: ignore[assignment]
    errors = (zlib.error, fast.error, gzip.BadGzipFile, EOFError)
    d = fast.decompressobj(wbits=31)
    try:
        while True:
            if not data:
                data = f.read(size)
                if not data:
                    break
            out = d.decompress(data, size)
            data = d.unconsumed_tail
            if out:
                yield out
            if d.eof:
                data = d.unused_data.lstrip(b"\x00")
                while not data:
                    data = f.read(size)
                    if not data:
                        return
                    data = data.lstrip(b"\x00")
                d = fast.decompressobj(wbits=31)
    except errors as exc:
        raise parse.TraceFileError(f"corrupt gzip ({exc})") from exc
    if not d.eof:
        raise parse.TraceFileError("truncated gzip (still being written?)", incomplete=True)
