"""Screen 0, the trace diff (`hta-tui CONTROL --compare TEST`), driven with Pilot: the numbers
on screen equal diff.compare_traces / ops_diff / kernel_diff_detail called directly, the CPU /
GPU toggle, short names, the iteration and rank pickers, filter, drill-down and back, empty
states, every shared case, the CLI wiring, and snapshots."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from textual.widgets import OptionList, Static

from hta_tui import cli
from hta_tui.analysis import diff
from hta_tui.app.app import HtaApp
from hta_tui.app.screens.diff import (
    CONTROL_KEY,
    MARK_STYLE,
    TEST_KEY,
    DiffDetailScreen,
    DiffScreen,
    DiffTable,
    PairSources,
    SidePicker,
    display_frame,
    undisplay,
)
from hta_tui.app.screens.overview import OverviewScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from tests.app_walk import Walk, run_scenarios, walk_app
from tests.shared_sets import trace_set
from tests.test_app_support import settle, wait_until, write_rank

SIZE = (80, 24)


def make_app(control: Path, test: Path | None, cache: Path, **kw: Any) -> HtaApp:
    kw.setdefault("watch", False)
    app = HtaApp(control, compare=test, cache=Cache(cache), timings=False, **kw)
    app.export_dir = cache.parent / "exports"
    return app


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("diffcache") / "cache"


@pytest.fixture(scope="module")
def synth_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("synth") / "traces"
    write_trace_dir(root, ranks=2, steps=3, seed=0, slow_rank=1)
    return root


def diff_ready(app: HtaApp) -> bool:
    s = app.screen_stack[0] if app.current_mode == "diff" else None
    return (
        isinstance(s, DiffScreen)
        and s.result is not None
        and s._shown_key == (s.trace_set.generation, s.params)
        and not any(w.group == "screen" and not w.is_finished for w in app.workers)
    )


async def wait_diff(pilot: Any) -> DiffScreen:
    await wait_until(pilot, lambda: diff_ready(pilot.app), 30, "the diff screen")
    await pilot.pause()
    return pilot.app.screen_stack[0]


async def start(pilot: Any) -> DiffScreen:
    await settle(pilot, 30)
    return await wait_diff(pilot)


def table_of(screen: DiffScreen) -> DiffTable:
    return screen.query_one("#diff-table", DiffTable)


def text(screen: Any, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def sides(app: HtaApp, c_rank: int | None = None, t_rank: int | None = None):
    cf, tf = app.trace_set.frames(), app.compare_set.frames()  # type: ignore[union-attr]
    return cf[min(cf) if c_rank is None else c_rank], tf[min(tf) if t_rank is None else t_rank]


def assert_table(screen: DiffScreen, expected: pl.DataFrame) -> None:
    """The table shows compare_traces' numbers, sorted by |diff_duration| then name."""
    shown = undisplay(table_of(screen).frame)
    want = expected.sort(pl.col("diff_duration").abs(), "name", descending=[True, False]).select(
        shown.columns
    )
    assert_frame_equal(shown, want)


async def pick(pilot: Any, control_index: int, test_index: int) -> None:
    """In a SidePicker: highlight and choose one option per side."""
    picker = pilot.app.screen
    assert isinstance(picker, SidePicker)
    for lst_id, index in (("#pick-control", control_index), ("#pick-test", test_index)):
        lst = picker.query_one(lst_id, OptionList)
        lst.focus()
        lst.highlighted = index
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()


# --------------------------------------------------------------------------------------------
# real traces


