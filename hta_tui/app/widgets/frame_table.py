"""A polars frame as a table: filter, sort and export exactly what is shown.

The frame stays the source of truth; `FrameView` draws it line by line, so only the rows on
screen are sliced and formatted: a million-row event list costs what a screenful does, with
no row cap. Refreshing with new data keeps the cursor's row key and the sort the user chose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import polars as pl
from rich.cells import cell_len
from rich.text import Text
from textual.actions import SkipAction
from textual.binding import Binding, BindingType
from textual.message import Message

from hta_tui.analysis.names import distinct_cuts
from hta_tui.analysis.rank_spread import summarise
from hta_tui.analysis.tables import csv_for_people
from hta_tui.app.moment import Moment, MomentColumns
from hta_tui.app.safe_text import as_text
from hta_tui.app.widgets.frame_view import FrameView, ViewColumn
from hta_tui.app.widgets.picker import Choices, Picker
from hta_tui.printable import printable

#: Views up to this many rows have every cell formatted once to size the columns exactly
#: (as wide as their widest text); a longer one measures its first WIDTH_ROWS rows exactly
#: and the rest from its columns' extremes (`column_bound`), without formatting them.
WIDTH_ROWS = 500
#: Frames of more rows than this are filtered, sorted and measured in a thread.
THREAD_ROWS = 200_000


#: A table of one row per rank (or per rank and device) with more ranks than this is shown
#: summarised (`RankSummary`): one row per rank no longer fits a screen at 80x24.
RANKS_MAX = 16


@dataclass(frozen=True)
class RankSummary:
    """How a per-rank table is summarised past RANKS_MAX ranks: its worst rows by `worst`
    (largest first when `descending`), then the spread of its number columns over the
    ranks (`analysis.rank_spread`); `a` shows every rank instead, and back."""

    worst: str
    descending: bool = True
    rank: str = "rank"


#: Longer texts (C++ kernel names run to 300 characters) are cut in the middle for display;
#: filters, sorting and exports see the whole text.
MAX_TEXT = 64


def elide(text: str, width: int = MAX_TEXT) -> str:
    if len(text) <= width:
        return text
    half = (width - 1) // 2
    return f"{text[:half]}…{text[len(text) - (width - 1 - half) :]}"


#: Words in a column name that say what kind of number it holds.
_SHARE_WORDS = ("%", "pct", "share", "percent")
_TIME_WORDS = ("us", "time", "dur", "delay", "sum", "mean", "min", "max", "std", "median")
#: "ratio" as a word of a column name: "dura-ratio-n" is a time, not a ratio
_RATIO = re.compile(r"(?<![a-z])ratio")


def float_style(col: pl.Series) -> str:
    """One number format per column, and one per kind of column, so numbers line up and read
    alike across tables: whole numbers without decimals; shares and times (us) with one
    decimal; ratios and z-scores with two; other small quantities with as many decimals as
    show three digits of the largest ("d3": 0.089, never 0.0887 beside 30.9)."""
    finite = col.drop_nulls().drop_nans()
    if finite.is_empty() or (finite == finite.round(0)).all():
        return "int"
    name = col.name.lower()
    if _RATIO.search(name) or name.endswith("_z"):  # 0.99 of a stream's idle time, z-scores
        return "d2"
    if any(w in name for w in (*_SHARE_WORDS, *_TIME_WORDS)):
        return "d1"
    top = float(finite.abs().max())  # type: ignore[arg-type]
    return "d1" if top >= 10 else "d2" if top >= 1 else "d3"


def format_value(
    value: Any, dtype: pl.DataType, style: str = "d1", max_text: int = MAX_TEXT
) -> str:
    """Numbers right-aligned and readable (1,234.5), in the column's `float_style`; nulls as
    a dash; texts longer than `max_text` elided in the middle, their control characters shown
    as escapes (the cell widths are those of what is shown)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if dtype.is_integer():
        return f"{value:,}"
    if dtype.is_float():
        if value != value:  # NaN
            return "-"
        decimals = 0 if style == "int" else int(style[1:]) if style[1:].isdigit() else 1
        return f"{value:,.{decimals}f}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(printable, value)) + "]"
    return elide(printable(value), max_text)


