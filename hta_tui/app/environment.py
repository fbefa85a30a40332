"""What the app asks of its surroundings: the terminal's encoding, where exports may go, and
errors told in one line."""

from __future__ import annotations

import locale
import os
import sys
from pathlib import Path


def unicode_ok() -> bool:
    """Can the terminal show block and box glyphs? (HTA_TUI_ASCII=1 forces the ASCII look.)"""
    if os.environ.get("HTA_TUI_ASCII", "") not in ("", "0"):
        return False
    stream = sys.__stdout__
    enc = getattr(stream, "encoding", None) or locale.getpreferredencoding(False) or ""
    return "utf" in enc.lower()


def export_dir(trace_root: Path) -> Path:
    """Where `e` writes CSV files: $HTA_TUI_EXPORT_DIR, else the current directory - unless
    that is inside the trace folder, which hta-tui never writes into: then the home folder."""
    env = os.environ.get("HTA_TUI_EXPORT_DIR")
    if env:
        return Path(env)
    cwd = Path.cwd().resolve()
    root = trace_root.resolve()
    root = root if root.is_dir() else root.parent
    return Path.home() if cwd == root or root in cwd.parents else cwd


def one_line(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown error"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]