async def test_trace_diff_numbers_toggle_filter_and_drill_down(shared: Path, cache_dir) -> None:
    root = shared / "traces" / "trace_diff"
    app = make_app(root / "control", root / "test", cache_dir)
    async with app.run_test(size=SIZE) as pilot:
        screen = await start(pilot)
        assert app.current_mode == "diff"
        c, t = sides(app)
        assert_table(screen, diff.compare_traces(c, t))
        # the summary counts are the ops_diff categories
        ops = diff.ops_diff(c, t)
        summary = text(screen, "#diff-summary")
        assert f"{len(ops['added'])} new, {len(ops['deleted'])} gone" in summary
        marks = table_of(screen).frame["chg"].to_list()
        assert marks.count("new") == len(ops["added"])
        assert marks.count("gone") == len(ops["deleted"])
        # both sides' temporal breakdowns, as breakdown_diff gives them
        temporal = diff.breakdown_diff(c, t)["temporal"]
        idle = temporal.filter(pl.col("metric") == "idle_time(us)").row(0, named=True)
        top = text(screen, "#diff-temporal")
        assert f"{idle['control']:,.0f}" in top and f"{idle['test']:,.0f}" in top
        assert "control rank 3" in text(screen, "#diff-sides")
        assert "test rank 1" in text(screen, "#diff-sides")

        # g: CPU, GPU, both
        table_of(screen).focus()
        for device in ("CPU", "GPU", "ALL"):
            await pilot.press("g")
            screen = await wait_diff(pilot)
            assert screen.params.get("device") == device
            assert_table(screen, diff.compare_traces(c, t, device_type=device))

        # drill down on the third row and come back to it
        table = table_of(screen)
        table.focus()
        await pilot.press("j", "j")
        row = table.selected_row()
        assert row is not None
        await pilot.press("enter")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, DiffDetailScreen) and app.screen.result is not None,
            30,
        )
        detail = app.screen
        assert isinstance(detail, DiffDetailScreen)
        want = diff.kernel_diff_detail(c, t, row["name"])
        assert_frame_equal(detail.query_one("#diff-stats", FrameTable).frame, want["stats"])
        if not want["kernels"].is_empty():
            assert_frame_equal(detail.query_one("#diff-kernels", FrameTable).frame, want["kernels"])
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        assert table_of(screen).selected_row() == row

        # a CPU op with kernels: cudaMemcpyAsync launches memcpys on both sides
        await pilot.press("slash")
        await pilot.press(*"cudamemcpyasync")
        await pilot.press("enter")
        await pilot.pause()
        view = table_of(screen).view_frame
        assert view.height >= 1
        assert all("cudamemcpyasync" in n.lower() for n in view["name"])
        await pilot.press("enter")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, DiffDetailScreen) and app.screen.result is not None,
            30,
        )
        kernels = app.screen.query_one("#diff-kernels", FrameTable).frame
        name = table_of(screen).selected_row()["name"]  # type: ignore[index]
        assert_frame_equal(kernels, diff.kernel_diff_detail(c, t, name)["kernels"])
        assert kernels.height > 0
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DiffScreen)


async def _compare_start(pilot: Any, seen: dict[str, Any]) -> None:
    """test_trace_compare_iteration_pick's first check, on the app's own pair."""
    app = pilot.app
    screen = await start(pilot)
    c, t = sides(app)
    assert_table(screen, diff.compare_traces(c, t))
    seen["result"] = screen.result


async def _iteration_pick(pilot: Any, seen: dict[str, Any]) -> None:
    """test_trace_compare_iteration_pick's steps (after every case: the pair's own result
    shown again first)."""
    app = pilot.app
    screen = await start(pilot)
    own = app.walk.seen["compare start"]["result"]  # type: ignore[attr-defined]
    screen.result = own
    screen.show(own)
    await pilot.pause()
    c, t = sides(app)
    assert_table(screen, diff.compare_traces(c, t))
    # the pair differs in its second (last) iteration: pick ProfilerStep#1010 on both
    await pilot.press("i")
    await pilot.pause()
    steps = diff.step_numbers(c)
    assert steps == [1009, 1010]
    await pick(pilot, 2, 2)  # options: first complete, #1009, #1010 (last)
    screen = await wait_diff(pilot)
    assert screen.params.get("control_iteration") == 1010
    assert screen.params.get("test_iteration") == 1010
    want = diff.compare_traces(c, t, control_iteration=1010, test_iteration=1010)
    assert_table(screen, want)
    assert "iter 1010" in text(screen, "#diff-sides")
    assert not want.equals(diff.compare_traces(c, t))  # it really changed the table
    # n: short names
    await pilot.press("n")
    screen = await wait_diff(pilot)
    assert_table(
        screen,
        diff.compare_traces(c, t, control_iteration=1010, test_iteration=1010, use_short_name=True),
    )
    seen["done"] = True


