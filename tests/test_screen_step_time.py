"""The Step time screen (key `b`): what it shows equals the step-time analysis on the same data,
on a GPU job and on a CPU-only one, and its snapshot (dark; the light
theme restyles, it does not lay out: its snapshots elsewhere cover it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from textual.widgets import Static

from hta_tui.analysis import step_breakdown, tb_roles
from hta_tui.app.screens.step_time import StepTimeBars, StepTimeScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import write_trace_dir
from hta_tui.trace.parse import parse_file
from tests.tb_oracle import answer, profiles_with
from tests.test_app_snapshot import demo_app
from tests.test_app_support import make_screen_app, screen_shows_current, settle, wait_until

SIZE = (80, 24)


async def open_step_time(pilot: Any) -> StepTimeScreen:
    app = pilot.app
    await settle(pilot)
    await pilot.press("b")

    def ready() -> bool:
        s = app.screen_stack[0]
        return isinstance(s, StepTimeScreen) and screen_shows_current(app, s)

    await wait_until(pilot, ready, 60.0, "the step time screen")
    await pilot.pause()
    return app.screen_stack[0]


async def test_gpu_job_numbers(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    files = write_trace_dir(root, ranks=2, steps=3, seed=0)
    frames = {r: parse_file(f).frames["events"] for r, f in enumerate(sorted(files))}
    want = step_breakdown.step_time_breakdown(frames)
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_step_time(pilot)
        shown = screen.query_one("#step-time-table", FrameTable)
        assert shown.row_count == want.height > 0
        got = screen.result["breakdown"].sort("rank", "step")
        assert (
            got["step_time (us)"].to_list() == want.sort("rank", "step")["step_time (us)"].to_list()
        )
        bars = screen.query_one("#step-time-bars", StepTimeBars)
        assert [b.label for b in bars.rows] == ["r0", "r1"]
        text = str(screen.query_one("#step-time-summary", Static).render())
        assert text.startswith("Average step")
        totals = {c: want[f"{c} (us)"].sum() for c in tb_roles.CATEGORIES}
        assert f": {max(totals, key=totals.get)} " in text  # the largest part is named first
        await pilot.press("r")  # rank picker, then one rank
        await pilot.press("down", "enter")
        await wait_until(
            pilot, lambda: screen_shows_current(app, screen) and screen.params.rank is not None
        )
        assert screen.result["breakdown"]["rank"].unique().to_list() == [screen.params.rank]


@pytest.mark.shared
async def test_cpu_only_job_names_the_plugins_largest_part(shared: Path, tmp_path: Path) -> None:
    """A CPU-only 4-rank gloo job: the summary's first part is the category the plugin's
    Overview shows as the largest (summed over its steps and ranks)."""
    totals: dict[str, float] = {}
    for profile in [p for p in profiles_with("overview.json") if p.startswith("pytorch_cpu_ddp")]:
        perf = answer(profile, "overview.json")["performance"][0]["children"]
        for child in perf:
            totals[child["name"]] = totals.get(child["name"], 0.0) + child["value"]
    largest = max(totals, key=totals.get)  # type: ignore[arg-type]
    app = make_screen_app(shared / "traces" / "pytorch_cpu_ddp_gloo_4", tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_step_time(pilot)
        text = str(screen.query_one("#step-time-summary", Static).render())
        assert f": {largest} " in text
        assert screen.query_one("#step-time-table", FrameTable).row_count == 12


async def _on_step_time(pilot: Any) -> None:
    await open_step_time(pilot)


def test_snapshot_dark(snap_compare, tmp_path: Path) -> None:
    assert snap_compare(demo_app(tmp_path), terminal_size=SIZE, run_before=_on_step_time)


def test_empty_job_says_so() -> None:
    from hta_tui.app.screens.step_time import summary

    empty = step_breakdown.step_time_breakdown({})
    result = {"breakdown": empty, "outliers": pl.DataFrame(), "dropped": pl.DataFrame()}
    assert summary(result).startswith("No steps")
