"""The table drawn line by line (`FrameView`, under every `FrameTable`): a million rows with
no cap, only the rows on screen formatted, and every line drawn as Textual's DataTable draws
the same cells."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widget import Widget
from textual.widgets import DataTable

from hta_tui.app.widgets import frame_view
from hta_tui.app.widgets.frame_table import WIDTH_ROWS, FrameTable
from hta_tui.app.widgets.frame_view import FrameView, ViewColumn

MILLION = 1_000_000


class OneTable(App[None]):
    def __init__(self, table: Widget) -> None:
        super().__init__()
        self.table = table

    def compose(self) -> ComposeResult:
        yield self.table


def screen_text(table: Widget) -> str:
    return "\n".join(table.render_line(y).text for y in range(table.size.height))


async def drawn(pilot: Any, table: FrameTable) -> None:
    """Until the table shows its latest view (a big frame's is made in a thread)."""
    await pilot.pause()
    while table.rows_pending:
        await pilot.pause(0.02)
    await pilot.pause()


def million() -> pl.DataFrame:
    """Kernel-like rows: a name, a duration that grows with the row, a stream."""
    i = pl.int_range(0, MILLION)
    return pl.select(
        name=pl.format("kernel_{}", i),
        dur=(i * 3 % 1_000_003).cast(pl.Float64) / 10,
        stream=i % 8,
    ).rename({"dur": "dur (us)"})


async def test_a_million_rows_are_all_reachable_and_only_those_on_screen_are_formatted() -> None:
    frame = million()
    table = FrameTable(id="t", key_column="name")
    async with OneTable(table).run_test(size=(80, 20)) as pilot:
        table.focus()
        table.show_frame(frame)
        await drawn(pilot, table)
        assert table.row_count == MILLION
        await pilot.press("G")  # the last row, not the last of a capped few hundred
        await pilot.pause()
        assert table.cursor_row == MILLION - 1
        assert table.selected_row() == frame.row(MILLION - 1, named=True)
        assert "kernel_999999" in screen_text(table)
        await pilot.press("pageup", "up")
        await pilot.pause()
        assert table.selected_row()["name"] == frame["name"][table.cursor_row]
        assert table.cursor_row < MILLION - 2
        # what was formatted: the pages on screen (and those visited), never the frame
        assert len(table.pages) <= frame_view.PAGES_KEPT
        formatted = sum(len(p) for p in table.pages.values())
        assert formatted <= frame_view.PAGES_KEPT * frame_view.PAGE
        # sorting sees every row: the largest duration comes first
        before = table.selected_row()
        table.sort_on("dur (us)")  # sorted in a thread: the old view answers meanwhile
        assert table.rows_pending and table.selected_row() == before
        header = table.render_line(0).text
        assert "sorting…" in header and "▼" not in header  # and says what is coming
        await drawn(pilot, table)
        header = table.render_line(0).text
        assert "dur (us) ▼" in header and "sorting" not in header
        table.move_cursor(row=0)
        assert table.selected_row()["dur (us)"] == frame["dur (us)"].max()
        # a filter that matches one row deep in the frame finds it
        table.set_filter("kernel_765432")
        assert "filtering…" in table.render_line(0).text
        await drawn(pilot, table)
        assert table.row_count == 1
        assert "kernel_765432" in screen_text(table)
        assert table.view_frame.height == 1


async def test_columns_fit_a_long_text_beyond_the_first_rows() -> None:
    """Widths come from every row: a name far down the table is drawn whole."""
    names = ["k"] * (WIDTH_ROWS * 4)
    names[-1] = "a_rather_long_kernel_name_far_down"
    frame = pl.DataFrame({"name": names, "count": list(range(len(names)))})
    table = FrameTable(id="t")
    async with OneTable(table).run_test(size=(80, 10)) as pilot:
        table.focus()
        table.show_frame(frame)
        await pilot.press("G")
        await pilot.pause()
        assert "a_rather_long_kernel_name_far_down" in screen_text(table)
        assert f"{len(names) - 1:,}" in screen_text(table)


CELLS = [
    "left text",
    "123",
    Text("styled", style="bold red"),
    Text("42", justify="right"),
    Text("right, styled", justify="right", style="italic"),
    Text("left, styled", justify="left", style="underline"),
    Text("spaces right   ", justify="right"),
    Text.assemble("two ", ("spans", "bold")),
    "x [bold]y",
    "far too long for its column of sixteen",
]


@pytest.mark.parametrize(("zebra", "tall"), [(False, False), (True, False), (True, True)])
async def test_frame_view_draws_as_data_table_does(zebra: bool, tall: bool) -> None:
    """Every line of a table of every kind of cell, with the cursor and zebra stripes, is
    the same segments (text and style) as DataTable's own drawing of the same cells; `tall`:
    rows 1 and 3 take two lines (a name and its reason under it, as the overview's files)."""
    two = Text.assemble("a file name\n", ("↳ why it failed, cut", "red"))
    rows = [[two, *CELLS[1:]] if tall and r % 2 else CELLS for r in range(4)]
    heights = [2 if tall and r % 2 else 1 for r in range(4)]
    view = FrameView(zebra_stripes=zebra, cursor_type="row")
    table = DataTable(zebra_stripes=zebra, cursor_type="row")
    lines = []
    for widget in (view, table):
        async with OneTable(widget).run_test(size=(200, 8)) as pilot:
            if isinstance(widget, FrameView):
                columns = [ViewColumn(f"c{i}", Text(f"c{i}"), 16) for i in range(len(CELLS))]
                kw = {"heights": heights} if tall else {}
                widget.set_rows(columns, len(rows), lambda a, b: rows[a:b], **kw)
            else:
                for i in range(len(CELLS)):
                    widget.add_column(Text(f"c{i}"), width=16)
                for r, row in enumerate(rows):
                    cells = [Text(c) if isinstance(c, str) else c for c in row]
                    widget.add_row(*cells, key=str(r), height=heights[r])
            await pilot.pause()
            if tall:
                widget.move_cursor(row=3)  # below a tall row: its lines are counted
                await pilot.pause()
            drawn = []
            for y in range(widget.size.height):
                strip = widget.render_line(y)
                drawn.append([(seg.text, seg.style) for seg in strip.simplify()])
            lines.append(drawn)
    assert lines[0] == lines[1]


async def test_keys_move_the_cursor_and_enter_selects() -> None:
    frame = pl.DataFrame({"name": [f"k{i}" for i in range(100)], "n": list(range(100))})
    table = FrameTable(id="t")
    selected: list[int] = []

    class Watching(OneTable):
        def on_frame_view_row_selected(self, msg: FrameView.RowSelected) -> None:
            selected.append(msg.cursor_row)

    async with Watching(table).run_test(size=(60, 12)) as pilot:
        table.focus()
        table.show_frame(frame)
        await pilot.press("j", "j", "down", "k")
        assert table.cursor_row == 2
        await pilot.press("pagedown")
        assert table.cursor_row > 2
        await pilot.press("G")
        await pilot.pause()
        assert table.cursor_row == 99
        assert "k99" in screen_text(table)
        await pilot.press("g", "enter")
        await pilot.pause()
        assert table.cursor_row == 0 and selected == [0]


def test_a_new_sort_of_the_same_rows_measures_nothing_again(monkeypatch) -> None:
    """Sorting again (`s`, `S`) reorders the rows only: the number formats and column widths
    of the view are those a fresh table works out for that sort, without measuring the
    columns again; a filter (other rows) measures them again."""
    from hta_tui.app.widgets import frame_table

    i = pl.int_range(0, 3 * WIDTH_ROWS)
    frame = pl.select(  # the longest name and the widest number last, beyond the first rows
        name=pl.format("k{}", i * i), dur=i.cast(pl.Float64) * 1.5, stream=i % 8
    )
    measured: list[str] = []
    real = frame_table.column_bound
    monkeypatch.setattr(
        frame_table, "column_bound", lambda col, *a: measured.append(col.name) or real(col, *a)
    )
    table = FrameTable(key_column="name")
    table.frame = frame
    table.sort_by = ("dur", True)
    first = table._prepare(0)
    assert sorted(measured) == ["dur", "name", "stream"]
    table.sort_by = ("dur", False)
    again = table._prepare(0)
    table.sort_by = ("name", False)
    by_name = table._prepare(0)
    assert sorted(measured) == ["dur", "name", "stream"]  # not measured again
    fresh = FrameTable(key_column="name")
    fresh.frame = frame
    fresh.sort_by = ("name", False)
    assert (by_name.widths, by_name.styles) == (fresh._prepare(0).widths, fresh._prepare(0).styles)
    assert again.widths == first.widths and again.view["dur"][0] == 0.0
    assert by_name.widths["name"] == len(f"k{(3 * WIDTH_ROWS - 1) ** 2}")
    before = len(measured)
    table.filter_text = "k1"
    table._prepare(0)
    assert len(measured) == before + 3  # other rows: measured again
