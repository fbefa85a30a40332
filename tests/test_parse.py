"""Every dialect becomes the same frames; every bad file becomes a one-line reason."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import orjson
import polars as pl
import pytest

from hta_tui.trace import parse as parse_mod
from hta_tui.trace.columns import kind_of_category
from hta_tui.trace.parse import TraceFileError, parse_bytes, parse_file
from hta_tui.trace.schema import EVENTS_SCHEMA, FLOWS_SCHEMA
from tests import dialects


def events_of(trace: dict, tmp_path: Path, name: str = "t.json") -> pl.DataFrame:
    parsed = parse_file(dialects.write(trace, tmp_path / name))
    assert parsed.frames["events"].schema == pl.Schema(EVENTS_SCHEMA)
    return parsed.frames["events"]


def test_current_dialect(tmp_path: Path) -> None:
    parsed = parse_file(dialects.write(dialects.current(rank=3), tmp_path / "r.json.gz"))
    ev = parsed.frames["events"]
    assert parsed.meta["rank_in_file"] == 3
    assert parsed.meta["device_properties"][0]["name"] == "NVIDIA A100-SXM4-80GB"
    kinds = dict(zip(ev["name"], ev["kind"], strict=False))
    assert kinds["ampere_sgemm_128x64_tn"] == "kernel"
    assert kinds["cudaLaunchKernel"] == "runtime"
    assert kinds["aten::mm"] == "cpu_op"
    assert kinds["ProfilerStep#1"] == "annotation"
    assert kinds["Memcpy DtoH (Device -> Pinned)"] == "memcpy"
    assert kinds["PyTorch Profiler (0)"] == "trace_span"
    k = ev.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert (k["stream"], k["device"], k["correlation"], k["external_id"]) == (7, 0, 10, 2)
    assert k["grid"] == [4, 2, 1] and k["block"] == [128, 1, 1] and k["registers"] == 64
    assert k["ts"] == 1_700_000_000_000_010_000  # exact ns from a 1.7e15 us float
    assert k["dur"] == 30_000
    mm = ev.filter(pl.col("name") == "aten::mm").row(0, named=True)
    # the event's [[4, 8], [8, 16]] (orjson writes it without spaces) in Kineto's spacing
    assert (mm["input_dims"], mm["input_type"]) == ("[[4, 8], [8, 16]]", '["float", "float"]')
    assert mm["stream"] is None
    m = ev.filter(pl.col("kind") == "memcpy").row(0, named=True)
    assert (m["bytes"], m["bandwidth"]) == (4096, 0.4096)
    flows = parsed.frames["flows"]
    assert flows.schema == pl.Schema(FLOWS_SCHEMA)
    assert sorted(flows["ph"].to_list()) == ["f", "s"] and set(flows["id"]) == {10}
    threads = parsed.frames["threads"]
    assert threads.row(0, named=True)["value"] == "python"
    assert parsed.meta["n_kernels"] == 1 and parsed.meta["n_events"] == ev.height


def test_legacy_dialect(tmp_path: Path) -> None:
    ev = events_of(dialects.legacy(), tmp_path)
    assert ev["kind"].to_list() == ["cpu_op", "runtime", "kernel", "memcpy", "memset"]
    kernel = ev.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert kernel["stream"] == 7 and kernel["tid"] == 7
    assert kernel["external_id"] == 5  # lower-case "external id"
    # a memset with no stream arg takes it from the "stream 9" tid
    assert ev.filter(pl.col("kind") == "memset")["stream"].to_list() == [9]
    assert ev.filter(pl.col("kind") == "cpu_op")["tid"].to_list() == [12]  # "12" as a string


def test_rocm_dialect(tmp_path: Path) -> None:
    parsed = parse_file(dialects.write(dialects.rocm(), tmp_path / "rocm.json"))
    ev = parsed.frames["events"]
    assert parsed.meta["device_properties"][0]["name"] == "AMD Instinct MI250X"
    assert parsed.meta["rank_in_file"] == 2
    gpu = ev.filter(pl.col("stream").is_not_null())
    assert gpu["stream"].to_list() == [0, 1]  # "0x0", "0x1"
    assert gpu["kind"].to_list() == ["kernel", "memcpy"]
    assert ev.filter(pl.col("name") == "hipLaunchKernel")["kind"].to_list() == ["runtime"]
    assert gpu["ts"].to_list() == [20_125, 33_000]
    assert gpu["bandwidth"].to_list() == [None, None]  # computed later, by the analyses


def test_triton_driver_launch_and_string_grid(tmp_path: Path) -> None:
    ev = events_of(dialects.triton_driver(), tmp_path)
    assert ev["kind"].to_list() == ["driver", "kernel"]
    assert ev["correlation"].to_list() == [35, 35]
    assert ev["grid"].to_list() == [None, None]  # "grid(1,)" is not a launch dimension


def test_non_cuda_accelerator(tmp_path: Path) -> None:
    ev = events_of(dialects.mlu(), tmp_path)
    assert ev["kind"].to_list() == ["runtime", "kernel"]
    assert ev.filter(pl.col("kind") == "kernel")["stream"].to_list() == [1]


def test_cpu_only_rank(tmp_path: Path) -> None:
    parsed = parse_file(dialects.write(dialects.cpu_only(rank=5), tmp_path / "c.json"))
    assert parsed.meta["rank_in_file"] == 5
    assert parsed.meta["n_kernels"] == 0
    assert parsed.frames["events"]["stream"].null_count() == 2


def test_fractional_timestamps_are_exact(tmp_path: Path) -> None:
    ev = events_of(dialects.nanoseconds(), tmp_path)
    assert ev["ts"].to_list() == [4458676983543183, 4458676983584591]
    assert ev["dur"].to_list() == [41407, 1]


def test_missing_distributed_info(tmp_path: Path) -> None:
    parsed = parse_file(dialects.write(dialects.triton_driver(), tmp_path / "t.json"))
    assert parsed.meta["rank_in_file"] is None
    assert parsed.meta["distributed_info"] is None


def test_unexpected_types_take_the_lenient_path(tmp_path: Path) -> None:
    trace = dialects.current()
    trace["traceEvents"][3]["args"]["correlation"] = "10"  # a string where an int belongs
    trace["traceEvents"][3]["args"]["stream"] = 7.0
    trace["traceEvents"].append("not an event")
    ev = events_of(trace, tmp_path)
    kernel = ev.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert kernel["correlation"] == 10 and kernel["stream"] == 7


@pytest.mark.parametrize(
    ("content", "needle", "incomplete", "not_trace"),
    [
        (b"", "empty", True, False),
        (b"   \n", "empty", True, False),
        (b"\x00\x01\x02binary", "not JSON", False, True),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1', "incomplete", True, False),
        (b'{"traceEvents": [{"ph": "X", "args": {"grid": [1]}}, {"ph', "incomplete", True, False),
        (b'{"traceEvents": [}', "invalid JSON", False, False),
        (b'[{"a": 1}]', "JSON list", False, True),
        (b'{"schema": "1.0.1", "nodes": []}', "execution trace", False, True),
        (b'{"hello": "world"}', "no traceEvents", False, True),
        (b'{"traceEvents": 5}', "not a list", False, True),
    ],
)
def test_bad_inputs(
    tmp_path: Path, content: bytes, needle: str, incomplete: bool, not_trace: bool
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceFileError) as info:
        parse_file(path)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)
    assert (info.value.incomplete, info.value.not_trace) == (incomplete, not_trace)


@pytest.mark.parametrize(
    "layout", ["events_first", "pretty_printed", "bracket_in_a_trailing_string", "trailing_list"]
)
def test_any_layout_of_the_document_gives_the_same_trace(tmp_path: Path, layout: str) -> None:
    """The events array is found without decoding it (the file's last "]" closes it, as
    Kineto writes it); any other layout must still give the same frames and metadata."""
    trace = dialects.current(rank=1)
    expected = parse_file(dialects.write(trace, tmp_path / "plain.json"))
    events = trace.pop("traceEvents")
    if layout == "events_first":
        data = orjson.dumps({"traceEvents": events, **trace})
    elif layout == "pretty_printed":
        data = json.dumps({**trace, "traceEvents": events}, indent=2).encode()
    elif layout == "bracket_in_a_trailing_string":
        data = orjson.dumps({**trace, "traceEvents": events, "displayTimeUnit": "m]s"})
    else:
        data = orjson.dumps({**trace, "traceEvents": events, "extra": [[1], {"a": [2]}]})
    got = parse_file(dialects.write(data, tmp_path / "t.json"))
    for name, frame in expected.frames.items():
        assert got.frames[name].equals(frame), name
    meta = {k: v for k, v in got.meta.items() if k != "path"}
    assert meta == {k: v for k, v in expected.meta.items() if k != "path"}
    assert meta["rank_in_file"] == 1


def test_truncated_gzip_is_incomplete(tmp_path: Path) -> None:
    whole = gzip.compress(b'{"traceEvents": []}' * 1000)
    path = tmp_path / "cut.json.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(TraceFileError) as info:
        parse_file(path)
    assert info.value.incomplete and "gzip" in str(info.value)


def test_category_kinds() -> None:
    assert kind_of_category("Kernel") == "kernel"
    assert kind_of_category("xpu_runtime") == "runtime"
    assert kind_of_category("privateuse1_driver") == "driver"
    assert kind_of_category("gpu_user_annotation") == "gpu_annotation"
    assert kind_of_category("cuda_sync") == "sync"
    assert kind_of_category("ac2g") == "other"
    assert kind_of_category(None) == "other"


@pytest.mark.shared
def test_every_shared_case_loads_or_says_why(shared: Path) -> None:
    files = sorted(p for p in (shared / "traces").rglob("*") if p.is_file() and p.suffix != ".md")
    assert len(files) >= 15
    outcomes = {}
    for f in files:
        try:
            parsed = parse_file(f)
            outcomes[f.relative_to(shared / "traces").as_posix()] = parsed.meta["n_events"]
        except TraceFileError as exc:
            outcomes[f.relative_to(shared / "traces").as_posix()] = str(exc)
    assert "execution trace" in outcomes["execution_trace/benchmark_simple_add_et.json.gz"]
    assert "JSON list" in outcomes["memory_analysis/memory_timeline.raw.gz"]
    assert outcomes["trace_diff/control/control.json.gz"] == 74937  # "X" events in the file
    assert outcomes["call_stack/backward_thread.json"] == 7


def test_odd_launch_dimensions_are_null_not_fatal(tmp_path: Path) -> None:
    """Only three integers make a grid or a block; anything else (two numbers, text inside
    the list, a string) leaves it null and the file still loads."""
    trace = dialects.current()
    kernel = next(e for e in trace["traceEvents"] if e.get("cat") == "kernel")
    odd = [[1, 2], ["a", 1, 2], "grid(1,)", [1, 2, 3, 4], [-1, 0, 7]]
    for i, grid in enumerate(odd):
        extra = {**kernel, "name": f"k{i}", "args": {**kernel["args"], "grid": grid}}
        trace["traceEvents"].append(extra)
    ev = events_of(trace, tmp_path)
    grids = dict(zip(ev["name"], ev["grid"].to_list(), strict=True))
    assert [grids[f"k{i}"] for i in range(len(odd))] == [None, None, None, None, [-1, 0, 7]]
    assert grids["ampere_sgemm_128x64_tn"] == [4, 2, 1]


@pytest.mark.parametrize(
    "make", [dialects.current, dialects.legacy, dialects.rocm, dialects.triton_driver]
)
def test_chunked_decode_gives_the_same_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make
) -> None:
    """Events are decoded a chunk at a time to bound memory; chunk edges change nothing (idx
    runs on across chunks, flows and metadata from every chunk), whether the chunks are cut
    from the JSON text (CHUNK_BYTES) or counted in events (CHUNK)."""
    from hta_tui.trace import parse as parse_mod

    path = dialects.write(make(), tmp_path / "t.json")
    whole = parse_file(path).frames
    monkeypatch.setattr(parse_mod, "CHUNK_BYTES", 1)  # one event per chunk
    cut_from_text = parse_file(path).frames

    def edge_in_a_string(text: memoryview, dropped: object):
        raise msgspec.DecodeError("as if a cut fell inside a string")
        yield

    monkeypatch.setattr(parse_mod, "_chunks", edge_in_a_string)
    monkeypatch.setattr(parse_mod, "CHUNK", 2)
    counted = parse_file(path).frames  # the safe path: one raw per event, 2 at a time
    for chunked in (cut_from_text, counted):
        for name, frame in whole.items():
            assert chunked[name].equals(frame), name
        assert chunked["events"]["idx"].to_list() == list(range(whole["events"].height))


def test_chunks_sharing_one_buffer_keep_their_own_arg_texts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every chunk is decoded from one reused buffer, and msgspec's Raw args (Input Dims,
    grid ...) are views into it: events of the same size, one per chunk, each keep their
    own shape text (they would all read the last chunk's if a chunk's events outlived it)."""
    from hta_tui.trace import parse as parse_mod

    trace = dialects.current()
    trace["traceEvents"] += [
        {
            "ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
            "ts": 100 + i, "dur": 1,
            "args": {"External id": 900 + i, "Input Dims": [[i, i]], "Input type": ["float"]},
        }
        for i in range(1, 10)
    ]  # fmt: skip
    path = dialects.write(trace, tmp_path / "t.json")
    whole = parse_file(path).frames["events"]
    monkeypatch.setattr(parse_mod, "CHUNK_BYTES", 1)  # one event per chunk
    chunked = parse_file(path).frames["events"]
    assert chunked.equals(whole)
    mm = chunked.filter(pl.col("external_id") > 900).sort("external_id")
    assert mm["input_dims"].to_list() == [f"[[{i}, {i}]]" for i in range(1, 10)]


