"""The app over the session, with Pilot: changes are pushed to the screens, nothing polls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.message_pump import MessagePump

from hta_tui.app.gc_pacing import GcPacer
from hta_tui.app.screens.kernels import KernelsScreen
from tests.test_app_support import make_screen_app, open_view, settle, wait_until, write_rank

SIZE = (100, 30)


async def test_nothing_polls_for_changes(tmp_path: Path, monkeypatch) -> None:
    """The only interval the app or a screen sets is the GC pacer's (it waits for quiet
    time, not for data): no tick for status bars or the overview, no screen poll, no timed
    recheck on the UI thread."""
    intervals: list[Any] = []
    real = MessagePump.set_interval

    def recording(self: MessagePump, interval: float, callback: Any = None, **kw: Any) -> Any:
        if getattr(callback, "__module__", "").startswith("hta_tui"):  # ours, not Textual's
            intervals.append(callback)
        return real(self, interval, callback, **kw)

    monkeypatch.setattr(MessagePump, "set_interval", recording)
    root = tmp_path / "traces"
    write_rank(root, 0, world=1)
    app = make_screen_app(root, tmp_path, watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await open_view(pilot, "K", KernelsScreen)
        await pilot.press("1")
        await settle(pilot)
    assert intervals == [app.gc_pacer.tick]
    assert isinstance(app.gc_pacer, GcPacer)


async def test_a_screen_follows_a_file_the_session_loads(tmp_path: Path) -> None:
    """A rank loaded while a view is open reaches it through the session's change (the app's
    `data`, which the screen watches), with no poll to find it."""
    root = tmp_path / "traces"
    write_rank(root, 0, world=2)
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_view(pilot, "K", KernelsScreen)
        assert "rank 0" in screen.query_one("#screen-title").render().plain
        shown = app.data
        new = write_rank(root, 1, world=2)
        app.session.reload([new])  # as the session's watcher does for a new file
        await wait_until(pilot, lambda: app.data != shown, what="the session's change")
        await wait_until(
            pilot,
            lambda: (
                screen.shows_current
                and "all 2 ranks" in screen.query_one("#screen-title").render().plain
            ),
            what="the view to show both ranks",
        )
        assert sorted(app.trace_set.loaded()) == [0, 1]
