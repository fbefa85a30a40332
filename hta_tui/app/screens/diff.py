"""Screen 0 (only when comparing, `hta-tui CONTROL --compare TEST`): what changed between two
runs, op by op and kernel by kernel - HTA's TraceDiff.

On top, both sides' temporal breakdowns (idle / compute / non-compute / kernel time, control,
test and the change); below, HTA's compare_traces table sorted by the largest duration change,
each row marked "+" (slower), "-" (faster), "new" (only in test), "gone" (only in control) or
"=" - in words as well as colours, so NO_COLOR stays readable. `g` cycles CPU / GPU / both,
`n` short names, `i` picks each side's iteration(s), `r` each side's rank, `/` filters; enter
opens one op or kernel on both sides (kernel_diff_detail), escape comes back to the same row.

The screen reads two trace sets (the app's `trace_set`, the control, and `compare_set`, the
test): `compute` gets `{CONTROL_KEY: control events, TEST_KEY: test events}` of the chosen ranks
(a side that has no loaded rank yet is missing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import get_current_worker

from hta_tui.analysis import diff, registry, step_pairs
from hta_tui.analysis.names import fold_names
from hta_tui.app.access import hta_app
from hta_tui.app.foreground import Superseded
from hta_tui.app.format import elide_middle, fmt_us
from hta_tui.app.safe_text import as_text
from hta_tui.app.screens.base import AnalysisScreen, Computed, Params
from hta_tui.app.widgets.footer import KeysFooter
from hta_tui.app.widgets.frame_table import FrameTable, float_style, format_value
from hta_tui.app.widgets.picker import Choices, Picker
from hta_tui.app.widgets.status import StatusBar
from hta_tui.app.widgets.text_line import TextBlock
from hta_tui.printable import printable
from hta_tui.trace.model import TraceSet

CONTROL_KEY, TEST_KEY = 0, 1
DEVICES = ("ALL", "CPU", "GPU")
DEVICE_LABEL = {"ALL": "CPU + GPU", "CPU": "CPU ops", "GPU": "GPU kernels"}

#: compare_traces column -> column on screen (narrow: 80 columns show every number).
DISPLAY: dict[str, str] = {
    "diff_duration": "diff us",
    "Control_total_duration": "ctrl us",
    "Test_total_duration": "test us",
    "Control_counts": "ctrl n",
    "Test_counts": "test n",
    "diff_counts": "diff n",
    "name": "name",
}
#: The drawn name column: the op's or kernel's short name (the full `name` is not drawn).
SHORT = "op"
#: The drawn count column, both sides' counts in one (`6`, or `4→6` where they differ), so
#: that the op's name has room at 80 columns; the three count columns stay in the frame.
COUNTS = "n"
#: Columns kept in the frame (exports, tests, drill-down) but not drawn.
HIDDEN = frozenset({"name", "ctrl n", "test n", "diff n"})
#: the change marker -> component class suffix (colour from the theme)
MARK_STYLE = {"+": "slower", "-": "faster", "new": "new", "gone": "gone", "=": "same"}
#: temporal_breakdown metric -> (label saying what the row sums, percentage metric); HTA's
#: `kernel_time` is the GPU's whole span, first kernel to last, the other three together
TEMPORAL = (
    ("idle_time(us)", "idle: no GPU work", "idle_time_pctg"),
    ("compute_time(us)", "compute kernels", "compute_time_pctg"),
    ("non_compute_time(us)", "comm+memory kernels", "non_compute_time_pctg"),
    ("kernel_time(us)", "span: the 3 above", None),
)


# --------------------------------------------------------------------------------------------
# pure helpers (worker side)


#: One side's tables (the registry's, asked once per side) and the one op's or kernel's.
SIDE_TABLES = ("diff_side_ops", "diff_side_temporal", "diff_side_iterations", "diff_side_steps")
ITEM_TABLES = ("diff_side_item", "diff_side_item_kernels", "diff_side_item_ops")
#: (names, options) -> those tables of one side: the registry's door for that side
SideDoor = Callable[[Sequence[str], registry.Options], dict[str, Any]]


def events_door(events: pl.DataFrame) -> SideDoor:
    """One side's door from its rank's events (a side given as events: tests, the CLI)."""
    return lambda names, options: registry.tables({0: events}, names, options)


def set_door(ts: TraceSet, rank: int) -> SideDoor:
    """One side's door: its trace set, its rank."""
    return lambda names, options: registry.set_tables(ts, names, options, ranks=[rank])


