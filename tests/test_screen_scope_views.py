"""Issue 17 (points 2, 6, 7): a title's parts are packed whole at any width, and a one-rank
trace names its rank. On every view (each title's ranks, steps and span whole at 80x24, why a
one-rank view shows that rank, every `x: ...` hint a key of the view, the rank picked with `r`
holding, escape clearing a filter first): the one walk over every view, test_every_view.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hta_tui.app.screens.base import AnalysisScreen
from hta_tui.app.screens.registry import SCREENS
from hta_tui.app.widgets.title_line import SEP, TitleLine, pack
from hta_tui.synth import make_trace, write_trace
from tests.test_app_support import make_screen_app, screen_shows_current, settle, wait_until

SIZE = (80, 24)
#: The steps part of a title where HTA leaves the last step out.
HTA = "steps 2-4, 5 left out as HTA (H)"


def views() -> list[Any]:
    return [e for e in SCREENS if issubclass(e.load(), AnalysisScreen)]


async def visit(pilot: Any, entry: Any) -> AnalysisScreen:
    app = pilot.app
    await pilot.press(entry.key)
    cls = entry.load()

    def ready() -> bool:
        return isinstance(app.screen, cls) and screen_shows_current(app, app.screen)

    await wait_until(pilot, ready, 60, entry.mode)
    await pilot.pause()
    return app.screen


def title_lines(screen: AnalysisScreen) -> tuple[str, list[str]]:
    title = screen.query_one("#screen-title", TitleLine)
    return title.text, str(title.render()).split("\n")


def test_pack_keeps_parts_whole() -> None:
    text = SEP.join(["Idle time", "all 8 ranks", "threshold 30 us", HTA])
    assert pack(text, 200) == text
    assert pack(text, 78).split("\n") == [
        SEP.join(["Idle time", "all 8 ranks", "threshold 30 us"]),
        HTA,
    ]
    assert pack(text, 0) == text  # not laid out yet


async def test_a_one_rank_trace_names_its_rank(tmp_path: Path) -> None:
    """'all ranks' on a one-rank trace left the rank unsaid: the generator wrote rank 3."""
    root = tmp_path / "traces"
    root.mkdir()
    write_trace(make_trace(3, world_size=8, steps=3, seed=1), root / "rank-3.json")
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, 60)
        entry = next(e for e in views() if e.mode == "kernels")
        screen = await visit(pilot, entry)
        text, _ = title_lines(screen)
        assert text.startswith(f"Kernels{SEP}rank 3{SEP}") and "all ranks" not in text
