"""One app run over every view, and the tests that read what it saw.

Each view's layout and numbers are most of what a walk over every view costs (Textual's
compositor, the analyses), so the suite walks once, at 80x24, on a trace that exercises every
view and whose names attack the terminal (issue 16: `hta_tui.synth.hostile`; two DDP ranks with
GPU memory events, the sync story as rank 2 with Python call sites and nn.Modules, two spans of
rank 0, a file that fails to load), and records what each view shows and does:

- navigation (issue 11 point 5): every view's letter and every section's digit reach the
  app's navigation from every view and over `?` (the walk reaches each view with its
  section's digit; a digit goes back to the section's last view), `?` and the command
  palette list every view, and the footer shows `?` at 80 columns;
- resizes: every view survives 60x20 (shown again there, the last then at 80x24 again), the
  footer's `?` still there at 60 (a wider terminal only adds room: the views whose names are
  cut at 80 columns are shown at 100x30 too, the app shell's layout test goes to 120x40; a
  third size on every view cost a fifth of this walk);
- scope (issue 17): each view's title says which ranks, steps and span its numbers cover,
  whole at 80 columns; every `x: ...` hint names a key the view has;
- the rank picked with `r` holds on every view; escape clears a view's filter first;
- `H` (HTA's left-out step) holds across views;
- names are data (issue 16): the app runs with a driver that records every byte Textual writes
  to the terminal; every view, every tab, the pickers, the help, a notice and a drill-down
  show the names (which are spreadsheet formulas too) as escapes, never as control, and `e`
  on every table exports them neutralised (test_csv_formulas). Textual's own sequences
  (cursor moves, colours, the pointer shape) are told apart by their grammar; nothing else
  may hold an escape, a control or a bidi character.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from textual.widgets import Input, Static

from hta_tui.app.screens.base import AnalysisScreen
from hta_tui.app.screens.help import HelpScreen
from hta_tui.app.screens.registry import (
    BY_MODE,
    BY_SECTION,
    DIFF,
    OLD_KEYS,
    SCREENS,
    SECTION_TITLE,
    SECTIONS,
)
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.title_line import SEP, TitleLine
from hta_tui.printable import printable
from hta_tui.synth.hostile import BIDI, FOLDER_PAYLOAD, PAYLOAD
from tests.test_app_support import app_idle, settle, wait_until
from tests.test_app_ui_behaviour import help_fits
from tests.test_hostile_names import (
    BAD,
    SHOWN,
    assert_clean,
    hostile_folder,
    recording_app,
    screen_text,
    visit,
    visit_tabs,
)
from tests.test_navigation import help_in_footer, nav_actions

SIZE = (80, 24)
#: Views whose name columns are narrower than SHOWN at 80 columns (they are filled for the
#: size they are first shown at), and the timeline (24 rows show one rank's threads): their
#: names are seen at WIDE_SIZE, the rest at 80x24.
WIDE = {"launch", "memory", "overlap", "timeline"}
WIDE_SIZE = (100, 30)
#: The two DDP ranks (rank 0 in two spans) and the sync story as rank 2.
RANKS = 3
#: What the generator writes: ProfilerStep#2..#4 on each DDP rank (`steps=3`), #1..#2 in the
#: story. HTA's analyses leave the last one out (H brings it back); the plugin's keep it.
HTA = "steps 1-3, 4 left out as HTA (H)"
PLUGIN = "steps 1-4, as the TensorBoard plugin"
EVERY_STEP = "steps 1-4, the last included (H)"
#: Every ProfilerStep of each rank, with `H`.
ITERATIONS = [3, 3, 2]
#: The steps part each view must show (the overview is no analysis screen: test_scope).
STEPS: dict[str, str] = {
    "step_time": PLUGIN,
    "gpu_metrics": PLUGIN,
    "distributed": "every ProfilerStep",
    "critical_path": "every ProfilerStep",  # the last one too: a path per step
    "memory": "whole trace",
    "operators": "whole trace",
    "syncs": "whole trace",
    "modules": "whole trace",
    "timeline": "whole trace",
    "findings": "each rule's steps",  # each reads another view's table, in its steps
}
#: Views that show one rank at a time when none is picked: which one, and why (the story has
#: no memory events).
ONE_RANK: dict[str, str] = {
    "sequences": f"rank 0 (smallest of {RANKS}; r picks)",
    "timelines": f"rank 0 (first of {RANKS}; r picks)",
    "memory": "rank 0 (first with memory events of 2; r picks)",
}
#: The span rank 0's numbers come from: the newer of its two files.
SPAN = "r0 span 2/2"
#: A hint inside a sentence: `(n: full name)`, `; o: all`, `· c: cutoffs`.
HINT = re.compile(r"[;(·]\s*([a-zA-Z]): ")


@dataclass
class ViewSeen:
    """What one view showed and did."""

    mode: str
    actions: dict[str, str] = field(default_factory=dict)
    help_at_80: bool = False
    title: str = ""
    title_lines: list[str] = field(default_factory=list)
    title_width: int = 0
    hints: list[str] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    sizes: list[tuple[int, int]] = field(default_factory=list)
    help_at_60: bool = False
    # with rank 2 picked
    rank: int | None = None
    rank_title: str = ""
    rank_title_lines: list[str] = field(default_factory=list)
    filter_cleared: bool = False
    mode_after_escape: str = ""


@dataclass
class Walk:
    views: dict[str, ViewSeen] = field(default_factory=dict)
    section_walks: dict[str, list[str]] = field(default_factory=dict)
    digits_back: list[str] = field(default_factory=list)
    help_rows: list[tuple[str, str, str]] = field(default_factory=list)
    palette: list[str] = field(default_factory=list)
    old_keys: dict[str, str] = field(default_factory=dict)
    help_actions: dict[str, str] = field(default_factory=dict)
    after_help_k: tuple[str, bool] = ("", False)
    after_help_digit: tuple[str, bool] = ("", False)
    every_step_title: str = ""
    every_step_iterations: list[int] = field(default_factory=list)
    every_step_on_kernels: str = ""
    back_to_hta_title: str = ""
    back_at: tuple[str, int, int] = ("", 0, 0)  # the last view at 80x24 again
    return_code: int | None = None
    # names (issue 16): each view's and tab's text as shown, by name
    names: dict[str, str] = field(default_factory=dict)
    markup: dict[str, set[str]] = field(default_factory=dict)
    lines: dict[str, str] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    output: str = ""  # every byte written to the terminal
    exported: list[str] = field(default_factory=list)
    exports: Path = Path()


def _title(screen: Any) -> tuple[str, list[str], int]:
    title = screen.query_one("#screen-title", TitleLine)
    return title.text, str(title.render()).split("\n"), title.size.width


async def _show(pilot: Any, entry: Any, key: str | None = None) -> Any:
    """Press the view's key (or `key`); the view once its numbers are current and drawn."""
    app = pilot.app
    cls = entry.load()
    if key != "":
        await pilot.press(key or entry.key)

    def ready() -> bool:
        s = app.screen
        current = not isinstance(s, AnalysisScreen) or s.shows_current
        return isinstance(s, cls) and current and app_idle(app)

    await wait_until(pilot, ready, 60, entry.mode)
    await pilot.pause()
    return app.screen


