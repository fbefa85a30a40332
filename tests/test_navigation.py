"""Issue 11 point 5: every view one or two keystrokes from anywhere, and `?`, the command
palette and README all list what the registry holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hta_tui.app.app import HtaApp
from hta_tui.app.screens.registry import (
    BY_MODE,
    BY_SECTION,
    DIFF,
    OLD_KEYS,
    SCREENS,
    SECTION_TITLE,
    SECTIONS,
)
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from tests.test_app_support import settle

README = Path(__file__).resolve().parent.parent / "README.md"
SIZE = (80, 24)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("nav") / "traces"
    write_trace_dir(d, ranks=2, steps=2, seed=5)
    return d


def make_app(root: Path, tmp_path: Path, **kw) -> HtaApp:
    return HtaApp(root, cache=Cache(tmp_path / "cache"), watch=False, timings=False, **kw)


def test_registry_keys_are_unique_and_free() -> None:
    """One key per view and per section, none that a view or table uses inside."""
    letters = [e.key for e in (*SCREENS, DIFF)]
    assert len(set(letters)) == len(letters) and all(k.isupper() for k in letters)
    # tables' reverse/bottom, timeline pages, every step
    assert not {"S", "G", "A", "D", "H"} & set(letters)
    digits = [s.key for s in SECTIONS] + [DIFF.section]
    assert len(set(digits)) == len(digits) and all(k.isdigit() for k in digits)
    inside = set("dvrsetginpcxzojkwmafhl")
    assert not inside & set(OLD_KEYS)
    assert all(e.section in SECTION_TITLE for e in SCREENS)
    assert all(BY_SECTION[s.key] for s in SECTIONS)  # no empty section


def _bindings(cls: type) -> dict[str, str]:
    """key -> action of a class's own and inherited BINDINGS (the subclass wins)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        for b in vars(klass).get("BINDINGS", ()):
            if isinstance(b, tuple):
                keys, action = b[0], b[1]
            else:
                keys, action = b.key, b.action
            for key in keys.split(","):
                out[key.strip()] = action
    return out


def test_t_opens_the_timeline_and_a_pans_it_everywhere() -> None:
    """Issue 15: `t` means "open the timeline here" on every view (the tables' key: no
    view binds it to anything else), `a` pans the timeline and means nothing elsewhere, and
    "include the last step" is `H` on every analysis view."""
    from hta_tui.app.screens.base import AnalysisScreen
    from hta_tui.app.screens.timeline import TimelineScreen
    from hta_tui.app.widgets.frame_table import FrameTable

    assert _bindings(FrameTable)["t"] == "timeline"
    for entry in (*SCREENS, DIFF):
        keys = _bindings(entry.load())
        assert "t" not in keys, entry.mode
        if entry.load() is not TimelineScreen:
            assert "a" not in keys, entry.mode
        if issubclass(entry.load(), AnalysisScreen):
            assert keys["H"] == "every_step", entry.mode
    timeline = _bindings(TimelineScreen)
    assert timeline["a"].startswith("pan(-") and timeline["d"].startswith("pan(")


def nav_actions(app: HtaApp) -> dict[str, str]:
    """key -> action of every navigation key as the current screen (focused widget
    included) resolves it: a view's own binding on one of these keys would show here."""
    return {k: a.binding.action for k, a in app.screen.active_bindings.items()}


def help_in_footer(app: HtaApp) -> bool:
    """The footer's keys that fit at 80 columns show `?`."""
    from textual.widgets import Footer
    from textual.widgets._footer import FooterKey

    footer = app.screen.query_one(Footer)
    found = list(footer.query(FooterKey))
    # the command palette's key is docked right, over whatever runs under it
    right = min([k.region.x for k in found if k.has_class("-command-palette")] or [SIZE[0]])
    keys = [k for k in found if k.region.width > 0 and k.region.right <= right]
    return "question_mark" in {k.key for k in keys}


async def test_section_digit_remembers_the_last_view(traces: Path, tmp_path: Path) -> None:
    app = make_app(traces, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, timeout=60)
        await pilot.press("L")  # kernel launches, in section 2
        await pilot.press("M")
        await pilot.press("2")
        await pilot.pause()
        assert app.current_mode == "launch"
        await pilot.press("2")  # again: the next view of the section
        await pilot.pause()
        assert app.current_mode == "sequences"
        await pilot.press("0")  # no diff without --compare
        await pilot.pause()
        assert app.current_mode == "sequences"


async def test_help_and_palette_list_every_view(traces: Path, tmp_path: Path) -> None:
    app = make_app(traces, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, timeout=60)
        await pilot.press("question_mark")
        await pilot.pause()
        rows = app.screen.rows
        for e in SCREENS:
            keys = {k: d for k, d, w in rows if w == SECTION_TITLE[e.section]}
            assert any(k.startswith(e.keys) and d == f"  {e.title}" for k, d in keys.items())
        for s in SECTIONS:
            assert any(k == s.key and d.startswith(f"{s.title} section") for k, d, _ in rows)
        for key, mode in OLD_KEYS.items():
            assert any(
                f", {key} (old)" in k and d.strip() == BY_MODE[mode].title for k, d, _ in rows
            )
        assert not any("Diff" in d for _, d, _ in rows)  # only when comparing
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for e in SCREENS:
            assert f"{e.section} {e.key} {e.title}" in titles
        assert f"0 F {DIFF.title}" not in titles


def test_readme_table_is_the_registry() -> None:
    text = README.read_text()
    table = text[text.index("| keys | section | view |") :].split("\n\n")[0]
    rows = [r.split("|")[1:4] for r in table.splitlines()[2:]]
    got = {(re.sub(r"[`\s]", "", k), s.strip(), v.strip()) for k, s, v in rows}
    want = {(f"{e.section}{e.key}", SECTION_TITLE[e.section], e.title) for e in SCREENS}
    want.add((f"{DIFF.section}{DIFF.key}", "Diff", "Diff (with `--compare`)"))
    assert got == want
