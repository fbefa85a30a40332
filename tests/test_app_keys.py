"""Keys every screen shares (issue 17, points 6 and 7): escape clears a filter before it
leaves, `j`/`k` move in the file list. (The footer's `?` and the rank picked with `r` on
every view: the every-view walk, tests/test_every_view.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from hta_tui.app.app import HtaApp
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from tests.test_app_support import app_idle as screen_ready
from tests.test_app_support import wait_patiently as wait_until


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("keys") / "traces"
    write_trace_dir(d, ranks=3, steps=4, seed=5)
    return d


async def test_escape_clears_the_filter_before_leaving(traces: Path, tmp_path: Path) -> None:
    app = HtaApp(traces, cache=Cache(tmp_path / "c"), watch=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.settled)
        await pilot.press("K")
        await wait_until(pilot, lambda: screen_ready(app))
        table = app.screen.query(FrameTable).first()
        rows = table.frame.height
        await pilot.press("slash", *"gemm", "enter")  # a kept filter; focus back on the table
        await pilot.pause(0.2)
        box = app.screen.query_one("#filter", Input)
        assert box.value == "gemm" and not box.has_focus
        assert 0 < table.view_frame.height < rows
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert app.current_mode == "kernels"  # still here ...
        assert box.value == "" and table.filter_text == ""  # ... with the filter gone
        assert table.view_frame.height == table.frame.height >= rows
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert app.current_mode == "overview"  # the next escape leaves


async def test_j_and_k_move_in_the_file_list(traces: Path, tmp_path: Path) -> None:
    app = HtaApp(traces, cache=Cache(tmp_path / "c"), watch=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.settled)
        files = app.screen.query_one("#files")
        assert files.has_focus and files.cursor_row == 0
        await pilot.press("j", "j")
        assert files.cursor_row == 2
        await pilot.press("k")
        assert files.cursor_row == 1
