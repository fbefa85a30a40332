"""Issue 24, point 3: the app's switch between the TensorBoard plugin's own rules and this
project's fixes (`X` and the command palette), on every plugin view, each title saying which
definitions its numbers follow and, with this project's, why they differ from the plugin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
from textual.app import SystemCommand

from hta_tui.analysis import kernel_view, step_breakdown
from hta_tui.app.screens.kernels import KernelsScreen
from hta_tui.app.screens.step_time import StepTimeScreen, overview_rows
from hta_tui.app.widgets.title_line import TitleLine
from hta_tui.trace.parse import parse_file
from tests.test_app_snapshot import demo_app
from tests.test_app_support import (
    make_screen_app,
    open_view,
    screen_shows_current,
    wait_until,
    write_ranks,
)

SIZE = (80, 24)


def _title(screen: Any) -> str:
    return screen.query_one("#screen-title", TitleLine).text


async def _switched(pilot: Any, screen: Any, compat: bool) -> None:
    await wait_until(
        pilot,
        lambda: (
            bool(screen.params.get("tb_compat")) == compat
            and screen_shows_current(pilot.app, screen)
        ),
        60.0,
        "the view in the other definitions",
    )


async def test_x_switches_plugin_views_to_the_plugins_own_rules(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    files = write_ranks(root, 2)
    frames = {r: parse_file(f).frames["events"] for r, f in enumerate(sorted(files))}
    fixed = step_breakdown.step_time_breakdown(frames).sort("rank", "step")
    plugin = step_breakdown.step_time_breakdown(frames, tb_compat=True).sort("rank", "step")
    assert not fixed.equals(plugin)  # the trace is one where the definitions differ
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_view(pilot, "B", StepTimeScreen)
        assert screen.result["breakdown"].sort("rank", "step").equals(fixed)
        assert "hta-tui's rules: cuda_runtime counts as Runtime" in _title(screen)
        assert _title(screen).endswith("(X: plugin's)")
        await pilot.press("X")
        await _switched(pilot, screen, True)
        assert app.tb_compat
        assert screen.result["breakdown"].sort("rank", "step").equals(plugin)
        assert "the TensorBoard plugin's own rules (X: hta-tui's)" in _title(screen)
        # another of the plugin's views follows the same switch
        kernels = await open_view(pilot, "K", KernelsScreen)
        assert kernels.params.get("tb_compat") is True
        assert "the TensorBoard plugin's own rules" in _title(kernels)
        want = kernel_view.job_kernel_table(frames, tb_compat=True)
        tc = dict(zip(want["name"], want["tc_used"], strict=True))
        shown = kernels.result["kernels"].filter(pl.col("name").is_in(list(tc)))
        assert shown.height > 0
        assert shown["tc"].to_list() == [tc[n] for n in shown["name"]]
        # the overview's step-time lines too, saying which definitions they show
        await pilot.press("O")
        want_text = overview_rows(plugin)[0]
        assert want_text != overview_rows(fixed)[0]
        await wait_until(
            pilot,
            lambda: app.overview_data is not None and app.overview_data.step_text == want_text,
            60.0,
            "the overview's step time by the plugin's own rules",
        )
        await pilot.pause()
        box = app.screen.query_one("#overview-step-box")
        assert str(box.border_subtitle) == "the TensorBoard plugin's own rules (X: hta-tui's)"
        await pilot.press("X")
        await wait_until(
            pilot,
            lambda: app.overview_data.step_text == overview_rows(fixed)[0],  # type: ignore[union-attr]
            60.0,
            "the overview's step time by this project's rules",
        )
        await pilot.pause()
        assert str(box.border_subtitle) == (
            "hta-tui's rules: cuda_runtime as Runtime, NCCL as Comm (X: plugin's)"
        )
        assert len(str(box.border_subtitle)) <= SIZE[0] - 6  # whole in the border


async def test_the_palette_has_the_switch(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    write_ranks(root, 1)
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        commands = [c for c in app.get_system_commands(app.screen) if "Definitions" in c.title]
        assert len(commands) == 1
        command: SystemCommand = commands[0]
        assert command.title.startswith("X ")
        command.callback()
        assert app.tb_compat
        command.callback()
        assert not app.tb_compat


async def _plugin_rules(pilot: Any) -> None:
    screen = await open_view(pilot, "B", StepTimeScreen)
    await pilot.press("X")
    await _switched(pilot, screen, True)
    pilot.app.clear_notifications()
    await pilot.pause()


def test_snapshot_plugins_own_rules(snap_compare, tmp_path: Path) -> None:
    assert snap_compare(demo_app(tmp_path), terminal_size=SIZE, run_before=_plugin_rules)
