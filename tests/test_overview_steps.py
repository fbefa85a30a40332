"""The overview answers "where does my step time go" first, at 80x24, without scrolling: on a
CPU-only trace and a GPU one, the step-time lines name the largest part of the step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from hta_tui.analysis import step_overview
from hta_tui.app.screens.overview import OverviewScreen
from tests.tb_oracle import answer, profiles_with
from tests.test_app_support import make_screen_app, settle, write_cpu_ranks

SIZE = (80, 24)


def step_lines(app: Any) -> str:
    screen = app.screen_stack[0]
    assert isinstance(screen, OverviewScreen)
    box = screen.query_one("#overview-step-box")
    # on screen, whole, without scrolling
    assert box.display and box.region.y >= 0 and box.region.bottom <= SIZE[1] - 2
    return str(screen.query_one("#overview-step-summary", Static).render())


async def test_cpu_only_trace_written_by_hand(tmp_path: Path) -> None:
    """Each step the writer made is 990 us with one 50 us aten::add: CPU Exec 5%, the rest
    Other."""
    root = write_cpu_ranks(tmp_path / "traces")
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = step_lines(app)
        assert text.startswith("Average step 990 us (6 steps, 2 ranks): Other 95%, CPU Exec 5%")


def _largest(case: str) -> str:
    totals: dict[str, float] = {}
    for profile in [p for p in profiles_with("overview.json") if p.startswith(case + "/")]:
        for child in answer(profile, "overview.json")["performance"][0]["children"]:
            totals[child["name"]] = totals.get(child["name"], 0.0) + child["value"]
    return max(totals, key=totals.get)  # type: ignore[arg-type]


@pytest.mark.shared
@pytest.mark.parametrize("case", ["pytorch_cpu_ddp_gloo_4", "tracelens_h100_bert_memory"])
async def test_shared_traces_name_the_plugins_largest_part(
    shared: Path, tmp_path: Path, case: str
) -> None:
    """A CPU-only 4-rank job and a GPU one: the first part named is the one the plugin's
    Overview shows as the largest."""
    app = make_screen_app(shared / "traces" / case, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, timeout=60)
        assert f": {_largest(case)} " in step_lines(app)


async def test_a_failing_step_breakdown_costs_only_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(ts: Any, **_: Any) -> Any:  # `tb_compat`: the overview follows X too
        raise ValueError("boom")

    monkeypatch.setattr(step_overview, "step_table", broken)
    app = make_screen_app(write_cpu_ranks(tmp_path / "traces"), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert step_lines(app) == "Step time not computed: ValueError: boom"
        assert app.screen_stack[0].query_one("#files").row_count == 2
