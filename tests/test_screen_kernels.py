"""Screens 3 (kernels), 4 (kernel detail) and 8 (kernel sequences), driven with Pilot: the
drill-down path from the overview to one kernel and back, the numbers equal the analyses
called on the same data, filter / sort / export / rank switch / top-k toggle, sequences for an
operator, every shared trace, and snapshots."""

from __future__ import annotations

import asyncio
import csv
import gzip
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from textual.widgets import OptionList, Static, TabbedContent

from hta_tui.analysis import kernel_detail, kernels, sequences
from hta_tui.analysis.names import fold_name
from hta_tui.app.app import HtaApp
from hta_tui.app.screens.base import Params
from hta_tui.app.screens.detail import KernelDetailScreen
from hta_tui.app.screens.kernels import KernelsScreen, TypeBreakdown, short_label
from hta_tui.app.screens.overview import OverviewScreen
from hta_tui.app.screens.sequences import SequencesScreen
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.app.widgets.plot import SafePlot
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from tests.app_walk import Walk, snapshot_steps, walk_app
from tests.shared_sets import trace_set
from tests.test_app_support import T0, rank_trace, screen_shows_current, settle, wait_until
from tests.test_app_support import make_screen_app as make_app

SIZE = (80, 24)
SCREENS = {"K": KernelsScreen, "E": KernelDetailScreen, "Q": SequencesScreen}


@pytest.fixture(scope="module")
def synth_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("synth") / "traces"
    write_trace_dir(root, ranks=2, steps=3, seed=0, slow_rank=1)
    return root


def screen_ready(app: HtaApp, cls: type) -> bool:
    s = app.screen_stack[0]
    return isinstance(s, cls) and screen_shows_current(app, s)


async def wait_screen(pilot: Any, cls: type) -> Any:
    await wait_until(pilot, lambda: screen_ready(pilot.app, cls), what=cls.__name__)
    await pilot.pause()
    return pilot.app.screen_stack[0]


async def open_screen(pilot: Any, key: str) -> Any:
    await pilot.press(key)
    return await wait_screen(pilot, SCREENS[key])


def table(screen: Any, id: str) -> FrameTable:
    return screen.query_one(f"#{id}", FrameTable)


