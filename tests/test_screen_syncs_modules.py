"""The syncs (y) and modules (u) screens on the generated backward-sync story: Pilot tests of
drill-down and fold / unfold against what the generator wrote, and 80x24 snapshots."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from hta_tui.app.app import HtaApp
from hta_tui.app.screens.modules import ModulesScreen
from hta_tui.app.screens.syncs import SyncsScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.icicle import icicle_lines
from hta_tui.synth import sync_story
from hta_tui.synth.files import write_trace
from tests.app_walk import Walk, snapshot_steps, walk_app
from tests.test_app_support import make_screen_app, screen_shows_current, settle, wait_until

SIZE = (80, 24)
STEPS = 3


def write_story(tmp_path: Path) -> Path:
    root = tmp_path / "traces"
    root.mkdir()
    write_trace(sync_story.make_sync_story(steps=STEPS), root / "rank-0.json")
    return root


@pytest.fixture
def story_root(tmp_path: Path) -> Path:
    return write_story(tmp_path)


async def open_screen(pilot: Any, key: str, cls: type) -> Any:
    await pilot.press(key)

    def ready() -> bool:
        s = pilot.app.screen_stack[0]
        return isinstance(s, cls) and screen_shows_current(pilot.app, s)

    await wait_until(pilot, ready, what=cls.__name__)
    await pilot.pause()
    return pilot.app.screen_stack[0]


async def _syncs(pilot: Any, seen: dict[str, Any]) -> None:
    """test_syncs_screen_verdict_and_drill_down's steps."""
    screen = await open_screen(pilot, "y", SyncsScreen)
    seen["verdict"] = str(screen.query_one("#sync-verdict", Static).render())
    summary = screen.query_one("#sync-summary", FrameTable)
    seen["top"] = summary.selected_row()
    seen["columns"] = summary.frame.columns
    instances = screen.query_one("#sync-instances", FrameTable)
    seen["before_pick"] = instances.frame.height
    summary.focus()
    await pilot.press("enter")
    await pilot.pause()
    seen["picked"] = instances.frame


async def _modules(pilot: Any, seen: dict[str, Any]) -> None:
    """test_modules_screen_fold_and_icicle's steps."""
    screen = await open_screen(pilot, "u", ModulesScreen)
    tree = screen.query_one("#module-tree", FrameTable)
    seen["tree"] = tree.frame
    tree.focus()
    await pilot.press("enter")  # fold Net_0
    await pilot.pause()
    seen["folded"] = tree.frame["module"].to_list()
    await pilot.press("enter")  # unfold
    await pilot.pause()
    seen["unfolded_height"] = tree.frame.height
    seen["icicle"] = str(screen.query_one("#module-icicle", Static).render())


async def _story_walk(root: Path, tmp_path: Path) -> Walk:
    app = make_screen_app(root, tmp_path, findings=False)
    return await walk_app(app, [("syncs", _syncs), ("modules", _modules)], size=SIZE, first=settle)


