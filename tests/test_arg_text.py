"""Args kept as JSON text come out in Kineto's spacing whatever spacing the file has: the
expected text is Python's `json.dumps` of the value (its default separators are Kineto's,
and the TensorBoard plugin's input shape is Python's str of the same list)."""

from __future__ import annotations

import json
import random

import orjson
import polars as pl

from hta_tui.trace.arg_text import arg_texts, kineto_spacing, text_blob

#: Strings as type names are written, and the hard cases: blanks, separators, brackets,
#: quotes and backslashes inside a string are text, not layout.
_WORDS = ["float", "unsigned char", "c10::BFloat16", "", "a, b", "x  y", "[1, 2]", 'q"t', "b\\s"]


def _value(rng: random.Random, depth: int = 0) -> object:
    pick = rng.random()
    if depth > 3 or pick < 0.35:
        return rng.choice([rng.randint(-(2**40), 2**40), rng.choice(_WORDS), True, None, 0])
    if pick < 0.85:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(_WORDS): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def _writings(value: object) -> list[str]:
    """The value as compact, Kineto-spaced, pretty (two indents, LF and CRLF) and tabbed JSON."""
    pretty = json.dumps(value, indent=2, ensure_ascii=False)
    return [
        orjson.dumps(value).decode(),
        json.dumps(value, ensure_ascii=False),
        pretty,
        pretty.replace("\n", "\r\n"),
        json.dumps(value, indent="\t", separators=(" ,", " : "), ensure_ascii=False),
        json.dumps(value, indent=7, ensure_ascii=False),
    ]


def test_any_spacing_becomes_kinetos() -> None:
    rng = random.Random(10)
    values = [_value(rng) for _ in range(300)] + [[[4, 8], [8, 16]], ["float", "Scalar"], [[]]]
    texts, want = [], []
    for value in values:
        for text in _writings(value):
            texts.append(text)
            want.append(json.dumps(value, ensure_ascii=False))
    got = kineto_spacing(pl.Series("t", [*texts, None], dtype=pl.String))
    assert got.to_list() == [*want, None]


def test_kinetos_own_texts_are_returned_as_they_are() -> None:
    texts = pl.Series("t", ["[[1, 2], [3]]", None, '["float", "unsigned char"]'])
    assert kineto_spacing(texts) is texts  # nothing to change: not even a copy


def test_pretty_blobs_of_numbers_and_of_strings() -> None:
    """The arg texts of a pretty-printed file, as the parser gathers them (`text_blob` per
    chunk, empty where an event has none): the same texts as a compact file's. A chunk's
    texts of numbers alone are compacted there, so a pretty file's blobs are held at their
    compact size; texts with strings are kept as written (a blank may be in a string)."""
    dims = [[[2048, 1024], []], [[16]], [[]]]
    types = [["float", "Scalar"], ["unsigned char"], []]
    for values in (dims, types):
        blobs_of = {}
        for layout in range(2):
            texts = [
                json.dumps(v, indent=4).encode() if layout else orjson.dumps(v) for v in values
            ]
            blobs = [text_blob([*texts, b""]), text_blob([b""])]
            blobs_of[layout] = blobs
            got = arg_texts("t", blobs).to_list()
            assert got == [json.dumps(v) for v in values] + [None, None], (values, layout)
        pretty, compact = blobs_of[1][0], blobs_of[0][0]
        if values is dims:
            assert pretty == compact
        else:
            assert b"\n" in pretty and b"unsigned char" in pretty