def text_of(screen: Any, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def frames_of(app: HtaApp) -> dict[int, pl.DataFrame]:
    return app.trace_set.frames()


# -- the drill-down path -------------------------------------------------------------------------


async def _drill_down_to_a_kernel_and_back(pilot: Any, seen: dict) -> None:
    app = pilot.app
    await settle(pilot)
    screen = await open_screen(pilot, "K")
    frames = frames_of(app)
    # the numbers are the analyses'
    types, _ = kernels.gpu_kernel_breakdown(frames)
    rows = screen.query_one(TypeBreakdown).rows
    assert rows == list(types.select("kernel_type", "sum", "percentage").iter_rows())
    kt = table(screen, "kernel-table")
    assert_frame_equal(analysis_columns(kt), kernel_detail.kernel_table(frames, fold=True))
    # down two rows, enter: the detail of that kernel
    await pilot.press("j", "j")
    name = kt.selected_row()["name"]
    assert kt.cursor_row == 2 and name != "others"
    await pilot.press("enter")
    detail = await wait_screen(pilot, KernelDetailScreen)
    assert app.selected_kernel == name
    assert detail.result["name"] == name and not detail.result["auto"]
    # the short name on one line; n: the full name, wrapped over as many lines as it takes
    assert text_of(detail, "#detail-name") == f"{fold_name(name)}  (n: full name)"
    await pilot.press("n")
    await pilot.pause()
    assert text_of(detail, "#detail-name") == name
    assert detail.query_one("#detail-name").size.height >= len(name) // SIZE[0]
    await pilot.press("n")
    await pilot.pause()
    summary, _ = kernels.kernel_duration_distribution(frames, name)
    assert_frame_equal(table(detail, "rank-table").frame, summary)
    assert_frame_equal(
        table(detail, "launchers-table").frame, kernel_detail.kernel_launchers(frames, name)
    )
    assert_frame_equal(
        table(detail, "streams-table").frame, kernel_detail.kernel_streams(frames, name)
    )
    # the tabs: v cycles through them (one key for the next table in every view)
    tabs = detail.query_one(TabbedContent)
    seen = [tabs.active]
    for _ in range(5):
        await pilot.press("v")
        seen.append(tabs.active)
    assert seen == ["tab-ranks", "tab-hist", "tab-time", "tab-runs", "tab-launch", "tab-ranks"]
    # escape: back to the kernels, on the same row
    await pilot.press("escape")
    await pilot.pause()
    assert app.screen is screen
    assert kt.cursor_row == 2 and kt.selected_row()["name"] == name
    # a second drill-down shows the new kernel on the same detail screen
    await pilot.press("k", "enter")
    again = await wait_screen(pilot, KernelDetailScreen)
    other = kt.selected_row()["name"]
    assert again is detail and other != name
    assert detail.result["name"] == other == app.selected_kernel


async def _kernel_table_filter_sort_export_topk_rank(pilot: Any, seen: dict) -> None:
    app = pilot.app
    await settle(pilot)
    screen = await open_screen(pilot, "K")
    frames = frames_of(app)
    kt = table(screen, "kernel-table")
    # filter
    await pilot.press("slash", *"cutlass", "enter")
    await pilot.pause()
    await wait_screen(pilot, KernelsScreen)
    assert screen.params.get("fold") is False  # a filter looks at every kernel
    names = kt.view_frame["name"].to_list()
    assert names and all("cutlass" in n.lower() for n in names)
    assert kt.row_count == len(names)
    # short names shown, full names kept (cursor row, export)
    assert kt.view_frame["kernel"].to_list() == [fold_name(n, 0) for n in names]
    # sort: s picks the column (numbers largest first), S reverses
    await pilot.press("s")
    await pilot.pause()
    options = app.screen.query_one(OptionList)
    options.highlighted = kt.frame.columns.index("sum us")
    await pilot.press("enter")
    await pilot.pause()
    assert app.screen is screen
    assert kt.sort_by == ("sum us", True)
    await pilot.press("S")
    assert kt.sort_by == ("sum us", False)
    sums = kt.view_frame["sum us"].to_list()
    assert sums == sorted(sums)
    # export writes exactly the table shown
    await pilot.press("e")
    await pilot.pause()
    files = list((app.export_dir).glob("*.csv"))
    assert len(files) == 1
    with files[0].open() as f:
        rows = list(csv.DictReader(f))
    assert [r["name"] for r in rows] == kt.view_frame["name"].to_list()
    assert [float(r["sum us"]) for r in rows] == pytest.approx(sums)
    # top-k toggle: every kernel, no "others"
    # / then escape clears the filter
    await pilot.press("slash", "escape")
    await pilot.pause()
    assert kt.filter_text == "" and kt.has_focus
    await pilot.press("o")
    await wait_screen(pilot, KernelsScreen)
    assert screen.params.get("fold") is True
    assert "others" in kt.frame["name"].to_list()
    await pilot.press("o")
    await wait_screen(pilot, KernelsScreen)
    assert screen.params.get("fold") is False
    every = kernel_detail.kernel_table(frames, fold=False)
    assert_frame_equal(analysis_columns(kt), every)
    assert "others" not in kt.frame["name"].to_list()
    assert kt.frame.height > kernel_detail.kernel_table(frames, fold=True).height - 3
    await pilot.press("o")
    await wait_screen(pilot, KernelsScreen)
    assert "others" in kt.frame["name"].to_list()
    # enter on "others" explains instead of drilling down
    kt.move_cursor(row=kt.view_frame["name"].to_list().index("others"))
    await pilot.press("enter")
    await pilot.pause()
    assert app.screen is screen and app.selected_kernel is None
    assert any("others" in str(n.message) for n in app._notifications)
    # rank switch: r, rank 1 -> HTA's per-rank kernel table
    await pilot.press("r")
    await pilot.pause()
    await pilot.press("down", "down", "enter")
    await wait_screen(pilot, KernelsScreen)
    assert screen.params.rank == 1
    one = {1: frames[1]}
    assert_frame_equal(analysis_columns(kt), kernel_detail.kernel_table(one))
    _, hta = kernels.gpu_kernel_breakdown(one)
    cols = ["name", "type", "count", "sum us", "mean us", "std us", "min us", "max us"]
    hta = hta.rename(
        {
            "kernel_type": "type",
            "sum (us)": "sum us",
            "mean (us)": "mean us",
            "stddev": "std us",
            "min (us)": "min us",
            "max (us)": "max us",
        }
    ).select(cols)
    assert_frame_equal(
        kt.frame.select(cols).sort("type", "name"), hta.sort("type", "name"), check_exact=False
    )
    assert "rank 1" in text_of(screen, "#screen-title")


async def _detail_without_a_pick_then_sequences(pilot: Any, seen: dict) -> None:
    app = pilot.app
    await settle(pilot)
    detail = await open_screen(pilot, "E")
    frames = frames_of(app)
    largest = kernel_detail.kernel_table(frames, fold=False)["name"][0]
    assert detail.result["name"] == largest and detail.result["auto"]
    assert "largest total time" in text_of(detail, "#detail-summary")
    bins = detail.result["bins"]
    _, hist = kernels.kernel_duration_distribution(frames, largest)
    assert bins["count"].sum() == hist["count"].sum() == detail.result["summary"]["count"].sum()
    occ = detail.result["occurrences"]
    assert_frame_equal(occ, kernel_detail.kernel_occurrences(frames, largest))
    # without UTF-8 the charts are plain ASCII
    app.ascii = True
    detail.show(detail.result)
    await wait_until(pilot, lambda: detail.charts_pending == 0, what="the charts")
    for tab, plot_id in (
        ("ranks", "#ranks-plot"),
        ("hist", "#hist-plot"),
        ("time", "#time-plot"),
    ):
        detail.query_one(TabbedContent).active = f"tab-{tab}"  # a chart is built when shown
        plot = detail.query_one(plot_id, SafePlot)
        await wait_until(pilot, lambda: plot.picture.plain.strip() != "", what=plot_id)  # noqa: B023
        chart = plot.picture.plain
        assert chart.strip() and chart.isascii(), plot_id
    app.ascii = False
    # then screen 8: sequences for an operator
    screen = await open_screen(pilot, "Q")
    ops = table(screen, "operators-table")
    assert_frame_equal(ops.frame, kernel_detail.launching_operators({0: frames[0]}))
    assert text_of(screen, "#seq-summary").startswith("Rank 0's operators")
    # the title says why rank 0: the smallest of the ranks loaded
    assert "rank 0 (smallest of" in text_of(screen, "#screen-title")
    # the first operator launching >= 3 kernels per instance
    pos = ops.frame.with_row_index().filter(pl.col("max ops") >= 3)["index"][0]
    for _ in range(pos):
        await pilot.press("j")
    operator = ops.selected_row()["operator"]
    await pilot.press("enter")
    await wait_screen(pilot, SequencesScreen)
    assert screen.params.get("operator") == operator
    want = sequences.frequent_cuda_kernel_sequences(
        frames, operator, rank=0, min_pattern_len=3, top_k=5
    )
    assert not want.is_empty()
    pats = table(screen, "patterns-table")
    assert_frame_equal(pats.frame, SequencesScreen.shown_patterns(want))
    assert_frame_equal(pats.frame.select(want.columns), want.head(5), check_column_order=False)
    assert pats.has_focus
    listed = text_of(screen, "#pattern-kernels").splitlines()
    parts = want["pattern"][0].split("|")
    assert listed[0] == parts[0] and len(listed) == len(parts)
    assert listed[1].strip().startswith("1. ")


# -- one app on the generated job for the tests above ---------------------------------------------


async def _opens_on_the_overview(pilot: Any, seen: dict) -> None:
    await settle(pilot)
    assert isinstance(pilot.app.screen, OverviewScreen)


async def _as_first_opened(pilot: Any, seen: dict) -> None:
    """No kernel picked, the detail on its first tab: as a new app would be."""
    app = pilot.app
    app.selected_kernel = None
    for stack in app._screen_stacks.values():
        for screen in stack:
            if isinstance(screen, KernelDetailScreen):
                screen.query_one(TabbedContent).active = "tab-ranks"
    await pilot.pause()


async def _synth_walk(root: Path, tmp_path: Path) -> Walk:
    app = make_app(root, tmp_path)
    scenarios = {
        "overview": _opens_on_the_overview,
        "detail": _detail_without_a_pick_then_sequences,  # before any kernel is picked
        "reset": _as_first_opened,
        "drill": _drill_down_to_a_kernel_and_back,
        "reset again": _as_first_opened,
        "table": _kernel_table_filter_sort_export_topk_rank,  # last: it leaves rank 1 picked
    }
    return await walk_app(app, scenarios, size=SIZE)


@pytest.fixture(scope="module")
def synth_walk(synth_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app on `synth_root` through the scenarios of the three tests below, in turn."""
    return asyncio.run(_synth_walk(synth_root, tmp_path_factory.mktemp("synth-app")))


def test_drill_down_to_a_kernel_and_back(synth_walk: Walk) -> None:
    synth_walk.check("overview")
    synth_walk.check("reset")
    synth_walk.check("drill")


def test_kernel_table_filter_sort_export_topk_rank(synth_walk: Walk) -> None:
    synth_walk.check("reset again")
    synth_walk.check("table")


def test_detail_without_a_pick_then_sequences(synth_walk: Walk) -> None:
    synth_walk.check("detail")


# -- analysis: kernel_detail ---------------------------------------------------------------------


def test_kernel_table_equals_hta_breakdown_per_rank(synth_root: Path, tmp_path: Path) -> None:
    from hta_tui.api import TraceAnalysis

    frames = TraceAnalysis(synth_root, cache=Cache(tmp_path / "cache"))._ranks()
    for fold, num in ((True, 10), (False, 10**9)):
        for rank in frames:
            one = {rank: frames[rank]}
            _, hta = kernels.gpu_kernel_breakdown(one, num_kernels=num)
            ours = kernel_detail.kernel_table(one, fold=fold, num_kernels=num)
            assert ours.height == hta.height
            assert sorted(ours["sum us"].round(6).to_list()) == sorted(
                hta["sum (us)"].round(6).to_list()
            )
            assert (ours["ranks"] == 1).all()
            assert ours["share %"].sum() == pytest.approx(100)
    every = kernel_detail.kernel_table(frames, fold=False)
    assert every["name"].n_unique() == every.height
    assert every["count"].sum() == kernel_detail.kernel_table(frames)["count"].sum()
    # each type's folded tail: its statistics over the events of the kernels it folds
    folded = kernel_detail.kernel_table(frames, num_kernels=2)
    gpu = kernels.gpu_table(frames).filter(pl.col("kernel_type").is_in(kernels.ANALYSED_TYPES))
    tails = 0
    for row in folded.filter(pl.col("name") == "others").iter_rows(named=True):
        shown = folded.filter(pl.col("type") == row["type"])["name"]
        d = (
            gpu.filter(
                (pl.col("kernel_type") == row["type"]) & ~pl.col("name").is_in(shown.implode())
            )["dur"]
            / 1000
        )
        assert (row["count"], row["ranks"]) == (d.len(), len(frames))
        want = (d.sum(), d.mean(), d.std(), d.min(), d.max())
        got = tuple(row[c] for c in ("sum us", "mean us", "std us", "min us", "max us"))
        assert got == pytest.approx(want, rel=1e-12)
        tails += 1
    assert tails


def test_launchers_and_operators_on_a_known_trace(tmp_path: Path) -> None:
    root = snapshot_root(tmp_path)
    from hta_tui.api import TraceAnalysis

    frames = TraceAnalysis(root, cache=Cache(tmp_path / "cache"))._ranks()
    gemm = "ampere_sgemm_128x64_tn"
    launchers = kernel_detail.kernel_launchers(frames, gemm)
    assert launchers["operator"].to_list() == ["aten::mm"]
    assert launchers["launch"].to_list() == ["cudaLaunchKernel"]
    # HTA's ProfilerStep filter keeps the steps before the last one starts: 2 of 3
    assert launchers["count"].to_list() == [4 * 2]
    assert launchers["ranks"].to_list() == [4]
    # kernel at t+20 us, launch ends at t+3: 17 us; the op starts with the launch
    assert launchers["mean delay us"][0] == pytest.approx(17.0)
    assert launchers["op delay us"][0] == pytest.approx(0.0)
    nccl = kernel_detail.kernel_launchers(frames, "ncclKernel_AllReduce_RING_LL_Sum_float")
    assert nccl["operator"].to_list() == ["aten::linear"]
    ops = kernel_detail.launching_operators(frames)
    by = {r["operator"]: r for r in ops.iter_rows(named=True)}
    assert by["aten::linear"]["max ops"] == 3 and by["aten::mm"]["max ops"] == 1
    assert by["aten::linear"]["instances"] == 8
    streams = kernel_detail.kernel_streams(frames, gemm)
    assert streams["stream"].to_list() == [7] * 4
    assert kernel_detail.kernel_occurrences(frames, gemm)["n"].sum() == 8
    few = kernel_detail.kernel_occurrences(frames, gemm, max_points=3)
    assert few.height <= 4 * 3 and few["n"].sum() == 8
    empty = {0: frames[0].clear()}
    assert kernel_detail.kernel_table(empty).is_empty()
    assert kernel_detail.kernel_launchers(frames, "no such kernel").is_empty()
    assert kernel_detail.launching_operators(empty).is_empty()


def analysis_columns(kt: FrameTable) -> pl.DataFrame:
    """The table's frame without the short-name column the screen adds."""
    return kt.frame.select(list(kernel_detail.KERNEL_TABLE_COLUMNS))


def test_short_labels() -> None:
    assert short_label("COMPUTATION overlapping COMMUNICATION") == "COMP + COMM"
    assert short_label("MEMORY") == "MEM"


# -- every shared trace --------------------------------------------------------------------------


def _cases() -> list[str]:
    from tests.conftest import SHARED

    folder = SHARED / "traces"
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


async def test_shared_traces(shared: Path, tmp_path: Path) -> None:
    """The screens through the app on a CPU-only rank (empty states), then every shared case's
    results computed as the screens' workers do and shown on those screens: one app session,
    so the whole check stays fast."""
    app = make_app(shared / "traces" / "cpu_only", tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, timeout=60)
        ks = await open_screen(pilot, "K")
        assert "No GPU kernels" in text_of(ks, "#kernels-summary")
        ds = await open_screen(pilot, "E")
        assert "No GPU kernels" in text_of(ds, "#detail-summary")
        ss = await open_screen(pilot, "Q")
        assert "no operator launches GPU work" in text_of(ss, "#seq-summary")
        assert not [w for w in app.workers if w.group == "screen" and w.error is not None]
        cases = _cases()
        assert "cpu_only" in cases and "trace_filter" in cases
        with_kernels = 0
        for case in cases:
            frames = trace_set(shared / "traces" / case).frames()  # parsed once a process
            has_kernels = not kernel_detail.kernel_table(frames).is_empty()
            with_kernels += has_kernels
            ks.show(KernelsScreen.compute(frames, Params(extra={"fold": True})))
            summary = text_of(ks, "#kernels-summary")
            assert ("No GPU kernels" in summary) != has_kernels, case
            result = KernelDetailScreen.compute(frames, Params(extra={"name": None}))
            ds.show(result)
            assert (result["name"] is not None) == has_kernels, case
            assert text_of(ds, "#detail-summary").strip()
            result = SequencesScreen.compute(frames, Params(extra={"operator": None}))
            ss.show(result)
            assert text_of(ss, "#seq-summary").strip()
            ops = result.get("operators")
            if ops is not None and not ops.is_empty():
                op = ops["operator"][0]
                ss.show(SequencesScreen.compute(frames, Params(extra={"operator": op})))
                assert op in text_of(ss, "#seq-title"), case
            await pilot.pause()
        assert with_kernels >= 5  # most cases have GPU kernels: the tables were really shown


# -- snapshots -----------------------------------------------------------------------------------


def snapshot_root(tmp_path: Path) -> Path:
    """Four ranks of the tests' fixed generator, each step's launches inside ATen ops
    (`aten::linear` around all three, `aten::mm` around the GEMM's). Byte-identical run to run."""
    root = tmp_path / "traces"
    root.mkdir(parents=True)
    for rank in range(4):
        trace = rank_trace(rank, steps=3, world=4)
        steps = [e for e in trace["traceEvents"] if str(e.get("name", "")).startswith("Profiler")]
        for step in steps:
            t = step["ts"]
            for name, ts, dur in (("aten::linear", t + 1, 5), ("aten::mm", t + 2, 1)):
                trace["traceEvents"].append(
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": name,
                        "pid": 100,
                        "tid": 100,
                        "ts": ts,
                        "dur": dur,
                        "args": {"External id": 5000},
                    }
                )
        data = gzip.compress(orjson.dumps(trace), mtime=0)
        (root / f"rank-{rank}.trace.json.gz").write_bytes(data)
    assert T0  # the generator's fixed origin
    return root


def _run_before(keys: tuple[str, ...]):
    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        for key in keys:
            if key in SCREENS:
                await open_screen(pilot, key)
            else:
                await pilot.press(key)
                await wait_screen(pilot, type(pilot.app.screen_stack[0]))
        await pilot.pause()

    return run_before


#: each view in the dark theme; the light theme restyles, it does not lay out
#: (the light theme's snapshots elsewhere cover it: a light twin here would show the same layout)
SNAPSHOTS = {
    "kernels-hta-dark": ("K",),
    "detail-hta-dark": ("K", "enter"),  # the kernel under the cursor, as a new app has it
    "sequences-hta-dark": ("Q", "enter"),
}


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Walk:
    """One app (dark theme) on `snapshot_root` through each snapshot's keys in turn."""
    tmp_path = tmp_path_factory.mktemp("snapshots")
    app = make_app(snapshot_root(tmp_path), tmp_path, theme="hta-dark", ascii=False)
    steps = snapshot_steps({name: _run_before(keys) for name, keys in SNAPSHOTS.items()})
    return asyncio.run(walk_app(app, steps, size=SIZE, notifications=True))


@pytest.mark.parametrize("name", list(SNAPSHOTS))
def test_snapshot(snap_svg, snapshots: Walk, name: str) -> None:
    assert snap_svg(snapshots.check(name)["svg"])


def test_the_kernels_view_and_the_kernel_detail_share_each_ranks_hta_view(
    synth_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank held whole reaches the Kernels view as the frame every view reads, so HTA's
    view of it (kept per frame) is built once for both: the drill-down after the Kernels
    view builds none (issue 27: a view's numbers within 1 s of its key)."""
    from hta_tui.analysis import hta_view
    from hta_tui.app.screens.base import Params
    from hta_tui.trace.model import open_set

    ts = open_set(synth_root, Cache(tmp_path / "cache"), workers=1)
    built: list[int] = []  # HTA's views of a rank built to be kept (`rank_view`)
    real = hta_view.build_rank_view

    def build(events: pl.DataFrame, *a: Any, **kw: Any) -> pl.DataFrame:
        if kw.get("columns") is hta_view.CACHED_COLUMNS:
            built.append(id(events))
        return real(events, *a, **kw)

    monkeypatch.setattr(hta_view, "build_rank_view", build)
    kernels_frames = KernelsScreen.frames_for(ts, Params())
    assert KernelsScreen.compute(kernels_frames, Params())["kernels"].height
    assert len(built) >= len(ts.loaded())  # one view per rank, at least
    built.clear()
    detail = KernelDetailScreen.compute(
        KernelDetailScreen.frames_for(ts, Params()), Params(extra={"name": None})
    )
    assert detail["name"] is not None and not built


def test_the_kernel_details_numbers_come_before_its_launchers_and_runs(
    synth_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first tab and the summary line do not wait for the launchers and the longest
    runs (every run joined to its launch on every rank, the costlier tables on a real set):
    they come after (`later`), the same tables as the whole view's."""
    from hta_tui.app.screens.base import Params
    from hta_tui.trace.model import open_set

    ts = open_set(synth_root, Cache(tmp_path / "cache"), workers=1)
    frames = KernelDetailScreen.frames_for(ts, Params())
    params = Params(extra={"name": None})
    whole = KernelDetailScreen.compute(frames, params, ts.origin_ns)
    asked: list[str] = []
    for name in ("kernel_launchers", "kernel_runs"):
        real = getattr(kernel_detail, name)
        monkeypatch.setattr(
            kernel_detail, name, lambda *a, real=real, name=name, **kw: asked.append(name)
            or real(*a, **kw),
        )  # fmt: skip
    first = KernelDetailScreen().compute_on(ts, frames, params)
    assert first["name"] == whole["name"] and not asked
    assert_frame_equal(first["summary"], whole["summary"])
    assert first["launchers"].is_empty() and first["runs"].is_empty()
    later = KernelDetailScreen.later(frames, first, ts.origin_ns)
    assert later is not None and sorted(asked) == ["kernel_launchers", "kernel_runs"]
    assert not whole["launchers"].is_empty() and not whole["runs"].is_empty()
    assert_frame_equal(later["launchers"], whole["launchers"])
    assert_frame_equal(later["runs"], whole["runs"])