def _every_case(cases: list[Path]) -> Any:
    async def scenario(pilot: Any, seen: dict[str, Any]) -> None:
        """test_every_shared_case_against_a_small_trace's steps."""
        app = pilot.app
        shown = seen["shown"] = {"table": 0, "no steps": 0, "not loaded": 0}
        screen = await start(pilot)
        test_set = app.compare_set
        assert test_set is not None
        for case in cases:
            pair = PairSources(trace_set(case), test_set)  # parsed once a process
            frames, info = pair.pick(screen.params)
            result = {**DiffScreen.compute(frames, screen.params), **info}
            screen.result = result
            screen.show(result)
            await pilot.pause()
            if result["ready"]:
                c, t = frames[CONTROL_KEY], frames[TEST_KEY]
                assert_table(screen, diff.compare_traces(c, t))
                shown["table"] += 1
                if not diff.step_numbers(c):
                    assert "control has no ProfilerStep" in text(screen, "#diff-summary"), case
                    shown["no steps"] += 1
            else:
                assert "control side has no loaded trace" in text(screen, "#diff-summary"), case
                shown["not loaded"] += 1
        seen["errors"] = [w for w in app.workers if w.state.name == "ERROR"]

    return scenario


async def _compare_walk(shared: Path, cache_dir: Path) -> Walk:
    walk = Walk()
    root = shared / "traces" / "trace_compare"
    cases = sorted(p for p in (shared / "traces").iterdir() if p.is_dir())
    cases = [c for c in cases if c.name not in ("trace_diff", "trace_compare")]
    app = make_app(root / "base", root / "test", cache_dir, findings=False)
    app.walk = walk  # type: ignore[attr-defined]
    async with app.run_test(size=SIZE) as pilot:
        await run_scenarios(
            pilot,
            walk,
            [
                ("compare start", _compare_start),
                ("every case", _every_case(cases)),
                ("iteration pick", _iteration_pick),  # last: it changes the parameters
            ],
        )
    return walk


@pytest.fixture(scope="module")
def compare_walk(shared: Path, cache_dir: Path) -> Walk:
    """One app on trace_compare's pair for its iteration test and every shared case."""
    return asyncio.run(_compare_walk(shared, cache_dir))


def test_trace_compare_iteration_pick(compare_walk: Walk) -> None:
    compare_walk["compare start"]
    assert compare_walk["iteration pick"]["done"]


def test_every_shared_case_against_a_small_trace(compare_walk: Walk) -> None:
    """Each case folder as the control side: a table or a clear sentence, never an error. One
    app session; each case's result computed as the screen's worker computes it (the sides
    picked as `PairSources` picks them) and shown on the screen."""
    seen = compare_walk["every case"]
    assert not seen["errors"]
    shown = seen["shown"]
    assert shown["table"] >= 10 and shown["no steps"] >= 1, shown  # the states were shown


# --------------------------------------------------------------------------------------------
# synthetic traces (no ../shared needed)


async def test_synthetic_ranks_of_one_folder(synth_root: Path, cache_dir) -> None:
    app = make_app(synth_root, synth_root, cache_dir, control_rank=0, test_rank=1)
    async with app.run_test(size=SIZE) as pilot:
        screen = await start(pilot)
        c, t = sides(app, 0, 1)
        assert_table(screen, diff.compare_traces(c, t))
        assert "rank 0" in text(screen, "#diff-sides") and "rank 1" in text(screen, "#diff-sides")
        # a theme switch recolours the change marks: no cell keeps the old theme's colour
        table = table_of(screen)
        chg = [c.key for c in table.view_columns].index("chg")

        def marks_as_themed() -> bool:
            cell = table.row_cells(0)[chg]
            want = f"diff-table--{MARK_STYLE.get(cell.plain, 'same')}"
            return cell.style == table.get_component_rich_style(want, partial=True)

        assert marks_as_themed()
        before = table.row_cells(0)[chg].style
        app.theme = "hta-light"
        await pilot.pause()
        assert table.row_cells(0)[chg].style != before
        assert marks_as_themed()
        app.theme = "hta-dark"
        await pilot.pause()
        # average every complete iteration on the control side, iteration 2 on the test side
        await pilot.press("i")
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, SidePicker)
        control_values = [v for _, v in picker.choices["control"]]
        test_values = [v for _, v in picker.choices["test"]]
        await pick(pilot, control_values.index("all"), test_values.index(2))
        screen = await wait_diff(pilot)
        want = diff.compare_traces(
            c,
            t,
            control_iteration=diff.complete_iterations(c),
            test_iteration=[2],
            average_iterations=True,
        )
        assert_table(screen, want)
        assert "per iteration" in text(screen, "#diff-summary")
        # escape in the picker changes nothing
        await pilot.press("i")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DiffScreen)
        assert screen.params.get("control_iteration") == "all"
        # r: swap the ranks (test rank 0 against control rank 1)
        await pilot.press("r")
        await pilot.pause()
        await pick(pilot, 1, 0)
        screen = await wait_diff(pilot)
        c, t = sides(app, 1, 0)
        assert screen.params.get("control_iteration") is None
        assert_table(screen, diff.compare_traces(c, t))
        # "0 F Diff" is in the command palette; the overview still works and 0 comes back
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "0 F Diff" in titles
        await pilot.press("1")
        await wait_until(pilot, lambda: isinstance(app.screen, OverviewScreen))
        await pilot.press("0")
        await wait_until(pilot, lambda: isinstance(app.screen, DiffScreen))


