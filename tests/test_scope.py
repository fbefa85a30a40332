"""Every screen says what its numbers cover (issue 17, point 2): the ranks, the span, the
steps, and the step HTA's rule leaves out, with `H` to include it on every screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from textual.widgets import Static

from hta_tui.analysis import kernels, steps
from hta_tui.analysis.scope import describe_steps, every_step_frames, step_scope
from hta_tui.app.app import HtaApp
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set
from tests.test_app_support import app_idle as screen_ready
from tests.test_app_support import wait_patiently as wait_until

STEPS = 4  # what the generator is told to write: ProfilerStep#2 .. #5 on every rank (#1 is
# the warm-up step the profiler schedule skips)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("scope") / "traces"
    write_trace_dir(d, ranks=2, steps=STEPS, seed=9)
    return d


@pytest.fixture
def frames(traces: Path, tmp_path: Path) -> dict[int, pl.DataFrame]:
    return open_set(traces, Cache(tmp_path / "c")).frames()


def test_the_last_step_is_left_out_and_shift_h_brings_it_back(frames) -> None:
    scope = step_scope(frames)
    assert scope.steps == (2, 3, 4, 5) and scope.kept == (2, 3, 4) and scope.left_out == (5,)
    assert describe_steps(scope, every_step=False) == "steps 2-4, 5 left out as HTA (H)"
    every = every_step_frames(frames)
    assert step_scope(every).kept == (2, 3, 4, 5)
    assert describe_steps(step_scope(every), every_step=True) == "steps 2-5, the last included (H)"
    # the numbers follow: step 5's iterations and kernels are counted
    assert steps.iterations(every).group_by("rank").len()["len"].to_list() == [STEPS] * 2
    hta, _ = kernels.gpu_kernel_breakdown(frames)
    whole, _ = kernels.gpu_kernel_breakdown(every)
    assert whole["sum"].sum() > hta["sum"].sum()
    # the original frames keep HTA's rule
    assert step_scope(frames).kept == (2, 3, 4)


def _title(app: HtaApp) -> str:
    return str(app.screen.query_one("#screen-title", Static).render())


async def test_shift_h_on_the_overview_counts_the_last_step(
    traces: Path, frames: dict[int, pl.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overview's temporal breakdown follows `H` too: its title says the last step is
    included, and its times are HTA's breakdown of the frames with the filter off (read
    from the frames, not the per-file summaries the overview uses). Until the overview `H`
    asked for is drawn the app is not settled, though the one on screen has the same
    generation (a snapshot taken then caught its table being refilled)."""
    from hta_tui.analysis.temporal import temporal_breakdown
    from hta_tui.app.refresh import RefreshMixin

    held: list[Any] = []
    apply = RefreshMixin._on_overview_ready

    def hold_when_asked(self: HtaApp, msg: Any) -> None:
        if held == ["hold"]:
            held[0] = msg
            return
        apply(self, msg)

    monkeypatch.setattr(RefreshMixin, "_on_overview_ready", hold_when_asked)
    app = HtaApp(traces, cache=Cache(tmp_path / "c"), watch=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.settled)
        held.append("hold")
        app.every_step = not app.every_step  # computed, its overview not drawn yet
        overview = ("overview",)
        await wait_until(
            pilot,
            lambda: (
                held != ["hold"]
                and not any(w.group in overview and not w.is_finished for w in app.workers)
            ),
        )
        assert not app.settled
        apply(app, held.pop())
        app.every_step = not app.every_step
        await wait_until(pilot, lambda: app.settled)
        box = app.screen.query_one("#temporal-box")
        assert box.border_title == "Temporal breakdown · steps 2-4, 5 left out as HTA (H)"
        # the step time above it keeps the last step, as the plugin does, and says so
        step_box = app.screen.query_one("#overview-step-box")
        assert step_box.border_title == (
            "Step time · steps 2-5, as the TensorBoard plugin · B: per rank and step"
        )
        # every view's own scope, and `H` holding across views: test_every_view.py
        before = app.overview_data.temporal
        await pilot.press("H")
        await wait_until(pilot, lambda: app.settled and "the last included" in box.border_title)
        assert box.border_title == "Temporal breakdown · steps 2-5, the last included (H)"
        whole = temporal_breakdown(every_step_frames(frames)).sort("rank")
        shown = app.overview_data.temporal
        assert shown != before
        assert [r[0] for r in shown] == whole["rank"].to_list()
        for (_, _, values), want in zip(shown, whole.iter_rows(named=True), strict=True):
            expected = [want[f"{k}_time(us)"] for k in ("compute", "non_compute", "idle")]
            assert values == pytest.approx(expected, abs=1e-3)
        await pilot.press("K")  # the choice holds on the other screens
        await wait_until(pilot, lambda: screen_ready(app) and "the last included" in _title(app))
        await pilot.press("H", "O")
        await wait_until(pilot, lambda: app.settled and "left out as HTA (H)" in box.border_title)


async def test_memory_without_memory_events_says_so(traces: Path, tmp_path: Path) -> None:
    """No memory events written: the memory view says so instead of a scope (every other
    view's scope: test_every_view.py)."""
    app = HtaApp(traces, cache=Cache(tmp_path / "c"), watch=False)
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_until(pilot, lambda: app.settled)
        await app.switch_mode("memory")
        want = "no rank has memory events"
        await wait_until(pilot, lambda: screen_ready(app) and want in _title(app))
        assert "left out as HTA" not in _title(app)
