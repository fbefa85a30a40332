"""Pure formatting of overview tables into display rows (no Textual, safe in a worker)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from hta_tui.printable import printable
from hta_tui.trace.parse import dropped_text

STATUS_LABELS = {
    "pending": "pending",
    "loading": "loading",
    "loaded": "loaded",
    "incomplete": "incomplete",
    "not_trace": "not a trace",
    "error": "error",
}


@dataclass(frozen=True)
class FileRow:
    """One row of the files table: `key` is the relative path, `values` the full display
    strings by column key (the screen elides them to the width it has; names `printable`),
    `status` the raw status, `reason` the one-line error (empty when none, printable)."""

    key: str
    values: dict[str, str]
    status: str
    rank: int | None
    reason: str

    def get(self, key: str) -> str:
        return self.values.get(key, "")

    @property
    def name(self) -> str:
        """The path as shown (`printable`)."""
        return self.values.get("file") or self.key

    @property
    def problem(self) -> bool:
        """Shown on two lines: the reason under the file name."""
        return bool(self.reason) or self.status in ("incomplete", "error", "not_trace")

    @property
    def tone(self) -> str:
        """The status whose colour the reason takes: a loaded file that lost events warns."""
        return "incomplete" if self.status == "loaded" and self.reason else self.status


#: Endings every trace file shares: dropped first when a name must be shortened.
TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")


def elide_file(path: str, width: int) -> str:
    """A trace file name in `width`: the shared ending goes first, then the middle, so two
    spans of a rank (`worker0.<timestamp>.pt.trace.json.gz`) stay apart."""
    if len(path) <= width:
        return path
    for suffix in TRACE_SUFFIXES:
        if path.endswith(suffix):
            return elide_middle(path[: -len(suffix)], width)
    return elide_middle(path, width)


def elide_middle(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    keep = width - 1
    head = keep // 2
    return text[:head] + "…" + text[len(text) - (keep - head) :]


def fmt_us(us: Any) -> str:
    """Microseconds, to a short human unit."""
    if us is None:
        return ""
    us = float(us)
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.1f} ms"
    return f"{us:.0f} us"


def fmt_count(n: Any) -> str:
    if n is None:
        return ""
    n = int(n)
    if n < 10_000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1e3:.1f}k"
    return f"{n / 1e6:.1f}M"


def fmt_pct(p: Any) -> str:
    return "" if p is None else f"{float(p):.1f}%"


def status_label(status: str, *, watching: bool) -> str:
    """The status cell; an incomplete file says it waits for its next write (on two lines:
    problem rows are two lines high)."""
    if status == "incomplete":
        return "incomplete,\nwaiting" if watching else "incomplete"
    return STATUS_LABELS.get(status, status)


def file_columns(df: pl.DataFrame, *, show_timings: bool) -> list[tuple[str, str]]:
    """(key, header) of the files table. The span column only appears when some rank has more
    than one file; load times only when `show_timings` (hidden for snapshots)."""
    cols = [("rank", "rank"), ("file", "file")]
    if "rank" in df.columns and df.height:
        ranked = df.filter(pl.col("rank").is_not_null())
        if ranked.height and ranked.get_column("rank").is_duplicated().any():
            cols.append(("span", "span"))
    cols += [
        ("status", "status"),
        ("events", "events"),
        ("kernels", "kernels"),
        ("busy", "GPU busy"),
        ("duration", "duration"),
    ]
    if show_timings:
        cols.append(("load", "load"))
    return cols


def overlap_text(n: int) -> str:
    """The data quality line's count of GPU ops that overlap an earlier one on their stream
    (`overview.FILE_COLUMNS`): what a timeline with one lane per stream (Perfetto) drops,
    the timeline here packs into lanes. The count and Perfetto first: 80 columns end there."""
    them = "it" if n == 1 else "them"
    ops = "GPU op overlaps" if n == 1 else "GPU ops overlap"
    return (
        f"{n:,} {ops} on {'its' if n == 1 else 'their'} stream: Perfetto would drop {them} "
        f"(one lane per stream); the timeline packs {them} in lanes"
    )


def _get(row: dict[str, Any], name: str, default: Any = None) -> Any:
    v = row.get(name, default)
    return default if v is None else v


def file_rows(df: pl.DataFrame, *, watching: bool) -> list[FileRow]:
    """Display rows of `overview.file_table`'s frame, ranked files first in rank order (a
    rank's conflicting files after its spans)."""
    if df.is_empty():
        return []
    order = [pl.col("rank").is_null(), pl.col("rank")]
    if "conflict" in df.columns:
        order.append(pl.col("conflict").is_not_null())
    ordered = df.sort([*order, pl.col("path")], nulls_last=True)
    out: list[FileRow] = []
    for row in ordered.iter_rows(named=True):
        status = str(_get(row, "status", ""))
        loaded = status == "loaded"
        path = str(row["path"])
        rank = row.get("rank")
        span = str(_get(row, "span", ""))
        several = bool(span)  # the rank has several spans (file_table names them then)
        name = path.rsplit("/", 1)[-1]
        if span == name:
            span = ""
        if row.get("shown") and span:
            span = "● " + span
        seconds = row.get("seconds")
        load = ""
        if seconds is not None and status not in ("pending", "loading"):
            load = "cached" if row.get("cached") else f"{float(seconds):.2f}s"
        values = {
            "rank": "" if rank is None else str(rank),
            "file": printable(path),
            "span": printable(span),
            "status": status_label(status, watching=watching),
            "events": fmt_count(row.get("events")) if loaded else "",
            "kernels": fmt_count(row.get("kernels")) if loaded else "",
            "busy": fmt_us(row.get("gpu_busy_us")) if loaded else "",
            "duration": fmt_us(row.get("duration_us")) if loaded else "",
            "load": load,
            "reason": printable(_get(row, "error", "")),
            # the span its rank shows, when it has several (marked in the file column too)
            "shown": "yes" if several and row.get("shown") else "no" if several else "",
        }
        reason = values.pop("reason")
        if status == "incomplete" and not reason:
            reason = "incomplete (still being written?)"
        dropped = {d["reason"]: d["count"] for d in row.get("dropped_events") or []}
        if loaded and dropped:  # the numbers rest on a partial file: say so, and why
            reason = f"dropped {dropped_text(dropped)}"
        overlapping = row.get("overlapping_on_stream")
        if loaded and overlapping:  # never dropped here, but other timelines would
            said = overlap_text(overlapping)
            reason = f"{reason}; {said}" if reason else said
        conflict = _get(row, "conflict", "")
        if loaded and conflict:  # another process's file says this rank: not its numbers
            reason = printable(conflict) + (f"; {reason}" if reason else "")
        out.append(FileRow(key=path, values=values, status=status, rank=rank, reason=reason))
    return out


