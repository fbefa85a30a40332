"""The Operators view (5 R): its tables equal the operator analysis on the same frames, per
operator and per input shape (`v`), one rank or all; a CPU-only trace shows host columns and
says why; call stacks of the highlighted operator when the trace has them; snapshots."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from textual.widgets import Static

from hta_tui.analysis import operators
from hta_tui.app.screens.base import Params
from hta_tui.app.screens.operators import DEVICE_COLUMNS, HEADERS, OperatorsScreen, display
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set
from tests.app_walk import Walk, snapshot_steps, walk_app
from tests.test_app_support import (
    T0,
    make_screen_app,
    open_view,
    screen_shows_current,
    wait_until,
    write_cpu_ranks,
)

SIZE = (80, 24)


async def open_operators(pilot: Any) -> OperatorsScreen:
    return await open_view(pilot, "R", OperatorsScreen)


def text_of(screen: Any, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def shown(screen: Any, id: str = "operators-table") -> pl.DataFrame:
    return screen.query_one(f"#{id}", FrameTable).frame


async def test_cpu_only_trace_has_host_columns_and_says_why(tmp_path: Path) -> None:
    root = write_cpu_ranks(tmp_path / "traces")
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_operators(pilot)
        table = shown(screen)
        assert not set(HEADERS[c] for c in DEVICE_COLUMNS) & set(table.columns)
        # the writer put one aten::add of 50 us in each of 3 steps on each of 2 ranks
        row = table.filter(pl.col("operator") == "aten::add").row(0, named=True)
        assert row["calls"] == 6 and row["host total"] == pytest.approx(300.0)
        assert "CPU-only trace" in text_of(screen, "#operators-summary")


def stack_trace() -> dict[str, Any]:
    """One step; aten::mm called 3 times from two call sites (2 + 1), aten::add once with
    no stack (`Call stack`, as with_stack=True writes it in PyTorch 1.x)."""
    cpu = {"pid": 1, "tid": 1}
    stacks = ["train.py(10): step\nmodel.py(5): forward", "train.py(10): step\nmodel.py(9): head"]
    ev: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", **cpu, "ts": T0,
         "dur": 500, "args": {}},
    ]  # fmt: skip
    for i, stack in enumerate([stacks[0], stacks[0], stacks[1]]):
        ev.append(
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", **cpu, "ts": T0 + 10 + 100 * i,
             "dur": 20, "args": {"Call stack": stack}}
        )  # fmt: skip
    ev.append(
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", **cpu, "ts": T0 + 400, "dur": 30,
         "args": {}}
    )  # fmt: skip
    return {"traceEvents": ev}


async def test_call_stacks_of_the_highlighted_operator(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    root.mkdir()
    (root / "rank-0.json").write_text(json.dumps(stack_trace()))
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_operators(pilot)
        table = screen.query_one("#operators-table", FrameTable)
        names = shown(screen)["operator"].to_list()
        table.move_cursor(row=names.index("aten::mm"))
        await pilot.pause()
        stacks = shown(screen, "operator-stacks")
        assert screen.query_one("#operator-stacks", FrameTable).display
        got = dict(zip(stacks["call stack"].to_list(), stacks["calls"].to_list(), strict=True))
        assert got == {
            "train.py(10): step\nmodel.py(5): forward": 2,
            "train.py(10): step\nmodel.py(9): head": 1,
        }
        assert "Call stacks of aten::mm: 2" in text_of(screen, "#operator-stacks-title")
        table.move_cursor(row=names.index("aten::add"))
        await pilot.pause()
        assert shown(screen, "operator-stacks").is_empty()
        assert "no call stack recorded" in text_of(screen, "#operator-stacks-title")


def _operators_then(keys: tuple[str, ...]):
    async def run_before(pilot: Any) -> None:
        screen = await open_operators(pilot)
        for key in keys:
            await pilot.press(key)
            await wait_until(
                pilot, lambda: screen_shows_current(pilot.app, screen) and screen.result["by_shape"]
            )
        await pilot.pause()

    return run_before


def _snapshot_app(tmp_path: Path, theme: str) -> Any:
    root = tmp_path / "traces"
    write_trace_dir(root, ranks=2, steps=3, seed=0)
    return make_screen_app(root, tmp_path, theme=theme)


@pytest.fixture(scope="module")
def dark_snapshots(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app in the dark theme for both tables' snapshots: per operator, then (`v`) per
    shape."""
    app = _snapshot_app(tmp_path_factory.mktemp("snapshots"), "hta-dark")
    steps = snapshot_steps(
        {
            "per-op": _operators_then(()),
            "per-shape": _operators_then(("v",)),
            "per-op light": _per_op_light,  # `v` back, then the light theme
        }
    )
    return asyncio.run(walk_app(app, steps, size=SIZE, notifications=True))