async def _poll(pilot: Any, predicate: Any, tries: int = 50) -> bool:
    """`predicate()` within a few frames (a loaded machine lays a footer out late)."""
    for _ in range(tries):
        if predicate():
            return True
        await pilot.pause(0.1)
    return False


#: Every view and tab that shows a name from the trace (the GPU's, a kernel's, an operator's,
#: a Python frame's or nn.Module's, a memory event's operator, a process group, a call site,
#: a thread's): each must show it as SHOWN. The others (step time, the idle and steps main
#: tabs, the comm-op and wait tables, the counters' timelines) show numbers and kinds only.
WITH_NAMES = [
    "gpu_metrics",
    "kernels",
    "detail",
    "detail/tab-ranks",
    "detail/tab-hist",
    "detail/tab-time",
    "detail/tab-runs",
    "detail/tab-launch",
    "launch",
    "launch/short",
    "launch/runtime",
    "launch/delay",
    "sequences",
    "idle/idle-tab-gaps",
    "memory",
    "memory/memory-peak-pane",
    "memory/memory-events-pane",
    "memory/memory-stats-pane",
    "distributed",
    "distributed/tab-collectives",
    "steps/steps-tab-annotations",
    "operators",
    "operators/python stacks",
    "syncs",
    "modules",
    "timeline/details",
    "detail from kernels/tab-launch",
]
#: Summaries of one line (per rank) that name something from the trace, by view: a name's line
#: break is shown as `\n` there too.
ONE_LINERS = {"gpu_metrics": "gpu-summary", "distributed": "dist-summary", "syncs": "sync-verdict"}
#: A timeline lane is labelled in 15 cells: the thread's name in brackets, escaped.
LANE = printable(f"={PAYLOAD}")[:15]
#: Statics that keep markup: constant text of ours (everything else a screen updates is a
#: TextLine or TextBlock, which never read markup).
OUR_MARKUP = {"screen-title", "detail-item", "cutoffs-note"}


