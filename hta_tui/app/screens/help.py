"""`?`: every key of the screen underneath (shown in the footer or not), in one table."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from hta_tui.app.screens.navigation import nav_bindings


class HelpScreen(ModalScreen[None]):
    """A modal list of (key, what it does, where) rows. `?`, `escape` or `q` closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("question_mark", "close", "Close", show=False),
        Binding("q", "close", "Close", show=False),
        *nav_bindings("app."),  # straight from here to any view
    ]

    def __init__(
        self, rows: list[tuple[str, str, str]], *, title: str = "Keys", start: int = 0
    ) -> None:
        super().__init__()
        self.rows = rows
        self.title_text = title
        #: the row the table opens on (the list of views: what `?` is mostly opened for)
        self.start = min(max(start, 0), max(len(rows) - 1, 0))

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box") as box:
            box.border_title = self.title_text
            box.border_subtitle = "? / esc / q close"
            yield DataTable(id="help-table", cursor_type="row", zebra_stripes=True)
            yield Static(
                "ctrl+p opens the command palette. If the mouse stays captured after a "
                "dropped SSH session, run `reset`.",
                id="help-note",
                markup=False,
            )

    def on_mount(self) -> None:
        table = self.query_one("#help-table", DataTable)
        table.add_column("key", key="key")
        table.add_column("action", key="action")
        table.add_column("where", key="where")
        for key, action, where in self.rows:
            table.add_row(Text(key, style="bold"), Text(action), Text(where))
        table.focus()
        if self.start:
            table.move_cursor(row=self.start, animate=False)
            self.call_after_refresh(table.scroll_to, y=self.start, animate=False)

    def action_close(self) -> None:
        self.dismiss(None)
