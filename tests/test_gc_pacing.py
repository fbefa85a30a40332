"""The garbage-collection pacer: collects and freezes only in quiet moments, sweeps fully only
after a long quiet spell, and the app feeds it input events."""

from __future__ import annotations

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


def test_quiet_moment_collects_new_objects_and_freezes_them() -> None:
    pacer, clock, log = pacer_with_log()
    pacer.activity()
    clock.now += gc_pacing.QUIET
    pacer.tick()
    assert log == ["collect", "freeze"]
    pacer.tick()  # nothing new since: no second pass
    assert log == ["collect", "freeze"]
    clock.now += gc_pacing.REFREEZE  # loading makes objects without keys
    pacer.tick()
    assert log == ["collect", "freeze"] * 2


def test_full_sweep_only_after_a_long_quiet_spell_and_not_too_often() -> None:
    pacer, clock, log = pacer_with_log()
    pacer.activity()
    clock.now += gc_pacing.LONG_QUIET
    pacer.tick()
    assert log == ["unfreeze", "collect", "freeze"]
    log.clear()
    pacer.activity()
    clock.now += gc_pacing.LONG_QUIET
    pacer.tick()  # quiet again, but the last sweep is recent
    assert log == ["collect", "freeze"]
    log.clear()
    clock.now += gc_pacing.FULL_EVERY
    pacer.tick()
    assert log == ["unfreeze", "collect", "freeze"]


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
