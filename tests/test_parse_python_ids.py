"""python_function frames keep their Python id, parent id and module id (read from the JSON)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from hta_tui.trace.parse import parse_bytes, read_bytes

VIT = "pytorch_cpu_vit_memory/worker0.1795489276434075715.pt.trace.json.gz"
ARGS = {
    "python_id": "Python id",
    "python_parent_id": "Python parent id",
    "python_module_id": "Python module id",
}


@pytest.mark.shared
def test_python_ids_match_the_raw_events(shared: Path) -> None:
    path = shared / "traces" / VIT
    with gzip.open(path, "rt") as f:
        raw = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    events = parse_bytes(read_bytes(path)).frames["events"]
    assert events.height == len(raw)
    for column, arg in ARGS.items():
        expected = [e.get("args", {}).get(arg) for e in raw]
        assert any(v is not None for v in expected)
        assert events.sort("idx")[column].to_list() == expected, column
    # Only Python frames carry them: an aten op with a "Python id"-free args has nulls.
    ops = events.filter(pl.col("kind") == "cpu_op")
    assert ops.select(pl.col(list(ARGS)).null_count()).row(0) == (ops.height,) * 3
