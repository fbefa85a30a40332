"""Tables: data shows as written (never as Rich markup), the overview's `PlainCells` draw as
DataTable does, hidden tables format nothing until shown."""

from __future__ import annotations

import polars as pl
import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable, TabbedContent, TabPane

from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.plain_cells import PlainCells

NAMES = [
    "void at::native::kernel<float>::[lambda(float) (instance 1)]",
    "void f<int>::{lambda()#1}[with T=float]",
    "x [bold]y",
    "plain_kernel",
]


class TableApp(App[None]):
    def __init__(self, table: DataTable) -> None:
        super().__init__()
        self.table = table

    def compose(self) -> ComposeResult:
        yield self.table


def shown_lines(table: DataTable) -> list[str]:
    return [table.render_line(y).text for y in range(table.size.height)]


async def test_frame_table_shows_names_with_brackets_as_written() -> None:
    table = FrameTable(id="t")
    async with TableApp(table).run_test(size=(120, 10)) as pilot:
        table.show_frame(pl.DataFrame({"kernel": NAMES, "count": [1, 2, 3, 4]}))
        await pilot.pause()
        text = "\n".join(shown_lines(table))
        for name in NAMES:
            assert name in text


CELLS = [
    "left text",
    "123",
    Text("styled", style="bold red"),
    Text("42", justify="right"),
    Text("right, styled", justify="right", style="italic"),
    Text("left, styled", justify="left", style="underline"),
    Text("spaces right   ", justify="right"),
]


@pytest.mark.parametrize("zebra", [False, True])
async def test_plain_cells_draw_as_data_table_does(zebra: bool) -> None:
    """Every line of a table of every kind of cell, with the cursor and zebra stripes, is
    the same segments (text and style) as DataTable's own drawing."""

    def fill(table: DataTable) -> None:
        for i, _ in enumerate(CELLS):
            table.add_column(f"c{i}", width=16)
        for r in range(4):
            table.add_row(*CELLS, key=str(r))

    fast = PlainCells(zebra_stripes=zebra, cursor_type="row")
    slow = DataTable(zebra_stripes=zebra, cursor_type="row")
    lines = []
    for table in (fast, slow):
        async with TableApp(table).run_test(size=(140, 8)) as pilot:
            fill(table)
            await pilot.pause()
            drawn = []
            for y in range(table.size.height):
                strip = table.render_line(y)
                drawn.append([(seg.text, seg.style) for seg in strip.simplify()])
            lines.append(drawn)
    assert lines[0] == lines[1]


class TabbedTables(App[None]):
    def compose(self) -> ComposeResult:
        with TabbedContent(initial="one"):
            with TabPane("One", id="one"):
                yield FrameTable(id="shown")
            with TabPane("Two", id="two"):
                yield FrameTable(id="hidden")


async def test_a_table_in_a_hidden_tab_formats_nothing_until_shown() -> None:
    """A screen's key press formats only the rows on view: a table in another tab has its
    latest data at once (sorting, filters, exports see it) but formats no cell until its tab
    is shown, and then shows that latest data."""
    frame = pl.DataFrame({"kernel": NAMES, "count": [1, 2, 3, 4]})
    app = TabbedTables()
    async with app.run_test(size=(100, 12)) as pilot:
        await pilot.pause()
        shown, hidden = app.query_one("#shown", FrameTable), app.query_one("#hidden", FrameTable)
        shown.show_frame(frame)
        hidden.show_frame(frame.head(2))
        hidden.show_frame(frame)  # the latest data is what gets drawn
        await pilot.pause()
        assert shown.row_count == 4 and hidden.row_count == 4
        assert hidden.frame.equals(frame)
        assert shown.pages and not hidden.pages  # nothing of the hidden one formatted
        app.query_one(TabbedContent).active = "two"
        await pilot.pause()
        await pilot.pause()
        text = "\n".join(shown_lines(hidden))
        assert all(name in text for name in NAMES)
