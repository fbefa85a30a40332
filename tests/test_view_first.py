"""The view on screen first (issue 27, point 4): work for views no longer shown waits at its
next checkpoint (the registry's door; the first before it reads its frames) while the shown
view wants its numbers, and goes on once it has them; a view visited on the way finishes in
the background, its numbers drawn when it is shown again, and a revisit computes nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
from textual import events
from textual.widgets._footer import FooterKey

from hta_tui.analysis import registry
from hta_tui.analysis.checkpoint import checkpoint, hooked
from hta_tui.app import foreground
from hta_tui.app.access import hta_app
from hta_tui.app.foreground import Foreground, ForegroundMixin
from hta_tui.app.screens.base import AnalysisScreen
from hta_tui.app.screens.detail import KernelDetailScreen
from hta_tui.app.screens.idle import IdleScreen
from hta_tui.app.screens.kernels import KernelsScreen
from hta_tui.app.screens.launch import LaunchScreen
from hta_tui.app.screens.modules import ModulesScreen
from hta_tui.app.screens.overlap import OverlapScreen
from hta_tui.app.screens.sequences import SequencesScreen
from hta_tui.app.screens.steps import StepsScreen
from hta_tui.app.screens.syncs import SyncsScreen
from hta_tui.synth import write_trace_dir
from tests.test_app_support import (
    base_screen,
    make_screen_app,
    press_view,
    screen_shows_current,
    wait_patiently,
    wait_view,
)

#: Six views whose work is held: as many as asyncio's default pool has threads on two cores,
#: which held work used to fill (the shown view's worker then queued behind it).
HELD = (KernelsScreen, IdleScreen, SyncsScreen, OverlapScreen, SequencesScreen, ModulesScreen)
HELD_KEYS = ("K", "I", "Y", "C", "Q", "U")


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The held views' computations ask the registry for a table (the door every view's
    work passes) until the gate opens, then compute as they would. The shown view's
    computation starts only once all of them wait at the door (or says why not), says it
    runs (`computing`) and goes on once told (`go`). Counts each view's computations and
    draws, and the launch view's frame reads."""
    release, computing, go = threading.Event(), threading.Event(), threading.Event()
    started: list[str] = []
    ended: list[str] = []
    views: list[Any] = []  # the held views
    shows: list[str] = []
    reads: list[str] = []
    registry.declare(
        registry.Analysis("held_gate", "a gate", lambda r, o: {"held_gate": pl.DataFrame})
    )
    for cls in HELD:
        real = cls.compute_on

        def held(self: Any, ts: Any, frames: Any, params: Any, real: Any = real) -> Any:
            started.append(type(self).__name__)
            views.append(self)
            try:
                while not release.wait(0.01):
                    registry.table(frames, "held_gate")
            finally:
                ended.append(type(self).__name__)
            return real(self, ts, frames, params)

        monkeypatch.setattr(cls, "compute_on", held)
    real_steps = StepsScreen.compute_on

    def shown(self: Any, ts: Any, frames: Any, params: Any) -> Any:
        started.append("StepsScreen")
        fg = hta_app(self).foreground
        deadline = time.monotonic() + 30
        while not (len(views) == len(HELD) and all(fg.is_holding(v) for v in views)):
            if time.monotonic() > deadline:
                raise AssertionError("the views left behind did not wait for the shown one")
            time.sleep(0.01)
        computing.set()
        go.wait(30)
        return real_steps(self, ts, frames, params)

    monkeypatch.setattr(StepsScreen, "compute_on", shown)
    real_show = KernelsScreen.show
    monkeypatch.setattr(
        KernelsScreen, "show", lambda self, r: shows.append("KernelsScreen") or real_show(self, r)
    )
    real_frames = AnalysisScreen.frames_for.__func__  # type: ignore[attr-defined]

    def frames_for(cls: Any, ts: Any, params: Any) -> Any:
        reads.append(cls.__name__)
        return real_frames(cls, ts, params)

    monkeypatch.setattr(LaunchScreen, "frames_for", classmethod(frames_for))
    yield release, started, ended, (computing, go), shows, reads
    release.set()
    go.set()
    registry.withdraw("held_gate")


