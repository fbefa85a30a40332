"""The garbage-collection pacer: freezes only in quiet moments, sweeps fully only after a long
quiet spell (or, at the latest, after FULL_AT_LEAST), and the app feeds it input events."""

from __future__ import annotations

import gc
import threading

from hta_tui.app import gc_pacing
from hta_tui.app.gc_pacing import GcPacer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pacer_with_log() -> tuple[GcPacer, Clock, list[str]]:
    clock, log = Clock(), []
    pacer = GcPacer(
        clock=clock,
        collect=lambda: log.append("collect") or 0,
        freeze=lambda: log.append("freeze"),
        unfreeze=lambda: log.append("unfreeze"),
    )
    return pacer, clock, log


def test_no_collection_while_keys_arrive() -> None:
    pacer, clock, log = pacer_with_log()
    pacer.activity()
    clock.now += gc_pacing.QUIET / 2
    pacer.tick()
    assert log == []


def test_quiet_moment_freezes_new_objects_without_collecting() -> None:
    pacer, clock, log = pacer_with_log()
    pacer.activity()
    clock.now += gc_pacing.QUIET
    pacer.tick()
    assert log == ["freeze"]
    pacer.tick()  # nothing new since: no second pass
    assert log == ["freeze"]
    clock.now += gc_pacing.REFREEZE  # loading makes objects without keys
    pacer.tick()
    assert log == ["freeze"] * 2


def test_full_sweep_only_after_a_long_quiet_spell_and_not_too_often() -> None:
    pacer, clock, log = pacer_with_log()
    clock.now += gc_pacing.FULL_EVERY
    pacer.activity()
    clock.now += gc_pacing.LONG_QUIET
    pacer.tick()
    assert log == ["unfreeze", "collect", "freeze"]
    log.clear()
    pacer.activity()
    clock.now += gc_pacing.LONG_QUIET
    pacer.tick()  # quiet again, but the last sweep is recent
    assert log == ["freeze"]
    log.clear()
    clock.now += gc_pacing.FULL_EVERY
    pacer.tick()
    assert log == ["unfreeze", "collect", "freeze"]


def test_a_full_sweep_comes_at_the_latest_after_full_at_least() -> None:
    """A user who never pauses for LONG_QUIET still gets frozen garbage reclaimed."""
    pacer, clock, log = pacer_with_log()
    while clock.now < 1000.0 + gc_pacing.FULL_AT_LEAST - 1:
        pacer.activity()
        clock.now += gc_pacing.QUIET
        pacer.tick()
    assert "collect" not in log
    clock.now += 1
    pacer.activity()
    clock.now += gc_pacing.QUIET
    pacer.tick()
    assert log[-3:] == ["unfreeze", "collect", "freeze"]


def test_no_full_sweep_while_work_is_pending() -> None:
    """A sweep cannot be split: while a file loads or a view computes (a result about to land,
    the moment keys come) it waits; what is new is still frozen meanwhile."""
    pacer, clock, log = pacer_with_log()
    pending = [True]
    pacer.idle = lambda: not pending[0]
    clock.now += gc_pacing.FULL_EVERY
    pacer.tick()
    assert log == ["freeze"]
    clock.now += gc_pacing.LONG_QUIET
    pacer.tick()
    assert "collect" not in log
    pending[0] = False
    log.clear()
    pacer.tick()  # the work just ended: its result is what keys come for
    assert "collect" not in log
    clock.now += gc_pacing.LONG_QUIET / 2
    pacer.tick()
    assert "collect" not in log
    clock.now += gc_pacing.LONG_QUIET / 2
    pacer.tick()
    assert log[-3:] == ["unfreeze", "collect", "freeze"]


def test_a_slow_sweep_waits_for_the_user_to_be_away() -> None:
    """Once a sweep took longer than SLOW_SWEEP (thousands of ranks' objects), the next comes
    neither after a short quiet spell nor after LONG_QUIET, only after AWAY without input."""
    pacer, clock, log = pacer_with_log()

    def slow_collect() -> int:
        log.append("collect")
        clock.now += gc_pacing.SLOW_SWEEP * 3
        return 0

    pacer.collect = slow_collect
    clock.now += gc_pacing.FULL_AT_LEAST
    pacer.tick()
    assert log == ["unfreeze", "collect", "freeze"]
    assert pacer.last_sweep > gc_pacing.SLOW_SWEEP
    # an active user: short quiet moments for longer than FULL_AT_LEAST, then a long one
    start = clock.now
    while clock.now < start + gc_pacing.FULL_AT_LEAST + gc_pacing.FULL_EVERY:
        pacer.activity()
        clock.now += gc_pacing.QUIET
        pacer.tick()
    clock.now += gc_pacing.LONG_QUIET
    pacer.tick()
    assert log.count("collect") == 1
    clock.now += gc_pacing.AWAY - gc_pacing.LONG_QUIET
    pacer.tick()
    assert log.count("collect") == 2


def test_start_leaves_full_collections_to_the_pacer_until_stop() -> None:
    before = gc.get_threshold()
    pacer = GcPacer()
    pacer.start()
    try:
        assert gc.get_threshold()[:2] == before[:2]
        assert gc.get_threshold()[2] == gc_pacing.AUTO_FULL_AFTER
    finally:
        pacer.stop()
    assert gc.get_threshold() == before


async def test_app_reports_keys_to_the_pacer(tmp_path) -> None:
    from hta_tui.app.app import HtaApp
    from hta_tui.synth import write_trace_dir
    from hta_tui.trace.cache import Cache

    write_trace_dir(tmp_path / "traces", ranks=1, steps=1, seed=0)
    app = HtaApp(tmp_path / "traces", cache=Cache(tmp_path / "cache"), watch=False)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(600):
            if app.settled:
                break
            await pilot.pause(0.05)
        before = app.gc_pacer.last_input
        await pilot.press("j")
        assert app.gc_pacer.last_input > before
        # the pacer's sweep waits while a worker computes; what the key started may run a
        # while on a loaded machine, so wait for it to end rather than for a fixed time
        for _ in range(400):
            if app.gc_pacer.idle():
                break
            await pilot.pause(0.05)
        assert app.gc_pacer.idle()
        release = threading.Event()
        worker = app.run_worker(release.wait, thread=True)
        assert not app.gc_pacer.idle()
        release.set()
        await worker.wait()
        assert app.gc_pacer.idle()
        assert gc.get_threshold()[2] == gc_pacing.AUTO_FULL_AFTER
    assert gc.get_threshold()[2] != gc_pacing.AUTO_FULL_AFTER  # restored when the app ends
