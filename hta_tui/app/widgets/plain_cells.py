"""DataTable cells drawn without Rich's layout engine.

DataTable hands every cell to Rich (markup parsing, padding, wrapping, line splitting): about
0.1 ms a cell, so 40 ms of frozen UI for a screenful of a wide table, on every first view and
every redraw (the overview redraws as each rank lands). Nearly every cell here is one line
of text that fits its column; `PlainCells` draws those as the segments Rich would produce,
and hands anything else (headers, labels, markup, spans, two-line rows, text that must be
cut) to DataTable. The snapshot tests check that the screens come out unchanged.

Every cell, label and header goes through `safe_cell` on its way in: a table shows names
from traces, which must never be read as markup or reach the terminal as control characters.

(Overrides a private method of the pinned Textual, `DataTable._render_cell`.)
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text, TextType
from textual.widgets import DataTable
from textual.widgets.data_table import CellType, ColumnKey, RowKey

from hta_tui.app.safe_text import as_text, safe_cell, safe_label


class PlainCells(DataTable):
    def add_column(self, label: TextType, **kw: Any) -> ColumnKey:
        return super().add_column(safe_label(label), **kw)

    def add_row(self, *cells: CellType, label: TextType | None = None, **kw: Any) -> RowKey:
        return super().add_row(*map(safe_cell, cells), label=safe_label(label), **kw)

    def update_cell(
        self, row_key: RowKey | str, column_key: ColumnKey | str, value: CellType, **kw: Any
    ) -> None:
        super().update_cell(row_key, column_key, safe_cell(value), **kw)

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        general = super()._render_cell
        if row_index < 0 or column_index < 0 or self.fixed_rows or self.fixed_columns:
            return general(row_index, column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if row_key is None or column_key is None:
            return general(row_index, column_index, base_style, width, cursor, hover)
        cache_key = (
            row_key,
            column_key,
            base_style,
            cursor,
            hover,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        cached = self._cell_render_cache.get(cache_key)
        if cached is not None:
            return cached
        room = width - 2 * self.cell_padding
        value = self._data.get(row_key, {}).get(column_key)
        cell = _plain(value, room) if self.rows[row_key].height == 1 else None
        if cell is None:
            if isinstance(value, str):  # DataTable would read it as markup, with emoji codes
                self._data[row_key][column_key] = as_text(value)
            return general(row_index, column_index, base_style, width, cursor, hover)
        text, text_style, justify = cell
        component_style, post_style = self._get_styles_to_render_cell(
            False,
            False,
            False,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        meta = Style.from_meta({"row": row_index, "column": column_index})
        outer = base_style + meta + component_style + post_style
        inner = base_style + meta + component_style
        if text_style:
            inner += self.app.console.get_style(text_style, default=Style.null())
        inner += post_style
        pad = " " * self.cell_padding
        fill = " " * (room - cell_len(text))
        # as Rich lays them out: "left" and "right" pad inside the text (in its style), the
        # default justification pads after it (in the cell's)
        if justify == "right":
            line = [Segment(pad, outer), Segment(fill + text, inner), Segment(pad, outer)]
        elif justify == "left":
            line = [Segment(pad, outer), Segment(text + fill, inner), Segment(pad, outer)]
        else:
            line = [Segment(pad, outer), Segment(text, inner), Segment(fill + pad, outer)]
        lines = [line]
        self._cell_render_cache[cache_key] = lines
        return lines


def _plain(value: Any, room: int) -> tuple[str, Any, str | None] | None:
    """(text, style, justify) of a cell that is one line fitting `room` cells, else None."""
    if type(value) is str:
        if "[" in value or "\n" in value:
            return None  # markup, or more than a line: DataTable's way
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
