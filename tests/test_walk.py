"""Issue 24's last point: what a walk through every view at 80x24 found contradicting another
view (the same step, rank or number said two ways), each fix on a small generated trace."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from textual.widgets import Static

from hta_tui.analysis.critical_path.tables import critical_path_tables
from hta_tui.analysis.kernel_detail import START
from hta_tui.analysis.scope import (
    describe_steps,
    every_step_frames,
    step_scope,
    steps_from_names,
)
from hta_tui.analysis.sync_summary import sync_tables
from hta_tui.app.screens.critical_path import CriticalPathScreen
from hta_tui.app.screens.detail import KernelDetailScreen
from hta_tui.app.screens.distributed import DistributedScreen
from hta_tui.app.screens.kernels import KernelsScreen
from hta_tui.app.screens.operators import OperatorsScreen
from hta_tui.app.screens.step_time import StepTimeScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import write_trace_dir
from hta_tui.trace.parse import parse_file
from tests.app_walk import Walk, walk_app
from tests.test_app_support import (
    make_screen_app,
    open_view,
    press_view,
    rank_trace,
    screen_shows_current,
    settle,
    wait_until,
)


def _frames(root: Path, **kw: int) -> dict[int, pl.DataFrame]:
    files = write_trace_dir(root, seed=0, kernels_per_step=6, **kw)
    return {r: parse_file(f).frames["events"] for r, f in enumerate(sorted(files))}


def _step_names(frame: pl.DataFrame) -> list[int]:
    """The N of each CPU-side ProfilerStep#N, in time order: how the trace names its steps."""
    names = frame.filter(
        pl.col("stream").is_null() & pl.col("name").str.starts_with("ProfilerStep#")
    ).sort("ts")["name"]
    return [int(re.sub(r".*#", "", n)) for n in names]


def test_critical_path_names_a_step_by_its_profiler_step_number(tmp_path: Path) -> None:
    """The critical path called the job's first step `step 0` (HTA's instance index) where
    every other view says `step 2` (ProfilerStep#2, the first a default schedule records)."""
    frames = _frames(tmp_path / "traces", ranks=2, steps=3)
    table = critical_path_tables(frames)["critical_path"]
    for rank, frame in frames.items():
        mine = table.filter(pl.col("rank") == rank).sort("instance_id")
        assert mine["step"].to_list() == _step_names(frame)
    across = table.filter(pl.col("rank").is_null()).sort("instance_id")
    assert across.height == 3
    assert across["step"].to_list() == _step_names(frames[0])


def test_one_step_kept_is_not_read_as_two_left_out(tmp_path: Path) -> None:
    """pytorch_cpu_vit_memory (steps 6 and 7): titles said `steps 6, 7 left out as HTA`,
    which reads as both steps left out; HTA keeps step 6 and leaves out 7."""
    frames = _frames(tmp_path / "traces", ranks=1, steps=2)
    scope = step_scope(frames)
    assert scope.kept == (2,) and scope.left_out == (3,)
    want = "step 2 only, 3 left out as HTA (H)"
    assert describe_steps(scope, every_step=False) == want
    assert steps_from_names({"ProfilerStep#2", "ProfilerStep#3"}) == want  # the overview's
    every = step_scope(every_step_frames(frames))
    assert describe_steps(every, every_step=True) == "steps 2-3, the last included (H)"
    assert steps_from_names({"ProfilerStep#2"}) == "step 2"


def _write_stepless(root: Path) -> None:
    """Two ranks whose steps are no ProfilerStep (a training loop's own `train_step` ops), as
    tracelens_mi300_ddp_resnet18."""
    root.mkdir(parents=True)
    for rank in range(2):
        trace = rank_trace(rank, world=2)
        for e in trace["traceEvents"]:
            if str(e.get("name", "")).startswith("ProfilerStep#"):
                e.update(name="train_step", cat="cpu_op")  # host ops the plugin spans
        (root / f"rank-{rank}.trace.json").write_bytes(orjson.dumps(trace))


