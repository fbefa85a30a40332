"""The events array is found wherever it sits (key order, log arrays after it, whitespace),
without decoding the document twice, and every layout gives the same frames."""

from __future__ import annotations

from pathlib import Path

import msgspec
import orjson
import pytest

from hta_tui.synth import make_trace
from hta_tui.synth.layouts import KINETO_LOGS, LAYOUTS, relayout
from hta_tui.trace import parse as parse_mod
from hta_tui.trace.parse import parse_bytes
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
    source = _source()
    base = parse_bytes(relayout(source, "compact"))
    for layout in LAYOUTS:
        parsed = parse_bytes(relayout(source, layout))
        for name, frame in base.frames.items():
            assert parsed.frames[name].equals(frame), (layout, name)
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
