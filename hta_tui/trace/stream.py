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
import multiprocessing as mp
import os
import re
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import msgspec
import polars as pl

if TYPE_CHECKING:
    import numpy as np

from hta_tui.trace import parse
from hta_tui.trace.checked import read_checked, write_checked
from hta_tui.trace.columns import build_frames
from hta_tui.trace.limits import Limits
from hta_tui.trace.quality import (
    _OP_KINDS,
    SHARED_CORRELATION,
    SHARED_EXTERNAL_ID,
    checked_events,
)
from hta_tui.trace.schema import FRAME_SCHEMAS, LAUNCH_KINDS

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


@dataclass(frozen=True)
class PieceSummaries:
    """How a front end's per-file summaries (`load.AfterParse`, which carries this as its
    `in_pieces`) are made for a file parsed in pieces, without reading its events back:
    `piece(events)` runs where each piece's events are (its worker), and returns a small
    part (None: it could not, and the summaries read the events back after all);
    `merge(entry, meta, parts)`, the parts in file order, returns what `after_parse` would
    (the memos). Both module-level functions, so workers can import them."""

    piece: Callable[[pl.DataFrame], Any]
    merge: Callable[[Path, dict[str, Any], list[Any]], Any]


class CannotSplit(Exception):
    """The file's layout does not allow reading it in pieces (the reason is the message)."""


def whole_limit(limits: Limits) -> int:
    """The most JSON a file may have to be parsed whole (`parse.parse_file`); a larger one
    is parsed in pieces (`parse_in_pieces`)."""
    return min(STREAM_BYTES, limits.max_bytes)


def parse_in_pieces(
    path: str | Path,
    sink: FrameSink,
    limits: Limits | None = None,
    summarize: Callable[[pl.DataFrame], Any] | None = None,
    parts: list[Any] | None = None,
) -> parse.ParsedTrace:
    """A file of more JSON than `whole_limit`, in pieces into `sink`: the result's `frames`
    are empty (the sink has them) and its `streamed` true. A file that cannot be split is
    parsed whole after all, within the byte limit (too big beyond it, with the reason it
    could not be split). `summarize` (`PieceSummaries.piece`) runs on each piece's events
    where they are parsed; `parts` receives what it returned, in file order (left empty
    when the file was parsed whole, or a piece had no part)."""
    limits = limits or Limits.from_env()
    out: list[Any] = [] if parts is None else parts
    try:
        parsed = _in_pieces(path, sink, min(PIECE_BYTES, limits.max_bytes), summarize, out)
    except CannotSplit as why:
        out.clear()
        sink.abort()
        log.info("%s: parsed whole: %s", path, why)
        return parse.parse_file(path, limits)
    parsed.meta["path"] = str(path)
    return parsed


def _in_pieces(
    path: str | Path,
    sink: FrameSink,
    piece: int,
    summarize: Callable[[pl.DataFrame], Any] | None = None,
    parts: list[Any] | None = None,
) -> parse.ParsedTrace:
    pieces = _Pieces(sink, piece, summarize)
    was_enabled = gc.isenabled()
    gc.disable()  # as `parse._parse_owned`: millions of small structs, no cycles
    try:
        if not _gzipped(path):
            parsed = _split_file(path, pieces, piece)
        else:
            parsed = _split(json_blocks(path, min(BLOCK_BYTES, piece)), pieces, piece)
        if parts is not None and pieces.parts is not None:
            parts.extend(pieces.parts)
        return parsed
    except RecursionError as exc:
        raise parse.TraceFileError("invalid JSON (nested too deeply)") from exc
    finally:
        pieces.close()
        if was_enabled:
            gc.enable()


#: The first event of the array (or its end), after the opening bracket.
_FIRST = re.compile(rb"\s*([{\]])")


def _gzipped(path: str | Path) -> bool:
    with parse.open_regular(path) as f:
        return f.read(2) == b"\x1f\x8b"


#: Read after a piece's size to find where it ends (more when no cut is found there).
_CUT_WINDOW = 1_000_000


