"""Timestamps to the nanosecond, whichever way a chunk's numbers are read (trace/numbers.py):
as float64 below 2^43 us, as their text above it or when a value is not a plain number.
Expected values are the written digits, read with Python's Decimal."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path

import msgspec
import pytest

from hta_tui.trace import parse as parse_mod
from hta_tui.trace.numbers import EXACT_FLOAT_US, InexactNumbers, plain_ns
from hta_tui.trace.parse import parse_file


def _ns(text: str) -> int:
    return int(Decimal(text) * 1000)


def _kernel(ts: str, dur: str = "1.5", name: str = "k") -> str:
    return (
        f'{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7, "ts": {ts}, '
        f'"dur": {dur}, "args": {{"stream": 7, "device": 0, "correlation": 1}}}}'
    )


def _write(tmp_path: Path, events: list[str]) -> Path:
    path = tmp_path / "t.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [' + ", ".join(events) + "]}")
    return path


def test_float64_ns_equal_the_written_digits_below_2_43_us() -> None:
    """The claim the float path rests on, over 30,000 random 3-decimal values up to 2^43 us
    (and the largest ones just under it), as msgspec decodes them in the parser."""
    rng = random.Random(7)
    top = int(EXACT_FLOAT_US) - 1
    whole = [rng.randrange(0, top) for _ in range(20_000)] + [top - i for i in range(10_000)]
    texts = [f"{w}.{rng.randrange(1000):03d}" for w in whole]
    texts += [f"-{t}" for t in texts[:1000]]
    floats = msgspec.json.decode("[" + ",".join(texts) + "]")
    assert all(type(v) is float for v in floats)
    got = plain_ns("ts", floats)
    assert got is not None
    assert got.to_list() == [_ns(t) for t in texts]


def test_a_float_beyond_2_43_us_is_read_from_its_text() -> None:
    floats = msgspec.json.decode(b"[1.5, 8796093022208.001]")
    with pytest.raises(InexactNumbers):
        plain_ns("ts", floats)
    ints = plain_ns("ts", [1_700_000_000_000_000, 5])  # integers stay exact at any size
    assert ints is not None and ints.to_list() == [1_700_000_000_000_000_000, 5_000]


def test_chunks_switch_to_text_once_a_timestamp_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One event per chunk: boot-relative floats, then an epoch timestamp to the ns (that
    chunk decoded again as text, and the chunks after it too); every one exact."""
    monkeypatch.setattr(parse_mod, "CHUNK_BYTES", 1)
    stamps = [
        "1212075003291.234",
        "8796093022207.999",
        "1700000000000000.123",
        "4632258063370.229",
        "1700000000000001.001",
    ]
    path = _write(tmp_path, [_kernel(ts, name=f"k{i}") for i, ts in enumerate(stamps)])
    events = parse_file(path).frames["events"].sort("name")
    assert events["ts"].to_list() == [_ns(t) for t in stamps]
    assert events["dur"].to_list() == [1500] * len(stamps)


def test_a_redone_chunk_counts_its_drops_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk read with floats whose events include a non-object (counted while decoding)
    and a ts given as text is decoded again as text: each drop is counted once."""
    monkeypatch.setattr(parse_mod, "CHUNK_BYTES", 10**9)  # one chunk
    path = _write(tmp_path, [_kernel("12.5"), "5", _kernel('"NaN"'), _kernel("14.25")])
    parsed = parse_file(path)
    assert parsed.meta["dropped_events"] == {"not an object": 1, "ts is not a number": 1}
    assert parsed.frames["events"]["ts"].to_list() == [12_500, 14_250]


@pytest.mark.parametrize("other", ["12.5", "12"])
def test_a_boolean_is_not_a_number(tmp_path: Path, other: str) -> None:
    """JSON true is not 1 us, beside floats or beside integers."""
    path = _write(tmp_path, [_kernel(other), _kernel("true"), _kernel(other, dur="false")])
    parsed = parse_file(path)
    assert parsed.meta["dropped_events"] == {"ts is not a number": 1, "dur is not a number": 1}
    assert parsed.frames["events"]["ts"].to_list() == [_ns(other)]
