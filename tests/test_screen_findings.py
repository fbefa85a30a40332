"""Issue 28, point 3: the overview opens with the findings (never before the data), the
Findings view (Z) lists them with their evidence, `enter` opens the evidence's view and row,
`t` the timeline at its moment. One Pilot run and one snapshot, at 80x24, on two ranks of the
tests' trace: per 990 us step an all-reduce of 200 us that nothing overlaps, so 20.2% of
the step is exposed communication (comm.exposed fails, > 20%) and the evidence is that
all-reduce in each rank's steps."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from hta_tui.app.findings_data import compute_findings
from hta_tui.app.screens.findings import FindingsScreen
from hta_tui.app.screens.timeline import TimelineScreen
from hta_tui.app.widgets import findings_block
from hta_tui.app.widgets.findings_block import FindingsBlock
from hta_tui.app.widgets.frame_table import FrameTable
from tests.test_app_support import (
    hold_loads,
    make_screen_app,
    settle,
    wait_until,
    write_rank,
    write_ranks,
)
from tests.test_timeline_links import selected_event

SIZE = (80, 24)


def _block_text(app: Any) -> str:
    block = app.screen.query_one(FindingsBlock)
    return "\n".join(str(w.render()) for w in block.children)


async def test_findings_block_view_enter_and_t(tmp_path: Path, monkeypatch: Any) -> None:
    root = tmp_path / "traces"
    write_rank(root, 0, world=2)
    held_back = write_rank(root, 1, world=2)
    gate = hold_loads(monkeypatch, held_back)  # rank 1 "takes long": listed, not loaded
    app = make_screen_app(root, tmp_path, findings=True)
    # each time the findings start computing: was the overview of that set drawn already?
    # (the first computation runs every analysis of every rank: not while the last files and
    # the overview need the cores)
    started: list[tuple[int, int]] = []
    compute = FindingsBlock._compute

    def spy(block: FindingsBlock, ts: Any) -> Any:
        started.append((app._overview_shown, ts.generation))
        return compute(block, ts)

    monkeypatch.setattr(FindingsBlock, "_compute", spy)
    # and at a lower priority than the UI thread's (the main thread, here)
    nice: list[tuple[int, int]] = []

    def niced(*args: Any) -> Any:
        here = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        nice.append((here, os.getpriority(os.PRIO_PROCESS, os.getpid())))
        return compute_findings(*args)

    monkeypatch.setattr(findings_block, "compute_findings", niced)
    try:
        async with app.run_test(size=SIZE) as pilot:
            # one rank in, one to come: no verdict yet, and nothing computed
            await wait_until(pilot, lambda: 0 in app.trace_set.loaded(), 30, "rank 0")
            await pilot.pause()
            text = _block_text(app)
            assert "computing findings… (waiting for 1 of 2 files)" in text
            assert "FAIL" not in text and app.screen.query_one(FindingsBlock).result is None
            gate.set()
            await settle(pilot, 30)  # settled: the findings of the set drawn too
            assert app.screen.query_one(FindingsBlock).current
            assert started and all(shown == generation for shown, generation in started)
            assert nice and all(mine > ui or ui == 19 for mine, ui in nice)
            found = compute_findings(app.trace_set.snapshot()).findings
            fired = found.filter(found["severity"].is_in(["fail", "warn", "info"]))
            lines = _block_text(app).splitlines()
            assert "fail" in lines[0] and "Z: all" in lines[0]
            assert len(lines) == 1 + min(fired.height, 2)  # at 24 rows: the two worst
            for line, rule in zip(lines[1:], fired["id"], strict=False):
                assert f" {rule}: " in line  # worst first
            exposed = next(line for line in lines if "comm.exposed: " in line)
            assert exposed.startswith("FAIL ")  # the worst severity there is, in the two
            assert "200 us/step 20%" in exposed  # 200 of 990 us per step at stake

            # Z: every rule, worst first; the evidence of the one under the cursor
            await pilot.press("Z")
            await wait_until(
                pilot,
                lambda: isinstance(app.screen, FindingsScreen) and app.screen.shows_current,
                30,
                "the Findings view",
            )
            await pilot.pause()
            table = app.screen.query_one("#findings-table", FrameTable)
            ids = [table.view_frame["id"][i] for i in range(table.row_count)]
            assert ids == found["id"].to_list()
            table.move_cursor(row=ids.index("comm.exposed"))
            await pilot.pause()
            evidence = app.screen.query_one("#finding-evidence", FrameTable).view_frame
            assert set(evidence["event"]) == {"all_reduce"} and set(evidence["rank"]) == {0, 1}
            first = evidence.row(0, named=True)

            # enter: the evidence's view, the cursor on its rank, step and collective
            await pilot.press("enter")
            await wait_until(
                pilot,
                lambda: (
                    app.current_mode == first["view"]
                    and app.screen.shows_current
                    and isinstance(app.focused, FrameTable)
                ),
                30,
                "the evidence's view",
            )
            await pilot.pause()
            await pilot.pause()
            row = app.focused.selected_row()
            assert row is not None and row["rank"] == first["rank"] == 0
            assert row.get("step") == first["step"] and "all_reduce" in row.values()

            # t on the finding: the timeline at its first evidence's moment (rank 0, step 1)
            await pilot.press("Z")
            await wait_until(pilot, lambda: isinstance(app.screen, FindingsScreen), 30, "Z")
            table = app.screen.query_one("#findings-table", FrameTable)
            table.focus()
            assert table.selected_row()["id"] == "comm.exposed"  # where it was left
            await pilot.press("t")
            await wait_until(
                pilot,
                lambda: (
                    isinstance(app.screen, TimelineScreen) and app.screen.view.selected is not None
                ),
                30,
                "the timeline with a selected event",
            )
            rank, event = selected_event(app)
            assert (rank, event["name"]) == (0, f"ProfilerStep#{first['step']}")
    finally:
        gate.set()


async def _findings_view(pilot: Any) -> None:
    app = pilot.app
    await settle(pilot, 30)
    await pilot.press("Z")
    await wait_until(
        pilot,
        lambda: isinstance(app.screen, FindingsScreen) and app.screen.shows_current,
        30,
        "the Findings view",
    )
    await pilot.pause()


async def test_the_app_is_settled_only_once_its_findings_are_drawn(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """`HtaApp.settled` (what tests wait for) includes the findings when they are on: they
    start after the overview is drawn, so an app whose overview is drawn is not settled
    until they are (a snapshot of them was taken early before)."""
    write_rank(tmp_path / "traces", 0)
    app = make_screen_app(tmp_path / "traces", tmp_path, findings=True)
    turns: list[tuple[FindingsBlock, int]] = []  # the findings' turns, held back
    monkeypatch.setattr(
        FindingsBlock, "overview_drawn", lambda b: turns.append((b, app.trace_set.generation))
    )

    def overview_done() -> bool:
        """Every file in, the overview of the last set drawn and nothing computing."""
        return (
            app.session.idle
            and app.overview_drawn
            and bool(turns)
            and turns[-1][1] == app.trace_set.generation
            and not any(w.group == "overview" and not w.is_finished for w in app.workers)
        )

    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, overview_done, 30, "the overview")
        await pilot.pause(0.1)
        assert overview_done() and not app.settled  # its findings not drawn yet
        monkeypatch.undo()
        block = turns[-1][0]
        block.overview_drawn()
        await settle(pilot, 30)
        assert block.current


def test_snapshot_findings_view(snap_compare, tmp_path: Path) -> None:
    """The Findings view at 80x24: the rules worst first, the advice of the first, its
    evidence rows."""
    write_ranks(tmp_path / "traces", 2)
    app = make_screen_app(tmp_path / "traces", tmp_path, findings=True)
    assert snap_compare(app, terminal_size=SIZE, run_before=_findings_view)


def test_evidence_row_found_most_exactly() -> None:
    """The row of an evidence: its rank, step and event where the table has them (the count
    says how exactly, so the table that checks most wins); no cell naming the event: none."""
    import polars as pl

    from hta_tui.app.evidence import row_index

    per_step = pl.DataFrame(
        {"rank": [0, 0, 1, 1], "step": [1, 2, 1, 2], "kind": ["all_reduce"] * 4}
    )
    assert row_index(per_step, 1, 2, "all_reduce") == (3, 3)
    assert row_index(per_step.drop("step"), 1, 2, "all_reduce") == (2, 2)
    assert row_index(per_step, 1, 2, "ProfilerStep#2") == (-1, 0)  # named nowhere
    assert row_index(per_step, 1, 2, None) == (3, 2)  # the step alone, then
    assert row_index(per_step.drop("kind"), 1, 2, "all_reduce") == (-1, 0)


def test_the_apps_findings_are_kept_for_the_next_open(tmp_path: Path, monkeypatch: Any) -> None:
    """The overview's findings at 1,000 small ranks cost ~200 s of CPU at every open: made
    as the report makes them (exec/split), the same tables, and read back at the next open
    with no file changed, without one analysis run."""
    from hta_tui.analysis import registry
    from hta_tui.app import findings_data
    from hta_tui.session.live import open_session
    from hta_tui.trace.cache import Cache

    root = tmp_path / "traces"
    write_ranks(root, 2)
    cache = Cache(tmp_path / "cache")
    ts = open_session(root, cache).trace_set
    plain = compute_findings(ts.snapshot())
    findings_data._last.clear()
    kept = compute_findings(ts.snapshot(), cache.root)
    assert kept.findings.equals(plain.findings) and kept.evidence.equals(plain.evidence)
    assert plain.findings.height > 0 and plain.evidence.height > 0
    # the next open: a new session on the same files reads the kept answer back
    findings_data._last.clear()

    def no_run(*a: Any, **kw: Any) -> Any:
        raise AssertionError("an analysis ran")

    monkeypatch.setattr(registry, "run", no_run)
    monkeypatch.setattr(registry, "rank_parts", no_run)
    again = compute_findings(open_session(root, cache).trace_set.snapshot(), cache.root)
    assert again.findings.equals(plain.findings) and again.evidence.equals(plain.evidence)
