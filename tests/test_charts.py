"""Charts a reader can use (issue 17, point 7): round ticks in the data's unit (the launch
scatter's log axes labelled in us, not log10), a legend and a marker per rank in the kernel
detail's time chart (ranks stay apart with NO_COLOR), and ASCII box borders when the terminal
cannot show box glyphs."""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path
from typing import Any

import pytest

from hta_tui.app.app import HtaApp
from hta_tui.app.screens.help import HelpScreen
from hta_tui.app.widgets.plot import SafePlot
from hta_tui.app.widgets.ticks import label, linear_ticks, log_ticks
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from tests.app_walk import Walk, run_scenarios
from tests.test_app_support import app_idle as screen_ready
from tests.test_app_support import wait_patiently as wait_until


def test_ticks_are_round_values() -> None:
    assert linear_ticks(3.217, 40.1) == [10, 20, 30, 40]
    assert linear_ticks(0.12, 0.93) == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert log_ticks(3.98, 89.1) == [5, 10, 20, 50]
    assert log_ticks(1.2, 25_000) == [10, 100, 1_000, 10_000]
    assert [label(v) for v in (1_000.0, 2.0, 0.5, 12.5)] == ["1,000", "2", "0.5", "12.5"]


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("charts") / "traces"
    write_trace_dir(d, ranks=3, steps=3, seed=8)
    return d


def _round(text: str) -> bool:
    value = float(text.replace(",", ""))
    return value > 0 and (value / 10 ** math.floor(math.log10(value))) in (1.0, 2.0, 5.0)


async def _picture(app: HtaApp, pilot, selector: str) -> str:
    plot = app.screen.query_one(selector, SafePlot)
    await wait_until(pilot, lambda: screen_ready(app) and not plot.building)
    return plot.picture.plain


async def _launch_scatter(pilot: Any, seen: dict[str, Any]) -> None:
    """test_launch_scatter_axes_in_us' steps."""
    await pilot.press("L")
    seen["lines"] = (await _picture(pilot.app, pilot, "#launch-plot")).splitlines()


async def _time_chart(pilot: Any, seen: dict[str, Any]) -> None:
    """test_time_chart_names_each_rank_with_its_own_marker's steps."""
    app = pilot.app
    await pilot.press("K")
    await wait_until(pilot, lambda: screen_ready(app))
    await pilot.press("enter", "v", "v")
    seen["text"] = await _picture(app, pilot, "#time-plot")
    # repaints of the same picture reuse its lines (made once per picture and size)
    plot = app.screen.query_one("#time-plot", SafePlot)
    lines = getattr(plot, "_lines", None)
    for _ in range(3):
        plot.refresh()
        await pilot.pause()
    kept = lines is not None and getattr(plot, "_lines", None) is lines
    seen["lines kept"] = kept and len(lines) == plot.size.height
    seen["first line"] = (plot.render_line(0).text, seen["text"].splitlines()[0])


async def _walk(traces: Path, tmp_path: Path) -> Walk:
    walk = Walk()
    app = HtaApp(traces, cache=Cache(tmp_path / "c"), watch=False, findings=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.settled)
        await run_scenarios(pilot, walk, [("launch", _launch_scatter), ("time", _time_chart)])
    return walk


@pytest.fixture(scope="module")
def walk(traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app at 100x30 under NO_COLOR (the time chart's markers must tell ranks apart
    without colour; the scatter's axes are text either way) for both charts."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NO_COLOR", "1")
        return asyncio.run(_walk(traces, tmp_path_factory.mktemp("charts-walk")))


def test_launch_scatter_axes_in_us(walk: Walk) -> None:
    lines = walk["launch"]["lines"]
    assert any("launch call on the CPU (us)" in line for line in lines)
    axis = next(i for i, line in enumerate(lines) if "└" in line)
    x_ticks = lines[axis + 1].split()
    y_ticks = [line.split("┤")[0].strip() for line in lines if "┤" in line]
    assert len(x_ticks) >= 2 and all(_round(t) for t in x_ticks), x_ticks
    assert len(y_ticks) >= 2 and all(_round(t) for t in y_ticks), y_ticks


def test_a_chart_repainted_reuses_its_lines(walk: Walk) -> None:
    """A 1,000-rank chart was repainted 5-6 times as its view was shown again or
    re-scoped, each time making every line anew from its picture (~8 ms each)."""
    seen = walk["time"]
    assert seen["lines kept"]
    drawn, picture = seen["first line"]
    assert drawn.rstrip() == picture.rstrip() and picture.strip()


def test_time_chart_names_each_rank_with_its_own_marker(walk: Walk) -> None:
    text = walk["time"]["text"]
    legend = dict(re.findall(r"(\S)\1 (r\d)", text))  # "•• r0": marker, rank
    assert set(legend.values()) == {"r0", "r1", "r2"}
    assert len(set(legend)) == 3  # three different markers


async def test_ascii_terminal_gets_ascii_borders(traces: Path, tmp_path: Path) -> None:
    app = HtaApp(traces, cache=Cache(tmp_path / "c"), watch=False, ascii=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.settled)
        for selector in ("#files", "#temporal-box"):
            border = app.screen.query_one(selector).styles.border_top[0]
            assert border == "ascii", selector
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert app.screen.query_one("#help-box").styles.border_top[0] == "ascii"
