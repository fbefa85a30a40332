"""The app's names for the sides (`session.MAIN`, `session.TEST`: the session owns them) as the
status bar shows them."""

from __future__ import annotations

from pathlib import Path

from hta_tui.printable import printable


def folder_label(path: Path) -> str:
    """A folder's or file's name, never its absolute path (screenshots, shared terminals)."""
    return printable(path.name or str(path)) + ("" if path.is_file() else "/")


def same_path(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b