def markup_statics(screen: Any) -> set[str]:
    """Ids of the screen's Statics that would read a string as markup."""
    from textual.widgets import Static

    return {
        w.id for w in screen.query(Static) if type(w) is Static and w.id and w._render_markup
    } - OUR_MARKUP


async def python_stacks(pilot: Any, seen: dict[str, str]) -> None:
    """Operators: the call stacks (Python frames, as `with_stack=True` writes them) of the
    sync story's aten::gather (rank 2 alone: the DDP ranks' ops have no stack); then all
    ranks again."""
    screen = pilot.app.screen
    screen.query_one("#operators-table", FrameTable).focus()
    await pilot.press("r", "down", "down", "down", "enter")
    await visit(pilot, seen, "operators/rank 2")
    table = screen.query_one("#operators-table", FrameTable)
    names = table.view_frame["operator"].to_list()
    table.move_cursor(row=next(i for i, n in enumerate(names) if n.endswith(":aten::gather")))
    title = screen.query_one("#operator-stacks-title")
    await wait_until(pilot, lambda: "aten::gather: " in str(title.render()), 30, "the stacks")
    await visit(pilot, seen, "operators/python stacks")
    await pilot.press("r", "up", "up", "up", "enter")


async def timeline_details(pilot: Any, seen: dict[str, str]) -> None:
    """Timeline: a kernel's details line (`]` selects the next event of the cursor's row),
    then a marked range's summary (its top names)."""
    from hta_tui.app.widgets.timeline_view import TimelineView

    view = pilot.app.screen.query_one(TimelineView)
    rows = view.timeline.rows
    view.goto_row(next(i for i, r in enumerate(rows) if r.label == "stream 7"))
    view.focus()
    await pilot.press("z", "right_square_bracket")
    await pilot.pause()
    seen["timeline/details"] = screen_text(pilot.app)
    await pilot.press("m", *["right"] * 60, "m")  # the top names of a range (runtime calls)
    await pilot.pause()
    seen["timeline/mark"] = screen_text(pilot.app)


#: The walk's names start with a spreadsheet formula too: one walk over every view shows the
#: names as text (issue 16) and exports every table with them neutralised (test_csv_formulas).
WALK_PAYLOAD = f"={PAYLOAD}"
WALK_SHOWN = f"={SHOWN}"


async def export_shown(pilot: Any, walk: Walk) -> None:
    """`e` on every table the screen shows that was not exported yet."""
    for table in pilot.app.screen.query(FrameTable):
        if table.display and table.region.area and table.export_name not in walk.exported:
            table.focus()
            await pilot.press("e")
            walk.exported.append(table.export_name)
    pilot.app.clear_notifications()  # the export's toast would cover the next screen's names


async def _names(pilot: Any, walk: Walk, entry: Any) -> None:
    """The view as shown (each of its tabs, each table exported); the operators' Python
    stacks, a timeline's details."""
    app = pilot.app
    seen = walk.names
    if entry is SCREENS[0]:
        await visit(pilot, seen, entry.mode)
        await export_shown(pilot, walk)
        return
    await visit_tabs(pilot, seen, entry.mode, lambda: export_shown(pilot, walk))
    walk.markup[entry.mode] = markup_statics(app.screen)
    if entry.mode in ONE_LINERS:
        block = app.screen.query_one(f"#{ONE_LINERS[entry.mode]}")
        walk.lines[entry.mode] = str(block.render())
    if entry.mode == "operators":
        await python_stacks(pilot, seen)
    elif entry.mode == "timeline":
        await timeline_details(pilot, seen)


