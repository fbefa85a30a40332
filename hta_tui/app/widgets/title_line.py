"""A screen's title: the view, then what its numbers cover (ranks, span, steps), parts joined
by `  ·  `. When the parts do not fit the terminal's width, they go on further lines whole,
so the scope (and the key that changes it) is never cut off at 80 columns."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from textual.widgets import Static

from hta_tui.printable import printable

SEP = "  ·  "


def pack(text: str, width: int) -> str:
    """`text`'s parts on as few lines of `width` cells as keep every part whole (a part wider
    than the line gets a line of its own, which wraps)."""
    parts = printable(text).split(SEP)
    lines = [parts[0]]
    for part in parts[1:]:
        joined = lines[-1] + SEP + part
        if width > 0 and cell_len(joined) > width:
            lines.append(part)
        else:
            lines[-1] = joined
    return "\n".join(lines)


class TitleLine(Static):
    """Names in a title are data: shown as written, control characters escaped, no markup."""

    def __init__(self, content: str = "", **kw: Any) -> None:
        self._text = content
        self._packed_at = 0
        kw["markup"] = False
        super().__init__(printable(content), **kw)

    def update(self, content: Any = "", **kw: Any) -> None:
        if not isinstance(content, str):
            super().update(content, **kw)
            return
        self._text = content
        self._packed_at = self.size.width
        super().update(pack(content, self._packed_at), **kw)

    @property
    def text(self) -> str:
        """The title as one line, whatever the width (tests and exports read it)."""
        return self._text

    def on_resize(self) -> None:
        if self.size.width != self._packed_at:
            self.update(self._text)
