"""Issue 17 on every view of today's app (points 2, 6, 7): at 80x24 each view's title says
which ranks, steps and span its numbers cover (rank 0 has two spans), whole (never cut), and
why a one-rank view shows that rank; every `x: ...` hint names a key the view has; the rank
picked with `r` holds on every view; escape clears a view's filter before it leaves."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from hta_tui.app.screens.base import AnalysisScreen
from hta_tui.app.screens.registry import SCREENS
from hta_tui.app.widgets.title_line import SEP, TitleLine, pack
from hta_tui.synth import MemoryOptions, make_trace, write_trace, write_trace_dir
from tests.test_app_support import make_screen_app, screen_shows_current, settle, wait_until

SIZE = (80, 24)
RANKS = 3
# What the generator is told to write: ProfilerStep#2..#5 on every rank. HTA's analyses leave
# the last one out (H brings it back); the TensorBoard plugin's views keep it.
HTA = "steps 2-4, 5 left out as HTA (H)"
PLUGIN = "steps 2-5, as the TensorBoard plugin"
#: The steps part each view must show (the overview is no analysis screen: test_scope).
STEPS: dict[str, str] = {
    "step_time": PLUGIN,
    "gpu_metrics": PLUGIN,
    "distributed": "every ProfilerStep",
    "critical_path": "every ProfilerStep",  # the last one too: a path per step
    "memory": "whole trace",
    "operators": "whole trace",
    "syncs": "whole trace",
    "modules": "whole trace",
    "timeline": "whole trace",
    "findings": "each rule's steps",  # each reads another view's table, in its steps
}
#: Views that show one rank at a time when none is picked: which one, and why.
ONE_RANK: dict[str, str] = {
    "sequences": f"rank 0 (smallest of {RANKS}; r picks)",
    "timelines": f"rank 0 (first of {RANKS}; r picks)",
    "memory": f"rank 0 (first with memory events of {RANKS}; r picks)",
}
#: The span rank 0's numbers come from: the newer of its two files.
SPAN = "r0 span 2/2"
#: A hint inside a sentence: `(n: full name)`, `; o: all`, `· c: cutoffs`.
HINT = re.compile(r"[;(·]\s*([a-zA-Z]): ")


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("scope-views") / "traces"
    write_trace_dir(d, ranks=RANKS, steps=4, seed=3, memory=MemoryOptions())
    # an older span of rank 0 (a profiler schedule writes one file per span): the newest is
    # analysed, and every view says so; one process wrote both (the seed gives the pid and
    # the profiler's base time), else it would be a conflicting file, not a span
    older = make_trace(0, world_size=RANKS, steps=3, seed=3, memory=MemoryOptions())
    path = write_trace(older, d / "rank-0.older.pt.trace.json")
    os.utime(path, ns=(10**18, 10**18))
    return d


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
