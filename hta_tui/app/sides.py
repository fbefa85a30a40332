"""The app's trace sets ("sides"): its own, and the test side when comparing. Loading messages
carry the side they belong to, and each side has its own scan generation."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hta_tui.printable import printable
from hta_tui.trace.model import TraceSet

#: The two trace sets: the app's own (the control side when comparing) and the test side.
MAIN, TEST = "main", "test"


@dataclass
class SideState:
    """Loading state of one trace set: its scan generation, whether a full scan is under way,
    and the files known when that scan started (those it does not list again are gone)."""

    root: Path
    trace_set: TraceSet
    generation: int = 0
    scanning: bool = False
    before: set[Path] = field(default_factory=set)


def tag(msg: Any, side: str) -> Any:
    """Mark a loading message with the side (trace set) it belongs to."""
    msg.side = side
    return msg


def side_of(msg: Any) -> str:
    return getattr(msg, "side", MAIN)


def folder_label(path: Path) -> str:
    """A folder's or file's name, never its absolute path (screenshots, shared terminals)."""
    return printable(path.name or str(path)) + ("" if path.is_file() else "/")


def same_path(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b
