"""Issue 11 point 5: every view one or two keystrokes from anywhere, and `?`, the command
palette and README all list what the registry holds. The keys pressed in the app (every
view's letter and section digit, a digit's memory, `?` and the palette) are checked on the one
walk over every view (tests/test_every_view.py)."""

from __future__ import annotations

import re
from pathlib import Path

from hta_tui.app.app import HtaApp
from hta_tui.app.screens.registry import (
    BY_SECTION,
    DIFF,
    OLD_KEYS,
    SCREENS,
    SECTION_TITLE,
    SECTIONS,
)

README = Path(__file__).resolve().parent.parent / "README.md"
SIZE = (80, 24)


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


def test_readme_table_is_the_registry() -> None:
    text = README.read_text()
    table = text[text.index("| keys | section | view |") :].split("\n\n")[0]
    rows = [r.split("|")[1:4] for r in table.splitlines()[2:]]
    got = {(re.sub(r"[`\s]", "", k), s.strip(), v.strip()) for k, s, v in rows}
    want = {(f"{e.section}{e.key}", SECTION_TITLE[e.section], e.title) for e in SCREENS}
    want.add((f"{DIFF.section}{DIFF.key}", "Diff", "Diff (with `--compare`)"))
    assert got == want