async def _notice(pilot: Any, walk: Walk) -> None:
    """Enter on a file of the overview (rank 0's other span): a notice names it. Last: the
    span it picks would change every view's scope."""
    app = pilot.app
    await _show(pilot, SCREENS[0])
    await pilot.press("enter")
    await wait_until(pilot, lambda: list(app._notifications), what="the notice")
    await pilot.pause(0.2)
    walk.names["notice"] = screen_text(app)
    walk.notices = [n.message for n in app._notifications]


async def _pickers_help_and_drill_down(pilot: Any, walk: Walk) -> None:
    """The sort and rank pickers and the help over the kernels, then a kernel's detail."""
    app = pilot.app
    seen = walk.names
    await pilot.press("K")
    await pilot.pause()
    for table in app.screen.query(FrameTable):
        table.focus()
        break
    await pilot.press("s")  # the sort picker lists the columns
    await pilot.pause()
    seen["sort picker"] = screen_text(app)
    await pilot.press("escape", "r")  # the rank picker
    await pilot.pause()
    seen["rank picker"] = screen_text(app)
    await pilot.press("escape", "question_mark")
    await pilot.pause()
    seen["help"] = screen_text(app)
    await pilot.press("question_mark", "K")
    await pilot.pause()
    await pilot.press("enter")  # drill down to the kernel under the cursor
    await visit_tabs(pilot, seen, "detail from kernels")


async def _resize(pilot: Any, size: tuple[int, int]) -> None:
    """The terminal at `size`, once the screen has taken it."""
    await pilot.resize_terminal(*size)
    await wait_until(pilot, lambda: tuple(pilot.app.screen.size) == size, 10, f"{size}")


async def _every_view(pilot: Any, walk: Walk) -> None:
    """Every view in the registry's order, each reached with its section's digit (one key to
    a section's first view, again to walk its views; the app opens on the first one)."""
    app = pilot.app
    for entry in SCREENS:
        key = "" if entry.mode == app.current_mode else entry.section
        wide = entry.mode in WIDE
        if wide:  # its names first, at the size they need (its tables are filled for it)
            await _resize(pilot, WIDE_SIZE)
        screen = await _show(pilot, entry, key)
        if wide:
            await _names(pilot, walk, entry)
            await _resize(pilot, SIZE)
        if key:
            walk.section_walks.setdefault(key, []).append(app.current_mode)
        seen = walk.views[entry.mode] = ViewSeen(mode=app.current_mode)
        seen.help_at_80 = await _poll(pilot, lambda: help_in_footer(app))
        seen.actions = nav_actions(app)
        if isinstance(screen, AnalysisScreen):
            seen.title, seen.title_lines, seen.title_width = _title(screen)
            bindings = screen.active_bindings.values()
            seen.keys = {b.binding.key for b in bindings}
            seen.keys |= {k for b in bindings for k in b.binding.key.split(",")}
            seen.hints = [
                key for w in screen.query(Static) for key in HINT.findall(str(w.render()))
            ]
        if not wide:
            await _names(pilot, walk, entry)


async def _navigation(pilot: Any, walk: Walk) -> None:
    app = pilot.app
    # from the last section: a section's digit goes back to the view last shown there;
    # again, to the section's next one (round to its first); `0` without --compare stays
    first = SECTIONS[0].key
    for key in (first, first, "0"):
        await pilot.press(key)
        await pilot.pause()
        walk.digits_back.append(app.current_mode)
    for key in OLD_KEYS:  # the old letters still work
        await pilot.press(key)
        await pilot.pause()
        walk.old_keys[key] = app.current_mode
    await pilot.press("question_mark")  # over `?` too
    await pilot.pause()
    assert isinstance(app.screen, HelpScreen)
    walk.help_actions = nav_actions(app)
    walk.help_rows = list(app.screen.rows)
    walk.palette = [c.title for c in app.get_system_commands(app.screen)]
    await pilot.press("K")
    await pilot.pause()
    walk.after_help_k = (app.current_mode, isinstance(app.screen, HelpScreen))
    await pilot.press("question_mark")
    await pilot.press("4")
    await pilot.pause()
    walk.after_help_digit = (app.current_mode, isinstance(app.screen, HelpScreen))


