"""A file over the byte limit is parsed in pieces (trace/stream.py) into its cache entry: the
frames and metadata are the whole-file parse's, each piece holds at most about the limit of
JSON, and a layout that cannot be split is refused over the limit as before. The knobs are
lowered so a small generated trace is cut into many pieces."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from hta_tui.synth.files import make_trace
from hta_tui.synth.hostile_files import HUGE_DIGITS
from hta_tui.synth.memory import MemoryOptions
from hta_tui.trace import parse, stream
from hta_tui.trace.cache import Cache, EntryWriter, read_frame
from hta_tui.trace.checked import read_checked
from hta_tui.trace.discover import describe
from hta_tui.trace.limits import Limits
from hta_tui.trace.load import load_files
from hta_tui.trace.model import RankData
from hta_tui.trace.quality import SHARED_CORRELATION, STEP_OUT_OF_RANGE
from hta_tui.trace.schema import FRAME_SCHEMAS

LIMIT = 30_000  # bytes of JSON held at once (the lowered byte limit): the piece size
_NOT_IN_BOTH = ("cache_files", "path")


def _trace() -> dict:
    """A rank with memory events, flows, metadata and steps, and at its end what depends on
    more than one piece: a launch reusing a correlation id of the first piece, a step
    number beyond any column, and timestamps a float cannot keep (the rest of the file is
    then decoded with numbers as text)."""
    trace = make_trace(0, world_size=2, steps=3, seed=3, memory=MemoryOptions())
    events = trace["traceEvents"]
    launch = next(e for e in events if e.get("cat") == "cuda_runtime" and "args" in e)
    step = next(e for e in events if e.get("name", "").startswith("ProfilerStep#"))
    kernel = next(e for e in events if e.get("cat") == "kernel" and "args" in e)
    late = 2**45  # us: beyond 2^43, a float cannot keep a fractional digit
    # Python functions around a launch: a module (an owner of its kernels) and plain ones
    where = {"ph": "X", "cat": "python_function", "pid": launch["pid"], "tid": launch["tid"]}
    events += [
        {**where, "name": "nn.Module: Net", "ts": launch["ts"] - 2, "dur": launch["dur"] + 4,
         "args": {"Python id": 7, "Python parent id": 6, "Python module id": 0}},
        {**where, "name": "net.py(12): forward", "ts": launch["ts"] - 1, "dur": launch["dur"] + 2,
         "args": {"Python id": 8, "Python parent id": 7}},
        {**where, "name": "net.py(3): helper", "ts": launch["ts"] + 1e5, "dur": 3.0,
         "args": {"Python id": 9, "Python parent id": 6}},
    ]  # fmt: skip
    events += [
        {**launch, "ts": launch["ts"] + 1e6},
        {**step, "name": f"ProfilerStep#{HUGE_DIGITS}"},
        {**launch, "ts": f"{late}.125", "dur": 1.5, "args": {"correlation": 10**9}},
        # a thread and a stream with events only at the end (the timeline lists their rows
        # even when it reads only the first part)
        {**launch, "cat": "cpu_op", "name": "aten::late", "tid": 4242, "ts": f"{late}.250",
         "dur": 2, "args": {}},
        {**kernel, "tid": 99, "ts": f"{late}.500", "dur": 1,
         "args": {**kernel["args"], "stream": 99, "correlation": 10**9}},
        {"ph": "X", "cat": "cpu_op", "name": "bad", "pid": 1, "tid": 1, "ts": "soon"},
    ]  # fmt: skip
    return trace


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """The events array's end looked for in the last 20 KB (not 4 MB: the whole file)."""
    monkeypatch.setattr(parse, "TAIL_WINDOW", 20_000)
    monkeypatch.setattr(stream, "BLOCK_BYTES", 8_192)


def _same(entry: Path, meta: dict, whole: parse.ParsedTrace) -> None:
    for name in FRAME_SCHEMAS:
        assert_frame_equal(read_frame(entry, name), whole.frames[name])
    # a column with no value (no kernel's occupancy here, say) held as one null, not a null
    # per row
    events = whole.frames["events"]
    assert any(events[c].null_count() == events.height for c in events.columns)
    assert read_frame(entry, "events").estimated_size() < events.estimated_size()
    strip = lambda m: {k: v for k, v in m.items() if k not in _NOT_IN_BOTH}  # noqa: E731
    assert strip(meta) == strip(whole.meta)