async def _every_profiler_step(pilot: Any, seen: dict[str, Any]) -> None:
    """test_views_of_every_profiler_step_say_when_there_is_none's steps and checks."""
    for key, cls, want in (
        ("W", DistributedScreen, "whole trace (no ProfilerStep)"),
        ("J", CriticalPathScreen, "no ProfilerStep: no step to follow"),
        ("K", KernelsScreen, "whole trace (no ProfilerStep)"),
    ):
        screen = await press_view(pilot, key, cls, 60.0)
        assert want in screen.scope_text, (key, screen.scope_text)
        assert "every ProfilerStep" not in screen.scope_text


async def _whole_trace_step(pilot: Any, seen: dict[str, Any]) -> None:
    """test_the_plugins_whole_trace_step_is_called_the_whole_trace's steps and checks (first:
    the overview as the app opens on it)."""
    app = pilot.app
    box = app.screen.query_one("#overview-step-box")
    await wait_until(pilot, lambda: "step 0" in str(box.border_title), 30.0, "step box")
    assert "whole trace as step 0 (no ProfilerStep)" in str(box.border_title)
    assert len(str(box.border_title)) <= 80 - 4  # whole in its border at 80 columns
    assert "whole trace (no ProfilerStep)" in str(
        app.screen.query_one("#temporal-box").border_title
    )
    screen = await press_view(pilot, "B", StepTimeScreen, 60.0)
    assert "whole trace as step 0 (no ProfilerStep)" in screen.scope_text
    text = str(screen.query_one("#step-time-summary", Static).render())
    assert "Step 0 is the whole trace: no ProfilerStep" in text
    assert "ProfilerStep ranges as recorded" not in text
    assert all(len(line) <= 78 for line in text.splitlines() if "Step 0" in line)


