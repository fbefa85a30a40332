"""One key per idea (issue 24, point 16): `v` shows a view's next table in every view with
several, and the footer shows it at 80 columns; keys typed while a view loads are acted on once
it has; `t` and `0` where they do not apply say why in one line; `?` opens on the views."""

from __future__ import annotations

import asyncio
import functools
import threading
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, TabbedContent
from textual.widgets._footer import FooterKey

from hta_tui.app.app import HtaApp
from hta_tui.app.screens.detail import KernelDetailScreen
from hta_tui.app.screens.help import HelpScreen
from hta_tui.app.screens.idle import IdleScreen
from hta_tui.app.screens.memory import MemoryScreen
from hta_tui.synth import MemoryOptions, write_trace_dir
from hta_tui.trace.cache import Cache
from tests.app_walk import Walk, walk_app
from tests.test_app_support import screen_shows_current, wait_until


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("onekey") / "traces"
    write_trace_dir(d, ranks=1, steps=3, seed=2, memory=MemoryOptions(leak_op="aten::add"))
    return d


def _app(traces: Path, tmp_path: Path) -> HtaApp:
    return HtaApp(traces, cache=Cache(tmp_path / "c"), watch=False, timings=False)


async def _open(pilot: Any, key: str, cls: type) -> Any:
    app = pilot.app
    await wait_until(pilot, lambda: app.settled, 30, "loading")
    await pilot.press(key)
    await wait_until(
        pilot,
        lambda: isinstance(app.screen, cls) and screen_shows_current(app, app.screen),
        60,
        cls.__name__,
    )
    await pilot.pause()
    return app.screen


def _footer_keys(screen: Any) -> dict[str, Any]:
    return {k.key: k for k in screen.query(FooterKey)}


async def _v_is_the_next_table(pilot: Any, seen: dict) -> None:
    app = pilot.app
    app.clear_notifications()  # an earlier scenario's
    for key, cls in (("I", IdleScreen), ("M", MemoryScreen), ("E", KernelDetailScreen)):
        screen = await _open(pilot, key, cls)
        tabs = screen.query_one(TabbedContent)
        before = tabs.active
        await pilot.press("v")
        await pilot.pause()
        assert tabs.active != before, cls.__name__
        footer = _footer_keys(screen)
        assert "v" in footer, cls.__name__
        # on screen at 80 columns, right after ? and q
        assert footer["v"].region.right <= 80 and footer["v"].region.width > 0
        if cls is KernelDetailScreen:  # `]` no longer switches tables here
            now = tabs.active
            await pilot.press("right_square_bracket")
            await pilot.pause()
            assert tabs.active == now


async def _typed_while_loading(pilot: Any, seen: dict) -> None:
    """The idle view's first compute held on a gate: `v v` typed meanwhile."""
    gate = threading.Event()
    compute = IdleScreen.compute

    def held(*args: Any, **kw: Any) -> Any:
        assert gate.wait(30)
        return compute(*args, **kw)

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(IdleScreen, "compute", staticmethod(held))
        try:
            await _typed_while_held(pilot, gate)
        finally:
            gate.set()


async def _typed_while_held(pilot: Any, gate: threading.Event) -> None:
    app = pilot.app
    await wait_until(pilot, lambda: app.settled, 30, "loading")
    await pilot.press("I")
    await wait_until(pilot, lambda: isinstance(app.screen, IdleScreen))
    screen = app.screen
    assert screen.query_one("#body").loading  # still computing: the gate is shut
    first = screen.query_one("#idle-tabs", TabbedContent).active
    await pilot.press("v", "v")  # two tables on, typed while it loads
    await pilot.pause()
    gate.set()
    await wait_until(pilot, lambda: screen_shows_current(app, screen), 30, "idle")
    await wait_until(pilot, lambda: not screen._queued_keys)
    await pilot.pause()
    tabs = screen.query_one("#idle-tabs", TabbedContent)
    panes = [p.id for p in tabs.query("TabPane")]
    assert tabs.active == panes[(panes.index(first) + 2) % len(panes)]


async def _0_and_f_say_why(pilot: Any, seen: dict) -> None:
    app = pilot.app
    app.clear_notifications()  # an earlier scenario's
    await wait_until(pilot, lambda: app.settled, 30, "loading")
    for key in ("0", "F"):
        await pilot.press(key)
        await pilot.pause()
        assert app.current_mode == "overview"
    notes = [n.message for n in app._notifications if "--compare" in n.message]
    assert len(notes) >= 1 and all("\n" not in n for n in notes)


async def _t_says_why(pilot: Any, seen: dict, where: str) -> None:
    app = pilot.app
    app.clear_notifications()  # an earlier scenario's
    await wait_until(pilot, lambda: app.settled, 30, "loading")
    if where == "kernels":
        await pilot.press("K")
        await wait_until(
            pilot,
            lambda: app.current_mode == "kernels" and screen_shows_current(app, app.screen),
            60,
        )
        await pilot.pause()
    await pilot.press("t")
    await pilot.pause()
    notes = [n.message for n in app._notifications if n.message.startswith("t: ")]
    assert len(notes) == 1 and "\n" not in notes[0]
    assert ("totals" in notes[0]) == (where == "kernels")


async def _help_opens_on_the_views(pilot: Any, seen: dict) -> None:
    app = pilot.app
    app.clear_notifications()  # an earlier scenario's
    await wait_until(pilot, lambda: app.settled, 30, "loading")
    await pilot.press("question_mark")
    await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
    await pilot.pause()
    table = app.screen.query_one("#help-table", DataTable)
    row = table.get_row_at(table.cursor_row)
    assert str(row[0]) == "1"  # the Overview section's digit, the views' first row
    assert table.cursor_row > 0  # the screen's own keys are above it
    # and in view at the top (scrolled there after the table's first refresh)
    await wait_until(pilot, lambda: table.scroll_y >= table.cursor_row - 1, 5, "the scroll")


# -- one app for the tests above ------------------------------------------------------------------


async def _one_key_walk(traces: Path, tmp_path: Path) -> Walk:
    scenarios = {  # the overview's first, then the views'
        "t overview": functools.partial(_t_says_why, where="overview"),
        "0 and F": _0_and_f_say_why,
        "help": _help_opens_on_the_views,
        "t kernels": functools.partial(_t_says_why, where="kernels"),
        "typed while loading": _typed_while_loading,  # the idle view's first visit
        "v": _v_is_the_next_table,
    }
    return await walk_app(_app(traces, tmp_path), scenarios, size=(80, 24), notifications=True)


@pytest.fixture(scope="module")
def one_key(traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on `traces` through the scenarios of the tests below, in turn."""
    return asyncio.run(_one_key_walk(traces, tmp_path_factory.mktemp("onekey-app")))


def test_v_is_the_next_table_everywhere_and_in_the_footer(one_key: Walk) -> None:
    one_key.check("v")


def test_a_key_typed_while_a_view_loads_is_acted_on_once_loaded(one_key: Walk) -> None:
    one_key.check("typed while loading")


def test_0_and_f_without_a_second_run_say_why(one_key: Walk) -> None:
    one_key.check("0 and F")


@pytest.mark.parametrize("where", ["kernels", "overview"])
def test_t_says_why_it_does_nothing(one_key: Walk, where: str) -> None:
    one_key.check(f"t {where}")


def test_help_opens_on_the_list_of_views(one_key: Walk) -> None:
    one_key.check("help")
