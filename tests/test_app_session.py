"""The app over the session, with Pilot: changes are pushed to the screens, nothing polls."""

from __future__ import annotations

import time
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


async def test_wake_ups_soon_after_an_apply_wait_for_one_deferred_apply(
    tmp_path: Path, monkeypatch
) -> None:
    """Files landing one by one are applied in batches: a wake-up soon after an apply (here
    the clock stands still) leaves the queue for one timer, which takes all of it."""
    from hta_tui.app import loading
    from hta_tui.app.loading import SessionReady

    root = tmp_path / "traces"
    write_rank(root, 0, world=3)
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        applied: list[int] = []
        real = app.session.apply_pending

        def counted(*args: Any) -> list[Any]:  # the app's limit per turn passed on
            changes = real(*args)
            if changes:  # an apply that found something queued
                applied.append(len(changes))
            return changes

        monkeypatch.setattr(app.session, "apply_pending", counted)
        monkeypatch.setattr(loading, "monotonic", lambda: 1000.0)
        app._last_apply = 1000.0  # an apply just happened
        app.session.reload([write_rank(root, 1, world=3), write_rank(root, 2, world=3)])
        while app.session._busy:  # the event loop is held: every wake-up waits in the queue
            time.sleep(0.01)
        app._on_session_ready(SessionReady())
        assert applied == [] and not app.session.idle  # queued, not applied yet
        await settle(pilot)
        assert applied == [1]
        assert sorted(app.trace_set.loaded()) == [0, 1, 2]


def test_the_overview_waits_its_turn_while_files_land(monkeypatch: Any) -> None:
    """While files land, the next overview waits OVERVIEW_SPACING times the last one's
    duration (at least OVERVIEW_GAP) after the last started: back to back, at 1,000 small
    files, they kept a core from the parser workers. Once every file is in: no wait."""
    from types import SimpleNamespace

    from hta_tui.app import refresh
    from hta_tui.app.widgets.status import StatusInfo

    monkeypatch.setattr(refresh.time, "monotonic", lambda: 100.0)  # a clock that stands
    app = SimpleNamespace(
        status_info=StatusInfo(root="r", total=1000, done=400),
        _overview_started=99.0,
        _overview_cost=0.5,
    )
    wait = refresh.RefreshMixin._overview_wait
    assert wait(app) == refresh.OVERVIEW_SPACING * 0.5 - 1.0  # type: ignore[arg-type]
    app._overview_cost = 0.01  # a cheap one still waits the gap
    app._overview_started = 100.0
    assert wait(app) == refresh.OVERVIEW_GAP  # type: ignore[arg-type]
    app.status_info = StatusInfo(root="r", total=1000, done=1000)  # the last file's: at once
    assert wait(app) == 0.0  # type: ignore[arg-type]
