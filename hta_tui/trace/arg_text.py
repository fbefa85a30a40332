"""Args kept as JSON text (`Input Dims`, `Input type`) in Kineto's spacing, whatever the layout.

These texts are shown, and compared across traces (the diff matches operators by shape), so
one trace must give one text in every layout: compact writers (orjson) drop the spaces Kineto
writes, pretty printers add line breaks and indentation. Kineto's form (`[[1, 2], [3]]`,
`["float", "Scalar"]`) is also the TensorBoard plugin's input shape (Python's str of the list).
Only whitespace outside strings changes; a string's text is kept as written.
"""

from __future__ import annotations

import polars as pl

_BLANK = r"[ \t\r\n]*"
#: Every JSON token with the blanks around it: a string, a literal (number, true, ...) or a
#: punctuation mark. Matches follow each other from the first character, so none starts
#: inside a string (msgspec has checked the text is JSON).
_TOKEN = _BLANK + r'("(?:[^"\\]|\\.)*"|[^ \t\r\n",:\[\]{}]+|[,:\[\]{}])' + _BLANK
#: JSON's blanks, as `bytes.translate` deletes them.
_BLANKS = b" \t\r\n"
#: Put after each token, then made Kineto's separators (never in JSON text: a control
#: character must be escaped inside a string).
_MARK = "\x01"


def kineto_spacing(texts: pl.Series) -> pl.Series:
    """`texts` (JSON, or null) with ", " and ": " between items and no other blank outside
    strings. Made once per distinct text (a trace has a few thousand shapes among hundreds of
    thousands of operators); texts already in that form cost only the comparison."""
    distinct, where = distinct_texts(texts)
    spaced = distinct.str.replace_all(_TOKEN, "${1}" + _MARK).str.replace_many(
        [f",{_MARK}", f":{_MARK}", _MARK], [", ", ": ", ""]
    )
    if distinct.equals(spaced):
        return texts
    return spaced.gather(where).alias(texts.name)


def distinct_texts(texts: pl.Series) -> tuple[pl.Series, pl.Series]:
    """The distinct texts, sorted, and where each of `texts` is among them (null where
    null): what is made of the distinct texts is placed with one gather (a `replace` joins,
    three times slower)."""
    distinct = texts.drop_nulls().unique().sort()
    found = distinct.search_sorted(texts)
    return distinct, pl.select(pl.when(texts.is_not_null()).then(found)).to_series()


def text_blob(texts: list[bytes]) -> bytes:
    """One chunk's texts of a Raw arg, NUL-joined for `arg_texts` (NUL never occurs in JSON
    text). A pretty-printed file's texts are five times their compact size; without a string
    in them every blank is layout, dropped here in one C pass, so the file's blobs are held,
    joined and copied into polars at their compact size."""
    blob = b"\x00".join(texts)
    if b"\n" in blob and b'"' not in blob:
        return blob.translate(None, _BLANKS)
    return blob


def arg_texts(name: str, blobs: list[bytes], *, spaced: bool = True) -> pl.Series:
    """The JSON texts of one Raw arg, from each chunk's `text_blob` (null where absent),
    split by polars: no Python object per value. `spaced`: in Kineto's spacing
    (`kineto_spacing`); else (texts only read as numbers) any spacing."""
    joined = b"\x00".join(blobs)
    whole = pl.Series(name, [joined.decode("utf-8", "replace")], dtype=pl.String)
    parts = whole.str.split("\x00").explode()
    texts = pl.select(pl.when(parts != "").then(parts)).to_series()
    return kineto_spacing(texts) if spaced else texts
