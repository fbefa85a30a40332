"""The diff screen as a reader expects it (issue 17, point 5): no number clipped at 80 or 160
columns, the time change and the change of share labelled apart, what each block covers
(whole trace, one iteration, inclusive times), a step-time headline, both sides' labels in
view at 80 columns."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from rich.text import Text
from textual.widgets import Static

from hta_tui.analysis import diff
from hta_tui.app.format import fmt_us
from hta_tui.app.screens.base import Params
from hta_tui.app.screens.diff import DiffTable
from hta_tui.synth import write_trace_dir
from tests.app_walk import Walk, run_scenarios
from tests.test_app_support import wait_until
from tests.test_screen_diff import make_app, start

SIZES = [(80, 24), (160, 48)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    control = root / "a_control_run_with_a_long_folder_name"
    test = root / "the_test_run_with_an_even_longer_folder_name"
    write_trace_dir(control, ranks=1, steps=4, seed=1)
    write_trace_dir(test, ranks=1, steps=4, seed=2, kernels_per_step=90)
    return control, test


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _median_step_us(folder: Path) -> tuple[float, int]:
    """The median step and the steps of the step-time view (B), as that view computes them:
    the diff's headline is about the same steps (issue 24, point 2)."""
    from hta_tui.app.screens.step_time import StepTimeScreen
    from hta_tui.trace.cache import Cache
    from hta_tui.trace.model import open_set

    with_tmp = folder.parent / "median-cache"
    frames = open_set(folder, Cache(with_tmp)).frames()
    table = StepTimeScreen.compute(frames, Params())["table"]
    shutil.rmtree(with_tmp, ignore_errors=True)
    return float(table["step (us)"].median()), table.height  # type: ignore[arg-type]


async def _clipped(pilot: Any, seen: dict[str, Any]) -> None:
    """`test_no_number_is_clipped` at the terminal's current size."""
    screen = await start(pilot)
    table = screen.query_one("#diff-table", DiffTable)
    frame = table.view_frame
    columns = table.view_columns
    at = [c.key for c in columns].index("diff us")
    width = columns[at].width
    for i in range(min(table.row_count, frame.height)):
        shown = table.row_texts(i)[at].strip()
        value = frame["diff us"][i]
        assert len(shown) <= width
        digits = f"{abs(value):,.1f}".split(".")[0]  # every integer digit is drawn
        assert digits in shown.replace("+", "").replace("-", ""), (shown, value)
        assert shown.startswith("+" if value > 0 else "-" if value < 0 else "0")
    seen["rows"] = min(table.row_count, frame.height)
    seen["size"] = tuple(pilot.app.size)


def _at(size: tuple[int, int]) -> Any:
    async def scenario(pilot: Any, seen: dict[str, Any]) -> None:
        if tuple(pilot.app.size) != size:
            await pilot.resize_terminal(*size)
            table = pilot.app.screen.query_one("#diff-table", DiffTable)
            await wait_until(
                pilot,
                lambda: tuple(pilot.app.size) == size and table.size.width > size[0] // 2,
                30,
                f"the table at {size}",
            )
            await pilot.pause()
        await _clipped(pilot, seen)

    return scenario


def _labels(control: Path, test: Path) -> Any:
    async def scenario(pilot: Any, seen: dict[str, Any]) -> None:
        screen = await start(pilot)
        seen["top"] = str(screen.query_one("#diff-temporal", Static).render())
        seen["temporal"] = diff.breakdown_diff(screen.result["control"], screen.result["test"])[
            "temporal"
        ]
        seen["summary"] = str(screen.query_one("#diff-summary", Static).render())
        seen["sides"] = str(screen.query_one("#diff-sides", Static).render())

    return scenario


async def _short_names(pilot: Any, seen: dict[str, Any]) -> None:
    screen = await start(pilot)
    table = screen.query_one("#diff-table", DiffTable)
    seen["drawn"] = [c.key for c in table.view_columns]
    frame = seen["frame"] = table.view_frame
    full = frame["name"].to_list()
    # the generator writes `void ...<...>(...)` kernels; none is drawn so
    templated = seen["templated"] = [
        i for i, n in enumerate(full) if n.startswith("void ") and "(" in n
    ]
    if templated:
        table.move_cursor(row=templated[0])
        await wait_until(pilot, lambda: table.cursor_row == templated[0], 10, "the cursor")
        await pilot.pause(0.1)
    seen["below"] = str(screen.query_one("#diff-name", Static).render())
    seen["compared"] = set(
        diff.compare_traces(screen.result["control"], screen.result["test"])["name"]
    )