TEMPORAL_COLUMNS: list[tuple[str, str]] = [
    ("rank", "rank"),
    ("compute", "compute"),
    ("non_compute", "non-comp"),
    ("idle", "idle"),
    # HTA's kernel_time: first GPU start to last end, what the % are of; not the step (B),
    # which the overview shows above it: named for what it is, so the two never look alike
    ("kernel", "GPU span"),
]


#: A temporal-breakdown row: the rank (int), or what a summary row stands for ("median"),
#: its display cells, and its bar's values (compute / non-compute / idle, us).
TemporalRow = tuple[int | str, tuple[str, ...], tuple[float, ...]]

#: More ranks than this and the temporal breakdown summarises: the spread over every rank,
#: then the ranks farthest from the median idle share (one row per rank no longer fits).
TEMPORAL_ROWS_MAX = 12
#: The spread: (label, quantile) over the ranks, each column on its own.
SPREAD = (("min", 0.0), ("median", 0.5), ("p90", 0.9), ("max", 1.0))

_PCT = ("compute_time_pctg", "non_compute_time_pctg", "idle_time_pctg")
_US = ("compute_time(us)", "non_compute_time(us)", "idle_time(us)")


def _temporal_row(label: int | str, row: dict[str, Any]) -> TemporalRow:
    cells = (
        str(label),
        *(fmt_pct(row.get(c)) for c in _PCT),
        fmt_us(row.get("kernel_time(us)")),
    )
    values = tuple(float(row.get(c) or 0.0) for c in _US)
    return label, cells, values