def test_a_chunk_edge_inside_a_string_falls_back_to_the_safe_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks are cut at "}, {" found by a regex; one inside a name must not cut the event
    in two. The cut chunk is invalid JSON, so the file is decoded the safe way, unchanged."""
    from hta_tui.trace import parse as parse_mod

    trace = dialects.current()
    odd = "void f<{}, {1}, {2}>(int)"  # "}, {" inside a string
    trace["traceEvents"][1]["name"] = odd
    path = dialects.write(trace, tmp_path / "t.json")
    whole = parse_file(path).frames["events"]
    assert odd in whole["name"].to_list()
    monkeypatch.setattr(parse_mod, "CHUNK_BYTES", 1)
    calls: list[int] = []
    safe = parse_mod._decoded
    monkeypatch.setattr(
        parse_mod, "_decoded", lambda raws, dropped: calls.append(1) or safe(raws, dropped)
    )
    assert parse_file(path).frames["events"].equals(whole)
    assert calls, "the safe path was not taken"


def test_a_bad_event_in_a_later_chunk_takes_the_lenient_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hta_tui.trace import parse as parse_mod

    monkeypatch.setattr(parse_mod, "CHUNK_BYTES", 1)
    trace = dialects.current()
    kernel_at = next(i for i, e in enumerate(trace["traceEvents"]) if e.get("cat") == "kernel")
    assert kernel_at >= 2  # not in the first chunk
    trace["traceEvents"][kernel_at]["args"]["correlation"] = "10"
    ev = events_of(trace, tmp_path)
    kernel = ev.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert kernel["correlation"] == 10
    assert ev["idx"].to_list() == list(range(ev.height))


def test_null_or_missing_args_read_as_no_args(tmp_path: Path) -> None:
    """`"args": null` and no args at all are the same: the event loads with null args, and a
    metadata event without args names no thread (events share one empty args struct)."""
    trace = dialects.current()
    kernel = next(e for e in trace["traceEvents"] if e.get("cat") == "kernel")
    bare = {k: v for k, v in kernel.items() if k != "args"}
    trace["traceEvents"] += [
        {**bare, "name": "null_args", "args": None},
        {**bare, "name": "no_args"},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 424242},
    ]
    parsed = parse_file(dialects.write(trace, tmp_path / "t.json"))
    ev = parsed.frames["events"]
    for name in ("null_args", "no_args"):
        row = ev.filter(pl.col("name") == name).row(0, named=True)
        assert (row["kind"], row["correlation"], row["grid"], row["stream"]) == (
            "kernel",
            None,
            None,
            None,
        )
    assert 424242 not in parsed.frames["threads"]["tid"].to_list()


def test_field_readers_take_only_field_names() -> None:
    from hta_tui.trace.events import EventArgs
    from hta_tui.trace.fields import reader

    assert reader("correlation")([EventArgs(correlation=3), EventArgs()]) == [3, None]
    for bad in ("a.b", "x; import os", "for", ""):
        with pytest.raises(ValueError):
            reader(bad)


def test_rocm_copy_bytes_as_text_keep_the_chunk_decode(monkeypatch) -> None:
    """ROCm writes `"bytes": "2"` on hipMemcpy calls: the number is read from its text, and
    the chunk holding such a call is decoded at once, not event by event (the slow path
    took a third of a real MI300 trace's chunks)."""
    head = {"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyWithStream", "pid": 1, "tid": 1}
    call = {**head, "ts": 10.5, "dur": 2.25, "args": {"correlation": 7, "bytes": "2"}}
    head = {"ph": "X", "cat": "gpu_memcpy", "name": "CopyHostToDevice", "pid": 2, "tid": 3}
    copy = {**head, "ts": 11.5, "dur": 1.0, "args": {"correlation": 7, "bytes": 4096, "stream": 3}}
    one_by_one = []  # the slow path splits its chunk into one raw text per event first
    real = parse_mod._RAWS

    class Counting:
        def decode(self, buf: bytes) -> object:
            one_by_one.append(buf)
            return real.decode(buf)

    monkeypatch.setattr(parse_mod, "_RAWS", Counting())
    parsed = parse_bytes(orjson.dumps({"traceEvents": [call, copy]}))
    assert one_by_one == []
    events = parsed.frames["events"]
    assert events.select("name", "ts", "dur").rows() == [
        ("hipMemcpyWithStream", 10_500, 2_250),
        ("CopyHostToDevice", 11_500, 1_000),
    ]
    copies = events.filter(pl.col("kind") == "memcpy")
    assert copies["bytes"].to_list() == [4096]


def test_metadata_names_of_any_type() -> None:
    """Process and thread names (`ph: "M"`), read a column at a time: ids given as text are
    numbers (" 12 ", "-3"), others null; a name that is a number is its text; the value is
    the name, else the labels, else the sort index; events without args name nothing."""
    meta = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": " 12 ", "tid": "-3", "args": {"name": 5}},
        {"ph": "M", "name": 7, "pid": "x", "tid": 4, "args": {"labels": "L"}},
        {"ph": "M", "name": "thread_sort_index", "pid": 2, "tid": 3, "args": {"sort_index": 9}},
        {"ph": "M", "name": "thread_sort_index", "pid": 2, "tid": 3, "args": None},
        {"ph": "M", "name": "thread_sort_index", "pid": 2, "tid": 3},
        {"ph": "M", "name": "x", "pid": 2, "tid": 3, "args": {"name": None}},
    ]
    op = {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}
    threads = parse_bytes(orjson.dumps({"traceEvents": [*meta, op]})).frames["threads"]
    assert threads.rows() == [
        (1, 0, "process_name", "python"),
        (12, -3, "thread_name", "5"),
        (None, 4, "7", "L"),
        (2, 3, "thread_sort_index", "9"),
        (2, 3, "x", None),
    ]