@pytest.fixture(scope="module")
def story_walk(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on the story for both views' tests (each reads its own view)."""
    tmp_path = tmp_path_factory.mktemp("story-walk")
    root = tmp_path / "traces"
    root.mkdir()
    write_trace(sync_story.make_sync_story(steps=STEPS), root / "rank-0.json")
    return asyncio.run(_story_walk(root, tmp_path))


def test_syncs_screen_verdict_and_drill_down(story_walk: Walk) -> None:
    seen = story_walk["syncs"]
    assert f"in {sync_story.BACKWARD_SYNC_CALL_SITE}, backward" in seen["verdict"]
    top = seen["top"]
    assert top is not None and top["module"] == sync_story.BACKWARD_SYNC_MODULE
    # a frame's line is its function's first line (issue 24.11): labelled so
    assert top["function (first line)"] == sync_story.BACKWARD_SYNC_CALL_SITE
    assert "call site" not in seen["columns"]
    assert seen["before_pick"] == 3 * STEPS  # every sync, before a pick
    assert seen["picked"].height == STEPS  # the backward call site's own
    assert set(seen["picked"]["forward op"]) == {"aten::gather"}


def test_modules_screen_fold_and_icicle(story_walk: Walk) -> None:
    seen = story_walk["modules"]
    tree = seen["tree"]
    assert tree["path"].to_list() == [
        "Net_0",
        "Net_0/CrossEntropyLoss_0",
        "Net_0/Linear_0",
        "Net_0/PatchDrop_0",
    ]
    assert tree["module"][0] == "- Net_0"
    assert seen["folded"] == ["+ Net_0"]
    assert seen["unfolded_height"] == 4
    assert "Net_0" in seen["icicle"] and "Linear_0" in seen["icicle"]


def test_icicle_widths_follow_the_values() -> None:
    import polars as pl

    tree = pl.DataFrame(
        {"path": ["a", "a/x", "a/y", "b"], "depth": [0, 1, 1, 0], "value": [30.0, 20, 10, 10]}
    )
    top, second = icicle_lines(tree, 40, ascii=True)
    assert top == "|a" + " " * 28 + "|b" + " " * 8  # 30:10 of 40 columns
    assert second == "|x" + " " * 18 + "|y" + " " * 8 + " " * 10


def _run_before(key: str, cls: type):
    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        await open_screen(pilot, key, cls)

    return run_before


SNAPSHOTS = {"syncs": ("y", SyncsScreen), "modules": ("u", ModulesScreen)}


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app (dark theme) on the story showing each view in turn for its snapshot."""
    tmp_path = tmp_path_factory.mktemp("snapshots")
    root = write_story(tmp_path)
    app: HtaApp = make_screen_app(root, tmp_path, theme="hta-dark", ascii=False)
    steps = snapshot_steps({name: _run_before(*view) for name, view in SNAPSHOTS.items()})
    return asyncio.run(walk_app(app, steps, size=SIZE, notifications=True))


@pytest.mark.parametrize("name", list(SNAPSHOTS))
def test_snapshot(snap_svg, snapshots: Walk, name: str) -> None:
    assert snap_svg(snapshots.check(name)["svg"])


async def test_syncs_of_several_ranks_say_which_rank_and_fold_kernel_names(
    tmp_path: Path,
) -> None:
    """Issue 17 at 80 columns: with several ranks the rank comes first (it was the last
    column, off screen, so rows of four ranks read as one's), one verdict row per rank, the
    most blocked first, the ones left out counted, and the kernel waited for shows by its
    short name (the export keeps it whole)."""
    from hta_tui.analysis import sync_summary
    from hta_tui.synth import write_trace_dir

    ranks = 4
    root = tmp_path / "traces"
    write_trace_dir(root, ranks=ranks, steps=3, seed=2)
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, 60)
        screen = await open_screen(pilot, "Y", SyncsScreen)
        box = screen.query_one("#sync-verdict", Static)
        verdict = str(box.render()).split("\n")
        worst = sync_summary.sync_tables(app.trace_set.frames())["sync_verdict"]
        worst = worst.sort("blocked_pctg", descending=True)["rank"][0]
        assert verdict[0].startswith(f"rank {worst}: ")
        assert verdict[-1] == f"... {ranks - 2} more ranks: r picks one"
        assert box.size.height == len(verdict) == 3  # a row each: none hides the next
        summary = screen.query_one("#sync-summary", FrameTable)
        assert summary.frame.columns[0] == "rank"
        assert set(summary.frame["rank"]) == set(range(ranks))
        instances = screen.query_one("#sync-instances", FrameTable)
        frame = instances.frame
        assert frame.columns[0] == "rank"
        full = frame["waited for (full name)"]
        kernels = set()
        for events in app.trace_set.frames().values():
            kernels |= set(events.filter(events["kind"] == "kernel")["name"].to_list())
        waited = [n for n in full.drop_nulls().unique().to_list() if n in kernels]
        assert waited and any("(" in n for n in waited)  # the generator's names have args
        short = dict(zip(full.to_list(), frame["waited for"].to_list(), strict=True))
        for name in [n for n in waited if "(" in n]:
            # the parameters folded away (and the return type, template arguments: fold_name)
            assert len(short[name]) < len(name) and not short[name].endswith(")"), name
            if "<" not in name and not name.startswith("void "):
                assert short[name] == name[: name.index("(")]
        # drawn: the short name; the full one is kept for the export and not drawn
        drawn = [c.key for c in instances.view_columns]
        assert "waited for" in drawn and "waited for (full name)" not in drawn


async def test_ranks_with_one_verdict_share_its_line(tmp_path: Path) -> None:
    """Two CPU-only ranks (no GPU to wait for): one verdict line for both, not one each."""
    from tests.test_app_support import write_cpu_ranks

    root = write_cpu_ranks(tmp_path / "traces", ranks=2)
    app = make_screen_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, 60)
        screen = await open_screen(pilot, "Y", SyncsScreen)
        verdict = str(screen.query_one("#sync-verdict", Static).render()).split("\n")
        assert len(verdict) == 1 and verdict[0].startswith("ranks 0-1: ")
