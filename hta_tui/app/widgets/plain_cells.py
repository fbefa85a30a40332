"""A DataTable that shows every cell, label and header as written.

Every cell, label and header goes through `safe_cell` on its way in, and every string cell
is handed over as a `Text`: a table shows names from traces, which must never be read as
markup (DataTable parses a string cell as markup, with emoji codes such as `:fire:`) or
reach the terminal as control characters.

Only the overview's small tables are DataTables; every table of a frame is a `FrameTable`
(`frame_view.py`), drawn line by line. Nothing here touches a private attribute of Textual
(tests/test_textual_privates.py).
"""

from __future__ import annotations

from typing import Any

from rich.text import TextType
from textual.widgets import DataTable
from textual.widgets.data_table import CellType, ColumnKey, RowKey

from hta_tui.app.safe_text import as_text, safe_cell, safe_label


def text_cell(value: Any) -> Any:
    """`value` as DataTable should get it: a string as a Text (never parsed as markup)."""
    value = safe_cell(value)
    return as_text(value) if isinstance(value, str) else value


class PlainCells(DataTable):
    def add_column(self, label: TextType, **kw: Any) -> ColumnKey:
        return super().add_column(safe_label(label), **kw)

    def add_row(self, *cells: CellType, label: TextType | None = None, **kw: Any) -> RowKey:
        return super().add_row(*map(text_cell, cells), label=safe_label(label), **kw)

    def update_cell(
        self, row_key: RowKey | str, column_key: ColumnKey | str, value: CellType, **kw: Any
    ) -> None:
        super().update_cell(row_key, column_key, text_cell(value), **kw)
