"""One app run over every view, and the tests that read what it saw.

Each view's layout is most of what a walk over every view costs (Textual's compositor), so the
suite walks once, at 80x24, on a trace that exercises every view (three ranks, GPU memory
events, two spans of rank 0), and records what each view shows and does:

- navigation (issue 11 point 5): every view's letter and every section's digit reach the
  app's navigation from every view and over `?` (the walk reaches each view with its
  section's digit; a digit goes back to the section's last view), `?` and the command
  palette list every view, and the footer shows `?` at 80 columns;
- resizes: every view survives 60x20 (shown again there, the last then at 80x24 again), the
  footer's `?` still there at 60 (a wider terminal only adds room: the hostile-names walk
  runs every view at 100x30, the app shell's layout test goes to 120x40; a third size on
  every view cost a fifth of this walk);
- scope (issue 17): each view's title says which ranks, steps and span its numbers cover,
  whole at 80 columns; every `x: ...` hint names a key the view has;
- the rank picked with `r` holds on every view; escape clears a view's filter first;
- `H` (HTA's left-out step) holds across views.
"""

from __future__ import annotations

import asyncio
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
from hta_tui.app.widgets.title_line import SEP, TitleLine
from tests.test_app_support import app_idle, make_screen_app, settle, wait_until
from tests.test_app_ui_behaviour import help_fits
from tests.test_navigation import help_in_footer, nav_actions
from tests.test_screen_scope_views import HINT, HTA, ONE_RANK, RANKS, SPAN, STEPS
from tests.test_screen_scope_views import traces as traces

SIZE = (80, 24)
#: ProfilerStep#2..#5 on every rank (the scope-views trace): HTA leaves #5 out
STEP_COUNT = 4


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


async def _every_view(pilot: Any, walk: Walk) -> None:
    """Every view in the registry's order, each reached with its section's digit (one key to
    a section's first view, again to walk its views; the app opens on the first one)."""
    app = pilot.app
    for entry in SCREENS:
        key = "" if entry.mode == app.current_mode else entry.section
        screen = await _show(pilot, entry, key)
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
    walk = Walk()
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, 60)
        await _every_view(pilot, walk)
        await _navigation(pilot, walk)
        await _rank_two(pilot, walk)
        await _every_step(pilot, walk)
        walk.return_code = app.return_code
    return walk


@pytest.fixture(scope="module")
def walk(traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Walk:
    return asyncio.run(walk_every_view(traces, tmp_path_factory.mktemp("walk")))


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
    assert "steps 2-5, the last included (H)" in walk.every_step_title
    assert walk.every_step_iterations == [STEP_COUNT] * RANKS  # step 5's iterations counted
    assert "steps 2-5" in walk.every_step_on_kernels
    assert "the last included" in walk.every_step_on_kernels
    assert HTA in walk.back_to_hta_title
