"""The diff's rows (issue 24, point 18): a Python frame whose line moved between two torch
versions is one row with both lines; the GPU-side `ProfilerStep` annotation is no CPU op;
every summary row says what it sums; op names readable at 80 columns."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from hta_tui.analysis import diff
from hta_tui.app.screens.diff import DiffScreen
from hta_tui.trace.parse import parse_file
from tests.test_diff import US, _frame, _launched, _step
from tests.test_screen_diff import make_app, start, table_of

H100 = "tracelens_h100_bert_memory"


def _py(name: str, ts: int, dur: int) -> dict[str, Any]:
    return {"name": name, "ts": ts, "dur": dur, "cat": "python_function", "kind": "python"}


def _side(lines: tuple[int, int, int]) -> pl.DataFrame:
    """One step: `module.py(<a>): _call_impl` around two `forward`s of one file (lines b, c)
    around an aten::mm each."""
    a, b, c = lines
    rows = [_step(1, 0, 100 * US), _py(f"torch/nn/modules/module.py({a}): _call_impl", US, 90 * US)]
    rows += [
        _py(f"model.py({b}): forward", 2 * US, 30 * US),
        _py("model.py(7): helper", 3 * US, US),
    ]
    rows += _launched("aten::mm", 4 * US, 10 * US, "gemm", 5 * US, corr=1)
    rows += [_py(f"model.py({c}): forward", 40 * US, 40 * US)]
    rows += _launched("aten::mm", 41 * US, 20 * US, "gemm", 5 * US, corr=2)
    return _frame(rows)


def test_a_frame_whose_line_moved_is_one_row_with_both_lines() -> None:
    control, test = _side((1743, 100, 200)), _side((1750, 104, 230))
    got = diff.compare_traces(control, test, device_type="CPU")
    names = got["name"].to_list()
    assert "torch/nn/modules/module.py(1743->1750): _call_impl" in names
    # two functions of one name in one file pair in line order, each with its own time
    first = got.filter(pl.col("name") == "model.py(100->104): forward").row(0, named=True)
    second = got.filter(pl.col("name") == "model.py(200->230): forward").row(0, named=True)
    assert first["Control_total_duration"] == first["Test_total_duration"] == 30.0
    assert second["Control_total_duration"] == second["Test_total_duration"] == 40.0
    assert got["counts_change_categories"].to_list() == ["="] * got.height
    assert "model.py(7): helper" in names  # an unmoved frame keeps its name
    ops = diff.ops_diff(control, test, device_type="CPU")
    assert ops["added"] == [] and ops["deleted"] == []
    # the drill-down finds the frame on each side by its own line
    detail = diff.kernel_diff_detail(control, test, "model.py(200->230): forward")
    assert detail["stats"]["count"].to_list() == [1, 1]
    assert detail["kernels"]["name"].to_list() == ["gemm"]
    # HTA's rows with --hta-compat: gone and new
    hta = diff.compare_traces(control, test, device_type="CPU", hta_compat=True)
    assert "model.py(100): forward" in hta["name"].to_list()
    assert "model.py(104): forward" in hta["name"].to_list()


def test_frames_that_cannot_pair_stay_apart() -> None:
    """Two `forward`s gone and one new in a file: which one moved is unknown, none pairs."""
    control = _side((1743, 100, 200))
    test = _frame(
        [
            _step(1, 0, 100 * US),
            _py("model.py(150): forward", 2 * US, 30 * US),
            *_launched("aten::mm", 4 * US, 10 * US, "gemm", 5 * US, corr=1),
        ]
    )
    names = diff.compare_traces(control, test, device_type="CPU")["name"].to_list()
    assert {"model.py(100): forward", "model.py(200): forward", "model.py(150): forward"} <= set(
        names
    )


@pytest.mark.shared
def test_gpu_side_profiler_step_is_no_cpu_op(shared: Path) -> None:
    (path,) = sorted((shared / "traces" / H100).glob("*.json*"))
    with gzip.open(path, "rt") as f:
        raw = [e for e in json.load(f)["traceEvents"] if e.get("name") == "ProfilerStep#6"]
    cpu = [e["dur"] for e in raw if e.get("cat") == "user_annotation"]
    assert len(raw) == 2 and len(cpu) == 1  # the CPU step and its GPU-side annotation
    ev = parse_file(path).frames["events"]
    for device in ("CPU", "ALL"):
        got = diff.compare_traces(ev, ev, device_type=device)
        step = got.filter(pl.col("name") == "ProfilerStep#6").row(0, named=True)
        assert step["Control_counts"] == 1
        assert step["Control_total_duration"] == pytest.approx(cpu[0], abs=1e-3)


def test_summary_rows_say_what_they_sum() -> None:
    metrics = ["idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)"]
    df = pl.DataFrame(
        {
            "metric": metrics,
            "control": [1.0, 2.0, 3.0, 6.0],
            "test": [2.0, 2.0, 2.0, 6.0],
            "diff": [1.0, 0.0, -1.0, 0.0],
        }
    )
    lines = DiffScreen._temporal_text(df).plain.splitlines()[1:]
    labels = [ln.split("  ")[0] for ln in lines]
    assert [lb.split()[0].rstrip(":") for lb in labels] == [
        "idle",
        "compute",
        "comm+memory",
        "span",
    ]
    assert labels[-1].strip() != "kernel" and "3 above" in labels[-1]
    assert "kernels" in labels[1] and "kernels" in labels[2]


async def test_op_names_readable_at_80_columns(tmp_path: Path) -> None:
    from hta_tui.synth import write_trace_dir

    control, test = tmp_path / "control", tmp_path / "test"
    write_trace_dir(control, ranks=1, steps=3, seed=0, slow_rank=None)
    write_trace_dir(test, ranks=1, steps=3, seed=1, slow_rank=None)
    app = make_app(control, test, tmp_path / "cache")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await start(pilot)
        table = table_of(screen)
        labels = [c.label.plain.strip() for c in table.view_columns]
        assert labels[-1] == "op"
        op = table.view_columns[-1]
        assert op.width >= 30
        drawn = [table.row_texts(i)[-1] for i in range(table.row_count)]
        full = table.view_frame["name"].head(len(drawn)).to_list()
        assert len(set(drawn)) == len(set(full))
        # every number still in view: the table is no wider than the screen
        assert table.table_width <= 80
        # the counts of both sides in one column, where they differ too
        counts = table.view_frame.select("ctrl n", "test n", "n").rows()
        assert all(n == (f"{c:g}" if c == t else f"{c:g}→{t:g}") for c, t, n in counts)
