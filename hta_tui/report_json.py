"""The report's JSON tables written straight from the frames, in polars.

What a table writes is `orjson.dumps(registry.json_value(name, df), option=OPT_INDENT_2)`
(records, or a list for `registry.LIST_KEYS`), indented to its place in the document and
made printable (`printable.json_printable`). Made as Python records that was most of a
results-warm report's CPU (8 x 100 MB ranks: an 81-115 MB document, ~1-1.5 s); here each
row's text is one polars string made from its columns' texts, the same bytes with no Python
object per row: integers and booleans as polars writes them, floats too (the same shortest
round-trip text as orjson's; NaN and infinities as `null`), strings through polars' JSON
encoder (orjson's escapes) and lists of these item by item. A table with a column of any
other type (dates, structs, decimals: none today) is written the records' way
(`table_text` answers None), and so is a small table (`small`): for a few rows the
records cost less than the expressions.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Union

import orjson
import polars as pl

from hta_tui import printable
from hta_tui.printable import json_printable, json_printable_expr

if TYPE_CHECKING:
    from hta_tui.exec.blobs import TextFile

#: A piece of a table's text made already (`part_text`), in bytes or left in its file
Given = Union[memoryview, "TextFile"]

#: A table of at most this many cells (rows x columns) is written the records' way
#: (`orjson` over its `to_dicts()`, the bytes this module matches): building a table's
#: expressions and its queries costs ~1-3 ms whatever its length, its records ~0.4 us a
#: cell (the two cross near 8,000 cells); a report of tiny ranks is ~190 tables of a few
#: rows, ~60 ms of expressions for ~1 ms of records.
SMALL_CELLS = 4_096

#: Rows of a table made into text at a time: a table of per-launch rows is millions of rows
#: on a large job; the client holds one slice's text at a time.
JSON_ROWS = 20_000

_KEY = "v"
_ENCODED = f'{{"{_KEY}":'  # what polars' JSON encoder writes before a value


def _spaces(n: int) -> str:
    return " " * n


def _text_like(dtype: pl.DataType) -> bool:
    return dtype == pl.String or isinstance(dtype, (pl.Categorical, pl.Enum))


def value_text(expr: pl.Expr, dtype: pl.DataType, at: int, ascii: bool = False) -> pl.Expr | None:
    """Each value's JSON text as orjson writes it (OPT_INDENT_2) on a line indented `at`
    spaces (a list's items on the lines below); None for a type written the records' way.
    `ascii`: a text column known to hold nothing from U+007F up (nothing to make printable)."""
    if dtype == pl.Boolean or dtype == pl.Null:
        return expr.cast(pl.String).fill_null("null")
    if dtype.is_integer():
        if dtype in (pl.Int128, pl.UInt128):  # (orjson refuses what 64 bits do not hold)
            return None
        return expr.cast(pl.String).fill_null("null")
    if dtype.is_float():
        wide = expr.cast(pl.Float64)  # a Float32 is written as the double it is
        return pl.when(wide.is_finite()).then(wide.cast(pl.String)).otherwise(pl.lit("null"))
    if _text_like(dtype):
        encoded = pl.struct(expr.cast(pl.String).alias(_KEY)).struct.json_encode()
        text = encoded.str.strip_prefix(_ENCODED).str.strip_suffix("}")
        return text if ascii else json_printable_expr(text)
    if isinstance(dtype, pl.List):
        inner = value_text(pl.element(), dtype.inner, at + 2)
        if inner is None:
            return None
        items = expr.list.eval(inner).list.join(",\n" + _spaces(at + 2))
        whole = pl.concat_str(
            pl.lit("[\n" + _spaces(at + 2)), items, pl.lit("\n" + _spaces(at) + "]")
        )
        return (
            pl.when(expr.is_null())
            .then(pl.lit("null"))
            .when(expr.list.len() == 0)
            .then(pl.lit("[]"))
            .otherwise(whole)
        )
    return None


def _key(name: str) -> str:
    return json_printable(orjson.dumps(name).decode())


def row_text(
    schema: pl.Schema, at: int, column: str | None = None, ascii: frozenset[int] = frozenset()
) -> pl.Expr | None:
    """Each row's text, each item of the list on its own line indented `at` spaces, "\\n"
    first: the row as a record, or its `column` alone (a `LIST_KEYS` table). None when a
    column's type is written the records' way (or there is no column). `ascii`: the places
    of text columns holding nothing from U+007F up."""
    names = list(schema)
    if column is not None:
        i = names.index(column)
        value = value_text(pl.nth(i), schema[column], at, i in ascii)
        return None if value is None else pl.concat_str(pl.lit("\n" + _spaces(at)), value)
    if not names:
        return None
    parts: list[pl.Expr] = []
    for i, (name, dtype) in enumerate(schema.items()):
        value = value_text(pl.nth(i), dtype, at + 2, i in ascii)  # (by place: see `_ascii`)
        if value is None:
            return None
        before = ("\n" + _spaces(at) + "{" if i == 0 else ",") + "\n" + _spaces(at + 2)
        parts += [pl.lit(before + _key(name) + ": "), value]
    parts.append(pl.lit("\n" + _spaces(at) + "}"))
    return pl.concat_str(parts)


def small(table: pl.DataFrame) -> bool:
    """Written the records' way: a few cells (`SMALL_CELLS`)."""
    return table.height * max(table.width, 1) <= SMALL_CELLS


def table_text(
    schema: pl.Schema,
    frames: Iterable[pl.DataFrame | Given],
    at: int,
    column: str | None = None,
) -> Iterator[str | Given] | None:
    """The JSON list of `frames`' rows (each of `schema`), as pieces of text, JSON_ROWS rows
    at a time; `at`: the indent of the line the list starts on. A piece of `frames` that is
    no frame is its rows' text made already (`part_text`, by the worker that made them,
    UTF-8: bytes, or left in the file it was kept in), given as it is. None when a column's
    type is written the records' way."""
    if row_text(schema, at + 2, column) is None:
        return None
    return _pieces(schema, frames, at, column)


def _ascii(frame: pl.DataFrame) -> frozenset[int]:
    """The places of `frame`'s text columns with nothing from U+007F up: their JSON text is
    printable as it is (most names are ASCII; looking costs less than the escaping)."""
    text = [i for i, dtype in enumerate(frame.schema.values()) if _text_like(dtype)]
    if not text:
        return frozenset()
    checks = []
    for i in text:
        col = pl.nth(i).cast(pl.String)
        plain = (col.str.len_bytes() == col.str.len_chars()).all() & ~col.str.contains(
            "\x7f", literal=True
        ).any()
        checks.append(plain.alias(str(i)))
    found = frame.select(checks)
    return frozenset(i for i in text if found.get_column(str(i)).item())


def _pieces(
    schema: pl.Schema, frames: Iterable[pl.DataFrame | Given], at: int, column: str | None
) -> Iterator[str | Given]:
    first = True
    made: dict[frozenset[int], pl.Expr] = {}
    for frame in frames:
        if not isinstance(frame, pl.DataFrame):
            yield "[" if first else ","
            yield frame
            first = False
            continue
        for text in _texts(schema, frame, at, column, made):
            yield ("[" if first else ",") + text
            first = False
    yield "[]" if first else "\n" + _spaces(at) + "]"


def _texts(
    schema: pl.Schema,
    frame: pl.DataFrame,
    at: int,
    column: str | None,
    made: dict[frozenset[int], pl.Expr],
    rows: int = JSON_ROWS,
) -> Iterator[str]:
    """The text of `frame`'s rows, `rows` rows at a time (each piece its rows' texts joined
    by ","; `made`: the row expressions made so far, by the text columns' ASCII)."""
    for start in range(0, frame.height, rows):
        part = frame.slice(start, rows)
        ascii = _ascii(part)
        texts = made.get(ascii)
        if texts is None:
            texts = made[ascii] = row_text(schema, at + 2, column, ascii)  # type: ignore[assignment]
        yield part.select(texts.alias("row")).to_series().str.join(",").item()


#: Where the report's tables start: each is a value of the document's top-level object.
TABLE_AT = 2
#: Rows of a rank's part made into text at a time by its worker (`part_text`): its memory
#: grows by what it holds at once and keeps it (a worker's allocator gives little back), a
#: slice's text ~1.3 MB here; smaller slices cost no more on a 100 MB rank.
PART_ROWS = 4_096


def part_text(name: str, frame: pl.DataFrame) -> Iterator[str] | None:
    """A rank's part of the table `name` as the report's document holds it among the table's
    rows (the rows' texts joined by ","; the list around them and the other ranks' rows are
    the client's), in pieces: made by the worker that made the rows
    (`exec.rank_work.Texts`), beside the rank's results, so the client writes it as it is.
    The same text as the whole table's wherever the whole has this part's schema
    (`exec.parts.RankParts.pieces`). None for a table written the records' way, or with no
    row."""
    from hta_tui.analysis.registry import LIST_KEYS

    column = LIST_KEYS.get(name)
    if not frame.height or row_text(frame.schema, TABLE_AT + 2, column) is None:
        return None
    return _joined(_texts(frame.schema, frame, TABLE_AT, column, {}, PART_ROWS))


def _joined(texts: Iterable[str]) -> Iterator[str]:
    """`",".join(texts)` in pieces."""
    for i, text in enumerate(texts):
        if i:
            yield ","
        yield text


def text_version() -> str:
    """What a kept text depends on besides its rows (its results' key: the analyses' code,
    the options): this module's and the printable escapes' source."""
    return source_version(sys.modules[__name__], printable)


@functools.cache
def source_version(*modules: ModuleType) -> str:
    """A short digest of these modules' source (read once): what a kept text made by them
    depends on besides its rows."""
    digest = hashlib.sha1()
    for module in modules:
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]
