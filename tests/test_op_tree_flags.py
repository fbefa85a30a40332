"""The op tree's operator tests made on distinct names (`op_tree.operator_flags`) answer as
the row-wise rules (`_is_operator`, `_op_type`) on the names and categories that decide them:
nulls (a null `cat` keeps its null), steps, data loaders, optimizers, the excluded wrappers,
casing and repeats."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis import op_tree

NAMES = [
    None, "", "aten::mm", "ProfilerStep#3", "profilerstep#3", "enumerate(DataLoader)#_x.__next__",
    "enumerate(DataLoader)#_x", "enumerate(DataPipe)#y", "Optimizer.step#SGD.step",
    "optimizer.step", "DataParallel.forward", "DistributedDataParallel.forward",
    "DataParallel.forward ", "nccl:all_reduce",
]  # fmt: skip
CATS = [None, "cpu_op", "Operator", "OPERATOR", "cpu_Op", "python", "user_annotation"]


def _frame(rows: list[tuple[str | None, str | None]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"name": pl.String, "cat": pl.String}, orient="row")


def test_operator_flags_match_row_rules() -> None:
    rows = [(n, c) for n in NAMES for c in CATS]
    for part in (rows, rows[::-1] + rows[:20], [("aten::mm", "cpu_op")], []):
        frame = _frame(part)
        got = frame.select(*op_tree.operator_flags(frame))
        want = frame.select(
            op_tree._is_operator().alias("is_op"), op_tree._op_type().alias("op_type")
        )
        assert got.equals(want)
    whole = _frame(rows)
    flags = whole.select(*op_tree.operator_flags(whole))
    # the rules decide differently across these rows (no all-true / all-false answer passes)
    assert flags["is_op"].sum() and flags["op_type"].sum() > flags["is_op"].sum()
    assert flags["is_op"].null_count() and (~flags["is_op"].fill_null(True)).sum()