async def _per_op_light(pilot: Any) -> None:
    screen = await open_operators(pilot)
    await pilot.press("v")
    await wait_until(
        pilot, lambda: screen_shows_current(pilot.app, screen) and not screen.result["by_shape"]
    )
    pilot.app.theme = "hta-light"
    await wait_until(pilot, lambda: screen_shows_current(pilot.app, screen))
    await pilot.pause()


# both tables in the dark theme, the light theme once (it restyles, it does not lay out)
@pytest.mark.parametrize(
    ("keys", "theme"),
    [((), "hta-dark"), ((), "hta-light"), (("v",), "hta-dark")],
    ids=["per-op-hta-dark", "per-op-hta-light", "per-shape-hta-dark"],
)
def test_snapshot(snap_svg, dark_snapshots: Walk, theme: str, keys) -> None:
    light = "" if theme == "hta-dark" else " light"
    assert snap_svg(dark_snapshots.check(("per-shape" if keys else "per-op") + light)["svg"])


def column_right_edges(table: FrameTable) -> dict[str, int]:
    """Each drawn column's right edge in cells, from the table's left."""
    edges, x = {}, 0
    for column in table.view_columns:
        x += column.width + 2 * table.cell_padding
        edges[column.key] = x
    return edges


async def _gpu_job(pilot: Any, seen: dict[str, Any]) -> None:
    """test_gpu_job_tables_and_toggles' steps and checks (after the per-shape one, which
    leaves the view per operator)."""
    app = pilot.app
    screen = await open_operators(pilot)
    frames = app.trace_set.frames()
    tables = operators.job_operator_tables(frames)
    assert shown(screen).equals(display(tables["name"], gpu=True))
    assert screen.query_one("#operators-table", FrameTable).row_count == tables["name"].height
    assert set(HEADERS[c] for c in DEVICE_COLUMNS) <= set(shown(screen).columns)
    summary = text_of(screen, "#operators-summary")
    assert summary.startswith(f"{tables['name'].height} operators")
    # the job's calls are the ranks' calls added up
    per_rank = operators.operator_stats(frames)
    assert int(shown(screen)["calls"].sum()) == int(per_rank["calls"].sum())
    await pilot.press("v")  # per operator + input shape
    await wait_until(pilot, lambda: screen_shows_current(app, screen) and screen.result["by_shape"])
    assert shown(screen).equals(display(tables["shape"], gpu=True))
    assert "input shape" in shown(screen).columns
    await pilot.press("v")
    await wait_until(
        pilot, lambda: screen_shows_current(app, screen) and not screen.result["by_shape"]
    )
    await pilot.press("r")  # one rank: the per-rank analysis
    await pilot.press("down", "down", "enter")
    await wait_until(pilot, lambda: screen_shows_current(app, screen) and screen.params.rank == 1)
    want = operators.operator_stats({1: frames[1]}).drop("rank")
    assert shown(screen).equals(display(want, gpu=True))
    # the generator writes Python frames, none around an operator: the view says so
    name = screen.query_one("#operators-table", FrameTable).selected_row()["operator"]
    title = text_of(screen, "#operator-stacks-title")
    assert title == f"{name}: no Python frame around its calls"
    assert not screen.query_one("#operator-stacks", FrameTable).display
    seen["done"] = True