def temporal_rows(df: pl.DataFrame, max_rows: int = TEMPORAL_ROWS_MAX) -> list[TemporalRow]:
    """(rank, display cells, bar values compute / non-compute / idle in us) per rank; past
    `max_rows` ranks, the spread (min, median, p90, max of each column over the ranks) and
    then the ranks whose idle share is farthest from the median, the farthest first."""
    if df.is_empty():
        return []
    if df.height <= max_rows:
        return [
            _temporal_row(int(row["rank"]), row) for row in df.sort("rank").iter_rows(named=True)
        ]
    columns = [*_PCT, *_US, "kernel_time(us)"]
    spread = df.select(
        [
            pl.col(c).cast(pl.Float64).quantile(q, "nearest").alias(f"{c}|{label}")
            for label, q in SPREAD
            for c in columns
        ]
    ).row(0, named=True)
    out = [
        _temporal_row(label, {c: spread[f"{c}|{label}"] for c in columns}) for label, _ in SPREAD
    ]
    median = pl.col("idle_time_pctg").median()
    outliers = (
        df.with_columns((pl.col("idle_time_pctg") - median).abs().alias("__far"))
        .sort(["__far", "rank"], descending=[True, False], nulls_last=True)
        .head(max(max_rows - len(SPREAD), 1))
    )
    out += [_temporal_row(int(row["rank"]), row) for row in outliers.iter_rows(named=True)]
    return out


def temporal_note(rows: list[TemporalRow], ranks: int) -> str:
    """What a summarised temporal breakdown shows (empty when it shows every rank)."""
    if not any(isinstance(label, str) for label, _, _ in rows):
        return ""
    shown = sum(isinstance(label, int) for label, _, _ in rows)
    return f"{ranks} ranks: spread, then {shown} outliers (idle)"


#: Columns given up, in this order, before the file name gets narrower than `MIN_FILE`;
#: the `SOFT_DROP` ones also go to give a file's reason `COMFORT_FILE` cells.
DROP_ORDER = ("load", "events", "span", "kernels", "duration")
SOFT_DROP = ("load", "events")
MIN_FILE = 20
COMFORT_FILE = 34
MAX_FILE = 64


def elide_end(text: str, width: int) -> str:
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"


def column_width(rows: list[FileRow], key: str, header: str) -> int:
    cells = [line for r in rows for line in r.get(key).split("\n")]
    return max([len(header), *map(len, cells)])


@dataclass(frozen=True)
class RowWidths:
    """What laying out the files table needs of its rows, made once per overview (in the
    worker) so the screen fits its columns without walking 10,000 rows on the UI thread:
    each column's longest line, the cells the file column would like, any two-line row."""

    widths: dict[str, int]
    need: int  # the longest name, or reason under a name (its "↳ " included)
    problems: bool

    @classmethod
    def of(cls, rows: list[FileRow]) -> RowWidths:
        keys = {k for r in rows for k in r.values}
        return cls(
            widths={k: column_width(rows, k, "") for k in keys},
            need=max(
                [4, *(len(r.name) for r in rows), *(len(r.reason) + 2 for r in rows if r.problem)]
            ),
            problems=any(r.problem for r in rows),
        )

    def width(self, key: str, header: str) -> int:
        return max(len(header), self.widths.get(key, 0))


def fit_columns(
    columns: list[tuple[str, str]],
    rows: list[FileRow] | RowWidths,
    width: int,
    *,
    padding: int = 2,
) -> tuple[list[tuple[str, str]], int]:
    """The columns that fit in `width` cells and the file column's width. The file column
    takes what the others leave (between MIN_FILE and MAX_FILE, or what its longest name or
    reason needs); optional columns go, in DROP_ORDER, before it gets narrower than MIN_FILE."""
    sizes = rows if isinstance(rows, RowWidths) else RowWidths.of(rows)
    need = min(sizes.need, MAX_FILE)
    widths = {k: sizes.width(k, h) + padding for k, h in columns if k != "file"}
    visible = list(columns)

    def room() -> int:
        return width - padding - sum(widths[k] for k, _ in visible if k != "file")

    for key in DROP_ORDER:
        if room() >= min(MIN_FILE, need):
            break
        visible = [c for c in visible if c[0] != key]
    if sizes.problems:
        for key in SOFT_DROP:
            if room() >= min(COMFORT_FILE, need):
                break
            visible = [c for c in visible if c[0] != key]
    return visible, max(4, min(room(), need))