def _split_file(path: str | Path, pieces: _Pieces, piece: int) -> parse.ParsedTrace:
    """`_split` for a file that is not compressed: only where the pieces end is read here
    (a window after each piece's size, and the file's tail); each worker reads its piece
    itself (`_parse_piece` of a byte range), so the pieces' bytes never pass through this
    process and it keeps the workers busy at a tenth of one's time."""
    with parse.open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size  # what it held when opened, as `json_blocks`
        head, pos = _events_start(_pread(f, 0, min(size, BLOCK_BYTES, piece)))
        last = size - parse.TAIL_WINDOW  # no cut at or after this: the array may end there
        while pos + piece < last:
            cut = _next_cut(f, pos + piece, last, pos + 4 * piece)
            if cut is None:
                break  # the rest is the last piece
            stop, pos_next = cut
            pieces.add((str(path), pos, stop))
            pos = pos_next
        return _last_piece(pieces, head, b"[" + _pread(f, pos, size - pos))


def _next_cut(f: BinaryIO, at: int, last: int, most: int) -> tuple[int, int] | None:
    """Where the piece reaching `at` ends (after its last event's "}") and the next begins
    (at its first event's "{"): the first edge between two events at or after `at` and
    before `last`; None when the rest is short enough to be the last piece (no edge before
    `last`); CannotSplit when no edge is found before `most`."""
    window = b""
    start = at
    while True:
        end = min(start + _CUT_WINDOW, last)
        if end <= start:
            return None
        window += _pread(f, start, end - start)
        edge = parse._EDGE.search(window)
        if edge is not None:
            return at + edge.start() + 1, at + edge.end() - 1
        if end >= most:
            raise CannotSplit("no place to cut between two events")
        start = end


def _pread(f: BinaryIO, offset: int, n: int) -> bytes:
    """`n` bytes of `f` from `offset` (fewer at its end)."""
    f.seek(offset)
    return f.read(n)


def _split(blocks: Iterator[bytes], pieces: _Pieces, piece: int) -> parse.ParsedTrace:
    """Read the blocks, cutting the events array into pieces of about `piece` bytes; the
    document around the array (its other keys) is decoded at the end, as
    `parse._find_events` does."""
    data, _ = _fill(b"", blocks, piece)  # a file that ends here: `_cut` finds it ended
    head, first = _events_start(data)
    rest = [data[first:]]  # from the first event's "{" (held by `_cut` alone)
    del data
    return _cut(rest, blocks, piece, head, pieces)


def _cut(
    rest: list[bytes], blocks: Iterator[bytes], piece: int, head: bytes, pieces: _Pieces
) -> parse.ParsedTrace:
    """The events array from its first event (`rest`'s one item, taken) on, cut into
    pieces; the keys around it (`head` and what follows it) decoded at the end."""
    data, ended = rest.pop(), False
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
    del data
    return _last_piece(pieces, head, framed)


def _events_start(data: bytes) -> tuple[bytes, int]:
    """(the document before the events array, without its "["; where its first event's "{"
    is) in a file's first bytes: where the pieces start."""
    key = data.find(parse._EVENTS_KEY)
    opening = parse._ARRAY_START.match(data, key + len(parse._EVENTS_KEY)) if key >= 0 else None
    first = _FIRST.match(data, opening.end()) if opening is not None else None
    if opening is None or first is None or first.group(1) != b"{":
        raise CannotSplit("no events array in its first bytes")
    return data[: opening.end() - 1], first.start(1)


