"""Keys, `?` rows and palette entries for the views, all derived from the registry, so a view
registered there is reachable, listed and documented without touching anything else."""

from __future__ import annotations

from textual.binding import Binding

from hta_tui.app.screens.registry import (
    BY_MODE,
    DIFF,
    DIFF_SECTION,
    OLD_KEYS,
    SCREENS,
    SECTION_TITLE,
    SECTIONS,
    ScreenEntry,
)


def _entries(comparing: bool) -> tuple[ScreenEntry, ...]:
    return (DIFF, *SCREENS) if comparing else SCREENS


def nav_bindings(prefix: str = "") -> list[Binding]:
    """The app's navigation keys: a digit per section, a capital letter per view, and the
    letters views had before sections (none of them taken inside a view). `prefix` "app."
    for a modal screen, which does not see the app's own bindings."""
    sections = (*SECTIONS, DIFF_SECTION)
    return [
        *(
            Binding(
                s.key,
                f"{prefix}section('{s.key}')",
                s.title,
                show=False,
                tooltip=f"{s.title} views",
            )
            for s in sections
        ),
        *(
            Binding(
                e.key, f"{prefix}goto('{e.mode}')", e.title, show=False, tooltip=f"{e.title} view"
            )
            for e in (*SCREENS, DIFF)
        ),
        *(
            Binding(key, f"{prefix}goto('{mode}')", BY_MODE[mode].title, show=False)
            for key, mode in OLD_KEYS.items()
        ),
    ]


def _section_title(entry: ScreenEntry) -> str:
    return SECTION_TITLE.get(entry.section, DIFF_SECTION.title)


def help_rows(comparing: bool) -> list[tuple[str, str, str]]:
    """`?` rows for navigation: each section's digit, then how each of its views is reached
    (its old letter too, where it had one)."""
    old = {mode: key for key, mode in OLD_KEYS.items()}
    rows: list[tuple[str, str, str]] = []
    for section in (*((DIFF_SECTION,) if comparing else ()), *SECTIONS):
        views = [e for e in _entries(comparing) if e.section == section.key]
        again = " (again: next)" if len(views) > 1 else ""
        rows.append((section.key, f"{section.title} section{again}", "everywhere"))
        for e in views:
            keys = e.keys + (f", {old[e.mode]} (old)" if e.mode in old else "")
            rows.append((keys, f"  {e.title}", section.title))
    return rows


def palette_entries(comparing: bool) -> list[tuple[str, str, str]]:
    """(title, help, mode) for the command palette: every view, named with its section."""
    return [
        (f"{e.keys} {e.title}", f"{_section_title(e)}: show the {e.title.lower()} view", e.mode)
        for e in _entries(comparing)
    ]