async def test_views_left_behind_wait_while_the_shown_one_computes(
    tmp_path: Path, gate: Any
) -> None:
    release, started, ended, (computing, go), shows, reads = gate
    write_trace_dir(tmp_path / "t", ranks=2, steps=3, seed=3)
    app = make_screen_app(tmp_path / "t", tmp_path)
    fg = app.foreground
    async with app.run_test(size=(100, 30)) as pilot:
        try:
            await wait_patiently(pilot, lambda: app.settled)
            launch = await press_view(pilot, "L", LaunchScreen, timeout=60)
            for n, key in enumerate(HELD_KEYS, 1):  # views whose work is held
                await pilot.press(key)
                await wait_patiently(pilot, lambda n=n: len(started) == n, what=f"{key} held")
            await pilot.press("P")  # the view shown now: its numbers, the others waiting
            await wait_patiently(pilot, computing.is_set, what="the shown view computing")
            # its loading indicator redraws 4 times a second, not Textual's 16 (50-95 ms of
            # the UI thread's CPU a second, taken from building and drawing screens)
            cover = base_screen(app).query_one("#body")._cover_widget  # Textual keeps it there
            await wait_patiently(pilot, lambda: bool(cover and cover.auto_refresh), what="drawn")
            assert cover.auto_refresh >= 0.25
            # work for a view left behind that starts now waits before it reads its frames
            read = len(reads)
            launch.set_params(probe=1)
            await wait_patiently(pilot, lambda: fg.is_holding(launch), what="launch held")
            assert len(reads) == read
            go.set()
            steps = await wait_view(pilot, StepsScreen, timeout=60)
            assert steps.result is not None and "failed" not in steps.scope_text
            assert not release.is_set() and not ended  # the others went on, not stopped
            release.set()
            await wait_patiently(pilot, lambda: len(ended) == len(HELD), timeout=30)
            await wait_patiently(
                pilot,
                lambda: not any(w.group == "screen" and not w.is_finished for w in app.workers),
                what="every view's work done",
            )
            await pilot.pause()
            assert len(reads) == read + 1  # launch's frames, once the shown view had its own
            assert not shows  # numbers that landed behind another view cost it no drawing
            # a view visited on the way finished in the background: shown at once
            await pilot.press("K")
            kernels = await wait_view(pilot, KernelsScreen, timeout=60)
            assert kernels.result is not None and base_screen(app) is kernels
            assert started.count("KernelsScreen") == 1 and shows  # drawn now, not computed
            drawn = len(shows)
            await press_view(pilot, "P", StepsScreen, timeout=60)  # a revisit computes nothing
            assert started.count("StepsScreen") == 1 and len(shows) == drawn
        finally:  # a held view never outlives the test, also when it fails
            release.set()
            go.set()


def test_the_door_is_a_checkpoint_and_a_hook_holds_only_inside_its_block() -> None:
    """The registry passes a checkpoint before each table it makes: a hook that raises
    there stops the work between two tables; outside `hooked`, checkpoints do nothing."""
    made: list[str] = []

    def tables(r: Any, o: Any) -> dict[str, Any]:
        return {n: (lambda n=n: made.append(n) or pl.DataFrame()) for n in ("gate_a", "gate_b")}

    class Stop(Exception):
        pass

    passes: list[int] = []

    def hook() -> None:
        passes.append(1)
        if len(passes) > 1:
            raise Stop

    registry.declare(registry.Analysis("gate_a", "two tables", tables, also=("gate_b",)))
    try:
        with hooked(hook), pytest.raises(Stop):
            registry.tables({}, ["gate_a", "gate_b"])
        assert made == ["gate_a"]  # stopped at the door of the second table
        checkpoint()  # no hook any more: nothing happens
        assert registry.tables({}, ["gate_b"])["gate_b"].is_empty()
        assert made == ["gate_a", "gate_b"] and len(passes) == 2
    finally:
        registry.withdraw("gate_a")


