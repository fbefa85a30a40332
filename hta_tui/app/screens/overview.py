"""The first screen: every file with its rank, span and status, and HTA's temporal breakdown
(idle / compute / non-compute) per rank as a table and as stacked bars.

The screen only displays: the app computes its tables in a worker and calls `show_overview`
with the result, so nothing here reads files or runs polars over frames. A file with a
problem (error, not a trace, incomplete) takes two lines: its reason sits under its name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Static

from hta_tui.app.access import hta_app
from hta_tui.app.format import (
    TEMPORAL_COLUMNS,
    FileRow,
    RowWidths,
    TemporalRow,
    elide_end,
    elide_file,
    fit_columns,
    temporal_note,
)
from hta_tui.app.screens.scope_line import EVERY_STEP_BINDING
from hta_tui.app.screens.step_time import CATEGORIES, StepTimeBars
from hta_tui.app.widgets.bars import BarRow, StackedBars
from hta_tui.app.widgets.findings_block import FindingsBlock
from hta_tui.app.widgets.footer import KeysFooter
from hta_tui.app.widgets.frame_view import FrameView, ViewColumn
from hta_tui.app.widgets.plain_cells import PlainCells
from hta_tui.app.widgets.status import StatusBar
from hta_tui.app.widgets.text_line import TextBlock

#: (column key, header, width) of each column the files table shows
Layout = tuple[tuple[str, str, int], ...]

RIGHT = frozenset({"rank", "events", "kernels", "busy", "duration", "load"})
#: Seconds between the parts of an overview shown while files land (`show_overview`): time
#: for the screen to repaint one part (its update timer runs at 60 Hz) before the next.
PART_GAP = 0.04


@dataclass(frozen=True)
class OverviewData:
    """Everything the screen shows, prepared off the main thread."""

    columns: list[tuple[str, str]] = field(default_factory=list)
    rows: list[FileRow] = field(default_factory=list)
    #: the rows' widths (`RowWidths.of(rows)`, made in the worker); None: made when shown
    widths: RowWidths | None = None
    #: per rank, or past a screenful the spread over the ranks and the outliers
    #: (`format.temporal_rows`)
    temporal: list[TemporalRow] = field(default_factory=list)
    temporal_ranks: int = 0  # ranks the temporal breakdown covers
    generation: int = 0
    loaded_ranks: int = 0  # ranks with a loaded file when the tables were computed
    loading: bool = False
    watching: bool = False
    root: str = ""
    #: the steps the temporal breakdown covers (HTA's rule; the file list counts whole files)
    steps: str = ""
    #: where the step time goes: the Step time view's summary lines and the job's average
    #: step per category (us; None without steps)
    step_text: str = ""
    step_bar: tuple[float, ...] | None = None
    #: the steps the step time covers (the plugin's: HTA's left-out last step included)
    step_scope: str = ""
    #: whose definitions the step time follows (the app's `X`, as the step-time view)
    step_definitions: str = ""


class FilesTable(FrameView):
    """The files table, drawn line by line (`FrameView`): showing 10,000 files formats the
    rows on screen only. A file with a problem takes two lines (its reason under its name);
    its component classes give each status a theme colour."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "Top", show=False),
        Binding("G", "scroll_bottom", "Bottom", show=False),
        Binding(
            "enter",
            "select_cursor",
            "Show this file for its rank",
            show=False,
        ),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = FrameView.COMPONENT_CLASSES | {
        "files-table--ok",
        "files-table--pending",
        "files-table--warning",
        "files-table--error",
        "files-table--muted",
    }

    STATUS_CLASS: ClassVar[dict[str, str]] = {
        "loaded": "ok",
        "pending": "pending",
        "loading": "pending",
        "incomplete": "warning",
        "not_trace": "error",
        "error": "error",
    }

    def status_style(self, status: str) -> Style:
        name = self.STATUS_CLASS.get(status, "muted")
        return self.get_component_rich_style(f"files-table--{name}", partial=True)

    def room(self) -> int:
        """Cells available to columns, keeping one for the vertical scrollbar."""
        return max(self.scrollable_content_region.width, self.content_region.width) - 1

    #: each row's file (its path relative to the root), in the order shown
    row_keys: Sequence[str] = ()

    def get_row_at(self, row: int) -> Sequence[object]:
        """The cells of `row` as drawn."""
        return self.row_cells(row)

    def get_row(self, key: str) -> Sequence[object]:
        """The cells of the row of file `key` as drawn."""
        return self.row_cells(list(self.row_keys).index(key))


