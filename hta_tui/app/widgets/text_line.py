"""A Static for text that may hold names from a trace (screen titles name ranks, spans and
files): a string is shown as written, its control characters as escapes, never as markup."""

from __future__ import annotations

from typing import Any

from textual.widgets import Static

from hta_tui.printable import printable


class TextLine(Static):
    def __init__(self, content: Any = "", **kw: Any) -> None:
        kw["markup"] = False
        super().__init__(printable(content) if isinstance(content, str) else content, **kw)

    def update(self, content: Any = "", **kw: Any) -> None:
        super().update(printable(content) if isinstance(content, str) else content, **kw)