def test_no_checkpoint_while_a_lock_is_held(tmp_path: Path) -> None:
    """Work waiting at a checkpoint while holding a lock would hold up the view on screen
    when it needs the lock (the operator tree's, which the Operators and Kernels views
    share): a deadlock, as the shown view is what it waits for."""
    from hta_tui.analysis import op_tree
    from hta_tui.trace.cache import Cache
    from hta_tui.trace.model import open_set

    write_trace_dir(tmp_path / "t", ranks=1, steps=2, seed=4)
    frames = open_set(tmp_path / "t", Cache(tmp_path / "c")).frames()
    seen: list[bool] = []
    with hooked(lambda: seen.append(op_tree._building.locked())):
        registry.tables(frames, ["operator_stats", "kernel_view_by_op"])
    assert seen and not any(seen)


def test_a_shown_view_wanting_numbers_holds_the_others_until_they_land(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From its key, before its worker has even started, the shown view holds the work left
    behind (it would take the cores while the shown view reads its frames); once the
    numbers are drawn, that work goes on. Should the shown view's worker queue for a thread
    held work keeps, the hold lapses (`QUEUED_GRACE`): nothing waits for ever."""
    fg = Foreground()
    shown, behind = object(), object()
    worker: Any = SimpleNamespace(is_cancelled=False)

    def behind_passes() -> threading.Event:
        passed = threading.Event()
        threading.Thread(target=lambda: (fg.give_way(behind, worker)(), passed.set())).start()
        return passed

    fg.show(shown)
    fg.wants(shown, True)
    passed = behind_passes()
    deadline = time.monotonic() + 30
    while not fg.is_holding(behind) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fg.is_holding(behind) and not passed.is_set()
    fg.wants(shown, False)  # its numbers are on the screen
    assert passed.wait(30) and not fg.is_holding(behind)
    monkeypatch.setattr(foreground, "QUEUED_GRACE", 0.2)
    fg.wants(shown, True)  # wanting, its worker never starting
    assert behind_passes().wait(30)


async def test_a_view_whose_key_another_view_key_follows_is_never_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Views' keys typed faster than screens are built (Textual holds the app's keys while
    a new screen mounts): a view whose key another view's key already follows is passed
    over, neither built nor computed (after a walk through every view, building the screens
    left behind took the UI thread ~4 s); what it would have shown still counts (a
    section's digit twice steps to the section's next view)."""
    built: list[str] = []
    real_init = AnalysisScreen.__init__

    def init(self: Any, **kw: Any) -> None:
        built.append(type(self).__name__)
        real_init(self, **kw)

    monkeypatch.setattr(AnalysisScreen, "__init__", init)
    write_trace_dir(tmp_path / "t", ranks=1, steps=2, seed=5)
    app = make_screen_app(tmp_path / "t", tmp_path)
    # the view switched to counts as shown from the switch on: told later (through the
    # app's queue, behind the new screen's mounting) the view left behind went on computing
    # meanwhile and the new view's first checkpoint waited for it (0.2-1 s after every view)
    told: list[bool] = []
    real_switch = type(app).switch_mode

    def switch(self: Any, mode: str) -> Any:
        done = real_switch(self, mode)
        told.append(self.foreground.shown is self.screen)
        return done

    monkeypatch.setattr(type(app), "switch_mode", switch)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_patiently(pilot, lambda: app.settled)

        def typed(*keys: str) -> None:  # all waiting before the app handles the first
            for key in keys:
                app.post_message(events.Key(key, key))

        typed("2", "2")  # Kernels (passed over), then the section's next view
        await wait_view(pilot, KernelDetailScreen, timeout=60)
        assert built == ["KernelDetailScreen"] and app.current_mode == "detail"
        typed("M", "W", "K", "P")
        assert app.foreground.leaving  # the view shown starts no new piece meanwhile
        steps = await wait_view(pilot, StepsScreen, timeout=60)
        assert built == ["KernelDetailScreen", "StepsScreen"] and not app.foreground.leaving
        assert len(told) == 2 and all(told)
        # the footer's keys are made again only when the keys to show change (Textual
        # remakes them on every change of focus: a third of a new screen's UI time)
        keys = list(steps.query(FooterKey))
        assert keys and all(k.has_class("-compact") for k in keys)
        steps.refresh_bindings()
        await pilot.pause()
        assert list(steps.query(FooterKey)) == keys
        # shown again in the same theme, a screen is not restyled whole (Textual restyles
        # it on every resume: 13-15% of the UI thread's time in a walk through the views)
        restyled: list[object] = []
        real_restyle = KernelDetailScreen.update_node_styles

        def counted(self: Any, animate: bool = True) -> None:
            restyled.append(self)
            real_restyle(self, animate)

        monkeypatch.setattr(KernelDetailScreen, "update_node_styles", counted)
        typed("escape")  # back to the view shown before, not to one passed over
        await wait_patiently(pilot, lambda: app.current_mode == "detail")
        await pilot.pause()
        detail = base_screen(app)
        assert isinstance(detail, KernelDetailScreen) and detail not in restyled
        # ... but a theme changed meanwhile still reaches it
        before = detail.styles.background
        typed("P")
        await wait_view(pilot, StepsScreen, timeout=60)
        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
        await pilot.pause()
        typed("escape")
        await wait_patiently(pilot, lambda: app.current_mode == "detail")
        await pilot.pause()
        assert detail.styles.background != before


def test_a_view_shown_without_numbers_holds_the_others_from_its_key() -> None:
    """A view shown without its numbers holds the work left behind from its key on, while
    its screen is still being built and before its computation is asked; one shown with
    its numbers holds nothing."""
    fg = Foreground()
    app: Any = SimpleNamespace(foreground=fg)
    worker: Any = SimpleNamespace(is_cancelled=False)

    def behind_passes(behind: object) -> threading.Event:
        passed = threading.Event()
        threading.Thread(target=lambda: (fg.give_way(behind, worker)(), passed.set())).start()
        return passed

    def screen(numbers: bool) -> Any:  # its first picture drawn at once
        return SimpleNamespace(shows_numbers=numbers, call_after_refresh=lambda f, *a: f(*a))

    ForegroundMixin._screen_changed(app, screen(True))
    assert behind_passes(object()).wait(30)
    shown = screen(False)
    ForegroundMixin._screen_changed(app, shown)
    behind = object()
    passed = behind_passes(behind)
    deadline = time.monotonic() + 30
    while not fg.is_holding(behind) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fg.is_holding(behind) and not passed.is_set()
    fg.wants(shown, False)  # its numbers drawn
    assert passed.wait(30)


async def test_a_view_left_behind_drops_work_of_a_state_no_longer_wanted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A view left behind whose computation is of a state no longer wanted (here a rank
    chosen on another view) has it cancelled: it stops at its next checkpoint rather than
    finishing once shown again (and being computed anew after). Shown again, it computes the
    state wanted then, with the numbers of that rank alone."""
    release = threading.Event()
    runs: list[tuple[int | None, str]] = []
    registry.declare(
        registry.Analysis("drop_gate", "a gate", lambda r, o: {"drop_gate": pl.DataFrame})
    )
    real = KernelsScreen.compute_on

    def gated(self: Any, ts: Any, frames: Any, params: Any) -> Any:
        try:
            while not release.wait(0.01):
                registry.table(frames, "drop_gate")  # the door: a checkpoint each time
        except foreground.Superseded:
            runs.append((params.rank, "dropped"))
            raise
        runs.append((params.rank, "computed"))
        return real(self, ts, frames, params)

    monkeypatch.setattr(KernelsScreen, "compute_on", gated)
    write_trace_dir(tmp_path / "t", ranks=2, steps=2, seed=6)
    app = make_screen_app(tmp_path / "t", tmp_path)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_patiently(pilot, lambda: app.settled)
            await pilot.press("K")  # its computation waits at the door until released
            await wait_patiently(
                pilot,
                lambda: (
                    isinstance(base_screen(app), KernelsScreen)
                    and base_screen(app)._computing is not None
                ),
                what="K asked",
            )
            kernels = base_screen(app)
            await press_view(pilot, "P", StepsScreen, timeout=60)  # K left behind
            app.rank_choice = 1
            await wait_patiently(pilot, lambda: runs == [(None, "dropped")], what="K dropped")
            release.set()
            await pilot.press("K")
            shown = await wait_view(pilot, KernelsScreen, timeout=60)
            assert shown is kernels and runs == [(None, "dropped"), (1, "computed")]
            assert kernels.params.rank == 1
            frames = app.trace_set.frames()
            want = KernelsScreen.compute({1: frames[1]}, kernels.params)  # rank 1's alone
            assert kernels.result["types"].equals(want["types"])
            assert kernels.result["kernels"]["name"].to_list() == want["kernels"]["name"].to_list()
    finally:
        release.set()
        registry.withdraw("drop_gate")


def test_work_left_behind_waits_until_the_shown_view_is_looked_at(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A view shown with its numbers (neither computing nor wanting) still holds the work
    left behind until it has been on the screen `LINGER` seconds: views passed through a
    fraction of a second apart do not let that work go between two keys, where the next
    view's key would find it in the middle of a piece."""
    monkeypatch.setattr(foreground, "LINGER", 60.0, raising=False)
    fg = Foreground()
    behind = object()
    worker: Any = SimpleNamespace(is_cancelled=False)
    fg.show(object())
    passed = threading.Event()
    threading.Thread(
        target=lambda: (fg.give_way(behind, worker)(), passed.set()), daemon=True
    ).start()
    deadline = time.monotonic() + 30
    while not fg.is_holding(behind) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fg.is_holding(behind) and not passed.is_set()
    ahead = threading.Event()  # the read-ahead, work every view needs, does not linger
    threading.Thread(
        target=lambda: (fg.give_way(object(), worker, lingers=False)(), ahead.set()),
        daemon=True,
    ).start()
    assert ahead.wait(30) and not passed.is_set()
    monkeypatch.setattr(foreground, "LINGER", 0.0)  # now looked at long enough
    assert passed.wait(30)


def _passes(fg: Foreground, view: object, *, lingers: bool = True) -> threading.Event:
    """A thread passing `view`'s checkpoint once; set once it has."""
    worker: Any = SimpleNamespace(is_cancelled=False)
    passed = threading.Event()
    threading.Thread(
        target=lambda: (fg.give_way(view, worker, lingers=lingers)(), passed.set()), daemon=True
    ).start()
    return passed


def _until(check: Any) -> bool:
    deadline = time.monotonic() + 30
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(check())


def test_the_shown_view_starts_no_piece_while_a_view_key_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a view's key waits to be handled (Textual hands it over once the screen being
    built is mounted), the view shown is about to be left: its work waits at its next
    checkpoint (a worker just started: before it reads its frames) rather than start a piece
    that would run on beside the next view's (after a walk through every view, 5-7 views
    were in the middle of one at the target's key). The read-ahead goes on meanwhile, as
    the shown view neither computes nor wants numbers."""
    monkeypatch.setattr(foreground, "LINGER", 0.0)
    fg = Foreground()
    shown = object()
    fg.show(shown)
    fg.key_waiting(True)
    passed = _passes(fg, shown)
    assert _until(lambda: fg.is_holding(shown)) and not passed.is_set()
    assert _passes(fg, object(), lingers=False).wait(30)  # the read-ahead
    fg.key_waiting(False)  # handled (here: it did not leave the view)
    assert passed.wait(30)
    with fg.running(shown):  # computing: work left behind and the read-ahead wait
        behind, ahead = object(), object()
        held, read = _passes(fg, behind), _passes(fg, ahead, lingers=False)
        assert _until(lambda: fg.is_holding(behind) and fg.is_holding(ahead))
        assert not held.is_set() and not read.is_set()
    assert read.wait(30) and held.wait(30)
    monkeypatch.setattr(foreground, "KEY_GRACE", 0.2)  # a key never handled holds for a while
    fg.key_waiting(True)
    assert _passes(fg, shown).wait(30)


def test_work_left_behind_goes_on_one_view_at_a_time_the_last_left_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once the view shown has its numbers and lingered, the views left behind go on one at
    a time, the one left last first (the user comes back to it first): all at once, the next
    key found each of them in the middle of a piece. One shown again computes as the view
    shown: the one left behind waits for it, then goes on."""
    monkeypatch.setattr(foreground, "LINGER", 0.0)
    fg = Foreground()
    first, second, third, shown = object(), object(), object(), object()
    for view in (first, second, third, shown):
        fg.show(view)
    went: list[object] = []
    done = {v: threading.Event() for v in (first, second, third)}
    worker: Any = SimpleNamespace(is_cancelled=False)

    def work(view: object) -> None:
        with fg.running(view):
            fg.give_way(view, worker)()
            went.append(view)
            done[view].wait(30)

    with fg.running(shown):  # the shown view computes: all three wait
        for view in (first, second, third):
            threading.Thread(target=work, args=(view,), daemon=True).start()
        assert _until(lambda: all(fg.is_holding(v) for v in (first, second, third)))
    assert _until(lambda: went == [third])
    time.sleep(0.2)  # the others still wait
    assert went == [third] and fg.is_holding(first) and fg.is_holding(second)
    done[third].set()  # its work ended
    assert _until(lambda: went == [third, second])
    fg.show(second)  # shown again, computing: the one left behind waits for it
    time.sleep(0.2)
    assert went == [third, second] and fg.is_holding(first)
    done[second].set()
    assert _until(lambda: went == [third, second, first])
    for event in done.values():
        event.set()


