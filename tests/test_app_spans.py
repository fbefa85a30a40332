"""Spans in the app: the newest file of a rank is analysed; enter on another one switches."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hta_tui.app.app import HtaApp
from hta_tui.synth import make_trace, write_trace
from hta_tui.trace.cache import Cache


async def test_enter_on_an_older_span_selects_it(tmp_path: Path, ui: Any) -> None:
    d = tmp_path / "t"
    d.mkdir()
    old = write_trace(
        make_trace(0, world_size=1, steps=3, seed=1), d / "worker0.1000.pt.trace.json"
    )
    new = write_trace(
        make_trace(0, world_size=1, steps=5, seed=1), d / "worker0.2000.pt.trace.json"
    )
    os.utime(old, ns=(10**18, 10**18))
    os.utime(new, ns=(2 * 10**18, 2 * 10**18))
    app = HtaApp(d, cache=Cache(tmp_path / "cache"), watch=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await ui.settle(pilot)
        ts = app.trace_set
        assert ts.selected(0).path == new
        table = app.screen.query_one("#files")
        keys = [r.key for r in app.screen._rows]
        table.move_cursor(row=keys.index(old.name))
        await pilot.press("enter")
        await ui.settle(pilot)
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
    ui: Any,
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
        write_trace(make_trace(0, world_size=1, steps=3 + i, seed=1), d / name)
        for i, name in enumerate(names)
    ]
    for i, p in enumerate(paths):
        os.utime(p, ns=((i + 1) * 10**18, (i + 1) * 10**18))
    app = HtaApp(d, cache=Cache(tmp_path / "cache"), watch=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        table = app.screen.query_one("#files")
        keys = [r.key for r in app.screen._rows]
        column = [c.key for c in table.view_columns].index("file")

        def cells() -> dict[str, str]:
            return {k: str(table.get_row_at(i)[column]) for i, k in enumerate(keys)}

        shown = cells()
        assert len(set(shown.values())) == 2  # the two names differ on screen
        assert shown[names[1]].startswith("● ") and not shown[names[0]].startswith("● ")
        assert "1795489276924276875" in shown[names[1]]
        table.move_cursor(row=keys.index(names[0]))
        await pilot.press("enter")
        await ui.settle(pilot)
        assert cells()[names[0]].startswith("● ") and not cells()[names[1]].startswith("● ")
        # the screens say which span they analyse
        await pilot.press("K")
        for _ in range(200):
            await pilot.pause(0.05)
            title = str(app.screen.query_one("#screen-title").render())
            if "span" in title:
                break
        assert "r0 span 1/2" in title


async def test_a_conflicting_file_is_listed_and_enter_picks_it(tmp_path: Path, ui: Any) -> None:
    """Issue 25.6: a newer one-event file saying rank 0 does not replace rank 0; the file list
    says why under its name, and enter on it makes it the rank's file."""
    from tests.test_app_support import write_rank
    from tests.test_span_identity import write_stray

    d = tmp_path / "t"
    real = write_rank(d, 0, world=2)
    write_rank(d, 1, world=2)
    stray = write_stray(d)
    app = HtaApp(d, cache=Cache(tmp_path / "cache"), watch=False, timings=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await ui.settle(pilot)
        ts = app.trace_set
        assert ts.selected(0).path == real
        rows = {r.key: r for r in app.screen._rows}
        row = rows["elsewhere/zz_stray.json"]
        assert row.rank == 0 and row.problem and row.reason.startswith("conflict: pid 4242")
        assert rows[real.name].reason == "" and rows[real.name].get("shown") == "yes"
        assert [d for _, d, w in app.binding_rows(app.screen) if d == "Show this file for its rank"]
        table = app.screen.query_one("#files")
        table.move_cursor(row=list(rows).index("elsewhere/zz_stray.json"))
        await pilot.pause()
        detail = str(app.screen.query_one("#file-detail").render())
        assert "conflict: pid 4242 says rank 0; shown: pid 100  (enter: show it)" in detail
        await pilot.press("enter")
        await ui.settle(pilot)
        assert ts.selected(0).path == stray
        rows = {r.key: r for r in app.screen._rows}
        assert rows[real.name].reason.startswith("conflict: pid 100 says rank 0")
        assert rows["elsewhere/zz_stray.json"].get("shown") == "yes"
        # the overview's numbers follow: rank 0 has no GPU time in the one-event file
        assert [rank for rank, _, _ in app.overview_data.temporal] == [1]
        # every view's title says the rank has a conflicting file (now the real one)
        await pilot.press("K")
        for _ in range(200):
            await pilot.pause(0.05)
            title = str(app.screen.query_one("#screen-title").render())
            if "conflict" in title:
                break
        assert "r0 (1 conflicting file)" in title
