"""A rank-wise table the client never holds whole: each rank's part read when it is used,
one at a time (a row per kernel launch or memory event is 1.75 MB of Arrow per 100 MB rank;
64 ranks of it concatenated were most of the client's 0.5-0.9 GB, bench/DASK.md).

`RankParts` stands where a table would: its height, schema and columns are known, its rows
come rank part by rank part (`frames`), each cast to the schema of the concatenation
`exec.split` would have made (`pl.concat(..., how="diagonal_relaxed")` of the non-empty
parts, in rank order), so what is written from it is what the whole table writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from hta_tui.exec.blobs import TextFile, fresh_text, unpack, unpack_text
from hta_tui.exec.rank_work import read_cached, text_path


@dataclass(frozen=True)
class Part:
    """One rank's tables of one analysis as kept: the file beside the rank's frames (read
    when used), or the bytes themselves when they are small or not kept there; or its
    tables already read (`held`: read as a worker's answer landed, while the others
    worked), and of a part read then but not held, each table's height and columns
    (`outline`: what `streamed` reads of every part)."""

    size: int
    path: Path | None = None
    blob: bytes | None = None
    #: the blob's last 4 bytes (its CRC-32): what a text kept beside it was made from
    tail: bytes = b""
    held: Mapping[str, pl.DataFrame] | None = field(default=None, compare=False, repr=False)
    outline: Mapping[str, tuple[int, pl.DataFrame]] | None = field(
        default=None, compare=False, repr=False
    )
    #: table -> the size of its text the worker kept in this run (`rank_work.texts_kept`)
    fresh: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    def text(self, table: str, version: str) -> memoryview | TextFile | None:
        """The text of its `table` a worker kept beside its file (`rank_work.Texts`, UTF-8),
        made by `version` from these very tables: left in its file when made in this run
        (`blobs.fresh_text`), else read and checked; None when there is none (or not
        whole)."""
        if self.path is None or len(self.tail) != 4:
            return None
        path = text_path(self.path, table, version)
        if table in self.fresh:
            return fresh_text(path, self.tail, self.fresh[table])
        try:
            kept = path.read_bytes()
        except OSError:
            return None
        return unpack_text(kept, self.tail)

    def tables(self) -> dict[str, pl.DataFrame]:
        """Its tables; OSError when its file went away or was damaged since it was kept."""
        if self.held is not None:
            return dict(self.held)
        blob = self.blob
        if blob is None:
            assert self.path is not None  # (one of the two, always)
            blob = read_cached(self.path)
            if blob is None:
                raise OSError(f"{self.path}: gone or damaged since it was kept")
        return unpack(blob)

    def shapes(self) -> Mapping[str, tuple[int, pl.DataFrame]]:
        """table -> (its height, its columns without rows): from what is known of it, else
        read."""
        if self.outline is not None:
            return self.outline
        return outline(self.tables())


def outline(tables: Mapping[str, pl.DataFrame]) -> dict[str, tuple[int, pl.DataFrame]]:
    """table -> (its height, its columns without rows)."""
    return {name: (df.height, df.clear()) for name, df in tables.items()}


class RankParts:
    """One table of a rank-wise analysis as its ranks' parts, in rank order (see the module
    docstring)."""

    def __init__(
        self,
        name: str,
        parts: Sequence[Part],
        schema: pl.DataFrame,
        height: int,
        exact: Sequence[bool] = (),
    ):
        self.name = name
        self._parts = list(parts)
        self._empty = schema  # no row, the concatenation's columns and types
        self.height = height
        #: per part: it has rows, of the concatenation's columns and types in its order (cast
        #: to it, they are as they are)
        self._exact = list(exact) or [False] * len(self._parts)

    @property
    def schema(self) -> pl.Schema:
        return self._empty.schema

    @property
    def columns(self) -> list[str]:
        return self._empty.columns

    def is_empty(self) -> bool:
        return self.height == 0

    def frames(self) -> Iterator[pl.DataFrame]:
        """Each non-empty rank part, cast to the whole table's schema, one at a time."""
        yield from self.pieces(None)  # type: ignore[misc]

    def pieces(self, version: str | None) -> Iterator[pl.DataFrame | memoryview | TextFile]:
        """`frames`, but a part's text in place of its frame where a worker kept it, made by
        `version` (`Part.text`), and the part's rows are the whole table's as they are
        (`exact`): the text of those rows wherever they are written."""
        for part, exact in zip(self._parts, self._exact, strict=True):
            text = part.text(self.name, version) if exact and version else None
            if text is not None:
                yield text
                continue
            table = part.tables().get(self.name)
            if table is not None and table.height:
                yield pl.concat([self._empty, table], how="diagonal_relaxed")

    def head(self, n: int) -> pl.DataFrame:
        """The first `n` rows (of the first parts only)."""
        got: list[pl.DataFrame] = []
        left = n
        for frame in self.frames():
            if left <= 0:
                break
            got.append(frame.head(left))
            left -= got[-1].height
        return pl.concat([self._empty, *got]) if got else self._empty

    def collect(self) -> pl.DataFrame:
        """The whole table (what a caller that needs it whole pays for)."""
        return pl.concat([self._empty, *self.frames()])


def streamed(names: Sequence[str], parts: Sequence[Part]) -> dict[str, RankParts]:
    """table -> its RankParts, from one analysis's rank parts (rank order): one pass reads
    each part once for the tables' heights and the concatenation's schema."""
    kinds: dict[str, list[pl.DataFrame]] = {n: [] for n in names}
    first: dict[str, pl.DataFrame] = {}
    heights = dict.fromkeys(names, 0)
    # per table, each part's schema where it has rows (None where it has none)
    schemas: dict[str, list[pl.Schema | None]] = {n: [] for n in names}
    for part in parts:
        shapes = part.shapes()
        for n in names:
            shape = shapes.get(n)
            has = shape is not None and shape[0] > 0
            schemas[n].append(shape[1].schema if has else None)  # type: ignore[index]
            if shape is None:  # (not in this rank's part: as `split._concat`)
                continue
            height, empty = shapes[n]
            first.setdefault(n, empty)
            heights[n] += height
            if height:
                kinds[n].append(empty)
    out = {}
    for n in names:
        shown = kinds[n]
        if n in first:
            empty = pl.concat(shown, how="diagonal_relaxed") if shown else first[n]
            # (a schema's `==` takes the columns' order and types: as they are, cast)
            exact = [s is not None and s == empty.schema for s in schemas[n]]
            out[n] = RankParts(n, parts, empty, heights[n], exact)
    return out


def whole_frame(table: pl.DataFrame | RankParts) -> pl.DataFrame:
    """A table as one frame: a streamed one collected (only where it is needed whole)."""
    return table.collect() if isinstance(table, RankParts) else table
