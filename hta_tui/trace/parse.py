"""One Kineto trace file -> typed polars frames.

msgspec decodes straight into small typed structs, skipping every field no analysis uses:
about 4x faster than `orjson.loads` into dicts on a 35 MB trace and a fraction of its memory.
The events are decoded a chunk at a time, so a rank's structs never all exist at once;
`columns` turns them into frames, normalising every dialect once.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import gzip
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import orjson
import polars as pl

from hta_tui.trace import metadata
from hta_tui.trace.columns import build_frames
from hta_tui.trace.discover import not_regular
from hta_tui.trace.events import Decoded, Event, EventArgs, Metadata, MetadataEvent
from hta_tui.trace.limits import Limits
from hta_tui.trace.quality import checked_events

#: Bumped whenever the frames change shape or meaning; part of the cache key.
PARSER_VERSION = 16


class TraceFileError(Exception):
    """A file that cannot become a rank. `incomplete` files may still be being written."""

    def __init__(
        self,
        message: str,
        *,
        incomplete: bool = False,
        not_trace: bool = False,
        too_big: bool = False,
    ):
        super().__init__(message)
        self.incomplete = incomplete
        self.not_trace = not_trace
        self.too_big = too_big  # over the byte limit


class _Trace(msgspec.Struct):
    # the events' JSON text (a view into the file's bytes), decoded in chunks (`_chunks`)
    traceEvents: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    distributedInfo: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    deviceProperties: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    computeProperties: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    schemaVersion: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    host_name: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)  # recent PyTorch
    traceName: str | None = None
    baseTimeNanoseconds: int | None = None
    displayTimeUnit: str | None = None
    # PyTorch execution traces (not Kineto) have these instead of traceEvents
    nodes: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    schema: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


_DECODER = msgspec.json.Decoder(_Trace)
#: Numbers as numbers: exact for the timestamps of most traces (see `numbers`)
_EVENTS_FLOAT = msgspec.json.Decoder(list[Event])
# float_hook=str: `Event.ts` / `dur` keep a fractional number's digits (see numbers.exact_ns)
_EVENTS = msgspec.json.Decoder(list[Event], float_hook=str)
_EVENT = msgspec.json.Decoder(Event, float_hook=str)
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_METADATA_FLOAT = msgspec.json.Decoder(list[MetadataEvent])
_METADATA = msgspec.json.Decoder(list[MetadataEvent], float_hook=str)

#: JSON decoded into structs at a time. All of a 100 MB trace's events as structs took 400 MB
#: on top of its bytes; a chunk at a time keeps the parse of a 100 MB rank under 400 MB, and
#: a chunk nearer the CPU caches decodes faster too (1 MB: about 4k events, 3.7 MB of
#: structs; about 5% less CPU time than 2 MB chunks in compact layouts, the same in pretty
#: ones, since the per-chunk polars calls were cut; 0.5 MB no better).
#: CHUNK: the same in events, where the events come one by one.
CHUNK_BYTES = 1_000_000
CHUNK = 20_000


@dataclass
class ParsedTrace:
    """What one file holds: metadata plus the frames of `schema.FRAME_SCHEMAS`."""

    meta: dict[str, Any]
    frames: dict[str, pl.DataFrame] = field(default_factory=dict)
    #: parsed in pieces into a sink (`stream`): `frames` is empty, the sink has them
    streamed: bool = False


def read_regular(path: str | Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file (at most `limit` + 1 of them, enough to tell it is over
    the limit; a file already larger on disk is refused unread); anything else (a FIFO, a
    socket, a device, or a link to one) raises before a byte is read (`open_regular`)."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if limit is not None and size > limit:
            # over the limit on disk, so over it as JSON too (gzip's output is never
            # smaller than its input but for a few header bytes): refused unread, so
            # a huge or sparse file costs no memory
            raise TraceFileError(_too_big(limit), too_big=True)
        return f.read() if limit is None else f.read(min(size, limit) + 1)


def open_regular(path: str | Path) -> BinaryIO:
    """A regular file opened for reading; anything else (a FIFO, a socket, a device, or a
    link to one) raises before a byte is read. The check is made on the opened file too
    (opened non-blocking: a FIFO without a writer would block the open), so a file swapped
    for a FIFO after discovery is refused as well."""
    try:
        why = not_regular(os.stat(path).st_mode)
    except FileNotFoundError:
        if not os.path.islink(path):
            raise
        raise TraceFileError("a symbolic link to nothing", not_trace=True) from None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise TraceFileError("a loop of symbolic links", not_trace=True) from None
    if why is None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        f = open(fd, "rb", closefd=True)  # noqa: SIM115 - returned open
        why = not_regular(os.fstat(fd).st_mode)
        if why is None:
            return f
        f.close()
    raise TraceFileError(why, not_trace=True)


def read_bytes(path: str | Path, max_bytes: int | None = None) -> bytes:
    """The file's JSON bytes, gunzipped when compressed (by magic, not by name), at most
    `max_bytes` of them (default: `Limits.from_env()`)."""
    limit = Limits.from_env().max_bytes if max_bytes is None else max_bytes
    data = read_regular(path, limit)
    if data[:2] == b"\x1f\x8b":
        return _gunzip(data, limit)
    if len(data) > limit:
        raise TraceFileError(_too_big(limit), too_big=True)
    return data


def _too_big(limit: int) -> str:
    return f"larger than the {limit / 1e6:,.0f} MB limit (HTA_TUI_MAX_FILE_MB)"


#: Input fed to the inflater at a time for each member after the first, doubling up to the
#: most: a member's leftover input is copied out once it ends, so feeding every member the
#: whole rest (as before) made a file of many small members quadratic (95,000 empty members:
#: 59 s). The first is given the whole file: one copy of the rest, once.
_GZIP_FEED = 1024
_GZIP_FEED_MAX = 1 << 20
#: After a member of less output than this, the next is inflated by zlib: isal's inflater
#: costs twice zlib's to start (a gzip of 200,000 empty members), and is faster only on
#: large members (a trace is one; bgzip's are 64 KB).
_SMALL_MEMBER = 16_384


def _gunzip(data: bytes, limit: int) -> bytes:
    """At most `limit` bytes out, whatever the gzip trailer claims (a gzip bomb stops at the
    limit), member after member, in time linear in the input however many members there
    are. isal's inflate when installed (2-3x faster than zlib)."""
    try:
        from isal import isal_zlib as fast
    except ImportError:
        fast = zlib  # type: ignore[assignment]
    parts: list[bytes] = []
    total, pos, view, size = 0, 0, memoryview(data), len(data)
    inflate, feed = fast, size  # the first member (a trace is one) at once: its output is
    # one piece, never copied again by a join (a 563 MB trace would be held twice)
    try:
        while pos < size:
            d = inflate.decompressobj(wbits=31)
            before = total
            while not d.eof and pos < size:
                piece = view[pos : pos + feed]
                out = d.decompress(piece, limit + 1 - total)
                if out:
                    total += len(out)
                    parts.append(out)
                if total > limit:
                    raise TraceFileError(_too_big(limit), too_big=True)
                pos += len(piece) - len(d.unused_data) - len(d.unconsumed_tail)
                feed = min(feed * 2, _GZIP_FEED_MAX)
            if not d.eof:
                raise TraceFileError("truncated gzip (still being written?)", incomplete=True)
            while pos < size and data[pos] == 0:  # padding after a member
                pos = _ZEROS.match(data, pos).end()  # type: ignore[union-attr]
            inflate = fast if total - before >= _SMALL_MEMBER else zlib
            feed = _GZIP_FEED
    except (zlib.error, fast.error, gzip.BadGzipFile, EOFError) as exc:
        raise TraceFileError(f"corrupt gzip ({exc})") from exc
    return parts[0] if len(parts) == 1 else b"".join(parts) if parts else b""