@pytest.fixture(scope="module")
def stepless_walk(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on two ranks without ProfilerStep for the two tests below: the overview and
    the step time first, then the views of every ProfilerStep."""
    tmp_path = tmp_path_factory.mktemp("stepless")
    root = tmp_path / "traces"
    _write_stepless(root)
    app = make_screen_app(root, tmp_path)
    scenarios = {"whole trace": _whole_trace_step, "every step": _every_profiler_step}
    return asyncio.run(walk_app(app, scenarios, first=settle, size=(80, 24)))


def test_views_of_every_profiler_step_say_when_there_is_none(stepless_walk: Walk) -> None:
    """On a trace without ProfilerStep the distributed view's title said `every ProfilerStep`
    and the critical path's `each ProfilerStep`, where the others say `whole trace (no
    ProfilerStep)`; with steps, both now use the same words."""
    stepless_walk.check("every step")
    assert CriticalPathScreen.STEPS == DistributedScreen.STEPS == "every ProfilerStep"


def test_the_plugins_whole_trace_step_is_called_the_whole_trace(stepless_walk: Walk) -> None:
    """Without ProfilerStep the plugin's one step "0" is the whole trace: the step-time view
    and the overview's step box said `step 0, as the TensorBoard plugin` (and `the ProfilerStep
    ranges as recorded`) beside a temporal breakdown of the `whole trace (no ProfilerStep)`."""
    stepless_walk.check("whole trace")


async def test_critical_path_edge_starts_count_from_the_trace_start(tmp_path: Path) -> None:
    """pytorch_cpu_ddp_gloo_4: an edge started at `4,632,258,067,029.5` us (as written in the
    file) where kernel detail, idle gaps and the timeline count us from the trace's start."""
    root = tmp_path / "traces"
    write_trace_dir(root, ranks=2, steps=2, seed=0, kernels_per_step=6)
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await press_view(pilot, "J", CriticalPathScreen, 60.0)
        table = screen.query_one("#cp-edges", FrameTable)
        row = table.selected_row()
        assert row is not None and START in row, row
        rank, instance = screen.picked
        edges = screen.result["critical_path_edges"].filter(
            (pl.col("rank") == rank) & (pl.col("instance_id") == instance)
        )
        origin = min(f["ts"].min() for f in app.trace_set.frames().values())
        assert row[START] * 1000 == pytest.approx(edges["start_ns"][0] - origin)
        assert 0 <= row[START] < 1e6  # a few ms into the trace, not the file's clock


def test_a_cpu_only_rank_has_no_gpu_to_wait_for(tmp_path: Path) -> None:
    """pytorch_cpu_ddp_gloo_4: the sync verdict said `the host never waited for the GPU` on
    a trace every other view calls CPU-only (no GPU); a GPU rank without syncs keeps it."""
    frames = {}
    for rank, gpu in ((0, False), (1, True)):
        path = tmp_path / f"rank-{rank}.json"
        path.write_bytes(orjson.dumps(rank_trace(rank, world=2, gpu=gpu)))
        frames[rank] = parse_file(path).frames["events"]
    verdict = sync_tables(frames)["sync_verdict"].sort("rank")
    assert verdict["verdict"].to_list() == [
        "no GPU to wait for (a CPU-only trace)",
        "the host never waited for the GPU",
    ]


async def _detail_hint(pilot: Any, seen: dict[str, Any]) -> None:
    """test_kernel_detail_names_the_key_that_picks_a_kernel's steps and checks."""
    app = pilot.app
    screen = await press_view(pilot, "E", KernelDetailScreen, 60.0)
    line = str(screen.query_one("#detail-summary", Static).render())
    hint = re.search(r"no kernel picked: [^;]*; (\w+)[: ]", line)
    assert hint, line
    await pilot.press(hint.group(1))
    await wait_until(pilot, lambda: isinstance(app.screen, KernelsScreen), 30.0, "kernels")


async def _tensor_core_list(pilot: Any, seen: dict[str, Any]) -> None:
    """test_operators_name_the_tensor_core_list_of_the_rules_shown's steps and checks."""
    app = pilot.app
    screen = await open_view(pilot, "R", OperatorsScreen)
    assert "tensor cores: modern kernel list" in str(
        screen.query_one("#operators-summary").render()
    )
    await pilot.press("X")
    await wait_until(
        pilot,
        lambda: screen.params.get("tb_compat") is True and screen_shows_current(app, screen),
        60.0,
        "the plugin's rules",
    )
    await pilot.pause()
    text = str(screen.query_one("#operators-summary").render())
    assert "tensor cores: the plugin's 2021 kernel list" in text, text


@pytest.fixture(scope="module")
def one_rank_walk(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on one generated rank of two steps for the two tests below, in turn."""
    tmp_path = tmp_path_factory.mktemp("one-rank")
    root = tmp_path / "traces"
    write_trace_dir(root, ranks=1, steps=2, seed=0, kernels_per_step=6)
    app = make_screen_app(root, tmp_path)
    scenarios = {"detail hint": _detail_hint, "tensor cores": _tensor_core_list}
    return asyncio.run(walk_app(app, scenarios, first=settle, size=(80, 24)))


def test_kernel_detail_names_the_key_that_picks_a_kernel(one_rank_walk: Walk) -> None:
    """Kernel detail opened with no kernel picked said `3 to pick`: 3 opens the memory
    section since the digits name sections. The key it names opens the kernels view."""
    one_rank_walk.check("detail hint")


def test_one_collective_on_one_rank_is_said_in_the_singular() -> None:
    """tracelens_b200_eager_nccl (rank 0 of 8): `1 collectives, none seen on two ranks`."""
    one = {"stragglers": pl.DataFrame(), "instances": pl.DataFrame({"seq": [0]})}
    assert DistributedScreen._summary(one).startswith("1 collective, not seen on another rank:")
    two = {"stragglers": pl.DataFrame(), "instances": pl.DataFrame({"seq": [0, 1]})}
    assert DistributedScreen._summary(two).startswith("2 collectives, none seen on two ranks:")


def test_operators_name_the_tensor_core_list_of_the_rules_shown(one_rank_walk: Walk) -> None:
    """The operators view said `tensor cores: modern kernel list` under the plugin's own
    rules (X), whose tensor-core columns use the plugin's 2021 list."""
    one_rank_walk.check("tensor cores")
