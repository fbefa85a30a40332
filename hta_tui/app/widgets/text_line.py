"""Statics for text that may hold names from a trace (screen titles name ranks, spans and
files; summaries name kernels, GPUs, call sites): a string is shown as written, its control
characters as escapes, never as markup. Every Static a screen updates with data is one of
these (`tests/test_hostile_names.py` checks it on every view)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from hta_tui.app.safe_text import KEEP_LINES, escaped
from hta_tui.printable import printable


class TextLine(Static):
    def __init__(self, content: Any = "", **kw: Any) -> None:
        kw["markup"] = False
        super().__init__(printable(content) if isinstance(content, str) else content, **kw)

    def update(self, content: Any = "", **kw: Any) -> None:
        super().update(printable(content) if isinstance(content, str) else content, **kw)


class TextBlock(Static):
    """A Static for lines that may hold names from a trace (a summary, a verdict, details):
    never markup, control characters shown as escapes, our own line breaks kept."""

    def __init__(self, content: Any = "", **kw: Any) -> None:
        kw["markup"] = False
        super().__init__(_lines(content), **kw)

    def update(self, content: Any = "", **kw: Any) -> None:
        super().update(_lines(content), **kw)


def _lines(content: Any) -> Any:
    if isinstance(content, str):  # escaped before Rich sees it: Text() drops BEL, BS, CR...
        return Text(content.translate(KEEP_LINES))
    return escaped(content) if isinstance(content, Text) else content
