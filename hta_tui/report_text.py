"""The report as text tables a person reads in a terminal: as wide as the terminal (a wider
table is printed in column groups, its key columns repeated), the longest tables sorted by time
with the rows left out counted and how to get them, and one number format per column: whole
numbers without decimals, others with a fixed number of decimals.

JSON and CSV output are untouched by any of this: they keep every row and every digit.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Mapping, Sequence
from typing import TextIO

import polars as pl

from hta_tui.analysis.names import distinct_cuts, fold_names

#: Rows shown per table unless --rows says otherwise (0: all).
DEFAULT_ROWS = 50
#: Width used when the output is not a terminal and $COLUMNS is unset.
DEFAULT_WIDTH = 120
#: Text cells are cut to this share of the width (names in full: --json, --csv).
TEXT_SHARE = 0.6

#: Tables listed by name or by rank in the analysis, shown with the most time first.
TIME_ORDER: dict[str, str] = {
    "gpu_kernel_breakdown": "sum (us)",
    "gpu_kernel_type_breakdown": "sum",
    "kernel_duration_stats": "sum",
    "user_annotation_breakdown": "sum (us)",
    "gpu_user_annotation_breakdown": "sum (us)",
    "aten_op_kernels_and_delay": "occurrence_count",
}

#: Kernel-name columns shown folded (analysis/names.py); JSON and CSV keep the full names.
FOLDED: dict[str, str] = {"gpu_kernel_breakdown": "name", "kernel_duration_stats": "name"}

#: Text columns of the files tables never shortened: which file, why it failed, and why it
#: is not its rank's file.
KEPT_WHOLE = frozenset(("path", "error", "span", "conflict"))

#: Columns that hold sentences (a verdict, why a step was left out, a finding's advice and
#: evidence): wrapped at word boundaries over several lines of their row, never cut mid-word.
SENTENCES = frozenset(("verdict", "reason", "why", "advice", "label"))

#: Long time series (a row per bucket, point or stretch): left out of the text report unless
#: named with --only; --json and --csv keep them.
SERIES = frozenset(
    (
        "gpu_utilization_series",
        "gpu_metric_series",
        "gpu_sm_efficiency_series",
        "memory_curve",
        "queue_length_time_series",
        "memory_bw_time_series",
    )
)

#: Columns that identify a row; repeated in every column group of a wide table.
KEY_COLUMNS = frozenset(
    (
        "rank",
        "stream",
        "device",
        "name",
        "kernel_type",
        "idle_category",
        "path",
        "aten_op_name",
        "step",
        "stack",
        "call_site",
        "operator",
        "module",
    )
)
#: A key column's text is cut to no fewer characters than this to fit beside the others.
KEY_TEXT_LEAST = 16


def terminal_width() -> int:
    """$COLUMNS, else the terminal's width, else DEFAULT_WIDTH (piped output)."""
    return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def _decimals(name: str) -> int:
    """Shares and z-scores need two decimals; microseconds are kept to the nanosecond."""
    lowered = name.lower()
    if any(k in lowered for k in ("pctg", "percentage", "ratio", "_z")):
        return 2
    return 3


def column_text(s: pl.Series, max_text: int, *, whole: bool = False) -> list[str]:
    """One column's cells as text, in one format for the whole column; text cut in the
    middle to `max_text` unless `whole`, keeping what tells two texts apart."""
    if s.dtype.is_float():
        finite = s.drop_nulls().drop_nans()
        whole = finite.is_empty() or bool((finite == finite.round(0)).all())
        digits = 0 if whole else _decimals(s.name)
        return ["" if v is None else f"{v:.{digits}f}" for v in s.to_list()]
    if s.dtype.is_numeric():
        return ["" if v is None else str(v) for v in s.to_list()]
    if s.dtype == pl.Boolean:
        return ["" if v is None else ("yes" if v else "no") for v in s.to_list()]
    if s.dtype.is_nested():  # lists of ranks, structs: as Python writes them
        return ["" if v is None else str(v)[:max_text] for v in s.to_list()]
    texts = ["" if v is None else v.replace("\n", " ") for v in s.cast(pl.String, strict=False)]
    return texts if whole else distinct_cuts(texts, max_text)


def wrap_words(text: str, width: int) -> list[str]:
    """A sentence over lines of at most `width`, broken between words (a word longer than
    the width alone is broken inside)."""
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def column_groups(widths: Sequence[int], keys: Sequence[int], width: int) -> list[list[int]]:
    """Column indices per printed block: the key columns, then as many others as fit."""
    others = [i for i in range(len(widths)) if i not in keys]
    base = sum(widths[i] + 3 for i in keys) + 1
    groups: list[list[int]] = []
    current: list[int] = []
    used = base
    for i in others:
        if current and used + widths[i] + 3 > width:
            groups.append([*keys, *current])
            current, used = [], base
        current.append(i)
        used += widths[i] + 3
    if current or not groups:
        groups.append([*keys, *current])
    return groups


