"""An icicle chart of a tree drawn in text: one line per depth, each node a block whose width
is its share of its parent's, labelled as far as the block allows (names escaped first, so a
block keeps its width). Plain text (no markup), so it works in any terminal and over SSH;
`ascii=True` draws the edges with `|`."""

from __future__ import annotations

import polars as pl

from hta_tui.printable import printable


def icicle_lines(
    tree: pl.DataFrame, width: int, *, depth: int = 3, value: str = "value", ascii: bool = False
) -> list[str]:
    """`tree`: path ("a/b/c", "/"-joined from the root), depth (0 at the top) and `value`.
    Returns up to `depth` lines of exactly `width` characters."""
    if tree.is_empty() or width < 4:
        return []
    rows = tree.select("path", "depth", value).unique("path").sort("path")
    total = float(rows.filter(pl.col("depth") == 0)[value].sum() or 0)
    if total <= 0:
        return []
    edge = "|" if ascii else "│"
    # Each node's [start, end) column range, laid out inside its parent's, in path order.
    spans: dict[str, tuple[int, int]] = {"": (0, width)}
    lines: list[str] = []
    for level in range(depth):
        line = [" "] * width
        nodes = rows.filter(pl.col("depth") == level)
        if nodes.is_empty():
            break
        cursor: dict[str, float] = {}
        parent_total = {
            parent: float(v)
            for parent, v in nodes.with_columns(_parent().alias("parent"))
            .group_by("parent")
            .agg(pl.col(value).sum())
            .iter_rows()
        }
        for path, _, v in nodes.iter_rows():
            parent = path.rpartition("/")[0]
            if parent not in spans:
                continue
            p0, p1 = spans[parent]
            # The top level shares the root; a child its parent's span (by the parent's
            # total value where it is known, else by its siblings').
            base = total if level == 0 else _value_of(rows, parent, value) or parent_total[parent]
            at = cursor.get(parent, float(p0))
            end = min(float(p1), at + (p1 - p0) * float(v or 0) / base) if base > 0 else at
            start_col, end_col = round(at), round(end)
            cursor[parent] = end
            if end_col - start_col < 1:
                continue
            spans[path] = (start_col, end_col)
            name = printable(path.rpartition("/")[2])  # escaped before it is cut to its block
            cell = (edge + name)[: end_col - start_col]
            line[start_col : start_col + len(cell)] = list(cell)
        lines.append("".join(line))
    return lines


def _parent() -> pl.Expr:
    return (
        pl.when(pl.col("path").str.contains("/"))
        .then(pl.col("path").str.replace(r"/[^/]*$", ""))
        .otherwise(pl.lit(""))
    )


def _value_of(rows: pl.DataFrame, path: str, value: str) -> float:
    hit = rows.filter(pl.col("path") == path)[value]
    return float(hit[0]) if hit.len() else 0.0