def _last_piece(pieces: _Pieces, head: bytes, framed: bytes) -> parse.ParsedTrace:
    """The last piece (`framed`: "[" and the file's rest, up to the events array's end) and
    the trace's keys around the events (`head` before them, what follows the array after):
    what `pieces.finish` makes of every piece."""
    closing = parse._events_end(framed, 0)
    if closing is None:
        raise CannotSplit("the events array's end is not among the file's last bytes")
    rest = b"".join((head, b"null", framed[closing + 1 :]))
    try:
        trace = parse._DECODER.decode(rest)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise CannotSplit("the keys around the events do not decode") from exc
    pieces.add(memoryview(framed)[1:closing])
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
    """Each piece's frames into the sink, in file order, with what crosses pieces: the ids
    of earlier pieces (`quality`), the counts and the per-file facts. The pieces are parsed
    by `_parse_piece` on PIECE_WORKERS processes at once (one piece of 128 MB is about 1 s
    of CPU; the file's reading and cutting, and this, a tenth of it), at most IN_FLIGHT
    pieces held at a time, so the memory is bounded by the piece size whatever the file's."""

    def __init__(
        self, sink: FrameSink, piece: int, summarize: Callable[[pl.DataFrame], Any] | None = None
    ) -> None:
        self.sink = sink
        self.summarize = summarize
        #: each piece's summary part, in order (None once a piece has none)
        self.parts: list[Any] | None = [] if summarize is not None else None
        self.dropped: Counter[str] = Counter()
        self.seen: dict[str, _SeenIds] = {}
        self.n = 0  # events so far
        self.flows = 0
        self.facts: list[pl.DataFrame] = []
        self.steps: set[str] = set()
        self.pids: list[pl.DataFrame] = []
        self.k = 0  # pieces handed out
        self.pending: deque[Future[_Piece]] = deque()
        folder = getattr(sink, "folder", None)
        self.folder = str(folder()) if callable(folder) else None
        self.pool = _pool(piece)

    def add(self, events_json: memoryview | tuple[str, int, int]) -> None:
        """The events `events_json` (objects separated by commas, no brackets; or where they
        are in a file: its path and the byte range), handed to a worker; the oldest pieces
        are taken back in order while too many are out."""
        job = events_json
        if self.pool is not None and isinstance(job, memoryview):
            job = bytes(job)
        if self.pool is None:
            self.pending.append(_done(_parse_piece(job, self.folder, self.k, self.summarize)))
        else:
            work = (_parse_piece, job, self.folder, self.k, self.summarize)
            self.pending.append(self.pool.submit(*work))
        self.k += 1
        while len(self.pending) > (IN_FLIGHT if self.pool is not None else 0):
            self._take(self.pending.popleft().result())

    def _take(self, piece: _Piece) -> None:
        """A parsed piece into the sink (its files renamed into their places), with the ids
        earlier pieces hold cleared."""
        self.dropped.update(piece.dropped)
        if piece.facts is not None:
            self.facts.append(piece.facts)
            self.steps.update(piece.steps)
            self.pids.append(piece.pids)
        frames = piece.frames
        part = piece.part
        clash = self._clashes(piece.ids)
        if clash:  # ids of earlier pieces (a merged or hand-made file): cleared, rewritten
            events = frames["events"]
            if isinstance(events, tuple):
                file = Path(events[0])
                events = read_checked(file)
                file.unlink()
            events = _clear(events, clash, self.dropped)
            frames = {**frames, "events": events}
            if self.parts is not None:  # the part, of the ids as they are kept
                part = _summary_part(self.summarize, events)
        if self.parts is not None:
            self.parts = None if part is None else [*self.parts, part]
        for name in FRAME_SCHEMAS:
            part = frames.get(name)
            if part is None:
                continue
            if isinstance(part, tuple):
                path, size, height = part
                self.sink.add_file(name, Path(path), size)  # type: ignore[attr-defined]
            else:
                height = part.height
                if name == "events":  # its rows' numbers in the file (`idx`)
                    part = part.with_columns(
                        pl.int_range(self.n, self.n + height, dtype=pl.UInt32).alias("idx")
                    )
                if height:
                    self.sink.add(name, part)
            if name == "events":
                self.n += height
            elif name == "flows":
                self.flows += height

    def _clashes(self, ids: dict[str, pl.Series]) -> dict[str, pl.Series]:
        """The ids of this piece's owners that an earlier piece's owners hold, by column;
        `seen` then holds this piece's too."""
        out: dict[str, pl.Series] = {}
        for column, mine in ids.items():
            seen = self.seen.setdefault(column, _SeenIds())
            both = seen.held(mine)
            if both.len():
                out[column] = both
            seen.add(mine)
        return out

    def finish(self, trace: parse._Trace) -> parse.ParsedTrace:
        """The file's metadata, as `parse._parsed` gives it for the whole file."""
        self.drain()
        if self.dropped and self.n == 0 and self.flows == 0:
            raise parse.TraceFileError(f"no usable event: {parse.dropped_text(self.dropped)}")
        meta = parse._meta(trace, self.dropped)
        meta.update(self._file_facts())
        meta["dropped_events"] = dict(self.dropped.most_common())
        return parse.ParsedTrace(meta=meta, frames={}, streamed=True)

    def drain(self) -> None:
        """Every piece handed out, taken back."""
        while self.pending:
            self._take(self.pending.popleft().result())

    def close(self) -> None:
        """Stop the workers at once, whatever they are doing (the file failed, or is done)."""
        if self.pool is None:
            return
        for fut in self.pending:
            fut.cancel()
        procs = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        self.pool = None

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


