"""Where the cache lives and what a file's entry is named, with no heavy import (no polars,
no parser): a front end asks it before its own imports (`exec.backends.start_early`)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from platformdirs import user_cache_dir

from hta_tui.trace.discover import TraceFile


def default_root() -> Path:
    """$HTA_TUI_CACHE, else the XDG user cache dir (~/.cache/hta-tui)."""
    env = os.environ.get("HTA_TUI_CACHE")
    return Path(env) if env else Path(user_cache_dir("hta-tui", appauthor=False))


def entry_name(tf: TraceFile) -> str:
    """The name of this version of the file's entry (its resolved path, size and mtime)."""
    path, size, mtime = tf.key
    return hashlib.sha1(f"{Path(path).resolve()}\0{size}\0{mtime}".encode()).hexdigest()
