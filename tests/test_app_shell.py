"""The app shell, driven headless with Pilot: loading, errors, the watcher, keys, layout."""

from __future__ import annotations

import asyncio
import gzip
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from textual.notifications import Notify
from textual.widgets import Footer, ProgressBar, Static
from textual.widgets._footer import FooterKey

from hta_tui.app.app import HtaApp, run_app
from hta_tui.app.format import FileRow, elide_end, elide_middle, fit_columns, status_label
from hta_tui.app.loading import SessionReady
from hta_tui.app.messages import OverviewReady
from hta_tui.app.screens.help import HelpScreen
from hta_tui.app.screens.overview import FilesTable, OverviewScreen
from hta_tui.app.widgets.bars import StackedBars, split_cells
from hta_tui.app.widgets.status import StatusBar
from hta_tui.session import live as loading_module
from hta_tui.synth import write_trace_dir
from hta_tui.trace import watch as watch_module
from hta_tui.trace.cache import Cache
from tests.app_walk import Walk, run_scenarios, walk_app
from tests.test_app_support import (
    listing,
    settle,
    trace_bytes,
    wait_until,
    write_rank,
    write_ranks,
)

SIZE = (80, 24)


def make_app(root: Path, tmp_path: Path, **kw) -> HtaApp:
    kw.setdefault("watch", False)
    return HtaApp(root, cache=Cache(tmp_path / "cache"), **kw)


def table(app: HtaApp) -> FilesTable:
    return app.screen.query_one("#files", FilesTable)


def cells(app: HtaApp, key: str) -> dict[str, str]:
    """The files table's row for `key` (a path relative to the root), as plain text."""
    t = table(app)
    row = t.get_row(key)
    return {col.key: str(cell) for col, cell in zip(t.view_columns, row, strict=True)}


def row_keys(app: HtaApp) -> list[str]:
    return list(table(app).row_keys)


# -- one app for the overview, `?`, reload, broken files and layout tests ----------------------
# Each test's steps are a scenario of one app run (tests/app_walk.py) on a generated 4-rank job:
# the overview lists it; `?`; then two files give way to a broken and a truncated one that
# only `r` finds (the broken-files and reload tests); the layout is checked with them shown.


async def _overview(pilot: Any, seen: dict[str, Any]) -> None:
    """test_overview_lists_every_file_with_rank_and_status' steps."""
    app = pilot.app
    paths = seen["paths"] = pilot.app.walk_paths
    assert isinstance(app.screen, OverviewScreen)
    seen["row_keys"] = row_keys(app)
    seen["rows"] = {p.name: cells(app, p.name) for p in paths}
    seen["temporal"] = [rank for rank, _, _ in app.overview_data.temporal]
    bars = app.screen.query_one("#temporal-bars", StackedBars)
    seen["bar_labels"] = [r.label for r in bars.rows]
    info = app.screen.query_one(StatusBar).info
    seen["info"] = (info.total, info.done, info.loaded, info.errors, info.loading)
    seen["messages"] = list(app.walk_messages)
    seen["listing"] = listing(app.trace_set.root)


async def _help(pilot: Any, seen: dict[str, Any]) -> None:
    """test_question_mark_shows_every_binding's steps."""
    app = pilot.app
    seen["footer"] = {(k.key, k.description) for k in app.screen.query_one(Footer).query(FooterKey)}
    await pilot.press("question_mark")
    await pilot.pause()
    seen["help_shown"] = isinstance(app.screen, HelpScreen)
    seen["rows"] = {desc: keys.split(", ") for keys, desc, _ in app.screen.rows}
    await pilot.press("escape")
    await pilot.pause()
    seen["after_escape"] = isinstance(app.screen, OverviewScreen)
    await pilot.press("question_mark")
    await pilot.pause()
    await pilot.press("question_mark")  # ? toggles
    await pilot.pause()
    seen["after_toggle"] = isinstance(app.screen, OverviewScreen)
    seen["running"] = app.is_running


