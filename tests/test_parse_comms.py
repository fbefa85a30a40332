"""Collective args (record_param_comms, NCCL kernels of newer PyTorch) reach the events frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from hta_tui.trace.parse import parse_file
from hta_tui.trace.schema import EVENTS_SCHEMA
from tests import dialects

_COMM_ARGS = {
    "External id": 7,
    "Collective name": "_allgather_base",
    "In msg nelems": 25136,
    "Out msg nelems": 201088,
    "Group size": 8,
    "dtype": "BFloat16",
    "Process Group Name": "3",
    "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]",
    "Seq": 41,
}


def _trace(args: dict[str, Any]) -> dict[str, Any]:
    cpu = {"ph": "X", "pid": 1, "tid": 1, "dur": 5}
    gpu = {"ph": "X", "pid": 0, "tid": 7, "dur": 9}
    return {
        "traceEvents": [
            {**cpu, "cat": "cpu_op", "name": "aten::mm", "ts": 1, "args": {"External id": 6}},
            {**cpu, "cat": "cpu_op", "name": "record_param_comms", "ts": 2, "args": args},
            {**gpu, "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "ts": 3,
             "args": {**args, "stream": 7, "correlation": 9}},
        ]
    }  # fmt: skip


def _comm_rows(tmp_path: Path, args: dict[str, Any]) -> pl.DataFrame:
    ev = parse_file(dialects.write(_trace(args), tmp_path / "t.json")).frames["events"]
    assert ev.schema == pl.Schema(EVENTS_SCHEMA)
    return ev


def test_record_param_comms_args_are_columns(tmp_path: Path) -> None:
    ev = _comm_rows(tmp_path, _COMM_ARGS)
    cols = ["coll_name", "in_nelems", "out_nelems", "group_size", "dtype", "pg_name", "comm_seq"]
    want = ("_allgather_base", 25136, 201088, 8, "BFloat16", "3", 41)
    for name in ("record_param_comms", "ncclDevKernel_AllGather_RING_LL"):
        row = ev.filter(pl.col("name") == name).row(0, named=True)
        assert tuple(row[c] for c in cols) == want
        assert row["pg_ranks"] == "[0, 1, 2, 3, 4, 5, 6, 7]"  # JSON text, not a quoted string
    plain = ev.filter(pl.col("name") == "aten::mm").row(0, named=True)
    assert all(plain[c] is None for c in (*cols, "pg_ranks"))


def test_comm_args_of_other_types_do_not_break_the_file(tmp_path: Path) -> None:
    """Numbers as text, a numeric group name and a list of ranks: read, not rejected."""
    odd = {
        **_COMM_ARGS,
        "In msg nelems": "25136",
        "Process Group Name": 3,
        "Process Group Ranks": [0, 1],
        "Seq": "41",
    }
    row = (
        _comm_rows(tmp_path, odd).filter(pl.col("name") == "record_param_comms").row(0, named=True)
    )
    assert (row["in_nelems"], row["pg_name"], row["comm_seq"]) == (25136, "3", 41)
    assert row["pg_ranks"] == "[0,1]"
