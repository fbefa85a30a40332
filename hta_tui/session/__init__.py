"""The headless session every front end opens its files through (no textual here): the sides
being compared, each a TraceSet with its generation, scanned, loaded, reloaded and watched on
the session's own threads, and each change announced once (`live.Change`)."""

from __future__ import annotations

from hta_tui.session.live import (
    MAIN,
    TEST,
    Change,
    InlineExecutor,
    LiveSession,
    Notice,
    Side,
    open_session,
)

__all__ = [
    "MAIN",
    "TEST",
    "Change",
    "InlineExecutor",
    "LiveSession",
    "Notice",
    "Side",
    "open_session",
]
