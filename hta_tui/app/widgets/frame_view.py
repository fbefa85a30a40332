"""A table drawn line by line (Textual's Line API): only the rows on screen are sliced and
formatted, so a million-row frame costs what a screenful does, with no row cap.

`FrameView` knows nothing of polars: it asks its source for `rows(start, stop)` (the cells
of those rows, one text or `Text` each) and is told the row count and the columns (label,
width). It draws exactly as Textual's DataTable draws the same cells (same component classes,
styles and segments), so themes, tests and screenshots see one kind of table; it reads and
writes no private attribute of any Textual class.

Every cell and label goes through `safe_cell`/`safe_label`: names from traces are data, never
markup or terminal control.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, ClassVar, Literal

from rich.cells import cell_len
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.renderables.styled import Styled
from textual.scroll_view import ScrollView
from textual.strip import Strip

from hta_tui.app.safe_text import as_text, safe_cell, safe_label

#: Rows formatted at once (a page), and pages kept: scrolling a screenful formats one page.
PAGE = 64
PAGES_KEPT = 8
#: Drawn rows kept (as strips) between frames.
STRIPS_KEPT = 512

CursorType = Literal["row", "none"]


@dataclass(frozen=True)
class ViewColumn:
    """A drawn column: its key, header label and content width (cells, padding aside)."""

    key: str
    label: Text
    width: int


#: The source of the cells of rows [start, stop): a list of rows, each a sequence of cells.
RowSource = Callable[[int, int], Sequence[Sequence[Any]]]


def _no_rows(start: int, stop: int) -> list[list[Any]]:
    return []


class FrameView(ScrollView, can_focus=True):
    """Rows drawn on demand, with a row cursor, zebra stripes and a header that stays put."""

    ALLOW_SELECT = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("right", "scroll_right", "Scroll right", show=False),
        Binding("left", "scroll_left", "Scroll left", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "scroll_top", "Top", show=False),
        Binding("ctrl+end", "scroll_bottom", "Bottom", show=False),
        Binding("home", "scroll_home", "Home", show=False),
        Binding("end", "scroll_end", "End", show=False),
    ]

    #: DataTable's names, so one theme rule styles every table
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "datatable--cursor",
        "datatable--hover",
        "datatable--header",
        "datatable--header-cursor",
        "datatable--header-hover",
        "datatable--odd-row",
        "datatable--even-row",
    }

    DEFAULT_CSS = """
    FrameView {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        &:focus {
            background-tint: $foreground 5%;
            & > .datatable--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .datatable--header {
                background-tint: $foreground 5%;
            }
        }
        &:dark {
            & > .datatable--even-row {
                background: $surface-darken-1 40%;
            }
        }
        & > .datatable--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .datatable--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .datatable--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .datatable--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .datatable--header-cursor {
            background: $accent-darken-1;
            color: $foreground;
        }
        & > .datatable--header-hover {
            background: $accent 30%;
        }
        & > .datatable--hover {
            background: $block-hover-background;
        }
    }
    """

    class _RowMessage(Message):
        """A message about the cursor's row of `view`."""

        def __init__(self, view: FrameView, cursor_row: int) -> None:
            super().__init__()
            self.view = view
            self.cursor_row = cursor_row

        @property
        def control(self) -> FrameView:
            return self.view

    class RowHighlighted(_RowMessage):
        """The cursor moved to a row (or the rows under it changed)."""

    class RowSelected(_RowMessage):
        """Enter (or a second click) on the cursor's row."""

    def __init__(
        self,
        *,
        cursor_type: CursorType = "row",
        zebra_stripes: bool = False,
        cell_padding: int = 1,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self.cursor_type: CursorType = cursor_type
        self.zebra_stripes = zebra_stripes
        self.cell_padding = cell_padding
        self.show_header = True
        self.show_cursor = True
        self.view_columns: list[ViewColumn] = []
        self.row_count = 0
        self.cursor_row = 0
        #: the row under the mouse, shown only while the mouse (not the keyboard) moves
        self.hover_row = 0
        self.show_hover = False
        self.source: RowSource = _no_rows
        #: the first line of each row and the end of the last, when rows are not all one
        #: line high (`set_rows(heights=...)`); None: row i is line i
        self.row_starts: list[int] | None = None
        self.pages: OrderedDict[int, Sequence[Sequence[Any]]] = OrderedDict()
        self.strips: OrderedDict[tuple[Any, ...], Strip] = OrderedDict()

    # -- data -----------------------------------------------------------------------------------
    def set_rows(
        self,
        columns: list[ViewColumn],
        row_count: int,
        source: RowSource,
        cursor_row: int | None = None,
        heights: Sequence[int] | None = None,
    ) -> None:
        """Show `row_count` rows whose cells `source` gives on demand; the cursor goes to
        `cursor_row` (else stays where it is, within the rows). `heights`: each row's lines
        when some take more than one (a cell's text then wraps in them, as DataTable draws a
        row of that height). Nothing is formatted here."""
        self.view_columns = [
            ViewColumn(c.key, safe_label(c.label), max(c.width, cell_len(c.label.plain)))
            for c in columns
        ]
        self.row_count = row_count
        self.source = source
        self.pages.clear()
        self.strips.clear()
        self.row_starts = None
        if heights is not None and any(h != 1 for h in heights):
            self.row_starts = [0, *accumulate(max(1, h) for h in heights)]
        self.virtual_size = Size(self.table_width, self.line_count + self.header_height)
        row = self.cursor_row if cursor_row is None else cursor_row
        self.cursor_row = max(0, min(row, row_count - 1))
        self.refresh()
        if self.cursor_type == "row" and row_count:
            self.post_message(self.RowHighlighted(self, self.cursor_row))
        self.call_after_refresh(self.scroll_to_cursor)

    def note_header(self, key: str, note: str) -> None:
        """Say `note` in column `key`'s header, cut to its width, until the next `set_rows`:
        a new view is on its way ("sorting…") while the rows shown stay the old ones."""
        self.view_columns = [
            ViewColumn(c.key, safe_label(as_text(note[: c.width])), c.width) if c.key == key else c
            for c in self.view_columns
        ]
        for drawn in [k for k in self.strips if k[0] == -1]:
            del self.strips[drawn]
        self.refresh(Region(0, 0, self.size.width, self.header_height))

    @property
    def header_height(self) -> int:
        return 1 if self.show_header else 0

    @property
    def line_count(self) -> int:
        """Lines the rows take (the header aside)."""
        return self.row_starts[-1] if self.row_starts is not None else self.row_count

    def row_line(self, row: int) -> tuple[int, int]:
        """(first line, height) of `row`, the header aside."""
        if self.row_starts is None:
            return row, 1
        return self.row_starts[row], self.row_starts[row + 1] - self.row_starts[row]

    def line_row(self, line: int) -> tuple[int, int]:
        """(row, line within it) of the `line`-th line of the rows (a row past the last
        beyond them)."""
        if self.row_starts is None or line < 0:
            return line, 0
        if line >= self.row_starts[-1]:
            return self.row_count, 0
        row = bisect_right(self.row_starts, line) - 1
        return row, line - self.row_starts[row]

    @property
    def table_width(self) -> int:
        return sum(c.width + 2 * self.cell_padding for c in self.view_columns)

    def row_cells(self, row: int) -> Sequence[Any]:
        """The cells of `row` as drawn (formatted once per page of PAGE rows)."""
        page = row // PAGE
        cells = self.pages.get(page)
        if cells is None:
            start = page * PAGE
            cells = [
                [safe_cell(c) for c in r]
                for r in self.source(start, min(start + PAGE, self.row_count))
            ]
            self.pages[page] = cells
            while len(self.pages) > PAGES_KEPT:
                self.pages.popitem(last=False)
        else:
            self.pages.move_to_end(page)
        return cells[row - page * PAGE]

    # -- cursor ---------------------------------------------------------------------------------
    def move_cursor(
        self, *, row: int | None = None, animate: bool = False, scroll: bool = True
    ) -> None:
        """Put the cursor on `row` (clamped to the rows), scrolled into view."""
        if row is None or not self.row_count:
            return
        row = max(0, min(row, self.row_count - 1))
        old, self.cursor_row = self.cursor_row, row
        if old != row:
            self.refresh_rows(old, row)
            if self.cursor_type == "row":
                self.post_message(self.RowHighlighted(self, row))
        if scroll:
            self.scroll_to_cursor(animate=animate)

    def scroll_to_cursor(self, animate: bool = False) -> None:
        if not self.row_count or self.cursor_type == "none":
            return
        line, height = self.row_line(self.cursor_row)
        width = max(self.size.width, self.table_width)
        region = Region(int(self.scroll_x), line + self.header_height, width, height)
        spacing = Spacing(self.header_height, 0, 0, 0)
        self.scroll_to_region(region, animate=animate, spacing=spacing, force=True)

    def refresh_rows(self, *rows: int) -> None:
        top = int(self.scroll_y) - self.header_height
        for row in rows:
            if row >= self.row_count:
                continue
            line, height = (row, 1) if row < 0 else self.row_line(row)
            y = line - top
            if -height < y < self.size.height:
                self.refresh(Region(0, y, self.size.width, height))

    def _keyboard(self) -> None:
        if self.show_hover:
            self.show_hover = False
            self.refresh_rows(self.hover_row)

    def action_cursor_up(self) -> None:
        self._keyboard()
        if self.show_cursor and self.cursor_type == "row":
            self.move_cursor(row=self.cursor_row - 1)
        else:
            self.scroll_up()

    def action_cursor_down(self) -> None:
        self._keyboard()
        if self.show_cursor and self.cursor_type == "row":
            self.move_cursor(row=self.cursor_row + 1)
        else:
            self.scroll_down()

    def _page_height(self) -> int:
        return max(1, self.scrollable_content_region.height - self.header_height)

    def action_page_down(self) -> None:
        self._keyboard()
        height = self._page_height()
        if self.show_cursor and self.cursor_type == "row":
            # as DataTable: one page of one-line rows, the view scrolled by as much
            target = min(self.cursor_row + height, self.row_count - 1)
            self.scroll_relative(y=height, animate=False, force=True)
            self.move_cursor(row=target, scroll=False)
        else:
            self.scroll_page_down()

    def action_page_up(self) -> None:
        self._keyboard()
        height = self._page_height()
        if self.show_cursor and self.cursor_type == "row":
            target = max(self.cursor_row - height, 0)
            self.scroll_relative(y=-height, animate=False)
            self.move_cursor(row=target, scroll=False)
        else:
            self.scroll_page_up()

    def action_scroll_top(self) -> None:
        self._keyboard()
        if self.show_cursor and self.cursor_type == "row":
            self.move_cursor(row=0)
        else:
            self.scroll_home()

    def action_scroll_bottom(self) -> None:
        self._keyboard()
        if self.show_cursor and self.cursor_type == "row":
            self.move_cursor(row=self.row_count - 1)
        else:
            self.scroll_end()

    def action_scroll_home(self) -> None:
        self._keyboard()
        self.scroll_x = 0

    def action_scroll_end(self) -> None:
        self._keyboard()
        self.scroll_x = self.max_scroll_x

    def action_scroll_left(self) -> None:
        self._keyboard()
        self.scroll_left()

    def action_scroll_right(self) -> None:
        self._keyboard()
        self.scroll_right()

    def action_select_cursor(self) -> None:
        self._keyboard()
        if self.show_cursor and self.cursor_type == "row" and self.row_count:
            self.post_message(self.RowSelected(self, self.cursor_row))

    # -- mouse ----------------------------------------------------------------------------------
    def on_mouse_move(self, event: events.MouseMove) -> None:
        row = event.style.meta.get("row")
        if row is None:
            return
        old, self.hover_row, self.show_hover = self.hover_row, row, True
        self.refresh_rows(old, row)

    def on_leave(self, _: events.Leave) -> None:
        self._keyboard()

    def on_click(self, event: events.Click) -> None:
        row = event.style.meta.get("row")
        if row is None or row < 0 or not self.show_cursor or self.cursor_type == "none":
            return
        again = row == self.cursor_row
        self.move_cursor(row=row, animate=True)
        if again:
            self.post_message(self.RowSelected(self, row))
        event.stop()

    # -- drawing --------------------------------------------------------------------------------
    def notify_style_update(self) -> None:
        """A new theme: cells styled by component classes (a diff's change marks) are
        formatted again, not only the lines drawn from them."""
        super().notify_style_update()
        self.strips.clear()
        self.pages.clear()

    def on_resize(self, _: events.Resize) -> None:
        self.strips.clear()

    def on_focus(self, _: events.Focus) -> None:
        self.strips.clear()

    def on_blur(self, _: events.Blur) -> None:
        self.strips.clear()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if self.show_header and y < self.header_height:
            row, line = -1, 0
        else:
            row, line = self.line_row(y + int(self.scroll_y) - self.header_height)
        if row >= self.row_count:
            return Strip.blank(width, base)
        cursor = self.cursor_type == "row" and self.show_cursor and row == self.cursor_row
        hover = self.show_hover and self.show_cursor and row == self.hover_row
        key = (row, line, cursor, hover, width, self.has_focus, base)
        strip = self.strips.get(key)
        if strip is None:
            strip = Strip(self._row_segments(row, base, cursor, hover, line))
            self.strips[key] = strip
            while len(self.strips) > STRIPS_KEPT:
                self.strips.popitem(last=False)
        x = int(self.scroll_x)
        return strip.crop(x, x + width).adjust_cell_length(width, base).simplify()

    def _component(self, name: str) -> Style:
        return self.get_component_styles(name).rich_style

    def _cell_styles(self, header: bool, hover: bool, cursor: bool) -> tuple[Style, Style]:
        """(component, post) styles of a cell, as DataTable composes them (the cursor's
        foreground wins over a cell's, its background does not)."""
        style = Style()
        if hover:
            style += self._component("datatable--hover")
            if header:
                style += self._component("datatable--header-hover")
        if cursor:
            style += self._component("datatable--cursor")
            if header:
                style += self._component("datatable--header-cursor")
        return style, Style.from_color(color=style.color)

    def _row_style(self, row: int, base: Style) -> Style:
        if row == -1:
            return self._component("datatable--header")
        if self.zebra_stripes:
            return self._component("datatable--odd-row" if row % 2 else "datatable--even-row")
        return base

    def _row_segments(
        self, row: int, base: Style, cursor: bool, hover: bool, line: int = 0
    ) -> list[Segment]:
        """Line `line` of `row` (-1: the header)."""
        row_style = self._row_style(row, base)
        height = 1 if row == -1 else self.row_line(row)[1]
        component, post = self._cell_styles(row == -1, hover, cursor)
        cells: Sequence[Any] = (
            [c.label for c in self.view_columns] if row == -1 else self.row_cells(row)
        )
        segments: list[Segment] = []
        pad = self.cell_padding
        for index, (column, value) in enumerate(zip(self.view_columns, cells, strict=False)):
            meta = Style.from_meta({"row": row, "column": index})
            width = column.width + 2 * pad
            plain = None if row == -1 or height > 1 else _plain_line(value, column.width, pad)
            if plain is None:
                pre = row_style + meta + component
                segments += self._rich_cell(value, width, pre, post, height, line)
                continue
            text, text_style, justify = plain
            outer = row_style + meta + component + post
            inner = row_style + meta + component
            if text_style:
                inner += self.app.console.get_style(text_style, default=Style.null())
            inner += post
            edge = " " * pad
            fill = " " * (column.width - cell_len(text))
            # as Rich lays them out: "left" and "right" pad inside the text (in its style),
            # the default justification pads after it (in the cell's)
            if justify == "right":
                middle, after = Segment(fill + text, inner), Segment(edge, outer)
            elif justify == "left":
                middle, after = Segment(text + fill, inner), Segment(edge, outer)
            else:
                middle, after = Segment(text, inner), Segment(fill + edge, outer)
            segments += [Segment(edge, outer), middle, after]
        remaining = max(0, self.size.width - self.table_width)
        extend = row_style + component
        extend += Style.from_meta({"row": row, "column": 0, "out_of_bounds": True})
        segments.append(Segment(" " * remaining, extend))
        return segments

    def _rich_cell(
        self, value: Any, width: int, pre: Style, post: Style, height: int = 1, line: int = 0
    ) -> list[Segment]:
        """Line `line` of a cell Rich lays out (a header, spans, text to cut, a row of
        several lines) in `width` cells and `height` lines, as DataTable does."""
        cell = value if isinstance(value, Text) else as_text(str(value))
        options = self.app.console_options.update_dimensions(width, height)
        if height == 1:
            options = options.update(no_wrap=True)
        lines = self.app.console.render_lines(
            Styled(Padding(cell, (0, self.cell_padding)), pre_style=pre, post_style=post),
            options,
        )
        return lines[line] if line < len(lines) else [Segment(" " * width, pre)]


def _plain_line(value: Any, room: int, pad: int) -> tuple[str, Any, str | None] | None:
    """(text, style, justify) of a cell that is one line fitting `room` cells, drawn as the
    segments Rich would make of it; None for anything Rich must lay out."""
    if type(value) is str:
        if "\n" in value:
            return None
        text, style, justify = value, None, None
    elif type(value) is Text:
        if (
            value.spans
            or "\n" in value.plain
            or value.justify not in (None, "default", "left", "right")
        ):
            return None
        text, style, justify = value.plain, value.style, value.justify
        if justify == "right":
            text = text.rstrip()
    else:
        return None
    if len(text) > room or cell_len(text) > room:
        return None
    return text, style, justify
