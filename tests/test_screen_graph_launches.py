"""Issue 24 point 13 in the app: the Kernels and Operators views say how much kernel time
belongs to no operator and why (a graph replay outside any operator), at 80x24; a trace
whose kernels all have an operator says nothing more."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from hta_tui.app.screens.kernels import KernelsScreen
from hta_tui.app.screens.modules import ModulesScreen
from hta_tui.app.screens.operators import OperatorsScreen
from hta_tui.synth.files import write_trace
from hta_tui.synth.graph_replay import make_graph_replay
from tests.app_walk import Walk, screenshot, walk_app
from tests.test_app_support import make_screen_app, open_view

SIZE = (80, 24)
SAID = (
    "99.7% of kernel time (1,200 us) belongs to no operator: "
    "2 cudaGraphLaunch calls outside any operator"
)


def _root(tmp_path: Path, **kw: Any) -> Path:
    root = tmp_path / "traces"
    root.mkdir()
    write_trace(make_graph_replay(**kw), root / "rank-0.json")
    return root


def _text(screen: Any, selector: str) -> str:
    return " ".join(str(screen.query_one(selector, Static).render()).split())


async def _kernels_snapshot(pilot: Any, seen: dict[str, Any]) -> None:
    await open_view(pilot, "K", KernelsScreen)
    seen["svg"] = await screenshot(pilot)


async def _no_operator(pilot: Any, seen: dict[str, Any]) -> None:
    kernels = await open_view(pilot, "K", KernelsScreen)
    assert SAID in _text(kernels, "#kernels-summary")
    ops = await open_view(pilot, "R", OperatorsScreen)
    assert SAID in _text(ops, "#operators-summary")


@pytest.fixture(scope="module")
def outside_walk(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on a graph replay outside any operator: the kernels view's snapshot (as a new
    app shows it), then what the views say."""
    tmp_path = tmp_path_factory.mktemp("outside")
    app = make_screen_app(_root(tmp_path, inside_op=False), tmp_path)
    steps = {"snapshot": _kernels_snapshot, "no operator": _no_operator}
    return asyncio.run(walk_app(app, steps, size=SIZE, notifications=True))


def test_views_say_the_kernel_time_with_no_operator(outside_walk: Walk) -> None:
    outside_walk.check("no operator")


async def test_views_say_nothing_more_when_every_kernel_has_an_operator(tmp_path: Path) -> None:
    app = make_screen_app(_root(tmp_path, inside_op=True), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        kernels = await open_view(pilot, "K", KernelsScreen)
        assert "no operator" not in _text(kernels, "#kernels-summary")


def test_snapshot_kernels_with_a_graph_replay_outside_any_operator(
    snap_svg, outside_walk: Walk
) -> None:
    assert snap_svg(outside_walk.check("snapshot")["svg"])


def test_snapshot_modules_with_cuda_graph_annotations(snap_compare, tmp_path: Path) -> None:
    """The Modules view's line of the modules graph kernels' annotations name (issue 31)."""
    app = make_screen_app(_root(tmp_path, steps=1, kernels=8, annotations=True), tmp_path)

    async def run_before(pilot: Any) -> None:
        screen = await open_view(pilot, "u", ModulesScreen)
        said = _text(screen, "#module-summary")
        assert "8 graph kernels by CUDA-graph annotation (not in the tree): " in said
        assert "layers.0.attention.wq 200 us, layers.1.attention.wq 200 us" in said

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_the_operators_numbers_come_before_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Operators view's numbers do not wait for the verdict, which nests every launch
    in its host ranges (`kernel_owners`, the costlier part on a real rank): it comes after
    them (`later`), saying the same."""
    from hta_tui.analysis import kernel_owners
    from hta_tui.app.screens.base import Params
    from hta_tui.trace.cache import Cache
    from hta_tui.trace.model import open_set

    ts = open_set(_root(tmp_path, inside_op=False), Cache(tmp_path / "cache"), workers=1)
    frames = OperatorsScreen.frames_for(ts, Params())
    asked: list[int] = []
    real = kernel_owners.job_verdict
    monkeypatch.setattr(kernel_owners, "job_verdict", lambda r: asked.append(1) or real(r))
    result = OperatorsScreen.compute(frames, Params())
    assert result["calls"] and result["gpu"] and not asked
    said = OperatorsScreen.later(frames, result)
    assert asked and said is not None and SAID in " ".join(said.split())