async def _per_shape(pilot: Any, seen: dict[str, Any]) -> None:
    """test_per_shape_keeps_the_device_columns_at_80_columns' steps and checks (first)."""
    app = pilot.app
    screen = await open_operators(pilot)
    await pilot.press("v")
    await wait_until(pilot, lambda: screen_shows_current(app, screen) and screen.result["by_shape"])
    table = screen.query_one("#operators-table", FrameTable)
    edges = column_right_edges(table)
    for header in ("input shape", "calls", "dev self (us)", "dev total"):
        assert edges[header] <= table.scrollable_content_region.width, header
    # the longest shape is elided in the table and whole in the line below it
    frame = shown(screen)
    longest = frame["input shape"].str.len_chars().arg_max()
    assert longest is not None
    table.move_cursor(row=longest)
    row = frame.row(longest, named=True)
    whole = f"{row['operator']} {row['input shape']}"
    await wait_until(
        pilot,
        lambda: text_of(screen, "#operator-shape") == whole,
        10,
        f"the line below to read {whole!r}, not {text_of(screen, '#operator-shape')!r}",
    )
    drawn = table.row_texts(longest)[list(edges).index("input shape")]
    assert drawn != row["input shape"] and "…" in drawn
    assert text_of(screen, "#operator-shape") == f"{row['operator']} {row['input shape']}"
    await pilot.press("v")  # per operator: no shape line
    await wait_until(
        pilot, lambda: screen_shows_current(app, screen) and not screen.result["by_shape"]
    )
    assert not screen.query_one("#operator-shape").display
    seen["done"] = True


async def _job_walk(root: Path, tmp_path: Path) -> Walk:
    app = make_screen_app(root, tmp_path, findings=False)
    return await walk_app(app, [("per shape", _per_shape), ("gpu job", _gpu_job)], size=SIZE)


@pytest.fixture(scope="module")
def job_walk(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on the generated 2-rank job for both tests on it."""
    tmp_path = tmp_path_factory.mktemp("operators-walk")
    root = tmp_path / "traces"
    write_trace_dir(root, ranks=2, steps=3, seed=0)
    return asyncio.run(_job_walk(root, tmp_path))


def test_gpu_job_tables_and_toggles(job_walk: Walk) -> None:
    assert job_walk["gpu job"]["done"]


def test_per_shape_keeps_the_device_columns_at_80_columns(job_walk: Walk) -> None:
    """Issue 17: per input shape, the shape column pushed the device columns off an 80-column
    screen. The name and the shape share the name's room; the whole shape is printed below."""
    assert job_walk["per shape"]["done"]


def test_the_view_makes_only_the_grouping_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The numbers are the grouping shown (per operator, or per input shape after `v`) and
    the call stacks below it: the other grouping, a third of the work, is made only when
    `v` asks for it; the tables are the job analysis's."""
    write_trace_dir(tmp_path / "t", ranks=2, steps=2, seed=3)
    frames = open_set(tmp_path / "t", Cache(tmp_path / "c")).frames()
    want = operators.job_operator_tables(frames)
    made: list[list[str]] = []
    real = operators._aggregate
    monkeypatch.setattr(
        operators, "_aggregate", lambda calls, keys: made.append(keys) or real(calls, keys)
    )
    for by_shape, table in ((False, "name"), (True, "shape")):
        made.clear()
        got = OperatorsScreen.compute(frames, Params(extra={"by_shape": by_shape}))
        assert made == [["name", "input_shape"] if by_shape else ["name"], ["name", "call_stack"]]
        assert got["table"].equals(display(want[table], gpu=True))
        assert got["stacks"].equals(display(want["stack"], gpu=True))