def test_metadata_chunks_take_the_short_way_to_the_same_frames(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A chunk whose events are all `ph: "M"` (Kineto writes the processes' and threads'
    names in blocks: 310k of them in a real MTIA trace) is decoded into a five-field struct
    and goes straight to the threads frame; the frames, and what was dropped, are those of
    the usual way, odd values too (a pid as text, a sort index as text, a name that is a
    number, args null or absent or with a field of another type, text that is not ASCII, a
    metadata event among the others)."""
    meta = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": p, "tid": 0, "args": {"name": f"p{p}"}}
        for p in range(40)
    ] + [
        {"name": "thread_name", "ph": "M", "ts": 1.5, "pid": "7", "tid": 3, "args": {"name": 9}},
        {"name": "thread_sort_index", "ph": "M", "pid": 7, "tid": 3, "args": {"sort_index": "5"}},
        {"name": "process_labels", "ph": "M", "pid": 8, "tid": 0, "args": {"labels": "GPU ü"}},
        {"name": "thread_name", "ph": "M", "pid": 8, "tid": 4, "args": None},
        {"name": "thread_name", "ph": "M", "pid": 8, "tid": 5},
        {"name": "thread_name", "ph": "M", "pid": 8, "tid": 6, "args": {"device": "x"}},
        {"name": "process_name", "ph": "M", "cat": 5, "pid": [1], "tid": 0, "args": {"name": "x"}},
    ]  # fmt: skip
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 2, "ts": i, "dur": 1}
        for i in range(20)
    ]
    mixed = [*events[:10], meta[0], *events[10:]]
    doc = {"traceEvents": [*meta, *mixed, *meta], "deviceLogs": ["[x] ]", "y"]}
    buf = json.dumps(doc, indent=1, ensure_ascii=False).encode()
    monkeypatch.setattr(parse_mod, "CHUNK_BYTES", 600)  # a few events a chunk
    short: list[int] = []
    metadata_chunk = parse_mod._metadata_chunk

    def spy(piece: memoryview, exact: bool) -> object:
        got = metadata_chunk(piece, exact)
        short.append(got is not None)
        return got

    monkeypatch.setattr(parse_mod, "_metadata_chunk", spy)
    fast = parse_bytes(buf)
    assert sum(short) >= 4 and not all(short)  # most metadata chunks, not the mixed ones
    monkeypatch.setattr(parse_mod, "_metadata_chunk", lambda piece, exact: None)
    usual = parse_bytes(buf)
    for name, frame in usual.frames.items():
        assert fast.frames[name].equals(frame), name
    assert fast.meta["dropped_events"] == usual.meta["dropped_events"]
    threads = fast.frames["threads"]
    assert threads.height >= 2 * 40 and threads["value"].to_list().count("GPU ü") == 2
    # msgspec checks what the short way needs (ph "M", args an object): a chunk with an
    # event of another phase or without args is left to the usual way, which drops it
    for odd in (meta[-4], meta[-3], events[0]):
        piece = memoryview(orjson.dumps([meta[0], odd]))
        assert metadata_chunk(piece, False) is None, odd
    assert metadata_chunk(memoryview(orjson.dumps(meta[:2])), False) is not None


def _array_start(buf: bytes) -> int:
    return parse_mod._ARRAY_START.match(buf, buf.find(b'"traceEvents"') + 13).end() - 1


def test_events_end_is_found_from_the_last_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    """The events array's end is looked for from the file's last "}"s first (log arrays
    after the events hold none: megabytes of them cost a memory scan, not a regex step per
    "]" of their lines), and is the "]" the regex walk finds: in every layout, after log
    arrays, before an array of objects, after an event whose text holds "}], {", with
    blanks before the "]"; an empty array, or more "}"s after the events than it looks at,
    is left to the walk."""
    from hta_tui.synth import make_trace
    from hta_tui.synth.layouts import LAYOUTS, relayout

    trace = make_trace(0, world_size=2, steps=1, seed=3, kernels_per_step=4)
    source = orjson.dumps(trace)
    odd = {**trace["traceEvents"][-1], "name": 'x}], {"ph": "X"}]}'}
    docs = [relayout(source, layout) for layout in LAYOUTS] + [
        orjson.dumps({"traceEvents": [*trace["traceEvents"], odd], "logs": ["a]", "}"]}),
        orjson.dumps({"traceEvents": trace["traceEvents"], "deviceProperties": [{"id": 0}]}),
        b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1}\n\t \r\n], "x": ["]"]}',
        orjson.dumps({"traceEvents": trace["traceEvents"], "p": [{"i": i} for i in range(9)]}),
    ]
    walk = parse_mod._object_end
    for n, doc in enumerate(docs):
        if n == len(docs) - 1:  # nine objects after the events, more than it looks at
            monkeypatch.setattr(parse_mod, "OBJECT_ENDS", 8)
        first = _array_start(doc)
        fast = walk(doc, first)
        monkeypatch.setattr(parse_mod, "_object_end", lambda buf, first: None)
        slow = parse_mod._events_end(doc, first)
        monkeypatch.setattr(parse_mod, "_object_end", walk)
        assert slow is not None and parse_mod._events_end(doc, first) == slow, n
        assert (fast == slow) if n < len(docs) - 1 else fast is None, n
        assert orjson.loads(doc[first : slow + 1]) == orjson.loads(doc)["traceEvents"], n
    for empty in (b'{"traceEvents": [ ], "INFO": ["a]"]}', b'{"x": [{}], "traceEvents":[]}'):
        first = _array_start(empty)
        assert walk(empty, first) is None
        assert parse_mod._events_end(empty, first) == empty.index(b"]", first)


def test_clean_files_are_checked_without_a_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose ids are each held once (every real trace) is told clean by counting
    them, and its steps by the names that can be steps: the per-row window and the regex
    over every name run only where a shared id or an odd step is; what they find is
    unchanged."""
    from collections import Counter

    from hta_tui.trace import quality

    clean = parse_bytes(orjson.dumps(dialects.current())).frames["events"]
    real_over = pl.Expr.over

    def no_window(*args: object, **kwargs: object) -> object:
        raise AssertionError("a window over a clean file")

    monkeypatch.setattr(pl.Expr, "over", no_window)
    dropped: Counter[str] = Counter()
    assert quality.checked_events(clean, dropped).equals(clean) and not dropped
    monkeypatch.setattr(pl.Expr, "over", real_over)
    shared = clean.with_columns(pl.lit(7, pl.Int64).alias("correlation"))
    launches = shared.filter(pl.col("kind").is_in(["runtime", "driver"])).height
    steps = shared.with_columns(pl.lit("ProfilerStep#99999999999").alias("name")).head(2)
    out = quality.checked_events(pl.concat([shared, steps]), dropped)
    assert dropped[quality.SHARED_CORRELATION] >= launches - 1 > 0
    assert dropped[quality.STEP_OUT_OF_RANGE] == 2 and out.height == shared.height
