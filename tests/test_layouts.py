"""The events array is found wherever it sits (key order, log arrays after it, whitespace),
without decoding the document twice, and every layout gives the same frames."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import orjson
import polars as pl
import pytest

from hta_tui.synth import make_trace
from hta_tui.synth.layouts import KINETO_LOGS, LAYOUTS, relayout
from hta_tui.trace import parse as parse_mod
from hta_tui.trace.parse import parse_bytes, read_bytes
from tests import dialects


def _source() -> bytes:
    return orjson.dumps(make_trace(0, world_size=2, steps=2, seed=3, kernels_per_step=20))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_is_found_without_the_slow_path(layout: str, monkeypatch) -> None:
    """The array `_find_events` cuts out is exactly the file's traceEvents, so the chunked
    decode runs once; the whole-document decode (the slow path) is never needed."""
    data = relayout(_source(), layout)
    found = parse_mod._find_events(data)
    assert found is not None
    _, text = found
    assert orjson.loads(bytes(text)) == orjson.loads(data)["traceEvents"]
    whole_decodes = []
    real = parse_mod._DECODER

    class Counting:
        def decode(self, buf: bytes) -> object:
            whole_decodes.append(len(buf))
            return real.decode(buf)

    monkeypatch.setattr(parse_mod, "_DECODER", Counting())
    parse_bytes(data)
    assert all(n < len(data) for n in whole_decodes)  # only the document without its events


def test_every_layout_gives_the_same_frames() -> None:
    """Column by column, in every layout and as Python's json writes it (Kineto's spacing);
    the arg texts kept as JSON are Kineto's text of the event's value in all of them."""
    trace = make_trace(0, world_size=2, steps=2, seed=3, kernels_per_step=20)
    source = orjson.dumps(trace)
    base = parse_bytes(relayout(source, "compact"))
    shapes = {
        (ev["name"], json.dumps(ev["args"]["Input Dims"]), json.dumps(ev["args"]["Input type"]))
        for ev in trace["traceEvents"]
        if "Input Dims" in ev.get("args", {})
    }
    assert len(shapes) > 5 and any(", " in dims for _, dims, _ in shapes)
    events = base.frames["events"].filter(pl.col("input_dims").is_not_null())
    assert set(events.select("name", "input_dims", "input_type").iter_rows()) == shapes
    writings = {layout: relayout(source, layout) for layout in LAYOUTS}
    writings["json.dumps"] = json.dumps(trace).encode()
    writings["tab-indented"] = json.dumps(trace, indent="\t").encode()
    for layout, data in writings.items():
        parsed = parse_bytes(data)
        for name, frame in base.frames.items():
            got = parsed.frames[name]
            assert got.columns == frame.columns, (layout, name)
            for column in frame.columns:
                assert got[column].equals(frame[column]), (layout, name, column)
        assert parsed.meta["trace_name"] == base.meta["trace_name"]
        assert parsed.meta["base_time_ns"] == base.meta["base_time_ns"]
        assert parsed.meta["rank_in_file"] == 0


def test_kineto_logs_hold_brackets_and_event_edges() -> None:
    """The log lines used for the layouts are the hard case: "]" and "}, {" inside strings."""
    lines = [line for lines in KINETO_LOGS.values() for line in lines]
    assert any("]" in line for line in lines) and any("}, {" in line for line in lines)


def test_arrays_of_objects_after_the_events(tmp_path: Path) -> None:
    """deviceProperties (objects, like events) after the events array, and an event whose
    name holds a "]": the array's end is still the right one."""
    trace = dialects.current()
    trace["traceEvents"][1]["name"] = 'aten::mm"], "x": [{"ph": "X"}]'
    props = trace.pop("deviceProperties", [{"id": 0, "name": "GPU"}])
    data = orjson.dumps({"traceEvents": trace.pop("traceEvents"), "deviceProperties": props})
    _, text = parse_mod._find_events(data)
    assert len(msgspec.json.decode(bytes(text))) == len(orjson.loads(data)["traceEvents"])
    names = parse_bytes(data).frames["events"]["name"].to_list()
    assert 'aten::mm"], "x": [{"ph": "X"}]' in names


def test_empty_events_array_in_any_position() -> None:
    for doc in (
        b'{"traceEvents": [], "traceName": "x", "INFO": ["a]"]}',
        b'{"INFO": ["a]"], "traceEvents": [ ]}',
        b'{"traceEvents":[]}',
    ):
        parsed = parse_bytes(doc)
        assert parsed.frames["events"].is_empty()
        assert parsed.meta["dropped_events"] == {}


@pytest.mark.shared
@pytest.mark.parametrize(
    "case",
    # pretty-printed (by the profiler or a tool after it), then compact as Kineto writes
    ["call_stack", "tracelens_b200_eager_nccl", "tracelens_h100_bert_memory", "triton_example"],
)
def test_real_traces_arg_texts_are_kinetos(shared: Path, case: str) -> None:
    """Pretty or compact, a real trace's shapes and input types are the raw events' values in
    Kineto's spacing: `[[2048, 1024], []]`, the text HTA and the TensorBoard plugin show."""
    files = sorted((shared / "traces" / case).glob("*.json*"))
    assert files
    for path in files:
        data = read_bytes(path)
        raw = orjson.loads(data)["traceEvents"]
        want = {
            (ev["name"], json.dumps(args["Input Dims"]), json.dumps(args.get("Input type")))
            for ev in raw
            if ev.get("ph") == "X" and "Input Dims" in (args := ev.get("args") or {})
        }
        events = parse_bytes(data).frames["events"].filter(pl.col("input_dims").is_not_null())
        got = set(events.select("name", "input_dims", "input_type").iter_rows())
        assert want and got == want, path.name


def test_log_arrays_longer_than_the_tail_window_are_passed_over(monkeypatch) -> None:
    """Log arrays after the events longer than the first window searched for the array's
    end (a real MTIA trace has several MB of them, with "]" in their lines): the end is
    still found from the file's end, in wider windows, and the document is never decoded
    whole."""
    trace = make_trace(0, world_size=2, steps=2, seed=3, kernels_per_step=20)
    trace["deviceLogs"] = [f"[kineto] buffer [{i}] flushed" for i in range(2_000)]
    data = orjson.dumps(trace)
    monkeypatch.setattr(parse_mod, "TAIL_WINDOW", 4_096)  # the logs: 60 KB
    _, text = parse_mod._find_events(data)
    assert orjson.loads(bytes(text)) == orjson.loads(data)["traceEvents"]
    whole_decodes = []
    real = parse_mod._DECODER

    class Counting:
        def decode(self, buf: bytes) -> object:
            whole_decodes.append(len(buf))
            return real.decode(buf)

    monkeypatch.setattr(parse_mod, "_DECODER", Counting())
    parsed = parse_bytes(data)
    assert whole_decodes and all(n < len(data) // 2 for n in whole_decodes)
    assert parsed.frames["events"].height == sum(e["ph"] == "X" for e in trace["traceEvents"])