async def test_empty_and_missing_sides(tmp_path: Path, synth_root: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    app = make_app(synth_root, empty, tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        screen = await start(pilot)
        assert "test side has no loaded trace" in text(screen, "#diff-summary")
        assert table_of(screen).frame.is_empty()
        await pilot.press("i")  # nothing to pick: a notice, no dialog
        await pilot.pause()
        assert isinstance(app.screen, DiffScreen)
    app = make_app(synth_root, synth_root, tmp_path / "cache", control_rank=7)
    async with app.run_test(size=SIZE) as pilot:
        screen = await start(pilot)
        assert "control side has no rank 7" in text(screen, "#diff-summary")


async def _watched(pilot: Any, seen: dict[str, Any]) -> None:
    """test_the_test_side_is_watched_too's steps, with the status bar's checks once the
    landed file has loaded (the test side also holds a broken file)."""
    app = pilot.app
    _, test, new = app.walk_paths  # type: ignore[attr-defined]
    screen = await start(pilot)
    assert "test side has no loaded trace" in text(screen, "#diff-summary")
    await wait_until(pilot, lambda: app.watcher_state == "watching", what="the watcher")
    shutil.copy(new, test / new.name)
    await wait_until(pilot, lambda: 0 in app.compare_set.loaded(), timeout=30, what="the test file")
    await settle(pilot, 30)
    await wait_until(
        pilot,
        lambda: diff_ready(app) and screen.result["ready"],
        timeout=30,
        what="the diff",
    )
    c, t = sides(app)
    assert_table(screen, diff.compare_traces(c, t))
    assert app.trace_set is not app.compare_set and len(app.trace_set.entries) == 1
    # the status bar counts both sides (test_the_status_bar_counts_both_sides)
    await wait_until(pilot, lambda: not app.status_info.loading, what="both sides")
    info = app.status_info
    seen["status"] = (info.total, info.loaded, info.errors)
    seen["root"] = info.root
    seen["bar"] = str(app.screen.query_one("#status-problems", Static).render())
    seen["notes"] = [str(n.message) for n in app._notifications]
    # a deletion on the test side leaves the control side alone
    (test / new.name).unlink()
    await wait_until(
        pilot,
        lambda: all(p.name != new.name for p in app.compare_set.entries),
        timeout=30,
        what="the deletion",
    )
    assert 0 in app.trace_set.loaded()
    seen["done"] = True


async def _watched_walk(tmp_path: Path) -> Walk:
    control, test, staging = tmp_path / "control", tmp_path / "test", tmp_path / "staging"
    write_rank(control, 0)
    test.mkdir()
    (test / "rank-1.json").write_bytes(b"{ not json")
    new = write_rank(staging, 0, steps=4)
    app = make_app(control, test, tmp_path / "cache", watch=True, findings=False)
    app.walk_paths = (control, test, new)  # type: ignore[attr-defined]
    return await walk_app(app, [("watched", _watched)], size=SIZE)


@pytest.fixture(scope="module")
def watched_walk(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One watched app comparing two folders, for the status bar's and the watcher's tests."""
    return asyncio.run(_watched_walk(tmp_path_factory.mktemp("watched")))


async def test_the_status_bar_counts_both_sides(tmp_path: Path, watched_walk: Walk) -> None:
    """Comparing, a broken file of the test side shows in the status bar too."""
    seen = watched_walk["watched"]
    assert seen["status"] == (3, 2, 1)
    assert seen["root"] == "control/ vs test/"
    assert "1 error" in seen["bar"]
    # the overview lists the control side's files: the test side's error is a notice
    notes = seen["notes"]
    assert any(n.startswith("test side: rank-1.json: ") for n in notes), notes
    # two ranks of one folder: its files once
    control = tmp_path / "control"
    write_rank(control, 0)
    app = make_app(control, control, tmp_path / "cache", test_rank=0)
    async with app.run_test(size=SIZE) as pilot:
        await start(pilot)
        await settle(pilot)
        await wait_until(pilot, lambda: not app.status_info.loading, what="the folder")
        assert (app.status_info.total, app.status_info.root) == (1, "control/")


def test_the_test_side_is_watched_too(watched_walk: Walk) -> None:
    """A file landing in the test folder loads into compare_set, and the diff follows."""
    assert watched_walk["watched"]["done"]


async def test_without_compare_nothing_changes(tmp_path: Path, synth_root: Path) -> None:
    app = HtaApp(synth_root, cache=Cache(tmp_path / "cache"), watch=False, timings=False)
    assert app.compare_set is None and not app.comparing
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.current_mode == "overview"
        await pilot.press("0")
        await pilot.pause()
        assert app.current_mode == "overview"
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert not any(t.startswith("0 ") for t in titles)


def test_display_frame_marks_and_order() -> None:
    comp = pl.DataFrame(
        {
            "name": ["a", "b", "c", "d", "e"],
            "Control_counts": [1, 1, 0, 2, 1],
            "Control_total_duration": [10.0, 10.0, 0.0, 5.0, 3.0],
            "Test_counts": [1, 1, 1, 0, 1],
            "Test_total_duration": [30.0, 4.0, 7.0, 0.0, 3.0],
            "diff_counts": [0, 0, 1, -2, 0],
            "diff_duration": [20.0, -6.0, 7.0, -5.0, 0.0],
            "counts_change_categories": ["=", "=", "+", "-", "="],
        }
    )
    out = display_frame(comp)
    assert out["name"].to_list() == ["a", "c", "b", "d", "e"]
    assert out["chg"].to_list() == ["+", "new", "-", "gone", "="]


# --------------------------------------------------------------------------------------------
# command line


def test_cli_compare_passes_the_sides_to_run_app(tmp_path: Path, monkeypatch) -> None:
    import hta_tui.app.app as app_module

    seen: dict[str, Any] = {}

    def fake_run_app(path: Path, **kw: Any) -> int:
        seen.update(kw, path=path)
        return 0

    monkeypatch.setattr(app_module, "run_app", fake_run_app)
    control, test = tmp_path / "c", tmp_path / "t.json"
    control.mkdir()
    test.write_text("{}")
    assert cli.main([str(control), "--compare", str(test), "--rank", "2", "--test-rank", "5"]) == 0
    assert seen["path"] == control and seen["compare"] == test
    assert seen["control_rank"] == 2 and seen["test_rank"] == 5
    seen.clear()
    assert cli.main([str(control), "--compare", str(control), "--test-rank", "1"]) == 0
    assert seen["compare"] == control and seen["control_rank"] is None and seen["test_rank"] == 1
    seen.clear()
    assert cli.main([str(control)]) == 0
    assert seen["compare"] is None and seen["control_rank"] is None
    # a missing test side is a usage error; ranks without --compare too
    assert cli.main([str(control), "--compare", str(tmp_path / "nope")]) == cli.EXIT_USAGE
    with pytest.raises(SystemExit):
        cli.main([str(control), "--rank", "1"])


# --------------------------------------------------------------------------------------------
# snapshots


@pytest.mark.parametrize("theme", ["hta-dark", "hta-light"])
def test_snapshot(snap_compare, tmp_path: Path, theme: str) -> None:
    control, test = tmp_path / "control", tmp_path / "test"
    write_trace_dir(control, ranks=1, steps=3, seed=0, slow_rank=None)
    write_trace_dir(test, ranks=1, steps=3, seed=1, slow_rank=None)
    app = make_app(control, test, tmp_path / "cache", theme=theme, ascii=False)

    async def run_before(pilot: Any) -> None:
        await start(pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
