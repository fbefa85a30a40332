"""Issue 31 point 4 in the app: the Comm/comp overlap view flags all-gathers and
reduce-scatters that serialise on one stream, and `v` lists the collectives per stream,
step and layer with what computation hides, at 80x24."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import Static

from hta_tui.app.screens.overlap import LAYERS_TITLE, OverlapScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import fsdp
from hta_tui.synth.files import write_trace
from tests.test_app_support import make_screen_app, open_view, screen_shows_current, wait_until

SIZE = (80, 24)


def _root(tmp_path: Path, *, separate: bool) -> Path:
    root = tmp_path / "traces"
    root.mkdir()
    write_trace(fsdp.make_fsdp(separate_streams=separate), root / "rank-0.json")
    return root


def _text(screen: Any, selector: str) -> str:
    return " ".join(str(screen.query_one(selector, Static).render()).split())


async def _layers(pilot: Any) -> OverlapScreen:
    screen = await open_view(pilot, "C", OverlapScreen)
    await pilot.press("v")
    app = pilot.app
    await wait_until(
        pilot,
        lambda: screen.params.get("layers") and screen_shows_current(app, screen),
        20,
        "the layers table",
    )
    await pilot.pause()
    return screen


async def test_overlap_view_flags_serialised_streams_and_lists_layers(tmp_path: Path) -> None:
    app = make_screen_app(_root(tmp_path, separate=False), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _layers(pilot)
        summary = _text(screen, "#overlap-summary")
        assert f"Rank 0: all-gathers and reduce-scatters serialise on stream {fsdp.AG_STREAM}" in (
            summary
        )
        assert _text(screen, "#comm-title") == LAYERS_TITLE
        frame = screen.query_one("#comm-kernels", FrameTable).frame
        assert frame is not None
        assert frame.height == 2 * 2 * 3  # kinds x steps x layers
        exposed = frame.filter(frame["exposed (us)"] > 0)
        assert set(exposed["layer"]) == {"Layer_0"}


async def test_overlap_view_says_nothing_of_separate_streams(tmp_path: Path) -> None:
    app = make_screen_app(_root(tmp_path, separate=True), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_view(pilot, "C", OverlapScreen)
        assert "serialise" not in _text(screen, "#overlap-summary")


def test_snapshot_overlap_layers(snap_compare, tmp_path: Path) -> None:
    app = make_screen_app(_root(tmp_path, separate=False), tmp_path)
    assert snap_compare(app, terminal_size=SIZE, run_before=_layers)


def test_overlap_numbers_come_before_the_serialised_streams_flag(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Issue 27: the view's numbers do not wait for `collective_streams` (it nests every
    launch in its host ranges, as much CPU as the rest of the view on a real trace); its
    flag comes after them (`LATER`), the same flag."""
    from hta_tui.analysis import registry
    from hta_tui.trace.parse import parse_bytes, read_bytes

    path = _root(tmp_path, separate=False) / "rank-0.json"
    frames = {0: parse_bytes(read_bytes(path)).frames["events"]}
    asked: list[str] = []
    real = registry.table
    monkeypatch.setattr(
        registry, "table", lambda f, name, *a, **k: asked.append(name) or real(f, name, *a, **k)
    )
    result = OverlapScreen.compute(frames, {"layers": False})
    assert "collective_streams" not in asked and result["overlap"].height == 1
    assert OverlapScreen.LATER
    flagged = OverlapScreen.later(frames)
    assert flagged["rank"].to_list() == [0]
    assert flagged["verdict"].item().startswith("all-gathers and reduce-scatters serialise")