async def _rank_two(pilot: Any, walk: Walk) -> None:
    """At 60x20, rank 2 picked on the first view, then every view: each is laid out again
    at the smaller size, the footer still shows `?`; the pick holds; a kept filter's first
    escape clears it and the view stays. Then 80x24 again. (Resized here rather than on the
    first visit: two more layouts of every view cost a tenth of the walk.)"""
    app = pilot.app
    views = [e for e in SCREENS if issubclass(e.load(), AnalysisScreen)]
    await _show(pilot, views[0])
    await pilot.resize_terminal(60, 20)
    await pilot.pause(0.1)
    await pilot.press("r")
    await pilot.pause(0.2)
    await pilot.press("down", "down", "down", "enter")  # all, rank 0, rank 1, rank 2
    await wait_until(pilot, lambda: app.screen.params.rank == 2, 30)
    for entry in SCREENS:
        screen = await _show(pilot, entry)
        seen = walk.views[entry.mode]
        seen.sizes.append((app.screen.size.width, app.screen.size.height))
        seen.help_at_60 = await _poll(pilot, lambda: help_fits(app, 60))
        if entry not in views:
            continue
        seen.rank = screen.params.rank
        seen.rank_title, seen.rank_title_lines, _ = _title(screen)
        await pilot.press("slash", *"zz", "enter")
        box = screen.query_one("#filter", Input)
        await wait_until(pilot, lambda b=box: b.value == "zz", 10)
        await pilot.press("escape")
        seen.filter_cleared = await _poll(pilot, lambda b=box: b.value == "" and not b.display)
        seen.mode_after_escape = app.current_mode
    await pilot.resize_terminal(*SIZE)
    await pilot.pause(0.1)
    walk.back_at = (app.current_mode, app.screen.size.width, app.screen.size.height)
    await _show(pilot, views[0])
    await pilot.press("r")  # all ranks again
    await pilot.pause(0.2)
    await pilot.press("up", "up", "up", "enter")
    await wait_until(pilot, lambda: app.screen.params.rank is None, 30)


async def _every_step(pilot: Any, walk: Walk) -> None:
    """`H` on the step view includes HTA's left-out step; the choice holds on the kernels."""
    app = pilot.app

    def title() -> str:
        return _title(app.screen)[0]

    def ready() -> bool:
        return app_idle(app) and isinstance(app.screen, AnalysisScreen)

    await pilot.press("P", "H")
    await wait_until(pilot, lambda: ready() and "the last included" in title(), 60)
    walk.every_step_title = title()
    shown = app.screen.result["iterations"]
    walk.every_step_iterations = shown.group_by("rank").len().sort("rank")["len"].to_list()
    await pilot.press("K")
    await wait_until(pilot, lambda: ready() and "the last included" in title(), 60)
    walk.every_step_on_kernels = title()
    await pilot.press("H")
    await wait_until(pilot, lambda: ready() and "left out" in title(), 60)
    walk.back_to_hta_title = title()


