"""Trace text handed to Rich and Textual as text, never as markup or terminal control.

A string given to a DataTable cell or header, a Static or a notice is parsed as markup
(`[@click=app.quit]` is an action, `[link=...]` a hyperlink, `:fire:` an emoji); a `Text` is
not. These helpers turn data into `Text` with every control character shown as its escape
(`hta_tui.printable`), keeping the line breaks our own cells put between lines.
"""

from __future__ import annotations

import itertools
from typing import Any

from rich.text import Span, Text

from hta_tui.printable import ESCAPES, has_unprintable

#: as ESCAPES, but a line break stays one: two-line cells put it there on purpose
KEEP_LINES = {code: esc for code, esc in ESCAPES.items() if code != 0x0A}


def as_text(value: object, style: str = "", **kw: Any) -> Text:
    """`value` as a Text shown exactly as written (controls escaped, no markup)."""
    s = value if isinstance(value, str) else str(value)
    return Text(s.translate(ESCAPES) if has_unprintable(s) else s, style=style, **kw)


def safe_cell(value: Any) -> Any:
    """A DataTable cell as it may be handed over: a string that markup could change, or that
    holds control characters, becomes a Text; a Text holding control characters gets them
    escaped (its styles kept). Other strings stay strings, the fast path of `PlainCells`,
    which draws them as written (it turns any other string it hands to DataTable into a
    Text, where emoji codes such as `:fire:` would be replaced)."""
    if isinstance(value, str):
        return as_text(value) if "[" in value or has_unprintable(value) else value
    if isinstance(value, Text):
        return escaped(value)
    return value


def safe_label(value: Any) -> Any:
    """A column header or row label: always handed over as Text (DataTable parses a string
    label as markup)."""
    return as_text(value) if isinstance(value, str) else safe_cell(value)


def escaped(value: Text) -> Text:
    """`value` with its control characters (line breaks aside) written as escapes; spans
    are moved to where their characters went."""
    plain = value.plain
    if not has_unprintable(plain.replace("\n", "")):
        return value
    spans = value.spans
    cuts = sorted({0, len(plain), *(s.start for s in spans), *(s.end for s in spans)})
    where = {0: 0}
    pieces = []
    for start, end in itertools.pairwise(cuts):
        piece = plain[start:end].translate(KEEP_LINES)
        pieces.append(piece)
        where[end] = where[start] + len(piece)
    return Text(
        "".join(pieces),
        style=value.style,
        justify=value.justify,
        overflow=value.overflow,
        no_wrap=value.no_wrap,
        end=value.end,
        tab_size=value.tab_size,
        spans=[Span(where[s.start], where[s.end], s.style) for s in spans],
    )