def side_options(params: Params, side: str) -> registry.Options:
    """One side's options, by HTA's TraceDiff names: its iteration, the screen's choices."""
    choice = params.get(f"{side}_iteration")
    return registry.Options(
        iteration="" if choice is None else str(choice),
        device_type=params.get("device", "ALL"),
        use_short_name=bool(params.get("short", False)),
        average_iterations="all" in (params.get("control_iteration"), params.get("test_iteration")),
        self_time=bool(params.get("self_time", False)),
        tb_compat=bool(params.get("tb_compat", False)),  # the step-time view's rules (X)
    )


def change_marker() -> pl.Expr:
    c, t, d = pl.col("Control_counts"), pl.col("Test_counts"), pl.col("diff_duration")
    return (
        pl.when((c == 0) & (t > 0))
        .then(pl.lit("new"))
        .when((t == 0) & (c > 0))
        .then(pl.lit("gone"))
        .when(d > 0)
        .then(pl.lit("+"))
        .when(d < 0)
        .then(pl.lit("-"))
        .otherwise(pl.lit("="))
    )


def display_frame(comp: pl.DataFrame) -> pl.DataFrame:
    """compare_traces for the table: a change marker, sorted by |diff_duration| (largest
    first, then by name), narrow column names; the numbers untouched. `op`, drawn in the
    name's place, is the short name (`void cutlass::Kernel…` was the same for every CUTLASS
    kernel at 80 columns); `name`, not drawn, stays whole for the line below, drill-down and
    the export."""
    shown = (
        comp.with_columns(change_marker().alias("chg"))
        .sort(pl.col("diff_duration").abs(), "name", descending=[True, False], nulls_last=True)
        .select("chg", *[pl.col(k).alias(v) for k, v in DISPLAY.items()])
    )
    return shown.select(
        pl.exclude("name"),
        count_text(pl.col("ctrl n"), pl.col("test n")).alias(COUNTS),
        fold_names(shown["name"], keep=0).alias(SHORT),
        "name",
    )


def count_text(control: pl.Expr, test: pl.Expr) -> pl.Expr:
    """Both sides' counts in one cell: `6` when equal, `4→6` when not (means: one decimal)."""

    def text(e: pl.Expr) -> pl.Expr:
        whole = e.round(0) == e
        return (
            pl.when(whole)
            .then(e.cast(pl.Int64).cast(pl.String))
            .otherwise(e.round(1).cast(pl.String))
        )

    return (
        pl.when(control == test)
        .then(text(test))
        .otherwise(pl.format("{}→{}", text(control), text(test)))
    )


def step_headline(pairs: dict[str, Any] | None) -> str:
    """The change a reader looks for first: each side's median step time over the steps
    both show in the step-time view (`step_pairs.paired_steps`), which steps those are, and
    the steps one side shows alone (left out)."""
    if not pairs:
        return "Step time: no ProfilerStep on either side"
    c, t = pairs["control"], pairs["test"]
    if not pairs["steps"]:
        if c["only_here"] and t["only_here"]:
            return "Step time: the two runs show no step number in common (B lists each)"
        which = "either side" if not (c["only_here"] or t["only_here"]) else "one side"
        return f"Step time: no ProfilerStep on {which}"
    cm, tm = c["median (us)"], t["median (us)"]
    change = f" ({(tm - cm) / cm:+.1%})" if cm else ""
    steps = step_pairs.steps_text(pairs["steps"])
    what = "Median step" if len(pairs["steps"]) > 1 else "Step time"
    text = (  # one line at 80 columns
        f"{what} (B's {steps}, both sides): control {fmt_us(cm)}, test {fmt_us(tm)}{change}"
    )
    alone = [
        f"{side}'s {step_pairs.steps_text(pairs[side]['only_here'])}"
        for side in ("control", "test")
        if pairs[side]["only_here"]
    ]
    if alone:
        text += f"; {' and '.join(alone)} left out (not on the other side)"
    return text


def undisplay(df: pl.DataFrame) -> pl.DataFrame:
    """The table's frame back in compare_traces' column names (tests, exports by name)."""
    return df.select([pl.col(v).alias(k) for k, v in DISPLAY.items()])