class _SeenIds:
    """The distinct ids of the pieces so far, as sorted blocks merged like a binary counter
    (a block is merged with the one before while that is at most twice its size): each
    piece's ids are looked up in a few blocks and merged O(log pieces) times. One set made
    again for every piece cost time quadratic in the pieces: 15 s of CPU over a 10 GB
    rank's 82 pieces, in the process that hands them out."""

    def __init__(self) -> None:
        self.blocks: list[np.ndarray] = []

    def held(self, ids: pl.Series) -> pl.Series:
        """Those of `ids` (distinct, no null) some earlier piece has."""
        import numpy as np  # (here: a report that parses nothing imports no numpy)

        mine = ids.to_numpy()
        hit = np.zeros(mine.size, dtype=bool)
        for block in self.blocks:
            at = np.minimum(np.searchsorted(block, mine), block.size - 1)
            hit |= block[at] == mine
        return ids.filter(pl.Series(hit))

    def add(self, ids: pl.Series) -> None:
        import numpy as np

        self.blocks.append(np.sort(ids.to_numpy()))
        while len(self.blocks) > 1 and self.blocks[-2].size <= 2 * self.blocks[-1].size:
            both = np.concatenate([self.blocks.pop(), self.blocks.pop()])
            both.sort(kind="stable")  # two sorted runs: merged (np.union1d hashes: 100x slower)
            new = np.empty(both.size, dtype=bool)
            new[:1] = True
            np.not_equal(both[1:], both[:-1], out=new[1:])
            self.blocks.append(both[new])


#: The processes parsing a file's pieces at once (never more than the cores).
PIECE_WORKERS = 2
#: Pieces handed out and not yet taken back, beyond those being parsed: one waiting, so a
#: worker that finishes starts the next at once.
IN_FLIGHT = PIECE_WORKERS + 1
#: Pieces smaller than this are parsed in this process (a worker's start would cost more).
POOL_PIECE_MIN = 8_000_000


