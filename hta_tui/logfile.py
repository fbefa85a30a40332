"""The debug log: what went wrong with a file, with its full traceback, goes to `--log FILE`
or $HTA_TUI_LOG, never to the terminal (the file list and the report show a one-line reason).
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

LOGGER = "hta_tui"


def _log_warning(message: Any, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:  # fmt: skip
    logging.getLogger(LOGGER).warning("%s:%s: %s: %s", filename, lineno, category.__name__, message)


def quiet_warnings() -> None:
    """A library's warning (numpy's overflow on a hostile value) goes to the debug log:
    stderr is for one-line errors alone."""
    warnings.showwarning = _log_warning


def setup(path: str | Path | None = None) -> Path | None:
    """Send hta_tui's log to `path` (else $HTA_TUI_LOG); nothing is logged without one.
    Returns the log file, or None. OSError when it cannot be opened."""
    chosen = path or os.environ.get("HTA_TUI_LOG") or None
    if chosen is None:
        return None
    handler = logging.FileHandler(chosen, encoding="utf-8", delay=False)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    return Path(chosen)