async def _self_time(pilot: Any, seen: dict[str, Any]) -> None:
    """Last: `x` changes the view's parameters (at 80x24, as the test was)."""
    await _at(SIZES[0])(pilot, {})
    screen = await start(pilot)
    seen["incl"] = screen.result["compare"]
    await pilot.press("x")
    await wait_until(pilot, lambda: screen.params.get("self_time") is True, 10, "x to take effect")
    screen = await start(pilot)
    seen["self_time"] = screen.params.get("self_time")
    seen["own"] = screen.result["compare"]
    seen["want"] = diff.compare_traces(
        screen.result["control"], screen.result["test"], self_time=True
    )
    seen["summary"] = str(screen.query_one("#diff-summary", Static).render())
    seen["title"] = str(screen.query_one("#screen-title", Static).render())


async def _walk(control: Path, test: Path, cache: Path) -> Walk:
    walk = Walk()
    app = make_app(control, test, cache, findings=False)
    async with app.run_test(size=SIZES[0]) as pilot:
        await start(pilot)
        await run_scenarios(
            pilot,
            walk,
            [
                (f"clipped {SIZES[0]}", _at(SIZES[0])),
                ("labels", _labels(control, test)),
                ("short names", _short_names),
                (f"clipped {SIZES[1]}", _at(SIZES[1])),
                ("self time", _self_time),
            ],
        )
    return walk


@pytest.fixture(scope="module")
def walk(runs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on the two runs for every test here (they only read the screen, but `x`,
    which goes last)."""
    control, test = runs
    return asyncio.run(_walk(control, test, tmp_path_factory.mktemp("walk") / "cache"))


@pytest.mark.parametrize("size", SIZES)
def test_no_number_is_clipped(walk: Walk, size: tuple[int, int]) -> None:
    seen = walk[f"clipped {size}"]
    assert seen["size"] == size and seen["rows"] > 0


def test_labels_headline_and_sides(walk: Walk, runs: tuple[Path, Path]) -> None:
    control, test = runs
    seen = walk["labels"]
    lines = seen["top"].splitlines()
    # the step-time headline: the steps of the step-time view, on each side
    (c, nc), (t, nt) = _median_step_us(control), _median_step_us(test)
    assert nc == nt  # both runs show the same steps: every one is compared
    assert lines[0].startswith(f"Median step (B's steps 2-{nc + 1}, both sides): ")
    assert f"control {fmt_us(c)}, test {fmt_us(t)} ({(t - c) / c:+.1%})" in lines[0]
    # the whole-trace block: time change and share change apart
    assert lines[1].split()[:3] == ["GPU,", "whole", "trace"]
    assert "time change" in lines[1] and lines[1].rstrip().endswith("share")
    values = {m: (a, b, d) for m, a, b, d in seen["temporal"].iter_rows()}
    a, _, d = values["idle_time(us)"]
    share = values["idle_time_pctg"][2]
    idle = next(line for line in lines if line.startswith("idle"))
    assert idle.endswith(f"{d:+,.0f} ({d / a:+.0%}) {share:+.1f} pt")
    # the table's scope
    assert seen["summary"].startswith("Per op in the iteration (inclusive, x: self)")
    # both sides' labels at 80 columns
    lines = seen["sides"].splitlines()  # one line each when both do not fit on one
    assert len(lines) == 2 and all(len(line) <= 78 for line in lines)
    assert lines[0].startswith(f"control: {control.name}") and lines[0].endswith("iter 2")
    assert lines[1].startswith(f"test: {test.name}") and lines[1].endswith("iter 2")


def test_t_shows_self_time(walk: Walk) -> None:
    seen = walk["self time"]
    assert seen["self_time"] is True
    own, incl = seen["own"], seen["incl"]
    assert own.sort("name").equals(seen["want"].sort("name"))
    step = pl.col("name").str.starts_with("ProfilerStep")
    assert own.filter(step)["Test_total_duration"][0] < incl.filter(step)["Test_total_duration"][0]
    assert "(self time, x: inclusive)" in seen["summary"]
    assert "self time" in seen["title"]


def test_names_are_short_in_the_table_and_whole_below(walk: Walk) -> None:
    """At 80 columns every CUTLASS kernel read `void cutlass::Kernel`: the table draws the
    short name (no return type, parameters or template arguments), the line below the
    highlighted row's whole name, the export the whole names."""
    seen = walk["short names"]
    drawn = seen["drawn"]
    assert drawn[-1] == "op" and "name" not in drawn
    frame = seen["frame"]
    full = frame["name"].to_list()
    # the generator writes `void ...<...>(...)` kernels; none is drawn so
    templated = seen["templated"]
    assert templated
    for i in templated:
        short = frame["op"][i]
        assert not short.startswith("void ") and not short.endswith(")"), short
    below = seen["below"]
    assert below == full[templated[0]] or below.rstrip("…") in full[templated[0]]
    # the frame behind the table (filter, export) holds every compared name whole
    assert seen["compared"] == set(full)