def _pool(piece: int) -> ProcessPoolExecutor | None:
    """Processes for pieces of `piece` bytes, or None: parse them here."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    workers = min(PIECE_WORKERS, cores)
    if workers < 2 or piece < POOL_PIECE_MIN:
        return None
    from hta_tui.trace.pool import START_METHOD, prepare_pool

    prepare_pool()
    return ProcessPoolExecutor(workers, mp_context=mp.get_context(START_METHOD))


def _done(piece: _Piece) -> Future[_Piece]:
    fut: Future[_Piece] = Future()
    fut.set_result(piece)
    return fut


@dataclass
class _Piece:
    """A parsed piece, as a worker hands it back: each frame's file in the entry being
    written (path, size, rows) or, without one, the frame; what depends on other pieces."""

    frames: dict[str, tuple[str, int, int] | pl.DataFrame]
    dropped: Counter[str]
    ids: dict[str, pl.Series]  # the ids of its owners, by column (`quality._unique_ids`)
    facts: pl.DataFrame | None
    steps: set[str]
    pids: pl.DataFrame | None
    part: Any = None  # `PieceSummaries.piece` of its events


def _parse_piece(
    events_json: bytes | memoryview | tuple[str, int, int],
    folder: str | None,
    k: int,
    summarize: Callable[[pl.DataFrame], Any] | None = None,
) -> _Piece:
    """One piece's frames (`columns.build_frames`, as a whole file's), its ids shared within
    it cleared, its facts and its summary part (`summarize`); written into `folder` (the
    entry being written) when given, so only their names travel back. `events_json`: the
    events, or the path and byte range of the file that holds them (read here). Run in a
    worker."""
    if isinstance(events_json, tuple):
        path, start, stop = events_json
        with parse.open_regular(path) as f:
            events_json = _pread(f, start, stop - start)
    was_enabled = gc.isenabled()
    gc.disable()  # as `parse._parse_owned`: millions of small structs, no cycles
    dropped: Counter[str] = Counter()
    try:
        text = memoryview(b"".join((b"[", events_json, b"]")))
        try:
            frames = build_frames(parse._chunks(text, dropped, [False]), dropped)
        except msgspec.DecodeError as exc:  # a cut inside a string, or not JSON at all
            raise CannotSplit("a piece does not decode on its own") from exc
        except RecursionError as exc:
            raise parse.TraceFileError("invalid JSON (nested too deeply)") from exc
        del text, events_json
    finally:
        if was_enabled:
            gc.enable()
    ids: dict[str, pl.Series] = {}
    events = checked_events(frames["events"], dropped, ids)
    frames["events"] = events
    facts, steps, pids = _facts(events)
    part = _summary_part(summarize, events) if summarize is not None else None
    out: dict[str, tuple[str, int, int] | pl.DataFrame] = {}
    for name, frame in frames.items():
        if frame.is_empty():
            continue
        if folder is None:
            out[name] = frame
        else:
            path = Path(folder) / f".piece-{k}-{name}.parquet"
            out[name] = (str(path), write_checked(frame, path), frame.height)
    return _Piece(out, dropped, ids, facts, steps, pids, part)


def _summary_part(summarize: Callable[[pl.DataFrame], Any] | None, events: pl.DataFrame) -> Any:
    """`summarize(events)`, or None when it fails (the summaries then read the events back:
    a bug there costs time, not the file)."""
    if summarize is None:
        return None
    try:
        return summarize(events)
    except Exception:
        log.warning("a piece's summary part failed; read back instead", exc_info=True)
        return None


def _facts(events: pl.DataFrame) -> tuple[pl.DataFrame | None, set[str], pl.DataFrame | None]:
    """A piece's share of `parse._frame_facts`."""
    if events.is_empty():
        return None, set(), None
    facts = events.select(
        pl.col("ts").min().alias("min_ts"),
        (pl.col("ts") + pl.col("dur")).max().alias("max_end"),
        (pl.col("kind") == "kernel").sum().alias("n_kernels"),
    )
    steps = events.filter(pl.col("name").str.contains("ProfilerStep", literal=True))
    pids = (
        events.filter(pl.col("pid").is_not_null())
        .group_by("pid")
        .agg(pl.len().alias("all"), pl.col("stream").is_null().sum().alias("cpu"))
    )
    return facts, set(steps["name"].unique().drop_nulls().to_list()), pids


def _clear(
    events: pl.DataFrame, clash: dict[str, pl.Series], dropped: Counter[str]
) -> pl.DataFrame:
    """`events` with the ids an earlier piece's owners hold cleared on this piece's owners,
    counted as `quality` counts them."""
    for column, ids in clash.items():
        owners = pl.col("kind").is_in(LAUNCH_KINDS if column == "correlation" else _OP_KINDS)
        shared = owners & pl.col(column).is_in(ids.implode())
        n = events.select(shared.sum()).item()
        if n:
            dropped[SHARED_CORRELATION if column == "correlation" else SHARED_EXTERNAL_ID] += n
            events = events.with_columns(
                pl.when(shared).then(None).otherwise(pl.col(column)).alias(column)
            )
    return events


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