def test_the_read_ahead_goes_on_while_a_view_key_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through a walk of keys the read-ahead goes on while the next view's key waits (the
    view shown is about to be left), even while that view wants numbers or its work waits
    at a checkpoint for the key; it waits while the view shown computes or, no key waiting,
    wants its numbers. Held through the walk, it left the view at its end to make the
    ranks' views and operator trees itself (issue 27: Operators 1.5 s, Launch 1.1 s after
    every other view)."""
    monkeypatch.setattr(foreground, "LINGER", 60.0, raising=False)
    fg = Foreground()
    shown = object()
    fg.show(shown)
    fg.wants(shown, True)  # its screen being built: wants numbers, nothing runs yet
    waiting = object()
    held = _passes(fg, waiting, lingers=False)  # the read-ahead
    assert _until(lambda: fg.is_holding(waiting)) and not held.is_set()
    fg.key_waiting(True)  # the next view's key
    assert held.wait(30)
    assert not _passes(fg, object()).wait(0.2)  # work left behind still waits
    with fg.running(shown):  # its work waits at its checkpoint for the key
        mine = _passes(fg, shown)
        assert _until(lambda: fg.is_holding(shown)) and not mine.is_set()
        assert _passes(fg, object(), lingers=False).wait(30)
        fg.key_waiting(False)  # handled (here: it stays): it computes, the read-ahead waits
        assert mine.wait(30)
        ahead = object()
        read = _passes(fg, ahead, lingers=False)
        assert _until(lambda: fg.is_holding(ahead)) and not read.is_set()
    fg.wants(shown, False)
    assert read.wait(30)


def test_every_background_checkpoint_waits_until_a_screen_shown_is_drawn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From a screen's switch to its first picture every background thread waits at its
    checkpoint: the view's own work, the views left behind, the read-ahead and the findings
    (`while_drawing`); only that screen's picture lets them go, and a picture never drawn
    holds them `DRAW_GRACE` at most. While the next view's key waits the read-ahead goes on
    (a walk's: held while each screen is drawn, it left the walk's target its work)."""
    monkeypatch.setattr(foreground, "LINGER", 0.0)
    fg = Foreground()
    shown, other = object(), object()
    fg.show(shown)
    assert _passes(fg, object(), lingers=False).wait(30)  # nothing drawn: nothing waits
    fg.drawing(shown, True)
    ahead, behind, mine = object(), object(), object()
    read, held = _passes(fg, ahead, lingers=False), _passes(fg, behind)
    own = _passes(fg, shown)
    findings = threading.Event()
    threading.Thread(target=lambda: (fg.while_drawing()(), findings.set()), daemon=True).start()
    assert _until(lambda: fg.is_holding(ahead) and fg.is_holding(behind) and fg.is_holding(shown))
    fg.drawing(other, False)  # another screen's picture: still held
    time.sleep(0.1)
    assert not (read.is_set() or held.is_set() or own.is_set() or findings.is_set())
    fg.key_waiting(True)  # a walk: the read-ahead goes on, the rest still waits
    assert read.wait(30)
    assert not (held.is_set() or own.is_set() or findings.is_set())
    fg.key_waiting(False)
    fg.drawing(shown, False)
    assert held.wait(30) and own.wait(30) and findings.wait(30)
    monkeypatch.setattr(foreground, "DRAW_GRACE", 0.2)
    fg.drawing(shown, True)  # never drawn (the screen removed first)
    assert _passes(fg, mine, lingers=False).wait(30)