# --------------------------------------------------------------------------------------------
# the two trace sets as one source for AnalysisScreen's refresh loop


class PairSources:
    """Control and test trace sets seen as one: a generation that changes with either, the
    entries of both (for the "still loading" check), and snapshots of both."""

    def __init__(
        self,
        control: TraceSet,
        test: TraceSet | None,
        scanning: tuple[bool, bool] = (False, False),
    ) -> None:
        self.control = control
        self.test = test
        self.scanning = scanning  # is each side's folder still being listed?

    @property
    def generation(self) -> tuple[int, int]:
        return (self.control.generation, -1 if self.test is None else self.test.generation)

    @property
    def entries(self) -> dict[Any, Any]:
        out: dict[Any, Any] = {("control", p): e for p, e in self.control.entries.items()}
        if self.test is not None:
            out |= {("test", p): e for p, e in self.test.entries.items()}
        return out

    def snapshot(self) -> PairSources:
        return PairSources(
            self.control.snapshot(),
            None if self.test is None else self.test.snapshot(),
            self.scanning,
        )

    def loading(self) -> tuple[bool, bool]:
        def busy(ts: TraceSet | None, scanning: bool) -> bool:
            if ts is None:
                return False
            return scanning or any(e.status in ("pending", "loading") for e in ts.entries.values())

        return busy(self.control, self.scanning[0]), busy(self.test, self.scanning[1])

    def pick(self, params: Params) -> tuple[dict[int, pl.DataFrame], dict[str, Any]]:
        """Events of each side's chosen rank (default: its smallest loaded one)."""
        frames: dict[int, pl.DataFrame] = {}
        info: dict[str, Any] = {}
        sides = (("control", CONTROL_KEY, self.control), ("test", TEST_KEY, self.test))
        for side, key, ts in sides:
            loaded = ts.loaded() if ts is not None else {}
            want = params.get(f"{side}_rank")
            rank = want if want is not None else min(loaded, default=None)
            info[f"{side}_ranks"] = sorted(loaded)
            info[f"{side}_rank"] = rank
            if rank is not None and rank in loaded:
                frames[key] = loaded[rank].events
                assert ts is not None
                info[f"{side}_door"] = set_door(ts, rank)
        c_busy, t_busy = self.loading()
        info["control_loading"], info["test_loading"] = c_busy, t_busy
        info["comparing"] = self.test is not None
        return frames, info


# --------------------------------------------------------------------------------------------
# widgets


class DiffTable(FrameTable):
    """The compare_traces table: the change marker and the duration change in colour."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # `g` is "top" in other tables; here it is the device toggle, as on the screen
        Binding("g", "screen.cycle_device", "CPU/GPU", tooltip="CPU ops, GPU kernels or both"),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "diff-table--slower",
        "diff-table--faster",
        "diff-table--new",
        "diff-table--gone",
        "diff-table--same",
    }

    def restyle(self, shown: pl.DataFrame) -> dict[str, list[Any]]:
        if shown.is_empty() or "chg" not in shown.columns:
            return {}
        marks: list[Text] = []
        numbers: list[Text] = []
        # the column's one format (over the whole view, not this slice), with a sign
        style_of = self.float_styles.get("diff us") or float_style(shown["diff us"])
        for mark, change in shown.select("chg", "diff us").iter_rows():
            style = self.get_component_rich_style(
                f"diff-table--{MARK_STYLE.get(mark, 'same')}", partial=True
            )
            marks.append(Text(mark, style=style))
            number = format_value(change, pl.Float64(), style_of)
            if change is not None and change > 0:
                number = "+" + number
            numbers.append(Text(number, style=style, justify="right"))
        return {"chg": marks, "diff us": numbers}


class SidePicker(Picker):
    """One choice per side (control | test): enter picks in the control list and moves to the
    test list; enter there closes with both. Escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab", "focus_next", "Next list", show=False),
    ]

    def __init__(
        self,
        title: str,
        control: list[tuple[str, Any]],
        test: list[tuple[str, Any]],
        current: tuple[Any, Any],
    ) -> None:
        sides = [
            Choices(options, now, label=side, id=f"pick-{side}")
            for side, options, now in (("control", control, current[0]), ("test", test, current[1]))
        ]
        hint = "enter: pick (control, then test) · escape: cancel"
        super().__init__(title, sides, box_id="side-picker", hint=hint, hint_class="hint")
        self.choices = {"control": control, "test": test}


