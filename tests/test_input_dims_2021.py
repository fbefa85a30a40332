"""Issue 24, point 8: old traces' `Input dims` (PyTorch 1.8-1.9, 2021) is read like `Input Dims`:
the operators by input shape of such a trace are those of the same trace in today's spelling
(before, every call's shape was empty and the table collapsed to one row per name)."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis import operators
from tests.hta_parity import trace_set

CASE = "pytorch_cpu_ddp_gloo_4"


def _shapes(folder: Path) -> pl.DataFrame:
    table = operators.operator_stats(trace_set(folder).frames(), by_input_shape=True)
    return table.select("name", "input_shape", "calls").sort("name", "input_shape")


@pytest.mark.shared
def test_input_dims_2021_spelling(shared: Path, tmp_path: Path) -> None:
    (source,) = sorted((shared / "traces" / CASE).glob("rank0.*.json.gz"))
    text = gzip.decompress(source.read_bytes())
    assert b'"Input Dims"' in text and b'"Input dims"' not in text
    today, old = tmp_path / "today", tmp_path / "old"
    today.mkdir()
    old.mkdir()
    (today / "rank0.json").write_bytes(text)
    (old / "rank0.json").write_bytes(text.replace(b'"Input Dims"', b'"Input dims"'))
    want, got = _shapes(today), _shapes(old)
    assert want.height > 2 * want["name"].n_unique()  # many shapes per operator
    assert got.equals(want)
