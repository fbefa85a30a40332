"""Python stacks of an operator (with_stack on PyTorch 2: `python_function` events, not the
`Call stack` arg): counted against the raw JSON of a real trace, and shown by the Operators
view for the highlighted operator."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from hta_tui.analysis.operator_stacks import has_python_frames, python_stacks
from hta_tui.app.screens.operators import OperatorsScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.trace.parse import parse_file
from tests.test_app_support import make_screen_app, open_view, wait_until

VIT = "pytorch_cpu_vit_memory"


def _raw(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


@pytest.mark.shared
def test_gather_stacks_cover_every_call_inside_python_frames(shared: Path) -> None:
    files = sorted((shared / "traces" / VIT).glob("*.json*"))
    frames = {i: parse_file(p).frames["events"] for i, p in enumerate(files)}
    assert has_python_frames(frames)
    table = python_stacks(frames, "aten::gather")
    # From the JSON: every aten::gather call, and the user frames (not torch/) around each.
    calls = 0
    sites: set[str] = set()
    for path in files:
        raw = _raw(path)
        frames_py = [e for e in raw if e.get("cat") == "python_function"]
        for op in (e for e in raw if e.get("cat") == "cpu_op" and e["name"] == "aten::gather"):
            end = op["ts"] + op["dur"]
            around = [
                f
                for f in frames_py
                if f["tid"] == op["tid"] and f["ts"] <= op["ts"] and f["ts"] + f["dur"] >= end
            ]
            if not around:
                continue
            calls += 1
            user = [f for f in around if ".py(" in f["name"] and not f["name"].startswith("torch/")]
            sites.add(max(user, key=lambda f: f["ts"])["name"])
    assert calls > 0
    assert int(table["calls"].sum()) == calls
    assert set(table["call site"].to_list()) == sites
    assert (table["call stack"].str.ends_with(table["call site"])).all()


@pytest.mark.shared
async def test_operators_view_lists_the_python_stacks_of_the_highlighted_op(
    shared: Path, tmp_path: Path
) -> None:
    app = make_screen_app(shared / "traces" / VIT, tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_view(pilot, "R", OperatorsScreen)
        table = screen.query_one("#operators-table", FrameTable)
        name = table.selected_row()["operator"]
        title = screen.query_one("#operator-stacks-title", Static)
        await wait_until(
            pilot, lambda: str(title.render()).startswith("Python stacks of"), 30, "the stacks"
        )
        want = python_stacks(app.trace_set.frames(), name)
        assert not want.is_empty()
        assert screen.query_one("#operator-stacks", FrameTable).frame.equals(want)
        assert name in str(title.render())
