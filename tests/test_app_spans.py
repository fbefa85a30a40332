"""Spans in the app: the newest file of a rank is analysed; enter on another one switches."""

from __future__ import annotations

import os
from pathlib import Path

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
