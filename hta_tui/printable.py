"""Text from a trace or a file name, made safe to show: names are data, never terminal control.

A kernel, thread or file name can hold anything: an escape sequence that sets the terminal's
title, writes its clipboard (OSC 52) or clears the screen; a bidi override that makes a name
read backwards; a newline that breaks a table. Every front end passes such text through
`printable` (or `printable_expr`, for a polars column) before showing it, so these characters
are shown as escapes (`\\x1b`, `\\u202e`) and can reach no terminal. Below every layer (no
package imports), so trace/, the analyses' callers, the report and the app can all use it.

Rich and Textual markup is another matter: it is only interpreted when a string is handed to
them as markup, so the app hands data over as `Text` / `Content`, never as a markup string.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # polars is imported where a frame is made printable: the CLI starts fast
    import polars as pl

#: C0 controls, DEL, C1 controls (U+0080-U+009F: 8-bit CSI, OSC, ...), bidi embeddings,
#: overrides, isolates and marks, and the Unicode line and paragraph separators.
UNPRINTABLE = (
    *range(0x00, 0x20),
    0x7F,
    *range(0x80, 0xA0),
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    0x200E,
    0x200F,
    0x061C,
    0x2028,
    0x2029,
)
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}


def _escape(code: int) -> str:
    return _NAMED.get(code) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


#: code point -> its visible escape, for str.translate
ESCAPES: dict[int, str] = {code: _escape(code) for code in UNPRINTABLE}
_FIND = re.compile("[" + "".join(re.escape(chr(c)) for c in UNPRINTABLE) + "]")


def has_unprintable(text: str) -> bool:
    return _FIND.search(text) is not None


def printable(text: object) -> str:
    """`text` (made a str) with every control, bidi and separator character written as its
    escape: `evil\\x1b]0;PWNED\\x07` instead of a new window title."""
    s = text if isinstance(text, str) else str(text)
    return s.translate(ESCAPES) if _FIND.search(s) else s


def printable_expr(expr: pl.Expr) -> pl.Expr:
    """`printable` over a String column, in polars (same result, no Python per value)."""
    return expr.str.replace_many(
        [chr(c) for c in ESCAPES], list(ESCAPES.values()), ascii_case_insensitive=False
    )


def printable_frame(df: pl.DataFrame) -> pl.DataFrame:
    """Every String column and every column name of `df` made printable."""
    import polars as pl

    text = [name for name, dtype in df.schema.items() if dtype == pl.String]
    out = df.with_columns(printable_expr(pl.col(c)) for c in text) if text else df
    if any(has_unprintable(name) for name in out.columns):
        names = [printable(name) for name in out.columns]
        if len(set(names)) < len(names):  # "\x1b" written out beside a real escape
            names = [f"{name} ({i})" for i, name in enumerate(names)]
        out.columns = names
    return out


#: the characters JSON may carry raw (it escapes the C0 ones itself), as JSON escapes
_JSON_ESCAPES = {code: f"\\u{code:04x}" for code in UNPRINTABLE if code >= 0x7F}
#: (not the C0 ones: JSON text has its own newlines, and escapes those in its strings)
_JSON_FIND = re.compile("[" + "".join(re.escape(chr(c)) for c in _JSON_ESCAPES) + "]")


def json_printable(doc: str) -> str:
    """JSON text with the DEL, C1, bidi and separator characters in its strings written as
    `\\u` escapes: the same JSON to a program, nothing a terminal acts on when printed."""
    return doc.translate(_JSON_ESCAPES) if _JSON_FIND.search(doc) else doc


def json_printable_expr(expr: pl.Expr) -> pl.Expr:
    """`json_printable` over a String column of JSON texts, in polars."""
    return expr.str.replace_many(
        [chr(c) for c in _JSON_ESCAPES], list(_JSON_ESCAPES.values()), ascii_case_insensitive=False
    )
