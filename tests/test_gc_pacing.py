"""The garbage-collection pacer: freezes only in quiet moments, sweeps fully only after a long
quiet spell (or, at the latest, after FULL_AT_LEAST), and the app feeds it input events."""

from __future__ import annotations

import gc

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
        assert gc.get_threshold()[2] == gc_pacing.AUTO_FULL_AFTER
    assert gc.get_threshold()[2] != gc_pacing.AUTO_FULL_AFTER  # restored when the app ends