_ZEROS = re.compile(rb"\x00*")


def parse_bytes(buf: bytes, *, path: str = "") -> ParsedTrace:
    """Decode and normalise; raises TraceFileError with a one-line reason.

    The cyclic GC is paused meanwhile: a million small structs would trigger it hundreds of
    times for nothing (they hold no cycles), which costs a third of the decode.
    """
    return _parse_owned([buf])


def _parse_owned(holder: list[bytes]) -> ParsedTrace:
    """Parse the bytes in `holder`, taking them out so they are freed as soon as the frames
    are built: for a 500 MB rank that is 500 MB less at the end."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_bytes(holder)
    except RecursionError as exc:  # msgspec, even when skipping a value, recurses per level
        raise TraceFileError("invalid JSON (nested too deeply)") from exc
    finally:
        if was_enabled:
            gc.enable()


def _parse_bytes(holder: list[bytes]) -> ParsedTrace:
    buf = holder.pop()
    head = buf[:4096].lstrip()
    if not head:
        raise TraceFileError("empty file", incomplete=True)
    if head[:1] == b"[":
        raise TraceFileError("not a Kineto trace: a JSON list (memory timeline?)", not_trace=True)
    if head[:1] != b"{":
        raise TraceFileError("not JSON", not_trace=True)
    found = _find_events(buf)
    if found is not None:
        try:
            return _from_events(*found, buf)
        except msgspec.DecodeError:
            pass  # not laid out as it seemed, or broken: the whole file tells which
    try:
        trace = _DECODER.decode(buf)
    except UnicodeDecodeError as exc:
        raise TraceFileError(f"invalid JSON (text is not UTF-8 at byte {exc.start})") from exc
    except msgspec.DecodeError as exc:
        msg = str(exc)
        if "truncated" in msg.lower():
            raise TraceFileError("incomplete JSON (still being written?)", incomplete=True) from exc
        if "Expected `" not in msg:
            raise TraceFileError(f"invalid JSON ({msg})") from exc
        return _lenient(buf)  # a top-level field of an unexpected type
    text = memoryview(trace.traceEvents)
    if not len(text) or text[:4] == b"null":
        if len(trace.nodes):
            raise TraceFileError("not a Kineto trace: PyTorch execution trace", not_trace=True)
        raise TraceFileError("not a Kineto trace: no traceEvents", not_trace=True)
    if text[:1] != b"[":
        raise TraceFileError("not a Kineto trace: traceEvents is not a list", not_trace=True)
    return _from_events(trace, text, buf)


def _from_events(trace: _Trace, text: memoryview, buf: bytes) -> ParsedTrace:
    """The trace from its events array `text`. DecodeError when `text` is not a valid
    array; an event field of an unexpected type costs only that event (`_decode_chunk`)."""
    dropped: Counter[str] = Counter()
    try:
        frames = build_frames(_chunks(text, dropped), dropped)
    except msgspec.DecodeError:
        # a cut fell inside a string: one raw per event (DecodeError: not an array at all)
        dropped.clear()
        frames = build_frames(_decoded(_RAWS.decode(text), dropped), dropped)
    return _parsed(trace, frames, dropped)


_EVENTS_KEY = b'"traceEvents"'
_ARRAY_START = re.compile(rb"\s*:\s*\[")
#: After a value inside an object: the next key or the object's end.
_AFTER_VALUE = re.compile(rb"\s*[,}]")
#: The keys Kineto writes after the events (log arrays, names) are searched for the array's
#: end in this many trailing bytes first, then in twice as many ... up to TAIL_MAX; a longer
#: tail is found by decoding the whole document.
TAIL_WINDOW = 4_000_000
TAIL_MAX = 64_000_000
#: The last event is looked for in this many bytes before a candidate end.
LAST_EVENT_WINDOW = 65_536


def _find_events(buf: bytes) -> tuple[_Trace, memoryview] | None:
    """The top-level fields, and the traceEvents array's text, without scanning the array.

    Decoding the whole document only to learn where the array ends costs a tenth of the parse.
    The array's end is found from the file's end instead (`_events_end`), wherever the array
    sits among the other keys; the rest of the document, with the array cut out, must then
    decode, and each chunk of the array must too (see `_chunks`). None, or a DecodeError from
    a chunk, when the file is laid out otherwise or broken: the caller then decodes the whole
    document.
    """
    key = buf.find(_EVENTS_KEY)
    opening = _ARRAY_START.match(buf, key + len(_EVENTS_KEY)) if key >= 0 else None
    if opening is None:
        return None
    first = opening.end() - 1
    closing = _events_end(buf, first)
    if closing is None:
        return None
    view = memoryview(buf)
    rest = b"".join((view[:first], b"null", view[closing + 1 :]))
    try:
        trace = _DECODER.decode(rest)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return trace, view[first : closing + 1]


def _events_end(buf: bytes, first: int) -> int | None:
    """The position of the "]" closing the events array that opens at `first`.

    Walks back over the "]"s of the file's tail that are followed by the next key or the
    document's end: the one closing the events is preceded by an event (an object with a
    `ph`) or the opening bracket. That passes over Kineto's trailing log arrays (strings)
    and a trailing array of other objects (deviceProperties after the events). The "]"s
    are found by a regex, a window at a time from the end (TAIL_WINDOW, doubling up to
    TAIL_MAX): log arrays of several MB after the events (a real MTIA trace's) are passed
    over at the regex's speed, not a Python step per "]". A wrong answer cannot decode
    (`_chunks`), so this only decides how fast the file parses.

    The "}"s are tried first (`_object_end`): a log array has none, so the last few "}"s
    of the file are found at memory speed, where the regex steps over every "]" of every
    log line (a tenth of a second per 40 MB of logs).
    """
    found = _object_end(buf, first)
    if found is not None:
        return found
    stop, window = len(buf), TAIL_WINDOW
    while stop > first:
        floor = max(first, stop - window)
        # a "]" just before `stop` is followed by what lies after it: look a little further
        ends = [m.start() for m in _CLOSE.finditer(buf, floor, min(len(buf), stop + 4096))]
        for end in reversed(ends):
            if end >= stop or end <= first:
                continue
            near = buf[max(first, end - 256) : end].rstrip()  # what the "]" closes
            if near == b"[" and end - 256 <= first:
                return end  # the events array, empty
            if near[-1:] != b"}":
                continue
            before = buf[max(first, end - LAST_EVENT_WINDOW) : end].rstrip()
            if _is_event(before, whole=end - LAST_EVENT_WINDOW <= first):
                return end
        if len(buf) - floor >= TAIL_MAX:
            return None
        stop, window = floor, window * 2
    return None


#: A "]" followed by the next key or the end of its object: where an array of values ends.
_CLOSE = re.compile(rb"\]\s*[,}]")
#: After an object's "}": the "]" of its array (`_CLOSE`).
_CLOSE_AFTER = re.compile(rb"\s*(\])\s*[,}]")
#: The "}"s `_object_end` looks at before leaving the search to the regex.
OBJECT_ENDS = 1024


def _object_end(buf: bytes, first: int) -> int | None:
    """`_events_end`'s answer when it closes an array of events, found from the file's
    last "}"s (at most OBJECT_ENDS of them, within TAIL_MAX of the end): the same "]"s in
    the same order as its regex walk takes those preceded by an object, the same checks.
    None when not found so: the regex walk decides (an empty array of events, a long tail)."""
    pos, low = len(buf), max(first, len(buf) - TAIL_MAX)
    for _ in range(OBJECT_ENDS):
        pos = buf.rfind(b"}", low, pos)
        if pos < 0:
            return None
        after = _CLOSE_AFTER.match(buf, pos + 1)
        if after is None:
            continue
        end = after.start(1)
        if buf[max(first, end - 256) : end].rstrip()[-1:] != b"}":
            continue  # (as `_events_end`: a "]" far from what it closes is not taken)
        before = buf[max(first, end - LAST_EVENT_WINDOW) : end].rstrip()
        if _is_event(before, whole=end - LAST_EVENT_WINDOW <= first):
            return end
    return None


def _is_event(before: bytes, *, whole: bool) -> bool:
    """Whether `before` (the text before a candidate end; `whole`: from the array's opening
    bracket) ends with an event: the object after its last "}, {" has a `ph`."""
    edges = list(_EDGE.finditer(before))
    if edges:
        start = edges[-1].end() - 1
    elif whole:
        start = before.find(b"{")
    else:
        return False  # one event longer than the window: let the whole document decide
    try:
        return bool(_EVENT.decode(before[start:]).ph)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return False


def _parsed(trace: _Trace, frames: dict[str, pl.DataFrame], dropped: Counter[str]) -> ParsedTrace:
    events = frames["events"] = checked_events(frames["events"], dropped)
    if dropped and events.is_empty() and frames["flows"].is_empty():
        raise TraceFileError(f"no usable event: {dropped_text(dropped)}")
    meta = _meta(trace, dropped)
    meta.update(_frame_facts(events))
    meta["dropped_events"] = dict(dropped.most_common())
    return ParsedTrace(meta=meta, frames=frames)


def dropped_text(dropped: dict[str, int]) -> str:
    """'ts is not a number in 1 event; no ph in 3 events': what a file lost, and why."""
    ordered = sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0]))
    return "; ".join(f"{why} in {n:,} {_unit(why)}{'s' if n != 1 else ''}" for why, n in ordered)


def _unit(why: str) -> str:
    """What a reason counts: values of the file's metadata, else events."""
    return "value" if why.startswith(metadata.KEYS) else "event"


#: Between two events of the traceEvents array (or, rarely, inside a string: see `_chunks`).
_EDGE = re.compile(rb"\}\s*,\s*\{")


def _chunks(
    text: memoryview, dropped: Counter[str], exact: list[bool] | None = None
) -> Iterator[list[Event]]:
    """The events of the array `text`, decoded about CHUNK_BYTES of JSON at a time.

    Numbers are decoded as numbers (`events.Decoded`: again with fractional numbers as text
    when a float cannot keep one exact, see `numbers`, and so for the rest of the file).
    Chunks are cut at a "}, {" found by a regex, without splitting the array into one object
    per event first (a third of the decode time). Such an edge can fall inside a string
    instead; then that chunk's JSON is invalid (it ends inside a string) and msgspec raises
    DecodeError, and the caller decodes the safe way. A wrong cut never decodes silently.

    Every chunk is copied, between its brackets, into one reused buffer: a fresh 1-2 MB
    `bytes` per chunk was fresh memory the kernel had to fault in each time (a tenth of a
    pretty-printed file's parse). msgspec's Raw args are views into that buffer, so a chunk's
    events must be used before the next one is asked for, as `build_frames` does.

    `exact`: a cell shared by the pieces of a file read in pieces (`stream`), so the file's
    later pieces keep their numbers' text too.
    """
    start, end = 1, len(text) - 1  # inside "[" and "]"
    size = _chunk_bytes(text)
    # once a chunk needed its numbers' text, the file's next chunks do too
    exact = [False] if exact is None else exact
    scratch = bytearray()
    while True:
        edge = _EDGE.search(text, start + size, end) if start + size < end else None
        stop = end if edge is None else edge.start() + 1
        n = stop - start
        if len(scratch) < n + 2:
            scratch = bytearray(n + 2 + n // 4)
        buf = memoryview(scratch)
        buf[0] = 0x5B
        buf[1 : n + 1] = text[start:stop]
        buf[n + 1] = 0x5D
        piece = buf[: n + 2]
        metadata = _metadata_chunk(piece, exact[0])
        if metadata is not None:
            yield metadata
            del metadata
        elif exact[0]:
            yield _decode_chunk(piece, dropped)
        else:
            before = dropped.copy()  # what this chunk's decode counts is counted again
            floats = _decode_chunk(piece, dropped, _EVENTS_FLOAT)

            def again(
                first: int = start, last: int = stop, before: Counter[str] = before
            ) -> list[Event]:
                exact[0] = True
                dropped.clear()
                dropped.update(before)
                return _decode_chunk(b"".join((b"[", text[first:last], b"]")), dropped)

            yield Decoded(floats, again)
            del floats
        del piece, buf
        if edge is None:
            return
        start = edge.end() - 1


#: A chunk whose first event is a metadata event (they come in blocks: Kineto writes the
#: processes' names first and the threads' last) is tried as all metadata.
_METADATA_HINT = re.compile(rb'"ph"\s*:\s*"M"')


def _metadata_chunk(piece: memoryview, exact: bool) -> Metadata | None:
    """A chunk's events as `MetadataEvent`s when every one is `ph: "M"` with args (the threads frame
    reads five of their fields: a third less decode than `Event`'s and none of the other
    phases' passes), else None: the chunk is decoded as any other. Only ASCII text: msgspec
    does not check the UTF-8 of the fields it skips, which `Event` may read (a chunk that
    is not UTF-8 goes event by event). The same field types as `Event` and `EventArgs`
    give the same values; anything else (a field of another type) goes the usual way."""
    if _METADATA_HINT.search(piece, 0, 512) is None:
        return None
    data = bytes(piece)
    if not data.isascii():
        return None
    try:  # (a ValidationError too: an event of another phase, or without args)
        return Metadata((_METADATA if exact else _METADATA_FLOAT).decode(data))
    except msgspec.DecodeError:
        return None


def _chunk_bytes(text: memoryview) -> int:
    """CHUNK_BYTES of compact JSON, in this file's layout: a pretty-printed file (half of it
    indentation) gets chunks as large in events as a compact one's, not twice as many
    (every chunk has a fixed cost in Python and polars)."""
    sample = bytes(text[:65536])
    blank = sum(map(sample.count, (b" ", b"\n", b"\r", b"\t")))
    return int(CHUNK_BYTES * len(sample) / max(len(sample) - blank, 1))


#: What a well-formed chunk can still raise: a field of an unexpected type, text that is not
#: UTF-8 (msgspec checks strings as it builds them).
_BAD_VALUES = (msgspec.ValidationError, UnicodeDecodeError)


def _decode_chunk(
    piece: bytes, dropped: Counter[str], decoder: msgspec.json.Decoder = _EVENTS
) -> list[Event]:
    """One chunk's events; when a field has a type the structs do not take (a name that is
    an object, a pid that is a list, an event that is not an object) or text is not UTF-8,
    the chunk's events one by one, repaired (`_coerce_event`) or counted as dropped."""
    try:
        return decoder.decode(piece)
    except _BAD_VALUES:
        raws = _RAWS.decode(piece)
    out = []
    for raw in raws:
        try:
            out.append(_EVENT.decode(raw))
            continue
        except _BAD_VALUES:
            pass
        try:
            event = _coerce_event(_ANY.decode(raw))
        except UnicodeDecodeError:
            dropped["text is not UTF-8"] += 1
            continue
        if event is None:
            dropped["not an object"] += 1
        else:
            out.append(event)
    return out


def _decoded(raws: list[msgspec.Raw], dropped: Counter[str]) -> Iterator[list[Event]]:
    """The events as structs, CHUNK at a time (each raw is one event's JSON text)."""
    for start in range(0, len(raws), CHUNK):
        yield _decode_chunk(b"[" + b",".join(raws[start : start + CHUNK]) + b"]", dropped)


def _slices(events: list[Event]) -> Iterator[list[Event]]:
    for start in range(0, len(events), CHUNK):
        yield events[start : start + CHUNK]


def parse_file(path: str | Path, limits: Limits | None = None) -> ParsedTrace:
    max_bytes = (limits or Limits.from_env()).max_bytes
    parsed = _parse_owned([read_bytes(path, max_bytes)])
    parsed.meta["path"] = str(path)
    return parsed


#: Any JSON, fractional numbers kept as their text (as the structs do).
_ANY = msgspec.json.Decoder(float_hook=str)


def _lenient(buf: bytes) -> ParsedTrace:
    """Slow path for files whose top-level fields have unexpected types: event by event."""
    try:
        raw = _ANY.decode(buf)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise TraceFileError(f"invalid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise TraceFileError("not a Kineto trace", not_trace=True)
    events = raw.pop("traceEvents", None)
    if events is not None and not isinstance(events, list):
        raise TraceFileError("not a Kineto trace: traceEvents is not a list", not_trace=True)
    top = {k: msgspec.Raw(msgspec.json.encode(v)) for k, v in raw.items() if k in _RAW_KEYS}
    for k in ("traceName", "displayTimeUnit"):
        if isinstance(raw.get(k), str):
            top[k] = raw[k]
    if isinstance(raw.get("baseTimeNanoseconds"), int):
        top["baseTimeNanoseconds"] = raw["baseTimeNanoseconds"]
    if events is None:
        if "nodes" in top:
            raise TraceFileError("not a Kineto trace: PyTorch execution trace", not_trace=True)
        raise TraceFileError("not a Kineto trace: no traceEvents", not_trace=True)
    coerced = [_coerce_event(ev) for ev in events]
    dropped: Counter[str] = Counter()
    if None in coerced:
        dropped["not an object"] = coerced.count(None)
    kept = [ev for ev in coerced if ev is not None]
    return _parsed(_Trace(**top), build_frames(_slices(kept), dropped), dropped)


_RAW_KEYS = {
    "distributedInfo",
    "deviceProperties",
    "computeProperties",
    "schemaVersion",
    "host_name",
    "nodes",
    "schema",
}


_ARGS_FIELDS = msgspec.structs.fields(EventArgs)
_EVENT_FIELDS = [f for f in msgspec.structs.fields(Event) if f.name != "args"]


def _coerce_event(raw: Any) -> Event | None:
    if not isinstance(raw, dict):
        return None
    args = raw.get("args")
    clean_args = None
    if isinstance(args, dict):
        clean = {}
        for f in _ARGS_FIELDS:
            v = args.get(f.encode_name)
            if v is None:
                continue
            if f.type is msgspec.Raw:
                clean[f.name] = msgspec.Raw(msgspec.json.encode(v))
                continue
            with contextlib.suppress(msgspec.ValidationError):
                clean[f.name] = msgspec.convert(v, f.type, strict=False)
        clean_args = EventArgs(**clean)
    out = {}
    for f in _EVENT_FIELDS:
        v = raw.get(f.name)
        if v is None:
            continue
        try:
            out[f.name] = msgspec.convert(v, f.type, strict=False)
        except msgspec.ValidationError:
            out[f.name] = str(v) if f.name in ("name", "cat", "ph") else None
    return Event(args=clean_args, **{k: v for k, v in out.items() if v is not None})


def _raw_json(raw: msgspec.Raw) -> Any:
    """A metadata value, or None when it cannot be kept as JSON (orjson, which stores the
    cache's metadata, takes no integer beyond 64 bits and no nesting past 255 levels)."""
    if not len(raw):
        return None
    try:
        value = orjson.loads(bytes(raw))
        orjson.dumps(value)  # writes less deep than it reads (255 levels, not 1024)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return None
    return value


def _small_int(value: Any, bound: int) -> int | None:
    """An integer in [0, bound), else None (a bool is not a rank)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < bound
    return value if ok else None


def _meta(trace: _Trace, dropped: Counter[str]) -> dict[str, Any]:
    """The file's metadata, each field checked on its own (`metadata`): a bad one dropped
    and counted in `dropped`."""
    dist = metadata.distributed(_raw_json(trace.distributedInfo), dropped)
    props = _raw_json(trace.deviceProperties)
    if props is None:
        props = _raw_json(trace.computeProperties)  # ROCm / older profilers
    rank = dist.get("rank") if dist is not None else None
    name = trace.traceName
    host = _raw_json(trace.host_name)
    return {
        # who wrote the file (with the CPU events' pid, `_frame_facts`): spans of one rank
        # come from one process
        "host_name": host[:256] if isinstance(host, str) else None,
        "distributed_info": dist,
        "rank_in_file": _small_int(rank, 2**31),
        "device_properties": metadata.devices(props, dropped),
        "schema_version": _raw_json(trace.schemaVersion),
        "trace_name": name if name is None or len(name) < 4096 else name[:4096],
        "base_time_ns": _small_int(trace.baseTimeNanoseconds, 2**63),
        "parser_version": PARSER_VERSION,
    }


def _frame_facts(events: pl.DataFrame) -> dict[str, Any]:
    """Small per-file facts kept in the cache's metadata, so a warm open reads no frames."""
    if events.is_empty():
        return {
            "min_ts": None,
            "max_end": None,
            "n_events": 0,
            "n_kernels": 0,
            "step_names": [],
            "process_pid": None,
        }
    # (only the columns read are filtered, not the whole frame's 38)
    names = events.get_column("name")
    steps = names.filter(names.str.contains("ProfilerStep", literal=True))
    row = events.select(
        pl.col("ts").min().alias("min_ts"),
        (pl.col("ts") + pl.col("dur")).max().alias("max_end"),
        pl.len().alias("n_events"),
        (pl.col("kind") == "kernel").sum().alias("n_kernels"),
    ).row(0, named=True)
    row["step_names"] = sorted(steps.unique().drop_nulls().to_list())
    row["process_pid"] = _process_pid(events.select("pid", "stream"))
    return row


def _process_pid(events: pl.DataFrame) -> int | None:
    """The pid of the process that wrote the trace: the most common pid of its CPU-side events
    (GPU events carry the device as pid), else of any event; the smallest on a tie."""
    pids = events.filter(pl.col("pid").is_not_null())
    cpu = pids.filter(pl.col("stream").is_null())
    pids = cpu if cpu.height else pids
    if pids.is_empty():
        return None
    return int(pids.group_by("pid").len().sort(["len", "pid"], descending=[True, False])["pid"][0])