def test_a_file_over_the_limit_opens_in_pieces_as_parsed_whole(
    tmp_path: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t" / "rank-0.json"
    path.parent.mkdir()
    path.write_bytes(orjson.dumps(_trace()))
    whole = parse.parse_file(path)
    assert whole.meta["dropped_events"].keys() >= {SHARED_CORRELATION, STEP_OUT_OF_RANGE}
    assert whole.frames["memory"].height and whole.frames["flows"].height
    sizes: list[int] = []
    add = stream._Pieces.add

    def spy(self: stream._Pieces, job: memoryview | tuple[str, int, int]) -> None:
        sizes.append(job[2] - job[1] if isinstance(job, tuple) else len(job))
        add(self, job)

    monkeypatch.setattr(stream._Pieces, "add", spy)
    cache = Cache(tmp_path / "cache")
    (result,) = load_files([describe(path)], cache, limits=Limits(max_bytes=LIMIT))
    assert result.ok and not result.frames, result.error
    # many pieces, none much over the limit (a piece ends at the first event after it)
    assert path.stat().st_size > 10 * LIMIT and len(sizes) >= 10
    assert max(sizes) < 2 * LIMIT
    assert (result.entry / "events.9.parquet").exists()
    _same(result.entry, result.meta, whole)
    assert_frame_equal(RankData(result.entry, result.meta).events, whole.frames["events"])
    # a warm open finds the entry whole; a piece gone is damage, found when it is looked up
    assert cache.lookup(describe(path)) is not None
    (result.entry / "events.3.parquet").unlink()
    assert cache.lookup(describe(path)) is None


def test_a_gzip_of_several_members_is_read_in_pieces(tmp_path: Path, small_pieces: None) -> None:
    text = orjson.dumps(_trace())
    path = tmp_path / "rank-0.json.gz"
    cut = len(text) // 3  # members of one document: gunzip joins them
    path.write_bytes(b"".join(gzip.compress(p) for p in (text[:cut], text[cut:])))
    whole = parse.parse_file(path)
    writer = EntryWriter(tmp_path / "entry")
    parsed = stream.parse_in_pieces(path, writer, Limits(max_bytes=LIMIT))
    assert parsed.streamed and parsed.meta["path"] == str(path)
    _same(writer.commit(parsed.meta), parsed.meta, whole)


def test_a_layout_that_cannot_be_split_is_held_whole_within_the_limit(
    tmp_path: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events followed by more than the tail window of other objects: a piece is cut
    between two of those, and the piece holding the events' end does not decode. Within
    the limit the file is parsed whole, as before; over it, refused with the limit's
    reason, and nothing is left in the cache."""
    monkeypatch.setattr(stream, "PIECE_BYTES", LIMIT)
    trace = _trace()
    trace["devices"] = [{"id": i, "name": "x" * 60} for i in range(1_500)]  # 120 KB
    path = tmp_path / "rank-0.json"
    path.write_bytes(orjson.dumps(trace))
    whole = parse.parse_file(path)
    writer = EntryWriter(tmp_path / "cache" / "entry")
    parsed = stream.parse_in_pieces(path, writer, Limits(max_bytes=10**9))
    assert not parsed.streamed
    _same_frames = [assert_frame_equal(parsed.frames[n], whole.frames[n]) for n in FRAME_SCHEMAS]
    assert len(_same_frames) == len(FRAME_SCHEMAS)
    with pytest.raises(parse.TraceFileError) as caught:
        stream.parse_in_pieces(path, writer, Limits(max_bytes=LIMIT))
    assert caught.value.too_big
    assert str(caught.value) == "larger than the 0 MB limit (HTA_TUI_MAX_FILE_MB)"
    assert not list((tmp_path / "cache").glob("*/*"))


def test_pieces_parsed_by_two_processes_at_once_make_the_whole_files_frames(
    tmp_path: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pieces go to worker processes (each reads its byte range itself, writes its
    frames into the entry) and come back in any order: the entry is still the whole-file
    parse's, row numbers and the ids an earlier piece holds (cleared) included, and no
    worker's file is left in it. Each worker makes its piece's share of the per-file
    summaries too: merged in order, they are the whole file's."""
    from hta_tui.analysis import piece_summary, step_overview

    monkeypatch.setattr(stream, "POOL_PIECE_MIN", 0)
    path = tmp_path / "rank-0.json"
    path.write_bytes(orjson.dumps(_trace()))
    whole = parse.parse_file(path)
    writer = EntryWriter(tmp_path / "entry")
    parts: list[piece_summary.Part] = []
    limits = Limits(max_bytes=LIMIT)
    parsed = stream.parse_in_pieces(path, writer, limits, piece_summary.summary_part, parts)
    assert parsed.streamed
    entry = writer.commit(parsed.meta)
    assert (entry / "events.9.parquet").exists()
    assert not list(entry.glob(".piece-*"))
    _same(entry, parsed.meta, whole)
    assert len(parts) == len(list(entry.glob("events*.parquet")))
    held = step_overview.precompute(tmp_path / "held", whole.meta, whole.frames)
    merged = step_overview.from_pieces(entry, parsed.meta, parts)
    assert merged.keys() == held.keys()
    for key, table in held.items():
        assert_frame_equal(merged[key], table)


def test_the_time_limit_is_for_each_gb_so_a_10_gb_rank_is_not_refused_for_its_size() -> None:
    """A large rank is parsed in pieces in bounded memory, so nothing refuses it for its
    size: the time limit (which stops a file stuck or endless, a gzip bomb small on disk)
    is given once per GB on disk, and a 10 GB rank gets ten times the default."""
    limits = Limits(timeout_s=300.0)
    assert limits.seconds_for(2_000_000) == 300.0  # a gzip bomb: small on disk
    assert limits.seconds_for(999_000_000) == 300.0
    assert limits.seconds_for(10_240_000_000) == 300.0 * 11
    assert Limits().max_bytes < 10_240_000_000  # only what cannot be split is held whole


def test_a_large_ranks_summaries_read_only_their_columns_back(
    tmp_path: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a file parsed in pieces is stored, its per-file summaries (the overview's row,
    the step breakdown) read only the events' columns they use from the entry, never the
    whole frame (a 10 GB rank's would not fit); they are those of the whole-file parse."""
    from hta_tui.analysis import step_overview
    from hta_tui.trace import cache as cache_module
    from hta_tui.trace import model

    monkeypatch.setattr(model, "NARROW_EVENTS", 0)  # this small rank counts as a large one
    path = tmp_path / "rank-0.json"
    path.write_bytes(orjson.dumps(_trace()))
    whole = parse.parse_file(path)
    writer = EntryWriter(tmp_path / "entry")
    parsed = stream.parse_in_pieces(path, writer, Limits(max_bytes=LIMIT))
    entry = writer.commit(parsed.meta)
    reads: list[tuple[str, list[str] | None]] = []
    read = cache_module.read_frame

    def spy(entry: Path, name: str, columns: list[str] | None = None) -> object:
        reads.append((name, columns))
        return read(entry, name, columns)

    monkeypatch.setattr(model, "read_frame", spy)
    narrow = step_overview.precompute(entry, parsed.meta, None)
    held = step_overview.precompute(tmp_path / "other", whole.meta, whole.frames)
    assert narrow.keys() == held.keys() and len(narrow) >= 2
    for key, table in held.items():
        assert_frame_equal(narrow[key], table)
    events = [cols for name, cols in reads if name == "events"]
    assert events and all(cols is not None and len(cols) < 20 for cols in events)


def _late_comm_kernel(trace: dict) -> dict:
    """`trace` with, at its end, a kernel of no NCCL name launched by a collective op of its
    start (its external id): its role in the step breakdown (communication) is decided by
    another piece."""
    events = trace["traceEvents"]
    op = next(e for e in events if e.get("name") == "nccl:all_reduce")
    kernel = next(e for e in events if e.get("cat") == "kernel" and "nccl" not in e["name"])
    args = {**kernel["args"], "External id": op["args"]["External id"], "correlation": 7}
    late = {**kernel, "name": "custom_all_reduce", "ts": kernel["ts"] + 3, "args": args}
    return {**trace, "traceEvents": [*events, late]}


@pytest.mark.parametrize("steps", [True, False])
def test_a_file_parsed_in_pieces_gets_its_summaries_from_its_pieces_not_read_back(
    tmp_path: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch, steps: bool
) -> None:
    """The per-file summaries of a file parsed in pieces (the overview's row, the step
    breakdown; the app's and the report's) are made from each piece's share, computed as
    the piece is parsed, and merged: no event is read back from the entry (a 10 GB rank's
    took 35-40 s of one core after the parse, and its peak), and every field is the
    whole-file parse's. With steps (HTA's ProfilerStep filter on, ids an earlier piece holds
    cleared) and without (the step breakdown's single step); a kernel whose role a
    collective op of another piece decides."""
    from hta_tui.analysis import overview, step_overview
    from hta_tui.trace import model

    trace = _late_comm_kernel(_trace())
    if not steps:
        events = trace["traceEvents"]
        trace["traceEvents"] = [e for e in events if "ProfilerStep" not in str(e.get("name"))]
    path = tmp_path / "rank-0.json"
    path.write_bytes(orjson.dumps(trace))
    whole = parse.parse_file(path)
    assert (len(whole.meta["step_names"]) >= 2) == steps
    reads: list[str] = []
    for name in ("read_frame", "read_rows"):
        real = getattr(model, name)
        spy = lambda *a, real=real, **k: reads.append(a[1]) or real(*a, **k)  # noqa: E731
        monkeypatch.setattr(model, name, spy)
    for k, precompute in enumerate((step_overview.precompute, overview.precompute)):
        held = precompute(tmp_path / f"held-{k}", whole.meta, whole.frames)
        cache = Cache(tmp_path / f"cache-{k}")
        (result,) = load_files(
            [describe(path)], cache, after_parse=precompute, limits=Limits(max_bytes=LIMIT)
        )
        assert result.ok and result.entry is not None
        assert (result.entry / "events.3.parquet").exists()  # parsed in pieces
        assert reads == []  # nothing read back
        assert result.memos is not None and result.memos.keys() == held.keys()
        for key, table in held.items():
            assert_frame_equal(result.memos[key], table)
            assert_frame_equal(read_checked(result.entry / "derived" / f"{key}.parquet"), table)
    row = held[next(iter(held))].row(0, named=True)
    assert row["has_gpu"] and row["overlapping"] is not None


def _no_part(events: pl.DataFrame) -> object:
    raise ValueError("a bug in a piece's part")


def test_a_piece_whose_summary_part_fails_costs_a_read_back_not_the_file(
    tmp_path: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A piece whose share of the summaries cannot be made (a bug) leaves the file loaded,
    its summaries made from its events read back, the same as the whole file's."""
    from hta_tui.analysis import step_overview
    from hta_tui.trace import model

    hook = step_overview.precompute.in_pieces  # type: ignore[attr-defined]
    monkeypatch.setattr(step_overview.precompute, "in_pieces", replace(hook, piece=_no_part))
    path = tmp_path / "rank-0.json"
    path.write_bytes(orjson.dumps(_trace()))
    whole = parse.parse_file(path)
    held = step_overview.precompute(tmp_path / "held", whole.meta, whole.frames)
    limits = Limits(max_bytes=LIMIT)
    reads: list[str] = []
    real = model.read_frame
    monkeypatch.setattr(model, "read_frame", lambda *a, **k: reads.append(a[1]) or real(*a, **k))
    (result,) = load_files(
        [describe(path)], Cache(tmp_path / "c"), after_parse=step_overview.precompute, limits=limits
    )
    assert result.ok and result.memos is not None and result.memos.keys() == held.keys()
    assert "events" in reads  # read back
    for key, table in held.items():
        assert_frame_equal(result.memos[key], table)


def test_the_kernels_and_timeline_of_a_large_rank_read_only_their_columns(
    tmp_path: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank too large to hold its whole events frame (this small one, by lowering the
    bound) gives the kernels view and the timeline from the few columns each reads back
    from its entry: the same kernel tables and timeline rows as from the whole frames."""
    import numpy as np

    from hta_tui.app.screens import timeline as timeline_screen
    from hta_tui.app.screens.base import Params
    from hta_tui.app.screens.kernels import KernelsScreen
    from hta_tui.app.screens.timeline import TimelineScreen
    from hta_tui.trace import model
    from hta_tui.trace.model import open_set

    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "rank-0.json").write_bytes(orjson.dumps(_trace()))
    monkeypatch.setenv("HTA_TUI_MAX_FILE_MB", str(LIMIT / 1e6))
    ts = open_set(tmp_path / "t", Cache(tmp_path / "cache"), workers=1)
    (data,) = ts.loaded().values()
    assert (data.entry / "events.3.parquet").exists()  # parsed in pieces
    whole = {0: data.events}
    kernels = KernelsScreen.compute(whole, Params())
    timeline = TimelineScreen.compute(whole, Params())
    reads: list[list[str] | None] = []
    read = model.read_frame
    monkeypatch.setattr(model, "read_frame", lambda e, n, c=None: reads.append(c) or read(e, n, c))
    monkeypatch.setattr(model, "NARROW_EVENTS", 0)
    data._frames.clear()  # as after a restart: nothing held
    given = KernelsScreen.frames_for(ts, Params())
    # only the rows its analyses read, a piece at a time: no Python function but modules',
    # numbered as in the whole frame
    plain = (pl.col("kind") == "python") & pl.col("python_module_id").is_null()
    assert whole[0].filter(plain).height >= 2 and not given[0].filter(plain).height
    assert given[0].filter(pl.col("kind") == "python").height >= 1
    kept = whole[0].filter(~plain).select(KernelsScreen.EVENTS_COLUMNS)
    assert_frame_equal(given[0], kept)
    # one chunk per column (the pieces' joined): the HTA view of the rank shares them
    assert set(given[0].n_chunks("all")) == {1}
    # ... and a column with no value in them (held as one null) reads the same
    assert any(given[0][c].null_count() == given[0].height for c in given[0].columns)
    narrow = KernelsScreen.compute(given, Params())
    for key in ("types", "kernels"):
        assert_frame_equal(narrow[key], kernels[key], check_exact=False)
    assert narrow["kernels"].height
    later, whole_later = KernelsScreen.later(given, Params()), KernelsScreen.later(whole, Params())
    assert later["attribution"] == whole_later["attribution"]
    assert_frame_equal(later["backends"], whole_later["backends"])
    by_op = Params(extra={"by_op": True})
    assert_frame_equal(
        KernelsScreen.compute(given, by_op)["kernels"],
        KernelsScreen.compute(whole, by_op)["kernels"],
    )
    frames = TimelineScreen.frames_for(ts, Params())
    assert len(frames[0].columns) == len(TimelineScreen.EVENTS_COLUMNS)
    rows = TimelineScreen.compute(frames, Params()).rows
    assert [r.key for r in rows] == [r.key for r in timeline.rows] and rows
    assert all(np.array_equal(a.idx, b.idx) for a, b in zip(rows, timeline.rows, strict=True))
    assert reads and all(c is not None and len(c) < 30 for c in reads)
    # a rank too large to draw whole: only the events starting in its first part are read
    # (here a third of its time) and drawn, on the rows and in the order they had
    monkeypatch.setattr(timeline_screen, "WINDOW_EVENTS", data.meta["n_events"] // 3)
    cut = timeline_screen.window(data.meta)
    assert cut is not None
    part = TimelineScreen.frames_for(ts, Params())[0]
    early = whole[0].filter(cut)
    assert 0 < part.height == early.height < whole[0].height
    assert_frame_equal(part, early.select(TimelineScreen.EVENTS_COLUMNS))
    drawn = {
        r.key: part["idx"].to_numpy()[r.idx]
        for r in TimelineScreen.compute({0: part}, Params()).rows
        if not r.counter
    }
    kept = set(early["idx"].to_list())
    every = {r.key: whole[0]["idx"].to_numpy()[r.idx] for r in timeline.rows if not r.counter}
    assert drawn and drawn.keys() <= every.keys()
    for key, idx in every.items():
        assert list(drawn.get(key, [])) == [i for i in idx if i in kept]
    # ... with every thread and stream of the whole rank listed (empty where the part has
    # none) and the whole rank's span, so the view pans to its end ...
    from hta_tui.analysis.timeline_rows import stream_of

    def lanes(tl: object) -> set[tuple]:
        return {(*r.key[:3], stream_of(r.key)) for r in tl.rows if not r.counter}  # type: ignore[attr-defined]

    screen = TimelineScreen()
    shown = screen.compute_on(ts, {0: part}, Params())
    alone = TimelineScreen.compute({0: part}, Params())
    assert screen.partial == [0] and screen.read_ns is not None
    assert not lanes(timeline) <= lanes(alone)  # some rows have no event in the first part
    assert lanes(timeline) <= lanes(shown)
    from hta_tui.analysis.timeline_cells import row_cells

    empty = [r for r in shown.rows if not len(r)]
    assert empty and all((row_cells(r, 0, shown.span_ns, 80).busy == 0).all() for r in empty)
    assert shown.origin_ns + shown.span_ns == data.meta["max_end"] > alone.origin_ns + alone.span_ns
    # ... and panning past the part read reads the part shown there: the last events drawn
    end = TimelineScreen.events_rows(Params(extra={"window_at": data.meta["max_end"] - 1}))
    at = timeline_screen.window_bounds(data.meta)
    assert at is not None and callable(end)
    late = Params(extra={"window_at": data.meta["max_end"] - (at[1] - at[0])})
    tail = TimelineScreen.frames_for(ts, late)[0]
    last = whole[0].filter(pl.col("ts") == pl.col("ts").max())["idx"].to_list()
    assert last and set(last) <= set(tail["idx"].to_list())
    moved = screen.compute_on(ts, {0: tail}, late)
    drawn_late = {i for r in moved.rows if not r.counter for i in tail["idx"].to_numpy()[r.idx]}
    assert set(last) <= drawn_late and lanes(timeline) <= lanes(moved)
    assert screen.read_ns[0] > at[1] - moved.origin_ns


def test_the_timeline_moved_past_the_part_read_reads_the_part_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A large rank's timeline (drawn in part): panning or zooming so that the view leaves
    the part read asks for the part from the view's left edge (once), not while it stays
    inside it or only widened around it."""
    from types import SimpleNamespace

    from hta_tui.app.screens.timeline import TimelineScreen

    view = SimpleNamespace(t0=0.0, span=100.0, timeline=SimpleNamespace(origin_ns=1_000))
    asked: list[dict] = []
    monkeypatch.setattr(TimelineScreen, "view", property(lambda s: view))
    monkeypatch.setattr(TimelineScreen, "_say", lambda s, text: None)
    monkeypatch.setattr(TimelineScreen, "set_params", lambda s, **kw: asked.append(kw))
    screen = TimelineScreen()
    screen.read_ns = (0, 400)
    screen._follow_view()  # inside the part read
    view.span = 1_000.0
    screen._follow_view()  # zoomed out from its start: nothing more to read from there
    assert asked == []
    view.t0, view.span = 450.0, 100.0  # panned past its end
    screen._follow_view()
    assert asked == [{"window_at": 1_450}]
    screen.params.extra["window_at"] = 1_450
    screen._follow_view()  # the same part asked for again: not read twice
    # the whole trace again (z) from the part read later: the first part read again
    screen.read_ns = (450, 850)
    view.timeline.span_ns = 2_000
    view.show_range = lambda t0, t1: setattr(view, "t0", t0) or setattr(view, "span", t1 - t0)
    screen.action_reset_zoom()
    assert asked == [{"window_at": 1_450}, {"window_at": 1_000}]
    screen.params.extra["window_at"] = 1_000
    screen.read_ns = None  # a rank drawn whole: nothing to read
    view.t0 = 5_000.0
    screen._follow_view()
    assert len(asked) == 2


def test_the_ids_of_earlier_pieces_are_found_in_any_of_them() -> None:
    """The ids each piece's owners hold are looked up in those of every earlier piece (kept
    as a few sorted blocks, merged as they come, not one set made again per piece): an id
    of the first piece is found in the last, and only held ids are."""
    import numpy as np

    rng = np.random.default_rng(5)
    pieces = stream._Pieces.__new__(stream._Pieces)
    pieces.seen = {}
    held: set[int] = set()
    for k in range(40):
        mine = np.unique(rng.integers(0, 20_000, 300 + 37 * k))
        ids = {"correlation": pl.Series("correlation", mine)}
        clash = pieces._clashes(ids).get("correlation", pl.Series(dtype=pl.Int64))
        assert set(clash.to_list()) == held & set(mine.tolist())
        held |= set(mine.tolist())
    assert len(pieces.seen["correlation"].blocks) < 8