#: Integer columns that name something rather than count it: written as the trace and every
#: title write them (step 1009, correlation 6939149), never with a thousands separator.
LABELS = frozenset(
    ("step", "iter", "rank", "stream", "correlation", "pid", "tid", "gpu", "slowest_rank")
)


def _is_label(col: pl.Series) -> bool:
    return col.name in LABELS and col.dtype.is_integer()


def column_cells(col: pl.Series, style: str = "d1", max_text: int = MAX_TEXT) -> list[str]:
    """A column's cells as drawn (`format_value`); texts cut to `max_text` so that two that
    differ still look different (`distinct_cuts`: the differing part is kept)."""
    values = col.to_list()
    if _is_label(col):
        return ["-" if v is None else str(v) for v in values]
    if col.dtype not in (pl.String, pl.Categorical) and not isinstance(col.dtype, pl.Enum):
        return [format_value(v, col.dtype, style, max_text) for v in values]
    whole = ["-" if v is None else printable(v) for v in values]
    return distinct_cuts(whole, max_text)


def text_match(df: pl.DataFrame, col: str, needle: str) -> pl.Expr | None:
    """Rows whose text in `col` contains `needle` (lower case), any case; None for a column
    of numbers. A categorical column tests its few distinct names and matches their codes:
    a 500k-row table filters in a few ms instead of lower-casing every cell."""
    dtype = df.schema[col]
    if dtype == pl.String:
        return pl.col(col).str.to_lowercase().str.contains(needle, literal=True)
    if isinstance(dtype, (pl.Categorical, pl.Enum)):
        names = df[col].unique().drop_nulls()
        text = names.cast(pl.String).str.to_lowercase()
        return pl.col(col).is_in(names.filter(text.str.contains(needle, literal=True)).implode())
    return None


def sorted_head(df: pl.DataFrame, col: str, descending: bool, limit: int | None) -> pl.DataFrame:
    """`df` sorted by `col` (stable, nulls last), or just its first `limit` rows of that order:
    for a number column those are picked in one pass (top-k), not by sorting every row."""
    if limit is None or df.height <= limit or not df.schema[col].is_numeric():
        out = df.sort(col, descending=descending, nulls_last=True, maintain_order=True)
        return out if limit is None else out.head(limit)
    rows = df.with_row_index("__row")
    pick = rows.top_k if descending else rows.bottom_k
    head = pick(limit, by=[col, "__row"], reverse=[False, descending])
    return head.sort([col, "__row"], descending=[descending, False], nulls_last=True).drop("__row")


def column_bound(col: pl.Series, style: str, max_text: int) -> int:
    """The widest a cell of `col` can be drawn, from the column's extremes (its longest
    text, capped as drawn; its smallest and largest number), without formatting each cell."""
    dtype = col.dtype
    if _is_label(col):
        return max((len(str(v)) for v in (col.min(), col.max(), "-")), default=1)
    if dtype.is_numeric():
        ends = [col.min(), col.max()]
        return max((len(format_value(v, dtype, style, max_text)) for v in ends), default=1)
    if dtype == pl.String or isinstance(dtype, (pl.Categorical, pl.Enum)):
        longest = col.cast(pl.String).str.len_chars().max()
        return min(int(longest or 1), max_text)  # type: ignore[arg-type]
    return 0


@dataclass(frozen=True)
class Prepared:
    """A view ready to draw (`FrameTable._prepare`)."""

    view: pl.DataFrame
    shown: pl.DataFrame
    styles: dict[str, str]
    widths: dict[str, int]
    columns: list[ViewColumn]
    target: int