class OverviewScreen(Screen):
    """Files, ranks, spans and the temporal breakdown."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "app.reload", "Reload", tooltip="Discover and load the folder again"),
        EVERY_STEP_BINDING,
    ]

    def __init__(self, *, ascii: bool = False) -> None:
        super().__init__()
        self.ascii = ascii
        self.data = OverviewData(loading=True)
        # what the files table shows now: visible columns, file column width, rows
        self._layout: Layout = ()
        self._rows: list[FileRow] = []
        #: the parts of `data` still to show, each after the last is drawn (`show_overview`)
        self._parts: tuple[Callable[[], None], ...] = ()

    def compose(self) -> ComposeResult:
        with Vertical(id="overview"):
            yield FindingsBlock(id="overview-findings")
            with Vertical(id="overview-step-box") as step_box:
                step_box.border_title = "Step time · B: per rank and step"
                yield TextBlock(id="overview-step-summary")
                yield StepTimeBars(CATEGORIES, ascii=self.ascii, id="overview-step-bars")
            files = FilesTable(id="files", cursor_type="row")
            files.border_title = "Files"
            files.border_subtitle = "counts: whole files"
            yield files
            yield Static(id="file-detail", markup=False)
            with Vertical(id="temporal-box") as box:
                box.border_title = "Temporal breakdown"
                with Horizontal(id="temporal"):
                    yield PlainCells(id="temporal-table", cursor_type="none", zebra_stripes=False)
                    yield StackedBars(id="temporal-bars", ascii=self.ascii)
                yield Static(id="temporal-empty", markup=False)
        yield StatusBar()
        yield KeysFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one("#files", FilesTable).focus()
        self.watch(self.app, "theme", self._restyle, init=False)
        data = hta_app(self).overview_data
        self.show_overview(data if data is not None else self.data)

    def on_screen_resume(self) -> None:
        # the app updates the overview of the current mode only: what landed while another
        # view was shown (ranks loaded, `H` pressed there) shows on the way back
        data = hta_app(self).overview_data
        if data is not None and data is not self.data:
            self.show_overview(data)

    def _restyle(self, _theme: str) -> None:
        self.call_after_refresh(self._rebuild_files)  # the status colours are the theme's

    def on_resize(self) -> None:
        self.call_after_refresh(self._relayout)

    @on(FindingsBlock.Changed)
    def _findings_resized(self) -> None:
        self._fit_step_bar()

    def _relayout(self) -> None:
        self._fit_step_bar()
        table = self.query_one("#files", FilesTable)
        if self._fit(table) != self._layout:
            self._rebuild_files()

    # -- updates from the app --------------------------------------------------------------------
    def show_overview(self, data: OverviewData) -> None:
        """Show `data`. While files are landing, in parts, each drawn before the next is set
        (`_next_part`): one repaint of the whole overview (files, temporal table and bars,
        step time) held the UI thread 40-75 ms of its CPU at 1,000 ranks, every half second
        of a cold open; a part's is a third of it. The last overview (nothing loading) is
        shown whole at once: what the app settles on is on screen in one go."""
        self.data = data
        if not data.loading:
            self._parts = ()
            for part in self._all_parts():
                part()
            return
        waiting = bool(self._parts)  # a part is due after the next refresh: it goes on
        self._parts = self._all_parts()
        if not waiting:
            self._next_part()

    def _all_parts(self) -> tuple[Callable[[], None], ...]:
        return (self._show_files_part, self._show_temporal, self._show_steps_part)

    def _next_part(self) -> None:
        """Show the next part of `data`, and the one after it once this one is drawn."""
        if not self._parts or not self.is_mounted:
            self._parts = ()
            return
        part, self._parts = self._parts[0], self._parts[1:]
        part()
        if self._parts:  # a timer: `call_after_refresh` ran the next before the repaint
            self.set_timer(PART_GAP, self._next_part)

    def _show_files_part(self) -> None:
        self._show_files()
        self._show_detail()

    def _show_steps_part(self) -> None:
        self._show_steps()
        self.query_one(FindingsBlock).overview_drawn()  # the findings' turn

    def _show_steps(self) -> None:
        """The answer to "where does my step time go", above everything else."""
        data = self.data
        box = self.query_one("#overview-step-box")
        box.display = bool(data.step_text)
        scope = f" · {data.step_scope}" if data.step_scope else ""
        box.border_title = f"Step time{scope} · B: per rank and step"
        box.border_subtitle = data.step_definitions if data.step_bar is not None else ""
        self.query_one("#overview-step-summary", Static).update(data.step_text)
        bars = self.query_one("#overview-step-bars", StepTimeBars)
        bars.set_rows([BarRow("avg", data.step_bar)] if data.step_bar is not None else [])
        self._fit_step_bar()

    def _fit_step_bar(self) -> None:
        """The step-time bar (legend and bar, two lines) only where the files table keeps its
        four lines and the temporal breakdown all its ranks: the summary lines say it too."""
        data = self.data
        width, height = self.size
        lines = sum(
            -(-max(len(line), 1) // max(width - 4, 1)) for line in data.step_text.split("\n")
        )
        temporal = len(data.temporal) + 3 if data.temporal else 3
        room = height - 2 - 1 - 4 - min(temporal, height // 2) - (lines + 2)
        room -= self.query_one(FindingsBlock).rows
        bar = data.step_bar is not None and room >= 2
        self.query_one("#overview-step-bars", StepTimeBars).display = bar

    def _fit(self, table: FilesTable) -> Layout:
        """(key, header, width) of the columns to show at the table's current width."""
        widths = self.data.widths or RowWidths.of(self.data.rows)
        visible, file_w = fit_columns(self.data.columns, widths, table.room())
        return tuple((k, h, file_w if k == "file" else widths.width(k, h)) for k, h in visible)

    def _cells(self, row: FileRow, layout: Layout, style: Style) -> list[Text]:
        cells = []
        file_w = {k: w for k, _, w in layout}.get("file", 0)
        for key, _, _ in layout:
            value = row.get(key)
            if key == "file":
                shown = row.get("shown")  # "yes" / "no" when the rank has several spans
                mark = {"yes": "* " if self.ascii else "● ", "no": "  "}.get(shown, "")
                text = Text(mark + elide_file(row.name, file_w - len(mark)), no_wrap=True)
                if row.problem:
                    text.append("\n")
                    text.append(elide_end("↳ " + (row.reason or row.status), file_w), style=style)
                cells.append(text)
            elif key == "status":
                cells.append(Text(value, style=style, no_wrap=True))
            else:
                cells.append(Text(value, justify="right" if key in RIGHT else "left"))
        return cells

    def _show_files(self) -> None:
        """The rows the worker made, handed to the table whole: it formats the rows on
        screen only (a page at a time), so 10,000 files cost what a screenful does. The
        cursor follows its file when rows move, unless it sits on the first row: then it
        stays at the top (rows reorder as ranks land; the view should not jump about)."""
        data = self.data
        table = self.query_one("#files", FilesTable)
        n = len(data.rows)
        table.border_title = f"Files ({n})" if n else "Files"
        target = None
        if 0 < table.cursor_row < len(self._rows):
            current = self._rows[table.cursor_row].key
            target = next((i for i, r in enumerate(data.rows) if r.key == current), None)
        self._layout = layout = self._fit(table)
        self._rows = rows = data.rows
        styles: dict[str, Style] = {}

        def source(start: int, stop: int) -> list[list[Text]]:
            out = []
            for row in rows[start:stop]:
                style = styles.get(row.tone)
                if style is None:
                    style = styles[row.tone] = table.status_style(row.tone)
                out.append(self._cells(row, layout, style))
            return out

        columns = [
            ViewColumn(key, Text(label, justify="right" if key in RIGHT else "left"), width)
            for key, label, width in layout
        ]
        heights = [2 if r.problem else 1 for r in rows]
        table.row_keys = [r.key for r in rows]
        table.set_rows(columns, n, source, cursor_row=target, heights=heights)

    def _rebuild_files(self) -> None:
        """The same rows again (a theme or width change): their styles and layout anew."""
        self._show_files()

    def _show_temporal(self) -> None:
        data = self.data
        table = self.query_one("#temporal-table", DataTable)
        bars = self.query_one("#temporal-bars", StackedBars)
        empty = self.query_one("#temporal-empty", Static)
        has = bool(data.temporal)
        self.query_one("#temporal").display = has
        empty.display = not has
        box = self.query_one("#temporal-box")
        note = temporal_note(data.temporal, data.temporal_ranks)
        box.border_title = "Temporal breakdown" + "".join(
            f" · {part}" for part in (note, data.steps) if part
        )
        if has:
            # Columns too: a DataTable's auto widths only ever grow. Each column's width is
            # given, its widest cell's: an auto width is measured later, when the table is
            # next idle, and a picture taken on a busy machine before that (the snapshot
            # tests') cut the idle column's `%` off (its label is a cell narrower).
            table.clear(columns=True)
            for i, (key, label) in enumerate(TEMPORAL_COLUMNS):
                justify = "left" if key == "rank" else "right"
                width = max(cell_len(label), *(cell_len(cells[i]) for _, cells, _ in data.temporal))
                table.add_column(Text(label, justify=justify), key=key, width=width)
            for rank, cells, _ in data.temporal:
                table.add_row(
                    *(Text(c, justify="left" if i == 0 else "right") for i, c in enumerate(cells)),
                    key=str(rank),
                )
            bars.set_rows(
                [
                    BarRow(f"r{label}" if isinstance(label, int) else label, values)
                    for label, _, values in data.temporal
                ]
            )
            return
        root = data.root or "this folder"
        if not data.rows:
            if data.loading:
                msg = "looking for trace files…"
            elif data.watching:
                msg = f"no trace files in {root} yet; watching for new ones"
            else:
                msg = f"no trace files in {root}"
        elif data.loaded_ranks == 0:
            msg = "waiting for the first rank…" if data.loading else "no rank could be loaded"
        else:
            msg = "no GPU kernels in the loaded ranks"
        empty.update(msg)

    @on(FrameView.RowSelected, "#files")
    def _row_selected(self) -> None:
        self.action_show_span()

    def action_show_span(self) -> None:
        """Make the highlighted file the one its rank shows: an older span (the newest is the
        default), or a file of another process that says the same rank (a conflict)."""
        table = self.query_one("#files", FilesTable)
        if not self._rows or not 0 <= table.cursor_row < len(self._rows):
            return
        row = self._rows[table.cursor_row]
        ts = hta_app(self).trace_set
        root = ts.root if ts.root.is_dir() else ts.root.parent
        entry = ts.files().get(root / row.key)
        if entry is None or entry.rank is None or entry.status != "loaded":
            self.notify("only a loaded file can be shown", severity="warning")
            return
        if len(ts.spans(entry.rank)) < 2 and not ts.conflicts(entry.rank):
            return
        hta_app(self).select_span(entry.rank, entry.path)  # every screen hears of it
        self.notify(f"rank {entry.rank} now shows {row.name}")

    @on(FrameView.RowHighlighted, "#files")
    def _row_highlighted(self) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        detail = self.query_one("#file-detail", Static)
        table = self.query_one("#files", FilesTable)
        if not self._rows or not 0 <= table.cursor_row < len(self._rows):
            detail.update("")
            return
        row = self._rows[table.cursor_row]
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("rank ?" if row.rank is None else f"rank {row.rank}", style="bold")
        conflict = row.reason.startswith("conflict")
        if not conflict:  # a conflict's reason takes the line: the row names the file
            text.append("  ")
            text.append(row.name)
        if row.get("shown") == "yes":
            text.append("  (the span shown)", style="bold")
        elif row.get("shown") == "no" and not conflict:
            text.append("  (enter: show this span)")
        if row.reason:
            text.append("  ")
            text.append(row.reason, style=table.status_style(row.tone))
        if conflict:  # after the reason, which says why it is not shown
            text.append("  (enter: show it)")
        detail.update(text)

    def action_every_step(self) -> None:
        """Include HTA's left-out last step here and on every screen, or leave it out again:
        the app, watching it, computes the temporal breakdown again."""
        app = hta_app(self)
        app.every_step = not app.every_step
