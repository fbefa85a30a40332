"""The app beside broken files (Pilot, 80x24): the file list gives each file's reason and
dropped-event counts, and the rest of the app works on the ranks that loaded."""

from __future__ import annotations

from pathlib import Path

import orjson
from polars.testing import assert_frame_equal
from textual.widgets import Static

from hta_tui.analysis import kernel_detail
from hta_tui.app.screens.kernels import KernelsScreen
from hta_tui.app.screens.overview import FilesTable
from hta_tui.synth import write_trace_dir
from hta_tui.trace.parse import read_bytes
from tests.test_app_support import make_screen_app, screen_shows_current, settle, wait_until

SIZE = (80, 24)


def broken_folder(root: Path) -> None:
    """Two synthetic ranks (rank 1 with two bad events), a NaN-only rank, a file nested
    100,000 deep (past msgspec's recursion limit)."""
    write_trace_dir(root, ranks=2, steps=2, seed=0, gzip_files=False)
    rank1 = next(root.glob("rank-1.*.json"))
    doc = orjson.loads(read_bytes(rank1))
    doc["traceEvents"] += [{"ph": "X", "cat": "kernel", "ts": "NaN", "dur": 1}, 17]
    rank1.write_bytes(orjson.dumps(doc))
    nan_only = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "NaN", "dur": -5}]}
    (root / "rank-2.json").write_bytes(orjson.dumps(nan_only))
    (root / "rank-3.json").write_bytes(b'{"traceEvents": [' + b"[" * 100_000)


def row_text(app, key: str) -> str:
    table = app.screen.query_one("#files", FilesTable)
    return " ".join(str(cell) for cell in table.get_row(key))


async def test_broken_files_show_reasons_and_drops_and_the_rest_works(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    broken_folder(root)
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        rank1 = next(p.name for p in root.glob("rank-1.*.json"))
        reasons = {row.key: row.reason for row in app.overview_data.rows}
        assert reasons[rank1] == "dropped not an object in 1 event; ts is not a number in 1 event"
        assert "↳ dropped not an object" in row_text(app, rank1)  # elided to the column
        assert "loaded" in row_text(app, rank1)
        assert reasons["rank-2.json"] == "no usable event: ts is not a number in 1 event"
        assert "↳ no usable event: ts is not a" in row_text(app, "rank-2.json")
        assert "error" in row_text(app, "rank-2.json")
        assert "↳ invalid JSON (nested too deep" in row_text(app, "rank-3.json")
        info = app.status_info
        assert (info.loaded, info.errors) == (2, 2)
        # the highlighted file's whole reason, on the detail line
        table = app.screen.query_one("#files", FilesTable)
        keys = list(table.row_keys)
        table.move_cursor(row=keys.index(rank1))
        await pilot.pause()
        detail = str(app.screen.query_one("#file-detail", Static).render())
        assert "not an object in 1 event" in detail
        # the rest of the app: the kernels of the two loaded ranks
        assert sorted(app.trace_set.loaded()) == [0, 1]
        await pilot.press("K")
        await wait_until(
            pilot,
            lambda: (
                isinstance(app.screen_stack[0], KernelsScreen)
                and screen_shows_current(app, app.screen_stack[0])
            ),
            what="the kernels screen",
        )
        screen = app.screen_stack[0]
        frames = app.trace_set.frames()
        assert_frame_equal(
            # the analysis's columns (the screen adds short names beside the full ones)
            screen.query_one("#kernel-table").frame.select(
                list(kernel_detail.KERNEL_TABLE_COLUMNS)
            ),
            kernel_detail.kernel_table(frames, fold=True),
        )
