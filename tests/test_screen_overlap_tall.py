"""At 160x48 the overlap screen shows every rank of an 8-rank job (issue 17, point 7: it
showed 6 of 8 with half the screen empty); at 80x24 it keeps its 7-line blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from hta_tui.app.app import HtaApp
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from tests.test_app_support import app_idle as screen_ready
from tests.test_app_support import wait_patiently as wait_until


@pytest.fixture(scope="module")
def eight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("eight") / "traces"
    write_trace_dir(d, ranks=8, steps=2, seed=4, kernels_per_step=20)
    return d


@pytest.mark.parametrize(("size", "every_rank"), [((160, 48), True), ((80, 24), False)])
async def test_every_rank_in_view_when_there_is_room(
    eight: Path, tmp_path: Path, size: tuple[int, int], every_rank: bool
) -> None:
    app = HtaApp(eight, cache=Cache(tmp_path / "c"), watch=False)
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: app.settled)
        await pilot.press("C")
        await wait_until(pilot, lambda: screen_ready(app))
        await pilot.pause(0.2)
        box = app.screen.query_one("#overlap-bars-box")
        table = app.screen.query_one("#overlap-table", FrameTable)
        assert table.row_count == 8
        rows_in_view = table.size.height - 1  # the header
        assert (box.max_scroll_y == 0 and rows_in_view >= 8) is every_rank
        if not every_rank:
            assert box.size.height == 7 and table.size.height == 7