async def walk_every_view(root: Path, tmp_path: Path) -> Walk:
    # the overview with its findings (names from the trace in the block too)
    app, written = recording_app(root, tmp_path, findings=True)
    walk = Walk(exports=tmp_path / "exports")
    async with app.run_test(headless=False, size=SIZE, notifications=True) as pilot:
        await settle(pilot, 60)
        await _every_view(pilot, walk)
        await _navigation(pilot, walk)
        await _pickers_help_and_drill_down(pilot, walk)
        await _rank_two(pilot, walk)
        await _every_step(pilot, walk)
        await _notice(pilot, walk)
        exports = walk.exports
        await wait_until(pilot, lambda: len(list(exports.glob("*.csv"))) == len(walk.exported))
        walk.return_code = app.return_code
    walk.output = "".join(written)
    return walk


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app run over every view of hostile names that are formulas too."""
    root = hostile_folder(tmp_path_factory.mktemp("walk"), WALK_PAYLOAD)
    return asyncio.run(walk_every_view(root, tmp_path_factory.mktemp("walk-app")))


@pytest.mark.heavy
def test_every_view_within_two_keys_from_every_view(walk: Walk) -> None:
    """On every view (and over `?`), each view's letter and each section's digit reach the
    app's navigation; pressing them moves as the registry says; the footer's keys that fit
    at 80 columns show `?` on every view."""
    assert [m for m in walk.views] == [e.mode for e in SCREENS]
    for entry in SCREENS:
        seen = walk.views[entry.mode]
        assert seen.mode == entry.mode
        for target in SCREENS:
            assert seen.actions.get(target.key) == f"goto('{target.mode}')", (entry, target)
        for section in SECTIONS:
            assert seen.actions.get(section.key) == f"section('{section.key}')", entry
        for key, mode in OLD_KEYS.items():
            assert seen.actions.get(key) == f"goto('{mode}')", (entry, key)
    hidden = [m for m, v in walk.views.items() if not v.help_at_80]
    assert not hidden, f"`?` not in the footer at 80 columns: {hidden}"
    for section in SECTIONS:  # its digit walked its views in order (the app opened on 1's)
        want = [e.mode for e in BY_SECTION[section.key]][section is SECTIONS[0] :]
        assert walk.section_walks[section.key] == want, section
    # `1` from section 6: the view last shown there; again: round to its first; `0`: stays
    last, first = BY_SECTION[SECTIONS[0].key][-1].mode, SCREENS[0].mode
    assert walk.digits_back == [last, first, first]
    assert walk.old_keys == OLD_KEYS
    assert all(walk.help_actions.get(e.key) == f"app.goto('{e.mode}')" for e in SCREENS)
    assert walk.after_help_k == ("kernels", False)
    mode, over_help = walk.after_help_digit
    assert mode in {e.mode for e in BY_SECTION["4"]} and not over_help


@pytest.mark.heavy
def test_help_and_palette_list_every_view(walk: Walk) -> None:
    """`?` lists every view under its section with its keys, every section, the old letters,
    and no diff without --compare; so does the command palette."""
    rows = walk.help_rows
    for e in SCREENS:
        keys = {k: d for k, d, w in rows if w == SECTION_TITLE[e.section]}
        assert any(k.startswith(e.keys) and d == f"  {e.title}" for k, d in keys.items())
    for s in SECTIONS:
        assert any(k == s.key and d.startswith(f"{s.title} section") for k, d, _ in rows)
    for key, mode in OLD_KEYS.items():
        assert any(f", {key} (old)" in k and d.strip() == BY_MODE[mode].title for k, d, _ in rows)
    assert not any("Diff" in d for _, d, _ in rows)  # only when comparing
    for e in SCREENS:
        assert f"{e.section} {e.key} {e.title}" in walk.palette
    assert f"0 F {DIFF.title}" not in walk.palette


@pytest.mark.heavy
def test_every_screen_survives_resizes(walk: Walk) -> None:
    """Every view, laid out at 80x24, is shown again at 60x20 (the last one then at 80x24
    again): each takes the size, and the footer still shows `?` at 60 columns (80: the
    navigation test)."""
    for mode, seen in walk.views.items():
        assert seen.sizes == [(60, 20)], mode
        assert seen.help_at_60, mode
    assert walk.back_at == (SCREENS[-1].mode, *SIZE)
    assert walk.return_code is None  # no crash


@pytest.mark.heavy
def test_every_view_states_its_scope_whole_at_80_columns(walk: Walk) -> None:
    checked = []
    for entry in SCREENS:
        if not issubclass(entry.load(), AnalysisScreen):
            continue
        seen = walk.views[entry.mode]
        lines = seen.title_lines
        assert all(cell_len(line) <= seen.title_width for line in lines), (entry.mode, lines)
        ranks = ONE_RANK.get(entry.mode, f"all {RANKS} ranks")
        steps = STEPS.get(entry.mode, HTA)
        for part in (ranks, steps, SPAN):
            # the part is on the screen whole, on one line
            assert any(part in line for line in lines), (entry.mode, part, lines)
        assert seen.title.startswith(f"{entry.title}{SEP}"), entry.mode
        if entry.mode in STEPS:  # views outside HTA's steps never claim its left-out step
            assert "left out as HTA" not in seen.title, entry.mode
        # every `x: ...` hint on the view names one of its keys
        assert set(seen.hints) <= seen.keys, (entry.mode, seen.hints)
        checked.append(entry.mode)
    assert {"gpu_metrics", "memory", "operators", "timeline", "distributed"} <= set(checked)


@pytest.mark.heavy
def test_rank_choice_and_escape_hold_on_every_view(walk: Walk) -> None:
    for entry in SCREENS:
        cls = entry.load()
        if not issubclass(cls, AnalysisScreen):
            continue
        seen = walk.views[entry.mode]
        if cls.FOLLOWS_RANK:
            assert seen.rank == 2, entry.mode
            assert any("rank 2" in line for line in seen.rank_title_lines), entry.mode
            assert f"all {RANKS} ranks" not in seen.rank_title
        # a kept filter: the first escape clears it and stays, the view is still there
        assert seen.filter_cleared, entry.mode
        assert seen.mode_after_escape == entry.mode


@pytest.mark.heavy
def test_shift_h_holds_across_views(walk: Walk) -> None:
    assert EVERY_STEP in walk.every_step_title
    assert walk.every_step_iterations == ITERATIONS  # the last step's iterations counted
    assert "steps 1-4" in walk.every_step_on_kernels
    assert "the last included" in walk.every_step_on_kernels
    assert HTA in walk.back_to_hta_title


@pytest.mark.heavy
def test_every_view_shows_hostile_names_as_text(walk: Walk) -> None:
    seen, lines, notices, output = walk.names, walk.lines, walk.notices, walk.output
    assert output, "nothing was recorded"
    assert_clean(output)
    # every view of the registry was visited, with its tabs, and the pickers, help, a notice
    assert {e.mode for e in SCREENS} <= set(seen)
    assert {"notice", "sort picker", "rank picker", "help"} <= set(seen)
    assert {"memory/memory-events-pane", "distributed/tab-wait", "timelines/memory-pane"} <= set(
        seen
    )
    for name, text in seen.items():
        assert not BAD.search(text.replace("\n", "")), name
    assert "PWNED" in output
    assert not {mode: ids for mode, ids in walk.markup.items() if ids}, "Statics reading markup"
    assert printable(BIDI)[:12] in seen["overview"], seen["overview"]  # the file list
    assert any(printable(BIDI) in n for n in notices), notices  # the notice: all of it
    status = printable(FOLDER_PAYLOAD)[:19]  # the folder's name, cut to 40 cells
    assert all(status in seen[n] for n in ("overview", "kernels", "steps")), "status bar"
    missing = [name for name in WITH_NAMES if WALK_SHOWN not in seen[name]]
    assert not missing, f"views without the escaped name: {missing}"
    for mode, text in lines.items():
        assert printable(WALK_PAYLOAD) in text, mode  # all of it, escaped
        assert text.count("\n") == (2 if mode == "syncs" else 0), mode  # syncs: three ranks
    assert "ncclDevKernel_=evil\\x1b]0;PWNED" in seen["overlap"]  # NCCL kernels, cut to fit
    assert "Net_0" in seen["modules"]  # nn.Module names: the payload, then the module's name
    assert seen["timeline"].count(LANE) >= 4  # the threads' lanes (two of each DDP rank)
    stacks = seen["operators/python stacks"]
    assert f"stacks of {WALK_SHOWN}" in stacks  # the title names the operator
    assert f"train.py(20): {WALK_SHOWN[:14]}" in stacks  # its call site: file and line, name


@pytest.mark.heavy
def test_every_view_exports_neutralised(walk: Walk) -> None:
    """`e` on every table of every view (every tab): no cell of any export runs as a formula,
    and the names (kernels, operators, memory events, modules, call sites, GPUs, process
    groups...) are there, behind their `'`."""
    from tests.test_csv_formulas import formula_cells, read_rows

    files = {
        p.name.removeprefix("hta-tui-").removesuffix(".csv"): p for p in walk.exports.glob("*.csv")
    }
    assert sorted(files) == sorted(walk.exported)
    assert {"kernels", "operators", "memory_events", "modules", "syncs", "wait_transfer"} <= set(
        files
    )
    runs = {name: formula_cells(path) for name, path in files.items()}
    assert not {name: cells for name, cells in runs.items() if cells}
    named = {
        name
        for name, path in files.items()
        if any(cell.startswith(f"'{WALK_PAYLOAD}") for row in read_rows(path) for cell in row)
    }
    for name in ("kernels", "operators", "memory_events", "modules", "gpu_metrics", "syncs"):
        assert name in named, (name, sorted(named))
