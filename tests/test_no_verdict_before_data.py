"""Issue 24, point 4: no verdict before the data. While no rank has loaded, a view says that it
is loading (never "No GPU: a CPU-only trace" or "No steps" about data it has not seen), and
an empty watched folder says "no trace files yet" on every view, not "no ProfilerStep"."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from hta_tui.app.screens.gpu_metrics import GpuMetricsScreen
from hta_tui.app.screens.step_time import StepTimeScreen
from hta_tui.app.widgets.title_line import TitleLine
from tests.app_walk import Walk, run_scenarios
from tests.test_app_support import hold_loads, make_screen_app, settle, wait_until, write_rank

SIZE = (80, 24)

#: The verdicts a view may give only about data it has seen.
VERDICTS = ("No GPU", "CPU-only", "No steps", "no ProfilerStep", "No GPU kernels")


def _seen(screen: Any) -> str:
    """Every line the view shows the user: title, waiting line and the visible body text."""
    title = screen.query_one("#screen-title", TitleLine).text
    texts = [title]
    waiting = screen.query_one("#waiting", Static)
    if waiting.display:
        texts.append(str(waiting.render()))
    if screen.query_one("#body").display:
        texts += [str(s.render()) for s in screen.query_one("#body").query(Static) if s.display]
    return "\n".join(texts)


async def _open(pilot: Any, key: str, cls: type) -> Any:
    await pilot.press(key)
    await wait_until(
        pilot,
        lambda: isinstance(pilot.app.screen, cls) and pilot.app.screen.result is not None,
        60.0,
        cls.__name__,
    )
    await pilot.pause()
    return pilot.app.screen


async def test_an_empty_watched_folder_says_no_trace_files_yet(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    root.mkdir()
    app = make_screen_app(root, tmp_path, watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.watcher_state != "off", 30.0, "the watcher")
        await settle(pilot, 30.0)
        for key, cls in (("B", StepTimeScreen), ("V", GpuMetricsScreen)):
            screen = await _open(pilot, key, cls)
            seen = _seen(screen)
            assert "No trace files in traces/ yet; watching for new ones." in seen, seen
            assert not any(v in seen for v in VERDICTS), seen


def test_a_view_says_loading_until_a_rank_lands(held_walk: Walk) -> None:
    """A file listed but not loaded yet (a cold open's first seconds): the views say they
    are loading; once a rank lands, its numbers replace the line."""
    seen = held_walk["views"]
    for key in ("B", "V"):
        assert "Loading 1 of 1 files" in seen[key], seen[key]
        assert not any(v in seen[key] for v in VERDICTS), seen[key]
    # the file loads: the numbers replace the waiting line
    assert not seen["waiting_after"]
    assert seen["body_after"]
    assert "NVIDIA" in seen["seen_after"] or "util" in seen["columns_after"]


async def _waiting(pilot: Any) -> None:
    """A file listed, none loaded yet (its load held back): the step-time view's loading
    line, with the status bar counting the same file as loading."""
    screen = await _open(pilot, "B", StepTimeScreen)
    await wait_until(pilot, lambda: "Loading 1 of 1" in _seen(screen), 30.0, "the loading line")
    await pilot.pause()


def test_snapshot_loading(snap_compare, tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "traces"
    root.mkdir()
    write_rank(root, 0)
    gate = hold_loads(monkeypatch)  # the file "takes long": listed, not loaded
    app = make_screen_app(root, tmp_path)
    try:
        assert snap_compare(app, terminal_size=SIZE, run_before=_waiting)
    finally:
        gate.set()


async def _empty_and_watched(pilot: Any) -> None:
    """An empty watched folder: the step-time view's `no trace files yet` line."""
    app = pilot.app
    await wait_until(pilot, lambda: app.watcher_state != "off", 30.0, "the watcher")
    await settle(pilot, 30.0)
    screen = await _open(pilot, "B", StepTimeScreen)
    await wait_until(pilot, lambda: "No trace files" in _seen(screen), 30.0, "the empty line")
    await pilot.pause()


def test_snapshot_empty_folder(snap_compare, tmp_path: Path) -> None:
    root = tmp_path / "traces"
    root.mkdir()
    app = make_screen_app(root, tmp_path, watch=True, poll=True)
    assert snap_compare(app, terminal_size=SIZE, run_before=_empty_and_watched)


async def _one_of_two(pilot: Any) -> None:
    """One rank loaded, a second file listed but not loaded (its load held back): the
    numbers of the one, and the title says the rest is still loading."""
    screen = await _open(pilot, "B", StepTimeScreen)
    # the title can say so before the view's numbers of the landed rank are drawn
    await wait_until(
        pilot,
        lambda: "loading 1 of 2 files" in _seen(screen) and screen.shows_current,
        30.0,
        "the title and the landed rank's numbers",
    )
    await pilot.pause()


def test_snapshot_still_loading(snap_compare, tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "traces"
    write_rank(root, 0, world=2)
    held_back = write_rank(root, 1, world=2)
    gate = hold_loads(monkeypatch, held_back)  # rank 1 "takes long": listed, not loaded
    app = make_screen_app(root, tmp_path)
    try:
        assert snap_compare(app, terminal_size=SIZE, run_before=_one_of_two)
    finally:
        gate.set()


async def _overview_held(pilot: Any, seen: dict[str, Any]) -> None:
    """test_the_overview_gives_no_step_verdict_before_a_rank's first look (the load held)."""
    from hta_tui.app.screens.overview import OverviewScreen

    app = pilot.app
    await wait_until(
        pilot, lambda: app.overview_data is not None and bool(app.overview_data.rows), 30.0
    )
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, OverviewScreen)
    step_box = screen.query_one("#overview-step-box")
    seen["text"] = "\n".join(
        [
            str(step_box.border_title),
            str(screen.query_one("#overview-step-summary", Static).render()),
            str(screen.query_one("#temporal-box").border_title),
        ]
    )


async def _views_held(pilot: Any, seen: dict[str, Any]) -> None:
    """test_a_view_says_loading_until_a_rank_lands' steps: the views while the load is held,
    then the gate opens and the rank lands."""
    app = pilot.app
    for key, cls in (("B", StepTimeScreen), ("V", GpuMetricsScreen)):
        screen = await _open(pilot, key, cls)
        await wait_until(
            pilot, lambda s=screen: "Loading 1 of 1 files" in _seen(s), 30.0, "loading"
        )
        seen[key] = _seen(screen)
    app.walk_gate.set()  # the file loads: the numbers replace the waiting line
    screen = app.screen
    await wait_until(
        pilot,
        lambda: bool(app.trace_set.loaded()) and screen.shows_current,
        60.0,
        "the loaded rank",
    )
    await pilot.pause()
    seen["waiting_after"] = screen.query_one("#waiting", Static).display
    seen["body_after"] = screen.query_one("#body").display
    seen["seen_after"] = _seen(screen)
    seen["columns_after"] = str(screen.result["table"].columns)


async def _overview_landed(pilot: Any, seen: dict[str, Any]) -> None:
    """The overview once the rank has landed."""
    from hta_tui.app.screens.overview import OverviewScreen

    app = pilot.app
    await pilot.press("O")  # the overview's letter
    await wait_until(pilot, lambda: isinstance(app.screen, OverviewScreen), 30.0, "overview")
    await wait_until(pilot, lambda: bool(app.overview_data.temporal), 60.0, "the rank")
    await pilot.pause()
    table = app.screen.query_one("#temporal-table")
    seen["labels"] = [str(c.label) for c in table.columns.values()]


async def _held_walk(tmp_path: Path) -> Walk:
    walk = Walk()
    root = tmp_path / "traces"
    root.mkdir()
    write_rank(root, 0)
    with pytest.MonkeyPatch.context() as mp:
        gate = hold_loads(mp)  # the file "takes long": listed, not loaded
        app = make_screen_app(root, tmp_path, findings=False)
        app.walk_gate = gate  # type: ignore[attr-defined]
        try:
            async with app.run_test(size=SIZE) as pilot:
                await run_scenarios(
                    pilot,
                    walk,
                    [
                        ("overview", _overview_held),
                        ("views", _views_held),
                        ("overview landed", _overview_landed),
                    ],
                )
        finally:
            gate.set()
    return walk


@pytest.fixture(scope="module")
def held_walk(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app whose only file's load is held back, for the overview's and the views' tests:
    the overview, then the views, while it is held; then it lands."""
    return asyncio.run(_held_walk(tmp_path_factory.mktemp("held")))


def test_the_overview_gives_no_step_verdict_before_a_rank(held_walk: Walk) -> None:
    """A file listed, its load held back: the overview's step-time box said `No steps: no
    ProfilerStep and no host ops in these ranks.` and the temporal breakdown's title `whole
    trace (no ProfilerStep)` about a file not read yet. Once the rank lands, the temporal
    table's time column says it is the GPU span (HTA's kernel time), not the step above."""
    seen = held_walk["overview"]["text"]
    assert "waiting for the first rank" in seen, seen
    assert not any(v in seen for v in VERDICTS), seen
    labels = held_walk["overview landed"]["labels"]
    assert "GPU span" in labels and "time" not in labels