# --------------------------------------------------------------------------------------------
# the screen


class DiffScreen(AnalysisScreen):
    TITLE = "Diff"
    ANALYSES = SIDE_TABLES
    FOLLOWS_RANK = False  # each side has its own rank (`r` here picks both)
    PLUGIN_STEPS = True  # its step time: the step-time view's steps, in the same rules (X)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "pick_rank", "Ranks", tooltip="The rank compared on each side"),
        Binding("g", "cycle_device", "CPU/GPU", tooltip="CPU ops, GPU kernels or both"),
        Binding("i", "pick_iterations", "Iterations", tooltip="The iterations of each side"),
        Binding("n", "toggle_short", "Short names", tooltip="Match on HTA's shortened names"),
        Binding(
            "x",
            "toggle_self",
            "Self/incl",
            tooltip="Self time (nested ops subtracted) or HTA's inclusive time",
        ),
    ]

    def default_params(self) -> dict[str, Any]:
        try:
            app = hta_app(self)
        except Exception:  # built outside an app (tests of the class)
            return {**self._defaults(), "control_rank": None, "test_rank": None}
        return {**self._defaults(), "control_rank": app.control_rank, "test_rank": app.test_rank}

    @staticmethod
    def _defaults() -> dict[str, Any]:
        return {
            "device": "ALL",
            "short": False,
            "self_time": False,
            "control_iteration": None,
            "test_iteration": None,
        }

    @property
    def trace_set(self) -> PairSources:  # type: ignore[override]
        app = hta_app(self)
        flags = (app.scanning("main"), app.scanning("test"))
        return PairSources(app.trace_set, app.compare_set, flags)

    def compose_body(self) -> ComposeResult:
        yield TextBlock("", id="diff-sides")
        yield TextBlock("", id="diff-temporal")
        yield TextBlock("", id="diff-summary", classes="summary")
        yield DiffTable(id="diff-table", key_column="name", export_name="diff")
        yield TextBlock("", id="diff-name")

    def _title_text(self) -> str:
        p = self.params
        parts = [self.TITLE, DEVICE_LABEL[p.get("device", "ALL")]]
        if p.get("short"):
            parts.append("short names")
        parts.append("self time" if p.get("self_time") else "inclusive time")
        return "  ·  ".join(parts)

    # -- computing ------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="screen", exit_on_error=False)
    def _compute(self, ts: PairSources, params: Params) -> None:  # type: ignore[override]
        worker = get_current_worker()
        frames, info = ts.pick(params)
        if worker.is_cancelled:
            return
        try:
            with self.giving_way(worker):  # the view on screen first (app/foreground.py)
                doors = {s: info.pop(f"{s}_door", None) for s in ("control", "test")}
                result = self.compute(frames, params, doors)
        except Superseded:
            return
        result.update(info)
        if not worker.is_cancelled:
            self.post_message(Computed(result, ts.generation, params))  # type: ignore[arg-type]

    @staticmethod
    def compute(
        frames: dict[int, pl.DataFrame],
        params: Params,
        doors: dict[str, SideDoor | None] | None = None,
    ) -> dict[str, Any]:
        """Each side's tables through the registry's door, asked once per side (`doors`: each
        side's trace set and rank; else its events in `frames`), then put side by side."""
        control, test = frames.get(CONTROL_KEY), frames.get(TEST_KEY)
        out: dict[str, Any] = {"control": control, "test": test, "ready": False}
        if control is None or test is None:
            return out
        doors = doors or {}
        sides: dict[str, SideDoor] = {
            "control": doors.get("control") or events_door(control),
            "test": doors.get("test") or events_door(test),
        }
        got = {side: door(SIDE_TABLES, side_options(params, side)) for side, door in sides.items()}
        c, t = got["control"], got["test"]
        average = side_options(params, "control").average_iterations
        its = {side: got[side]["diff_side_iterations"] for side in got}
        kw: dict[str, Any] = {
            # the iterations compared on each side (HTA's first complete one by default)
            f"{side}_iteration": its[side].filter(pl.col("compared"))["step"].to_list()
            for side in its
        }
        kw |= {
            "device_type": params.get("device", "ALL"),
            "use_short_name": bool(params.get("short", False)),
            "average_iterations": average,
        }
        comp = diff.compare_summaries(
            c["diff_side_ops"], t["diff_side_ops"], average_iterations=average
        )
        out.update(
            ready=True,
            kw=kw,
            doors=sides,
            compare=comp,
            table=display_frame(comp),
            ops=diff.ops_from_compare(comp),  # counts: self or inclusive time alike
            temporal=diff.temporal_sides(c["diff_side_temporal"], t["diff_side_temporal"]),
            control_iterations=its["control"].filter(pl.col("complete"))["step"].to_list(),
            test_iterations=its["test"].filter(pl.col("complete"))["step"].to_list(),
            control_steps=its["control"]["step"].to_list(),
            test_steps=its["test"]["step"].to_list(),
            step_time=step_pairs.pair_lengths(c["diff_side_steps"], t["diff_side_steps"]),
        )
        return out

    # -- showing --------------------------------------------------------------------------------
    def _side_label(self, side: str, result: dict[str, Any]) -> str:
        app = hta_app(self)
        root = app.root if side == "control" else app.compare_root
        name = "-" if root is None else printable(root.name or str(root))
        rank = result.get(f"{side}_rank")
        text = f"{side}: {name} rank {rank if rank is not None else '-'}"
        if result.get("ready"):
            choice = self.params.get(f"{side}_iteration")
            iters = result[f"{side}_iterations"]
            if choice == "all":
                text += f", avg of {len(iters)} iter"
            elif choice is not None:
                text += f", iter {choice}"
            elif iters:
                text += f", iter {iters[0]}"
        return text

    def show(self, result: dict[str, Any]) -> None:
        sides = self.query_one("#diff-sides", Static)
        temporal = self.query_one("#diff-temporal", Static)
        summary = self.query_one("#diff-summary", Static)
        table = self.query_one("#diff-table", DiffTable)
        # one line when both sides fit, else one line each: a side's label is never cut
        room = max(20, self.size.width - 2)  # the padding
        control, test = self._side_label("control", result), self._side_label("test", result)
        one_line = len(control) + 5 + len(test) <= room
        sides.styles.height = 1 if one_line else 2
        sides.update(
            Text(
                f"{control}  |  {test}"
                if one_line
                else f"{elide_middle(control, room)}\n{elide_middle(test, room)}"
            )
        )
        if not result.get("ready"):
            temporal.display = False
            table.show_frame(pl.DataFrame())
            summary.update(self._missing_text(result))
            self._show_name()
            return
        temporal.display = True
        text = Text(step_headline(result.get("step_time", {})) + "\n", style="bold")
        text.append_text(self._temporal_text(result["temporal"]))
        temporal.update(text)
        table.hidden_columns = HIDDEN
        # cut where two names differ (names.distinct_cuts); 80 columns leave it 36
        table.max_text = self.text_room(44, least=16)
        table.show_frame(result["table"])
        summary.update(self._summary_text(result))
        self._show_name()

    def _missing_text(self, result: dict[str, Any]) -> str:
        if not result.get("comparing"):
            return "Not comparing: start hta-tui CONTROL --compare TEST to diff two runs."
        lines = []
        for side in ("control", "test"):
            if result.get(side) is not None:
                continue
            rank, ranks = result.get(f"{side}_rank"), result.get(f"{side}_ranks") or []
            if result.get(f"{side}_loading"):
                lines.append(f"The {side} side is still loading.")
            elif not ranks:
                lines.append(f"The {side} side has no loaded trace (see screen 1 for errors).")
            else:
                have = ", ".join(map(str, ranks))
                lines.append(f"The {side} side has no rank {rank} (ranks {have}; r to pick).")
        return " ".join(lines)

    def _summary_text(self, result: dict[str, Any]) -> str:
        notes = []
        for side in ("control", "test"):
            if not result[f"{side}_iterations"]:
                notes.append(f"{side} has no ProfilerStep: none of its ops are compared")
        if result["compare"].is_empty():
            notes.append("no ops or kernels on either side in the compared iterations")
            return "; ".join(notes).capitalize() + "."
        table: pl.DataFrame = result["table"]
        counts = table["chg"].value_counts()
        n = dict(zip(counts["chg"].to_list(), counts["count"].to_list(), strict=True))
        scope = (
            "averaged per iteration" if result["kw"]["average_iterations"] else "in the iteration"
        )
        how = "self time, x: inclusive" if self.params.get("self_time") else "inclusive, x: self"
        text = (
            f"Per op {scope} ({how}): "
            f"{n.get('+', 0)} slower, {n.get('-', 0)} faster, "
            f"{n.get('new', 0)} new, {n.get('gone', 0)} gone, {n.get('=', 0)} same"
        )
        if n.get("new") and n.get("gone") and not self.params.get("short"):
            text += "; n matches renames"
        if notes:
            text += "; " + "; ".join(notes)
        return text

    @staticmethod
    def _temporal_text(df: pl.DataFrame) -> Text:
        values = {m: (c, t, d) for m, c, t, d in df.iter_rows()}

        def num(v: float | None, sign: bool = False) -> str:
            if v is None:
                return "-"
            return f"{v:+,.0f}" if sign else f"{v:,.0f}"

        def pct(v: float | None, sign: bool = False) -> str:
            if v is None:
                return ""
            return f" ({v:+.1f}%)" if sign else f" ({v:.1f}%)"

        def points(v: float | None) -> str:
            return "" if v is None else f"{v:+.1f} pt"

        # the time change and the change of share are different numbers: both, labelled
        rows = [("GPU, whole trace (us)", "control", "test", "time change", "share")]
        for metric, label, pmetric in TEMPORAL:
            c, t, d = values.get(metric, (None, None, None))
            pc, pt, pd = values.get(pmetric, (None, None, None)) if pmetric else (None,) * 3
            rel = f" ({d / c:+.0%})" if c and d is not None else ""
            rows.append((label, num(c) + pct(pc), num(t) + pct(pt), num(d, True) + rel, points(pd)))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        text = Text(no_wrap=True, overflow="crop")
        for n, row in enumerate(rows):
            line = (
                row[0].ljust(widths[0])
                + "  "
                + " ".join(cell.rjust(widths[i + 1]) for i, cell in enumerate(row[1:]))
            )
            text.append(line, style="bold" if n == 0 else "")
            if n < len(rows) - 1:
                text.append("\n")
        return text

    # -- interaction ----------------------------------------------------------------------------
    @on(FrameTable.RowHighlighted, "#diff-table")
    def _highlighted(self, event: FrameTable.RowHighlighted) -> None:
        self._show_name()

    def _show_name(self) -> None:
        row = self.query_one("#diff-table", DiffTable).selected_row()
        label = self.query_one("#diff-name", Static)
        label.update(as_text(row["name"], no_wrap=True, overflow="ellipsis") if row else "")

    def action_cycle_device(self) -> None:
        current = self.params.get("device", "ALL")
        self.set_params(device=DEVICES[(DEVICES.index(current) + 1) % len(DEVICES)])

    def action_toggle_self(self) -> None:
        self.set_params(self_time=not self.params.get("self_time", False))

    def action_toggle_short(self) -> None:
        self.set_params(short=not self.params.get("short", False))

    def action_pick_rank(self) -> None:
        result = self.result or {}
        control = [(f"rank {r}", r) for r in result.get("control_ranks") or []]
        test = [(f"rank {r}", r) for r in result.get("test_ranks") or []]
        if not control or not test:
            self.notify("Ranks can be picked once both sides have loaded.", timeout=4)
            return
        current = (result.get("control_rank"), result.get("test_rank"))

        def chosen(value: tuple[Any, Any] | None) -> None:
            if value is not None:
                self.set_params(
                    control_rank=value[0],
                    test_rank=value[1],
                    control_iteration=None,
                    test_iteration=None,
                )

        self.app.push_screen(SidePicker("Rank compared", control, test, current), chosen)

    def action_pick_iterations(self) -> None:
        result = self.result or {}
        if not result.get("ready"):
            self.notify("Iterations can be picked once both sides have loaded.", timeout=4)
            return

        def options(iters: list[int], steps: list[int]) -> list[tuple[str, Any]]:
            first = f"first complete ({iters[0]})" if iters else "first (no ProfilerStep)"
            out: list[tuple[str, Any]] = [(first, None)]
            out += [(f"ProfilerStep#{i}" + ("" if i in iters else " (last)"), i) for i in steps]
            if len(iters) > 1:
                out.append((f"average all {len(iters)} complete", "all"))
            return out

        current = (self.params.get("control_iteration"), self.params.get("test_iteration"))

        def chosen(value: tuple[Any, Any] | None) -> None:
            if value is not None:
                self.set_params(control_iteration=value[0], test_iteration=value[1])

        picker = SidePicker(
            "Iterations compared",
            options(result["control_iterations"], result["control_steps"]),
            options(result["test_iterations"], result["test_steps"]),
            current,
        )
        self.app.push_screen(picker, chosen)

    @on(FrameTable.RowSelected, "#diff-table")
    def _selected(self, event: FrameTable.RowSelected) -> None:
        event.stop()
        row = self.query_one("#diff-table", DiffTable).selected_row()
        result = self.result or {}
        if row is None or not result.get("ready"):
            return
        kw = result["kw"]
        average = kw["average_iterations"]
        self.app.push_screen(
            DiffDetailScreen(
                result["doors"],
                str(row["name"]),
                iterations={s: kw[f"{s}_iteration"] for s in ("control", "test")},
                use_short_name=kw["use_short_name"],
                per_iteration=average,
            )
        )