async def _reload_broken(pilot: Any, seen: dict[str, Any]) -> None:
    """test_reload_key_rescans_the_folder's and test_broken_files_show_their_reason_while_
    others_load's steps: not watching, only `r` finds the changes."""
    app = pilot.app
    root = app.trace_set.root
    seen["before_count"] = len(row_keys(app))
    for path in app.walk_paths[2:]:
        path.unlink()
    (root / "rank-2.trace.json").write_bytes(b'{"traceEvents": [oops')
    whole = gzip.compress(trace_bytes(3), mtime=0)
    (root / "rank-3.trace.json.gz").write_bytes(whole[: len(whole) // 2])  # truncated
    seen["written"] = listing(root)
    await pilot.press("r")
    await wait_until(pilot, lambda: app.scan_generation == 2)
    await settle(pilot)
    seen["row_keys"] = row_keys(app)
    seen["want_keys"] = sorted(p.name for p in root.iterdir())
    seen["watch"] = app.status_info.watch
    first, second = (p.name for p in app.walk_paths[:2])
    seen["first"] = cells(app, first)["status"]
    seen["second"] = cells(app, second)["status"]
    seen["broken"] = cells(app, "rank-2.trace.json")
    seen["cut"] = cells(app, "rank-3.trace.json.gz")
    seen["temporal"] = [rank for rank, _, _ in app.overview_data.temporal]
    info = app.status_info
    seen["counts"] = (info.loaded, info.errors, info.incomplete)
    seen["problems"] = str(app.screen.query_one("#status-problems", Static).render())
    # the detail line gives the whole reason of the highlighted file
    t = table(app)
    t.move_cursor(row=row_keys(app).index("rank-2.trace.json"))
    await pilot.pause()
    seen["detail"] = str(app.screen.query_one("#file-detail", Static).render())


async def _layout(pilot: Any, seen: dict[str, Any]) -> None:
    """test_layout_fits_80x24_and_survives_resizes' steps (a broken file's row shown)."""
    app = pilot.app

    def fits(width: int, height: int) -> bool:
        screen = app.screen
        status = screen.query_one(StatusBar)
        t = table(app)
        # every visible column fits inside the table: nothing essential off screen
        used = t.table_width
        keys = [c.key for c in t.view_columns]
        return (
            app.size == (width, height)
            and status.region.y == height - 2
            and status.region.width == width
            and screen.query_one(Footer).region.y == height - 1
            and used <= t.scrollable_content_region.width
            and {"rank", "file", "status"} <= set(keys)
            and screen.query_one("#temporal-box").region.bottom <= status.region.y
        )

    seen["errors"] = app.status_info.errors
    seen["fits"] = fits(*SIZE)
    for size in ((120, 40), (60, 20), (80, 24)):
        await pilot.resize_terminal(*size)
        await wait_until(pilot, lambda size=size: fits(*size), what=f"the layout at {size}")
    await pilot.resize_terminal(140, 30)
    await wait_until(
        pilot,
        lambda: "events" in [c.key for c in table(app).view_columns],
        what="the events column at 140 columns",
    )
    seen["done"] = True


async def _shell_walk(root: Path, paths: list[Path], tmp_path: Path) -> Walk:
    walk = Walk()
    walk.seen["before"] = {"listing": listing(root)}
    messages: list[Any] = []
    app = make_app(root, tmp_path, findings=False)
    app.walk_paths = paths  # type: ignore[attr-defined]
    app.walk_messages = messages  # type: ignore[attr-defined]
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        await run_scenarios(
            pilot,
            walk,
            [
                ("overview", _overview),
                ("help", _help),
                ("reload", _reload_broken),
                ("layout", _layout),
            ],
        )
    walk.seen["after"] = {"listing": listing(root)}
    return walk


@pytest.fixture(scope="module")
def shell_walk(tmp_path_factory: pytest.TempPathFactory) -> tuple[Walk, Path]:
    """The walk and its temporary folder (the test's cache is under it)."""
    tmp_path = tmp_path_factory.mktemp("shell-walk")
    root = tmp_path / "traces"
    paths = write_trace_dir(root, ranks=4, steps=2, seed=0)
    return asyncio.run(_shell_walk(root, paths, tmp_path)), tmp_path


def test_overview_lists_every_file_with_rank_and_status(shell_walk) -> None:
    walk, tmp_path = shell_walk
    seen = walk["overview"]
    paths = seen["paths"]
    assert seen["row_keys"] == [p.name for p in paths]
    for rank, path in enumerate(paths):
        row = seen["rows"][path.name]
        assert row["rank"] == str(rank)
        assert row["status"] == "loaded"
        assert row["kernels"] and int(row["kernels"]) > 0
        assert row["busy"].endswith("ms")
    assert seen["temporal"] == [0, 1, 2, 3]
    assert seen["bar_labels"] == ["r0", "r1", "r2", "r3"]
    assert seen["info"] == (4, 4, 4, 0, False)
    # the session wakes the app once per batch of changes, never once per file (a waiting
    # wake-up stands for any number); overviews come tagged with a generation
    messages = seen["messages"]
    wakes = [m for m in messages if isinstance(m, SessionReady)]
    assert 1 <= len(wakes) <= 2 * len(paths)
    gens = [m.generation for m in messages if isinstance(m, OverviewReady)]
    assert gens == sorted(gens)
    # the trace folder is untouched (by the app: the reload test changes it later, and
    # checks the same); parsed frames went to the test's cache only
    assert seen["listing"] == walk["before"]["listing"]
    assert list((tmp_path / "cache").rglob("meta.json"))


def test_broken_files_show_their_reason_while_others_load(shell_walk) -> None:
    walk, _ = shell_walk
    seen = walk["reload"]
    assert seen["first"] == "loaded"
    assert seen["second"] == "loaded"
    broken = seen["broken"]
    assert broken["status"] == "error"
    assert "invalid JSON" in broken["file"]  # the reason, under the name, in the row
    cut = seen["cut"]
    assert cut["status"] == "incomplete"
    assert "truncated" in cut["file"]
    assert seen["temporal"] == [0, 1]
    assert seen["counts"] == (2, 1, 1)
    problems = seen["problems"]
    assert "1 error" in problems and "1 incomplete" in problems
    # the detail line gives the whole reason of the highlighted file
    detail = seen["detail"]
    assert "rank 2" in detail and "invalid JSON" in detail
    assert walk["after"]["listing"] == seen["written"]


def test_reload_key_rescans_the_folder(shell_walk) -> None:
    walk, _ = shell_walk
    seen = walk["reload"]
    assert seen["before_count"] == 4
    # two files gone and two new ones: found by `r` (not watching)
    assert seen["row_keys"] == seen["want_keys"]
    assert "rank-2.trace.json" in seen["row_keys"] and len(seen["row_keys"]) == 4
    assert seen["watch"] == "off"


def test_question_mark_shows_every_binding(shell_walk) -> None:
    walk, _ = shell_walk
    seen = walk["help"]
    assert {("q", "Quit"), ("question_mark", "Help"), ("r", "Reload")} <= seen["footer"]
    assert seen["help_shown"], "? did not open the help"
    rows = seen["rows"]
    assert "q" in rows["Quit"] and "?" in rows["Help"] and "r" in rows["Reload"]
    assert "Cursor down" in rows  # bindings the footer hides are listed too
    assert seen["after_escape"], "escape did not close the help"
    assert seen["after_toggle"], "? again did not close the help (? toggles)"
    assert seen["running"], "the app stopped"


def test_layout_fits_80x24_and_survives_resizes(shell_walk) -> None:
    walk, _ = shell_walk
    seen = walk["layout"]
    assert seen["errors"] == 1  # a broken file's row is in the table
    assert seen["fits"], "the layout does not fit 80x24"
    assert seen["done"]


@pytest.mark.parametrize("poll", [False, True], ids=["native", "poll"])
async def test_watch_adds_reloads_and_removes_files(tmp_path: Path, poll: bool) -> None:
    root = tmp_path / "traces"
    write_rank(root, 0)
    staging = tmp_path / "staging"
    new = write_rank(staging, 1)
    slow = root / "rank-2.trace.json"
    body = trace_bytes(2)
    slow.write_bytes(body[: len(body) // 2])  # still being written
    app = make_app(root, tmp_path, watch=True, poll=poll)
    state = "polling" if poll else "watching"
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await wait_until(pilot, lambda: app.watcher_state == state, what="the watcher")
        assert cells(app, "rank-0.trace.json.gz")["status"] == "loaded"
        waiting = cells(app, "rank-2.trace.json")["status"]
        assert "incomplete" in waiting and "waiting" in waiting
        assert app.status_info.watch == state
        assert state in str(app.screen.query_one("#status-watch", Static).render())

        shutil.copy(new, root / new.name)
        await wait_until(
            pilot,
            lambda: new.name in row_keys(app) and cells(app, new.name)["status"] == "loaded",
            timeout=30,
            what="the copied file to load",
        )
        assert cells(app, "rank-0.trace.json.gz")["status"] == "loaded"  # first rank stays

        slow.write_bytes(body)  # the writer finishes: retried on this change
        await wait_until(
            pilot,
            lambda: cells(app, slow.name)["status"] == "loaded",
            timeout=30,
            what="the completed file to load",
        )
        await settle(pilot)
        assert [rank for rank, _, _ in app.overview_data.temporal] == [0, 1, 2]

        (root / new.name).unlink()
        await wait_until(
            pilot, lambda: new.name not in row_keys(app), timeout=30, what="the deleted file"
        )
        await settle(pilot)
        assert [rank for rank, _, _ in app.overview_data.temporal] == [0, 2]
        assert app.status_info.total == 2


async def test_incomplete_files_are_rechecked_when_the_watcher_misses_a_change(
    tmp_path: Path, monkeypatch
) -> None:
    async def blind_watch(root, *, poll=False, stop_event=None, **kw):
        await stop_event.wait()  # "watching", but reports nothing (a missed event)
        return
        yield  # pragma: no cover

    monkeypatch.setattr(watch_module, "watch", blind_watch)
    root = tmp_path / "traces"
    slow = root / "rank-0.trace.json"
    root.mkdir()
    body = trace_bytes(0)
    slow.write_bytes(body[:100])
    app = make_app(root, tmp_path, watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.trace_set.counts()["incomplete"] == 1)
        assert app.watcher_state == "watching"
        slow.write_bytes(body)
        await wait_until(
            pilot, lambda: app.trace_set.entries[slow].status == "loaded", what="the recheck"
        )
        await settle(pilot)
        assert [rank for rank, _, _ in app.overview_data.temporal] == [0]


async def test_a_failing_watcher_turns_off_and_says_why(tmp_path: Path, monkeypatch) -> None:
    async def no_watch(root, **kw):
        raise OSError("OS file watch limit reached")
        yield  # pragma: no cover

    monkeypatch.setattr(watch_module, "watch", no_watch)
    root = tmp_path / "traces"
    write_ranks(root, 1)
    messages = []
    app = make_app(root, tmp_path, watch=True)
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        await wait_until(pilot, lambda: any(isinstance(m, Notify) for m in messages))
        assert app.watcher_state == "off" and app.status_info.watch == "off"
        assert cells(app, "rank-0.trace.json.gz")["status"] == "loaded"
    (note,) = [m.notification for m in messages if isinstance(m, Notify)]
    assert "watch limit" in note.message and "--poll" in note.message


async def test_first_rank_shows_before_the_last_lands(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "traces"
    write_ranks(root, 3)
    gate = threading.Event()
    real = loading_module.load_files

    def gated(files, cache, **kw):
        results = real(files, cache, **kw)
        yield next(results)
        gate.wait(20)  # the other files "take long"
        yield from results

    monkeypatch.setattr(loading_module, "load_files", gated)
    app = make_app(root, tmp_path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(
                pilot,
                lambda: app.overview_data is not None and len(app.overview_data.temporal) == 1,
                what="the first rank's overview",
            )
            # whichever file the parser workers finish first (the largest starts first)
            statuses = sorted(r.status for r in app.overview_data.rows)
            assert statuses == ["loaded", "pending", "pending"]
            info = app.status_info
            assert (info.done, info.total, info.loading) == (1, 3, True)
            await pilot.pause()
            bar = app.screen.query_one("#status-progress", ProgressBar)
            assert bar.display and bar.progress == 1 and bar.total == 3
            assert "loading 1/3" in str(app.screen.query_one("#status-files", Static).render())
            assert not app.settled
            gate.set()
            await settle(pilot)
            assert [rank for rank, _, _ in app.overview_data.temporal] == [0, 1, 2]
            assert not app.screen.query_one("#status-progress", ProgressBar).display
    finally:
        gate.set()


async def test_a_crashed_loader_fails_its_files_not_the_app(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "traces"
    write_ranks(root, 2)

    def broken(files, cache, **kw):
        raise RuntimeError("pool exploded")
        yield  # pragma: no cover

    monkeypatch.setattr(loading_module, "load_files", broken)
    app = make_app(root, tmp_path)
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        assert app.is_running
        rows = app.overview_data.rows
        assert [r.status for r in rows] == ["error", "error"]
        assert all("pool exploded" in r.reason for r in rows)
    notes = [m.notification for m in messages if isinstance(m, Notify)]
    assert any("pool exploded" in n.message and n.severity == "error" for n in notes)


async def test_one_file_as_the_root(tmp_path: Path) -> None:
    (path,) = write_ranks(tmp_path / "traces", 1)
    app = make_app(path, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert row_keys(app) == [path.name]
        assert app.status_info.root == path.name


async def test_q_quits(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    write_ranks(root, 1)
    app = make_app(root, tmp_path, watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, what="the app to exit")
    assert app.return_code == 0


async def _empty(pilot: Any, seen: dict[str, Any]) -> None:
    """test_empty_folder's steps."""
    app = pilot.app
    seen["text"] = str(app.screen.query_one("#temporal-empty", Static).render())
    seen["total"] = app.status_info.total


async def _no_gpu(pilot: Any, seen: dict[str, Any]) -> None:
    """test_no_gpu_kernels_says_so's steps: two CPU-only ranks land in the folder (`r`)."""
    app = pilot.app
    write_ranks(app.trace_set.root, 2, gpu=False)
    await pilot.press("r")
    await wait_until(pilot, lambda: app.scan_generation == 2)
    await settle(pilot)
    seen["loaded"] = app.status_info.loaded
    empty = app.screen.query_one("#temporal-empty", Static)
    seen["empty_shown"] = empty.display
    seen["text"] = str(empty.render())
    seen["temporal_shown"] = app.screen.query_one("#temporal").display


async def _empty_walk(tmp_path: Path) -> Walk:
    root = tmp_path / "traces"
    root.mkdir()
    app = make_app(root, tmp_path, findings=False)
    return await walk_app(app, [("empty", _empty), ("no gpu", _no_gpu)], size=SIZE, first=settle)


@pytest.fixture(scope="module")
def empty_walk(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on an empty folder, then on two CPU-only ranks written into it."""
    return asyncio.run(_empty_walk(tmp_path_factory.mktemp("empty-walk")))


def test_no_gpu_kernels_says_so(empty_walk: Walk) -> None:
    seen = empty_walk["no gpu"]
    assert seen["loaded"] == 2
    assert seen["empty_shown"], "the temporal box's empty line is hidden"
    assert "no GPU kernels in the loaded ranks" in seen["text"]
    assert not seen["temporal_shown"], "the temporal table is shown without GPU kernels"


def test_empty_folder(empty_walk: Walk) -> None:
    seen = empty_walk["empty"]
    assert "no trace files in traces/" in seen["text"]
    assert seen["total"] == 0


@pytest.mark.shared
async def test_real_two_rank_trace(shared: Path, tmp_path: Path) -> None:
    root = shared / "traces" / "trace_filter"
    app = make_app(root, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, 30)
        assert row_keys(app) == ["sampled_rank-0.json.gz", "sampled_rank-1.json.gz"]
        assert [rank for rank, _, _ in app.overview_data.temporal] == [0, 1]


def test_run_app_rejects_an_unknown_theme(tmp_path: Path, capsys) -> None:
    assert run_app(tmp_path, cache=Cache(tmp_path / "cache"), theme="no-such-theme") == 2
    assert "unknown theme" in capsys.readouterr().err


# -- pure helpers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "width"),
    [((1.0, 1.0, 1.0), 10), ((95.0, 4.0, 1.0), 30), ((0.0, 0.0, 5.0), 7), ((1e-9, 1.0, 0.0), 5)],
)
def test_split_cells_fills_the_width(values, width) -> None:
    cells = split_cells(values, width)
    assert sum(cells) == width
    assert all(c > 0 for c, v in zip(cells, values, strict=True) if v > 0)


def test_split_cells_without_data() -> None:
    assert split_cells((0.0, 0.0, 0.0), 10) == [0, 0, 0]


def test_fit_columns_drops_optional_columns_first() -> None:
    cols = [
        ("rank", "rank"),
        ("file", "file"),
        ("status", "status"),
        ("events", "events"),
        ("kernels", "kernels"),
        ("busy", "GPU busy"),
        ("duration", "duration"),
        ("load", "load"),
    ]
    row = FileRow(
        key="x" * 40,
        values={"rank": "0", "status": "loaded", "events": "12.3k", "load": "0.12s"},
        status="loaded",
        rank=0,
        reason="",
    )
    wide, file_w = fit_columns(cols, [row], 200)
    assert [k for k, _ in wide] == [k for k, _ in cols] and file_w == 40
    narrow, file_w = fit_columns(cols, [row], 77)
    keys = [k for k, _ in narrow]
    assert "load" not in keys and {"rank", "file", "status", "busy"} <= set(keys)
    assert file_w >= 20


def test_text_helpers() -> None:
    assert elide_middle("abcdefghij", 5) == "ab…ij"
    assert elide_middle("abc", 5) == "abc"
    assert elide_end("abcdefghij", 5) == "abcd…"
    assert status_label("incomplete", watching=True).replace("\n", " ") == "incomplete, waiting"
    assert status_label("not_trace", watching=False) == "not a trace"
