"""Spans in the app: the newest file of a rank is analysed; enter on another one switches."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hta_tui.app.app import HtaApp
from hta_tui.synth import make_trace, write_trace
from hta_tui.trace.cache import Cache


async def settle(app: HtaApp, pilot) -> None:
    for _ in range(300):
        await pilot.pause(0.05)
        if app.settled:
            return
    raise AssertionError("app did not settle")


async def test_enter_on_an_older_span_selects_it(tmp_path: Path) -> None:
    d = tmp_path / "t"
    d.mkdir()
    old = write_trace(
        make_trace(0, world_size=1, steps=3, seed=1), d / "worker0.1000.pt.trace.json"
    )
    new = write_trace(
        make_trace(0, world_size=1, steps=5, seed=2), d / "worker0.2000.pt.trace.json"
    )
    os.utime(old, ns=(10**18, 10**18))
    os.utime(new, ns=(2 * 10**18, 2 * 10**18))
    app = HtaApp(d, cache=Cache(tmp_path / "cache"), watch=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        ts = app.trace_set
        assert ts.selected(0).path == new
        table = app.screen.query_one("#files")
        keys = [r.key for r in app.screen._rows]
        table.move_cursor(row=keys.index(old.name))
        await pilot.press("enter")
        await settle(app, pilot)
        assert ts.selected(0).path == old
        # the overview now shows the old span's numbers, not the new one's
        from hta_tui.analysis.temporal import temporal_breakdown
        from hta_tui.trace.parse import parse_file

        def compute_us(path: Path) -> float:
            events = parse_file(path).frames["events"]
            return temporal_breakdown({0: events})["compute_time(us)"][0]

        (rank, _, values) = app.overview_data.temporal[0]
        assert rank == 0
        assert values[0] == compute_us(old) != compute_us(new)


async def test_two_spans_stay_apart_at_80_columns_and_the_shown_one_is_marked(
    tmp_path: Path,
) -> None:
    """Issue 17: both spans of a rank showed as `worker0.1795489…pt.trace.json.gz`, and
    nothing said which one the screens analyse."""
    d = tmp_path / "t"
    d.mkdir()
    names = [
        "worker0.1795489276434075715.pt.trace.json.gz",
        "worker0.1795489276924276875.pt.trace.json.gz",
    ]
    paths = [
        write_trace(make_trace(0, world_size=1, steps=3, seed=i), d / name)
        for i, name in enumerate(names)
    ]
    for i, p in enumerate(paths):
        os.utime(p, ns=((i + 1) * 10**18, (i + 1) * 10**18))
    app = HtaApp(d, cache=Cache(tmp_path / "cache"), watch=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one("#files")
        keys = [r.key for r in app.screen._rows]
        column = [str(c.key.value) for c in table.ordered_columns].index("file")

        def cells() -> dict[str, str]:
            return {k: str(table.get_row_at(i)[column]) for i, k in enumerate(keys)}

        shown = cells()
        assert len(set(shown.values())) == 2  # the two names differ on screen
        assert shown[names[1]].startswith("● ") and not shown[names[0]].startswith("● ")
        assert "1795489276924276875" in shown[names[1]]
        table.move_cursor(row=keys.index(names[0]))
        await pilot.press("enter")
        await settle(app, pilot)
        assert cells()[names[0]].startswith("● ") and not cells()[names[1]].startswith("● ")
        # the screens say which span they analyse
        await pilot.press("K")
        for _ in range(200):
            await pilot.pause(0.05)
            title = str(app.screen.query_one("#screen-title").render())
            if "span" in title:
                break
        assert "r0 span 1/2" in title


@pytest.mark.heavy
async def test_every_view_names_the_span_it_analyses(tmp_path: Path) -> None:
    """Two spans of one rank: every analysis view's title says which one its numbers come
    from (the newest, 2 of 2), whole at 80 columns; after enter on the older one, 1 of 2."""
    from hta_tui.app.screens.base import AnalysisScreen
    from hta_tui.app.screens.registry import SCREENS
    from hta_tui.app.widgets.title_line import TitleLine
    from hta_tui.synth import MemoryOptions
    from tests.test_app_support import screen_shows_current, wait_until

    d = tmp_path / "t"
    d.mkdir()
    paths = [
        write_trace(
            make_trace(0, world_size=1, steps=3, seed=i, memory=MemoryOptions()),
            d / f"worker0.{i + 1}000.pt.trace.json",
        )
        for i in range(2)
    ]
    for i, p in enumerate(paths):
        os.utime(p, ns=((i + 1) * 10**18, (i + 1) * 10**18))
    app = HtaApp(d, cache=Cache(tmp_path / "cache"), watch=False)
    views = [e for e in SCREENS if issubclass(e.load(), AnalysisScreen)]

    async def titles(want: str) -> None:
        for entry in views:
            await pilot.press(entry.key)
            cls = entry.load()
            await wait_until(
                pilot,
                lambda c=cls: isinstance(app.screen, c) and screen_shows_current(app, app.screen),
                60,
                entry.mode,
            )
            title = app.screen.query_one("#screen-title", TitleLine)
            lines = str(title.render()).split("\n")
            assert any(want in line for line in lines), (entry.mode, lines)

    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await titles("r0 span 2/2")
        await pilot.press("O")
        await settle(app, pilot)
        table = app.screen.query_one("#files")
        keys = [r.key for r in app.screen._rows]
        table.move_cursor(row=keys.index(paths[0].name))
        await pilot.press("enter")
        await settle(app, pilot)
        await titles("r0 span 1/2")