def table_lines(df: pl.DataFrame, width: int, whole: frozenset[str] = frozenset()) -> list[str]:
    """`df` as markdown-style table lines no wider than `width` (wider: column groups); the
    text of the `whole` columns is never cut."""
    max_text = max(60, int(width * TEXT_SHARE))
    cells = [column_text(df[c], max_text, whole=c in whole) for c in df.columns]
    widths = [
        max([len(c), *(len(v) for v in col)]) for c, col in zip(df.columns, cells, strict=True)
    ]
    numeric = [df[c].dtype.is_numeric() for c in df.columns]
    keys: list[int] = []
    for i, c in enumerate(df.columns):
        if c not in KEY_COLUMNS:
            break
        room = width // 2 - sum(widths[k] + 3 for k in keys) - 3
        if widths[i] > room:  # a long name is cut to fit, never left out of a group
            if numeric[i] or c in whole or room < max(len(c), KEY_TEXT_LEAST):
                break
            cells[i] = column_text(df[c], room)
            widths[i] = max([len(c), *(len(v) for v in cells[i])])
        keys.append(i)
    # a text column must fit beside the key columns repeated in its group
    room = width - sum(widths[k] + 3 for k in keys) - 4
    wrapped: dict[int, list[list[str]]] = {}
    for i, c in enumerate(df.columns):
        text = not numeric[i] and df[c].dtype != pl.Boolean
        if i in keys or not text or c in whole:
            continue
        if c in SENTENCES:
            full = column_text(df[c], 10**9, whole=True)
            wrapped[i] = [wrap_words(v, max(room, len(c), 8)) for v in full]
            widths[i] = max([len(c), *(len(line) for v in wrapped[i] for line in v)])
        elif widths[i] > room:
            cells[i] = column_text(df[c], max(room, len(c), 8))
            widths[i] = max([len(c), *(len(v) for v in cells[i])])
    lines: list[str] = []
    for n, group in enumerate(column_groups(widths, keys, width)):
        if n:
            lines.append("")

        def cell(i: int, text: str) -> str:
            return text.rjust(widths[i]) if numeric[i] else text.ljust(widths[i])

        lines.append("| " + " | ".join(cell(i, df.columns[i]) for i in group) + " |")
        lines.append("|" + "|".join("-" * (widths[i] + 2) for i in group) + "|")
        for r in range(df.height):
            parts = {i: wrapped[i][r] if i in wrapped else [cells[i][r]] for i in group}
            for k in range(max(len(p) for p in parts.values())):
                texts = (cell(i, parts[i][k] if k < len(parts[i]) else "") for i in group)
                lines.append("| " + " | ".join(texts) + " |")
    return lines  # wider than `width` only where a `whole` column is (file paths)


def ordered(name: str, df: pl.DataFrame) -> pl.DataFrame:
    """Tables listed by name in the analysis come most time first, kernel names folded."""
    if "rank" in df.columns:
        df = df.select("rank", pl.exclude("rank"))
    fold = FOLDED.get(name)
    if fold in df.columns:
        df = df.with_columns(fold_names(df[fold]))
    column = TIME_ORDER.get(name)
    if column is None or column not in df.columns:
        return df
    return df.sort(column, descending=True, nulls_last=True, maintain_order=True)


def write_text(
    tables: Mapping[str, pl.DataFrame],
    titles: Mapping[str, str],
    out: TextIO,
    *,
    width: int | None = None,
    rows: int | None = DEFAULT_ROWS,
    why: Mapping[str, str] | None = None,
    heights: Mapping[str, int] | None = None,
) -> None:
    """Every table under a `# title` line; `rows` per table at most (None or 0: all); an
    empty table says why when `why` knows. `heights`: a table's rows in all where it is
    given its first rows only (a streamed table's)."""
    width = width or terminal_width()
    encoding = (getattr(out, "encoding", None) or "utf-8").lower()
    dots = "…" if "utf" in encoding else "~"  # an ASCII terminal cannot print "…"
    for name, df in tables.items():
        print(f"# {titles.get(name, name)}", file=out)
        if df.is_empty():
            reason = (why or {}).get(name, "the loaded traces have nothing for this table")
            print(textwrap.fill(f"(no rows: {reason})", width), file=out)
            print(file=out)
            continue
        df = ordered(name, df)
        if name in FOLDED:
            print("(kernel names folded; --json or --csv DIR give them whole)", file=out)
        shown = df if not rows else df.head(rows)
        whole = KEPT_WHOLE if name.endswith("files") else frozenset()
        for line in table_lines(shown, width, whole):
            print(line.replace("…", dots), file=out)
        total = (heights or {}).get(name, df.height)
        left = total - shown.height
        if left:
            note = (
                f"({left:,} more rows of {total:,} not shown: --rows 0 shows them all; "
                "--json or --csv DIR write every row)"
            )
            print(textwrap.fill(note, width), file=out)
        print(file=out)
