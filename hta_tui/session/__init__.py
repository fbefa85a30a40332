"""The headless session every front end opens its files through (no textual here): the sides
being compared, each a TraceSet with its generation, scanned, loaded, reloaded and watched on
the session's own threads, and each change announced once (`Change`).

    sides   Side, Change, Notice, InlineExecutor: what a session is made of and announces
    live    LiveSession (the threads, the queue, `apply_pending`) and `open_session`
"""

from __future__ import annotations

from hta_tui.session.live import LiveSession, open_session
from hta_tui.session.sides import MAIN, TEST, Change, InlineExecutor, Notice, Side

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