class ColumnPicker(Picker):
    """The columns of a table, to sort by one."""

    def __init__(self, columns: list[str], current: str | None) -> None:
        choices = Choices([(c, c) for c in columns], current, fallback=None)
        super().__init__("Sort by", [choices], box_id="column-picker")
        self.columns = columns


class FrameTable(FrameView):
    """Shows a polars frame. `s` sorts by the cursor's column (again: reverses), `e` exports
    the filtered, sorted view to CSV; the screen drives the filter (`set_filter`)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "sort", "Sort", tooltip="Pick the column to sort by"),
        Binding("S", "reverse", "Reverse", show=False, tooltip="Reverse the sort order"),
        Binding("e", "export", "Export CSV", tooltip="Write the table as shown to a CSV file"),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "Top", show=False),
        Binding("G", "scroll_bottom", "Bottom", show=False),
        Binding("t", "timeline", "Timeline", tooltip="Open the timeline at this row's moment"),
        Binding(
            "a",
            "every_rank",
            "Every rank",
            tooltip="Every rank's row, or the summary (worst ranks, then the spread) again",
        ),
    ]

    class OpenTimeline(Message):
        """`t` on a row that names a moment (the screen opens the timeline there)."""

        def __init__(self, moment: Moment) -> None:
            super().__init__()
            self.moment = moment

    class Exported(Message):
        def __init__(self, table: FrameTable, path: Path, rows: int) -> None:
            super().__init__()
            self.table = table
            self.path = path
            self.rows = rows

    def __init__(
        self,
        *,
        key_column: str | None = None,
        export_name: str = "table",
        moment: MomentColumns | None = None,
        ranks: RankSummary | None = None,
        **kw: Any,
    ) -> None:
        kw.setdefault("cursor_type", "row")
        kw.setdefault("zebra_stripes", True)
        super().__init__(**kw)
        self.key_column = key_column
        self.export_name = export_name
        #: the columns naming a moment, for `t` (None: the key belongs to the screen)
        self.moment = moment
        #: a per-rank table: summarised past RANKS_MAX ranks unless `every_rank` (`a`)
        self.ranks = ranks
        self.every_rank = False
        self.rank_count = 0  # ranks in the frame (of a per-rank table)
        self.frame: pl.DataFrame = pl.DataFrame()
        #: columns kept in the frame (cursor row, filter, export) but not drawn: a kernel's
        #: full name behind its short one
        self.hidden_columns: frozenset[str] = frozenset()
        #: texts longer than this are elided in the middle when drawn
        self.max_text = MAX_TEXT
        #: a narrower cap for some columns (an operator's input shapes beside its name)
        self.column_max_text: dict[str, int] = {}
        self.filter_text = ""
        self.sort_by: tuple[str, bool] | None = None  # (column, descending)
        #: each drawn float column's one number format (`float_style`, over the whole view)
        self.float_styles: dict[str, str] = {}
        #: the last filtered frame and views (`_view`), by what they were made from
        self._views: dict[Any, tuple[pl.DataFrame, Any, pl.DataFrame]] = {}
        #: the view drawn (every column), its drawn columns, and each one's width
        self._current: pl.DataFrame = pl.DataFrame()
        self._shown: pl.DataFrame = pl.DataFrame()
        self._widths: dict[str, int] = {}
        self._generation = 0  # of the view asked for last (`_render_frame`)
        self._preparing = False  # a view being made in a thread
        #: the sort and filter of the view drawn (a new one's header says what is coming)
        self._applied: tuple[tuple[str, bool] | None, str] = (None, "")

    @property
    def rows_pending(self) -> bool:
        """A new view (of a big frame) is being made in a thread: the rows shown are not
        the latest yet (tests, screenshots and screens' `shows_current` wait for none)."""
        return self._preparing

    # -- data ----------------------------------------------------------------------------------
    def show_frame(self, df: pl.DataFrame) -> None:
        """Show `df`: only the view's size, number formats and column widths are worked out
        here; cells are formatted when their rows come on screen."""
        self.frame = df
        spec = self.ranks
        could = self.can_summarise
        # (a row of no rank, the critical path across ranks, is not one more rank)
        ranks = df[spec.rank].drop_nulls() if spec and spec.rank in df.columns else None
        self.rank_count = ranks.n_unique() if ranks is not None else 0
        if could != self.can_summarise and self.is_attached:
            self.refresh_bindings()  # `a` shows in the footer only where it does something
        self._render_frame()

    @property
    def can_summarise(self) -> bool:
        """A per-rank table of more ranks than a screenful."""
        return self.ranks is not None and self.rank_count > RANKS_MAX

    @property
    def summarised(self) -> bool:
        """Showing the summary (worst ranks, spread) instead of every rank."""
        return self.can_summarise and not self.every_rank

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()
        self._render_frame()

    @property
    def view_frame(self) -> pl.DataFrame:
        """The frame as shown: filtered (any text column contains the filter, any case) and
        sorted; every row (there is no cap), so exports are complete."""
        return self._view(None)

    def _view(self, limit: int | None) -> pl.DataFrame:
        """`view_frame`, or its first `limit` rows; the last of each is kept, so a key that
        redraws the table filters and sorts a big frame once, not once per use."""
        key = (self.filter_text, self.sort_by, limit, self.summarised)
        cached = self._views.get(limit)
        if cached is not None and cached[0] is self.frame and cached[1] == key:
            return cached[2]
        df = self._filtered()
        if self.summarised and self.ranks is not None:
            spec = self.ranks
            df = summarise(df, spec.worst, descending=spec.descending, rank=spec.rank)
            df = df if limit is None else df.head(limit)
        elif self.sort_by is not None and self.sort_by[0] in df.columns:
            df = sorted_head(df, *self.sort_by, limit)
        elif limit is not None:
            df = df.head(limit)
        self._views[limit] = (self.frame, key, df)
        return df

    def _filtered(self) -> pl.DataFrame:
        df = self.frame
        if not self.filter_text or df.is_empty():
            return df
        cached = self._views.get("filter")
        if cached is not None and cached[0] is df and cached[1] == self.filter_text:
            return cached[2]
        hits = [text_match(df, c, self.filter_text.lower()) for c in df.columns]
        hits = [h for h in hits if h is not None]
        out = df.filter(pl.any_horizontal(hits).fill_null(False)) if hits else df
        self._views["filter"] = (df, self.filter_text, out)
        return out

    def selected_row(self) -> dict[str, Any] | None:
        """The row under the cursor, as a dict of the frame's columns (of the view drawn)."""
        df = self._current
        if df.is_empty() or not 0 <= self.cursor_row < df.height:
            return None
        return df.row(self.cursor_row, named=True)

    def row_texts(self, row: int) -> list[str]:
        """The cells of the view's `row` as drawn (tests and exports of the screen read it)."""
        return [c.plain if isinstance(c, Text) else str(c) for c in self.row_cells(row)]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "every_rank":
            return self.can_summarise
        return self.moment is not None if action == "timeline" else True

    def action_every_rank(self) -> None:
        """Every rank's row, or the summary again."""
        if self.can_summarise:
            self.every_rank = not self.every_rank
            self._render_frame()

    def action_timeline(self) -> None:
        if self.moment is None:
            raise SkipAction()  # a table of totals: no moment to show
        row = self.selected_row()
        moment = self.moment.moment(row) if row is not None else None
        if moment is not None:
            self.post_message(self.OpenTimeline(moment))
        elif row is not None:
            self.notify("This row names no moment (a mean, or no time in the trace).")

    def restyle(self, shown: pl.DataFrame) -> dict[str, list[Any]]:
        """Subclasses: cells (Rich renderables) to draw instead of the plain texts, by column,
        for the rows `shown` (a slice of the view; `float_styles` holds the whole view's
        number formats). Columns are as wide as the plain texts, or these where wider."""
        return {}

    def _texts(
        self, shown: pl.DataFrame, styles: dict[str, str], widths: dict[str, int]
    ) -> dict[str, list[Any]]:
        """The cells of `shown` as texts in the columns' number `styles`; numbers
        right-aligned to their column's width where `widths` has it."""
        schema = shown.schema
        texts: dict[str, list[Any]] = {}
        for c in shown.columns:
            cap = self.column_max_text.get(c, self.max_text)
            # texts cut so that two that differ still look different (`column_cells`) among
            # the rows formatted together: a page of the view, or the rows that size it
            cells = column_cells(shown[c], styles.get(c, "d1"), cap)
            width = widths.get(c)
            if width is not None and schema[c].is_numeric():
                cells = [t.rjust(width) for t in cells]
            texts[c] = cells
        return texts

    def _rows(self, start: int, stop: int) -> list[tuple[Any, ...]]:
        """Cells of the view's rows [start, stop): the one place cells are formatted, for the
        rows `FrameView` is about to draw."""
        shown = self._shown.slice(start, stop - start)
        texts = self._texts(shown, self.float_styles, self._widths)
        texts.update(self.restyle(shown))
        return list(zip(*(texts[c] for c in shown.columns), strict=True))

    def _restyled(self) -> bool:
        return type(self).restyle is not FrameTable.restyle

    def _measure(self, shown: pl.DataFrame, styles: dict[str, str]) -> dict[str, int]:
        """Each drawn column's widest cell: exactly over the first WIDTH_ROWS rows (restyled
        cells included), from the columns' extremes beyond them."""
        head = shown.head(WIDTH_ROWS)
        texts = self._texts(head, styles, {})
        widths = {name: max(map(cell_len, cells), default=0) for name, cells in texts.items()}
        for name, cells in self.restyle(head).items():  # a restyled cell may be wider
            widest = max(
                (cell_len(c.plain if isinstance(c, Text) else str(c)) for c in cells), default=0
            )
            widths[name] = max(widths.get(name, 0), widest)
        if shown.height > WIDTH_ROWS:
            for name in shown.columns:
                cap = self.column_max_text.get(name, self.max_text)
                bound = column_bound(shown[name], styles.get(name, "d1"), cap)
                widths[name] = max(widths[name], bound)
        return widths

    def _sized(self, shown: pl.DataFrame) -> tuple[dict[str, str], dict[str, int]]:
        """The view's number formats and column widths. Neither depends on the rows' order
        (a width is exact over every row, or bounded by the columns' extremes), so a new
        sort of the same rows reuses them: a million-row sort costs the sort only."""
        key = (
            self.filter_text,
            self.summarised,
            tuple(shown.columns),
            self.max_text,
            tuple(sorted(self.column_max_text.items())),
        )
        cached = self._views.get("sized")
        if cached is not None and cached[0] is self.frame and cached[1] == key:
            styles, widths = cached[2]
            return styles, dict(widths)
        styles = {c: float_style(shown[c]) for c, t in shown.schema.items() if t.is_float()}
        widths = self._measure(shown, styles)
        if not self._restyled():  # restyled cells are measured over the first rows only
            self._views["sized"] = (self.frame, key, (styles, dict(widths)))
        return styles, widths

    def _prepare(self, cursor: int) -> Prepared:
        """The view (filter, sort), its number formats, column widths and headers, and the
        row for the cursor: the first with the key of the view's row at `cursor` (none: the
        top). Pure of the widget's drawn state, so it may run in a thread."""
        df = self._view(None)
        drawn = [c for c in df.columns if c not in self.hidden_columns]
        shown = df.select(drawn)
        schema = shown.schema
        styles, widths = self._sized(shown)
        columns = []
        for name in drawn:
            arrow = ""
            if self.sort_by is not None and self.sort_by[0] == name and not self.summarised:
                arrow = " ▼" if self.sort_by[1] else " ▲"
            header = printable(name) + arrow
            if schema[name].is_numeric():
                # pad numbers to one width so their digits line up on the right
                widths[name] = max(len(header), widths[name])
                header = header.rjust(widths[name])
            columns.append(ViewColumn(name, as_text(header), widths[name]))
        target = 0
        if self.key_column and self.key_column in df.columns and 0 <= cursor < df.height:
            key = df[self.key_column][cursor]
            hits = (df[self.key_column] == key).fill_null(False).arg_true()
            target = int(hits[0]) if hits.len() else 0
        return Prepared(df, shown, styles, widths, columns, target)

    def _render_frame(self) -> None:
        """Work out the view and hand its rows to `FrameView`, which formats those on
        screen as it draws them. A frame of more than THREAD_ROWS rows is filtered, sorted
        and measured in a thread (a million rows sort in about a second on a busy machine):
        the old view stays on screen, answering keys, until the new one is ready."""
        self._generation += 1
        generation, cursor = self._generation, self.cursor_row
        if self.frame.height <= THREAD_ROWS or self._restyled() or not self.is_attached:
            self._apply(self._prepare(cursor), generation)
            return
        self._preparing = True
        self._say_pending()

        def prepare() -> None:
            prepared = self._prepare(cursor)
            if self.is_attached:
                self.app.call_from_thread(self._apply, prepared, generation)

        self.run_worker(
            prepare, thread=True, group="frame-table", exclusive=True, exit_on_error=False
        )

    def _say_pending(self) -> None:
        """While a big view is sorted or filtered in a thread, the old one's header says so
        (the key that asked has answered; the rows change when the view is ready)."""
        sort, text = self._applied
        drawn = [c.key for c in self.view_columns]
        if not drawn:
            return
        if self.sort_by is not None and self.sort_by != sort:
            self.note_header(self.sort_by[0] if self.sort_by[0] in drawn else drawn[0], "sorting…")
        elif self.filter_text != text:
            self.note_header(drawn[0], "filtering…")

    def _apply(self, prepared: Prepared, generation: int) -> None:
        if generation != self._generation:
            return  # a newer view is on its way
        self._preparing = False
        self._applied = (self.sort_by, self.filter_text)
        self._current = prepared.view
        self._shown = prepared.shown
        self.float_styles = prepared.styles
        self._widths = prepared.widths
        self.set_rows(prepared.columns, prepared.shown.height, self._rows, prepared.target)

    # -- actions -------------------------------------------------------------------------------
    def action_sort(self) -> None:
        """Pick a column (rows have no column cursor); picking the sorted one reverses it."""
        if self.frame.is_empty() and not self.frame.columns:
            return
        current = self.sort_by[0] if self.sort_by else None

        def chosen(col: str | None) -> None:
            if col is not None:
                self.every_rank = True  # sorting the ranks: every rank's row
                self.sort_on(col)

        self.app.push_screen(ColumnPicker(self.frame.columns, current), chosen)

    def sort_on(self, col: str) -> None:
        """Sort by `col`: numbers largest first, text A to Z; again on the same column
        reverses."""
        if self.sort_by is not None and self.sort_by[0] == col:
            self.sort_by = (col, not self.sort_by[1])
        else:
            self.sort_by = (col, self.frame.schema[col].is_numeric())
        self._render_frame()

    def action_reverse(self) -> None:
        if self.sort_by is not None:
            self.sort_by = (self.sort_by[0], not self.sort_by[1])
            self._render_frame()

    def action_export(self) -> None:
        export_dir = Path(getattr(self.app, "export_dir", Path.cwd()))
        export_dir.mkdir(parents=True, exist_ok=True)
        path = export_dir / f"hta-tui-{self.export_name}.csv"
        n = 1
        while path.exists():
            n += 1
            path = export_dir / f"hta-tui-{self.export_name}-{n}.csv"
        df = self.view_frame
        csv_for_people(df).write_csv(path)  # a person opens it: no cell runs as a formula
        self.post_message(self.Exported(self, path, df.height))
        self.notify(f"{df.height} rows written to {path}", title="Exported")