class DiffDetailScreen(Screen):
    """One op or kernel on both sides (kernel_diff_detail): duration statistics per side and,
    for a CPU op, the kernels it launches on each side. Escape goes back to the diff."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
    ]

    def __init__(
        self,
        doors: dict[str, SideDoor],
        name: str,
        *,
        iterations: dict[str, list[int]],
        use_short_name: bool = False,
        per_iteration: bool = False,
    ) -> None:
        super().__init__()
        self.doors = doors  # each side's registry door (`DiffScreen.compute`)
        self.item_name = name
        self.iterations = iterations  # the iterations compared on each side
        self.use_short_name = use_short_name
        self.per_iteration = per_iteration
        self.result: dict[str, pl.DataFrame] | None = None

    def compose(self) -> ComposeResult:
        yield Static("Diff detail", id="screen-title", classes="screen-title")
        with Vertical(id="body"):
            yield Static(as_text(self.item_name, style="bold"), id="detail-item")
            yield Static("Duration (us) on each side", classes="section-title")
            yield FrameTable(id="diff-stats", key_column="side", export_name="diff_stats")
            yield TextBlock("", id="diff-kernels-title", classes="section-title")
            yield FrameTable(id="diff-kernels", key_column="name", export_name="diff_kernels")
        yield StatusBar()
        yield KeysFooter(compact=True)

    def on_mount(self) -> None:
        self.query_one("#body").loading = True
        info = hta_app(self).status_info
        if info is not None:
            self.query_one(StatusBar).show(info)
        self._compute()

    @work(thread=True, exclusive=True, group="screen", exit_on_error=False)
    def _compute(self) -> None:
        parts = {}
        for side, label in (("control", "Control"), ("test", "Test")):
            options = registry.Options(
                diff_item=self.item_name,
                diff_side=label,
                iteration=",".join(map(str, self.iterations[side])),
                use_short_name=self.use_short_name,
            )
            got = self.doors[side](ITEM_TABLES, options)
            parts[side] = {
                "stats": got["diff_side_item"],
                "launched": got["diff_side_item_kernels"],
                "ops": got["diff_side_item_ops"],
            }
        result: dict[str, Any] = dict(diff.detail_from_sides(parts["control"], parts["test"]))
        # a CPU-side name (no stream) that launched nothing, or a GPU kernel?
        result["cpu_side"] = any(p["ops"]["cpu_side"][0] for p in parts.values())
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show, result)

    def _show(self, result: dict[str, Any]) -> None:
        self.result = result
        self.query_one("#body").loading = False
        stats_table = self.query_one("#diff-stats", FrameTable)
        stats_table.show_frame(result["stats"])
        kernels: pl.DataFrame = result["kernels"]
        title = self.query_one("#diff-kernels-title", Static)
        table = self.query_one("#diff-kernels", FrameTable)
        if kernels.is_empty():
            table.display = False
            title.update(
                "A CPU op that launches no GPU kernels."
                if result["cpu_side"]
                else "A GPU kernel (or a name absent from both sides): nothing launched."
            )
        else:
            table.display = True
            scope = "in all compared iterations" if self.per_iteration else ""
            title.update(f"Kernels it launches (count, sum us) {scope}".strip())
            table.show_frame(kernels)
        stats_table.focus()

    def action_back(self) -> None:
        hta_app(self).action_go_back()
