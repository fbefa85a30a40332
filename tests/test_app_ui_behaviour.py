"""What users expect across screens: every number key works, resizing never breaks a screen,
live updates keep the user's place, NO_COLOR stays readable."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from hta_tui.app.app import HtaApp
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("ui") / "traces"
    write_trace_dir(d, ranks=3, steps=4, seed=11)
    return d


def help_fits(app: HtaApp, width: int) -> bool:
    """The footer's `?` is on screen, whole, within `width` columns (it recomposes when the
    screen's bindings change)."""
    from textual.widgets._footer import FooterKey

    keys = {k.action: k for k in app.screen.query(FooterKey)}
    help_key = keys.get("help")
    return help_key is not None and help_key.region.width > 0 and help_key.region.right <= width


async def test_live_update_keeps_screen_and_selection(
    traces: Path, tmp_path: Path, ui: Any
) -> None:
    folder = tmp_path / "live"
    shutil.copytree(traces, folder)
    extra = sorted(folder.glob("rank-2.*"))[0]
    held = tmp_path / extra.name
    extra.rename(held)  # rank 2 arrives later
    app = HtaApp(folder, cache=Cache(tmp_path / "c"), watch=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await ui.wait_patiently(pilot, lambda: app.settled and app.watcher_state != "off")
        await pilot.press("K")
        await ui.wait_patiently(pilot, lambda: ui.app_idle(app))
        table = app.screen.query(FrameTable).last()
        table.focus()
        await pilot.press("j", "j", "j")
        chosen = table.selected_row()
        assert chosen is not None
        generation = app.trace_set.generation
        shutil.copy(held, folder / extra.name)
        await ui.wait_patiently(pilot, lambda: len(app.trace_set.loaded()) == 3)
        await ui.wait_patiently(
            pilot,
            lambda: (
                app.screen._shown_key is not None
                and app.screen._shown_key[0] > generation
                and ui.app_idle(app)
            ),
        )
        assert app.current_mode == "kernels"
        assert table.selected_row()["name"] == chosen["name"]


async def test_no_color_is_readable(
    traces: Path, tmp_path: Path, ui: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "nc"
    shutil.copytree(traces, folder)
    (folder / "rank-9.json").write_bytes(b"{ broken")
    monkeypatch.setenv("NO_COLOR", "1")
    app = HtaApp(folder, cache=Cache(tmp_path / "c"), watch=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await ui.wait_patiently(pilot, lambda: app.settled)
        assert app.no_color
        svg = app.export_screenshot()
        # states are told apart by words, not only colours
        assert "loaded" in svg and "error" in svg and "invalid&#160;JSON" in svg


async def test_theme_change_restyles_screens_built_before_and_after(
    traces: Path, tmp_path: Path, ui: Any
) -> None:
    """New screens skip Textual's app-wide restyle (app.refresh_css): a theme picked mid-session
    must still reach a screen built earlier and one built afterwards, tables included."""
    from textual.color import Color

    app = HtaApp(traces, cache=Cache(tmp_path / "c"), watch=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await ui.wait_patiently(pilot, lambda: app.settled)
        restyles: list[object] = []  # app-wide restyles (Textual's refresh_css)
        update = app.stylesheet.update

        def counted(root: Any, *args: Any, **kw: Any) -> None:
            if root is app:
                restyles.append(root)
            update(root, *args, **kw)

        app.stylesheet.update = counted  # type: ignore[method-assign]
        await pilot.press("K")
        await ui.wait_patiently(pilot, lambda: ui.app_idle(app))
        assert restyles == []  # a first visit restyles nothing already built
        dark_table = app.screen.query(FrameTable).first().styles.background
        app.theme = "hta-light"
        await pilot.pause()
        assert restyles  # a theme change does
        await pilot.press("I")  # built after the change
        await ui.wait_patiently(pilot, lambda: ui.app_idle(app))
        light = Color.parse(app.current_theme.background or "")
        assert app.screen.styles.background == light
        light_table = app.screen.query(FrameTable).first().styles.background
        await pilot.press("K")  # built before
        await pilot.pause()
        assert app.screen.styles.background == light
        assert app.screen.query(FrameTable).first().styles.background == light_table
        assert light_table != dark_table