def test_in_background_runs_its_function_under_the_hook_given() -> None:
    """The findings' thread passes its checkpoints through the hook it was given (a hook
    is a thread's own: set in the caller's thread it would never be seen)."""
    from hta_tui.app.findings_data import in_background

    passed: list[str] = []

    def work() -> int:
        checkpoint()
        return threading.get_ident()

    ident = in_background(work, checkpoint=lambda: passed.append("hook"))
    assert passed == ["hook"] and ident != threading.get_ident()
    assert in_background(work) != threading.get_ident() and passed == ["hook"]


async def test_a_key_s_screen_is_drawn_before_any_background_thread_goes_on(
    tmp_path: Path,
) -> None:
    """Pressing a view's key: from the switch until the new screen's first refresh the
    read-ahead (here on a view revisited, which wants no numbers and so held nothing before)
    and the findings wait at their checkpoints; once it is drawn they go on."""
    write_trace_dir(tmp_path / "t", ranks=1, steps=2, seed=5)
    app = make_screen_app(tmp_path / "t", tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_patiently(pilot, lambda: app.settled)
        await press_view(pilot, "K", KernelsScreen, timeout=60)
        await pilot.press("O")
        await wait_patiently(pilot, lambda: app.current_mode == "overview")
        fg = app.foreground
        ahead = object()
        seen: dict[str, Any] = {}

        def switched(screen: Any) -> None:  # inside the switch: nothing drawn yet
            if seen:
                return
            seen["read"] = _passes(fg, ahead, lingers=False)
            seen["findings"] = findings = threading.Event()
            threading.Thread(
                target=lambda: (fg.while_drawing()(), findings.set()), daemon=True
            ).start()
            seen["held"] = _until(lambda: fg.is_holding(ahead))  # the UI thread blocked here
            seen["early"] = seen["read"].is_set() or findings.is_set()

        app.screen_change_signal.subscribe(app, switched, immediate=True)
        await pilot.press("K")
        await wait_patiently(pilot, lambda: bool(seen) and seen["read"].is_set())
        assert seen["held"] and not seen["early"]
        assert screen_shows_current(app, base_screen(app))  # revisited: wanted no numbers
        await wait_patiently(pilot, seen["findings"].is_set)
        assert not fg.being_drawn
