"""One door to the analyses (analysis/registry.py): an analysis declared once is in `--list`,
the report, `--only` and the API; the screens and the API ask the registry for the tables the
report gives instead of calling the analysis functions themselves; one table costs one table;
options go by HTA's names."""

from __future__ import annotations

import ast
import io
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from hta_tui import cli
from hta_tui.analysis import comm_overview, comm_stats, idle, registry
from hta_tui.api import TraceAnalysis
from hta_tui.app.screens.base import Params
from hta_tui.app.screens.registry import SCREENS
from hta_tui.report import build_report, build_tables
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set
from tests.test_app_support import synth_job

PKG = Path(__file__).resolve().parents[1] / "hta_tui"


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return synth_job(tmp_path_factory, seed=11)


@pytest.fixture(scope="module")
def job(job_dir: tuple[Path, Path]):
    return open_set(job_dir[0], Cache(job_dir[1]))


def _kernel_counts(r: registry.Ranks, o: registry.Options) -> registry.Lazy:
    """A new analysis: kernels per rank, and the `top_k` longest of them (an option)."""

    def counts() -> pl.DataFrame:
        return pl.DataFrame(
            {
                "rank": list(r),
                "kernels": [int((ev["kind"] == "kernel").sum()) for ev in r.values()],
            },
            schema={"rank": pl.Int64, "kernels": pl.Int64},
        )

    def longest() -> pl.DataFrame:
        frames = [
            ev.filter(pl.col("kind") == "kernel").select(pl.lit(rank).alias("rank"), "name", "dur")
            for rank, ev in r.items()
        ]
        return pl.concat(frames).sort("dur", descending=True).head(o.top_k)

    return {"kernel_counts": counts, "longest_kernels": longest}


@pytest.fixture
def declared() -> Iterator[registry.Analysis]:
    a = registry.declare(
        registry.Analysis(
            "kernel_counts",
            "Kernels per rank (declared by a test)",
            _kernel_counts,
            default=False,
            options=("top_k",),
            also=("longest_kernels",),
        )
    )
    try:
        yield a
    finally:
        registry.withdraw(a.name)


def test_one_declaration_reaches_list_report_only_and_api(
    declared: registry.Analysis, job, job_dir: tuple[Path, Path]
) -> None:
    listed = io.StringIO()
    cli.list_analyses(listed)
    text = listed.getvalue()
    assert "kernel_counts" in text and "Kernels per rank (declared by a test)" in text
    assert "longest_kernels" in text and "(from kernel_counts)" in text

    want = {
        r: int((f["kind"] == "kernel").sum()) for r, f in job.frames().items()
    }  # the truth, counted here from the frames
    tables = build_tables(job, names=["kernel_counts"])
    assert list(tables) == ["files", "kernel_counts", "longest_kernels"]
    assert dict(tables["kernel_counts"].iter_rows()) == want
    only = build_tables(job, names=["longest_kernels"])
    assert list(only) == ["files", "longest_kernels"]
    assert only["longest_kernels"].height == registry.Options().top_k

    ta = TraceAnalysis(job_dir[0], cache=Cache(job_dir[1]))
    assert dict(ta.get_kernel_counts().iter_rows()) == want
    assert ta.get_longest_kernels(top_k=2).height == 2  # an option by its name
    assert dict(ta.get_kernel_counts(ranks=[1]).iter_rows()) == {1: want[1]}
    assert cli.main(["report", str(job_dir[0]), "--only", "kernel_counts", "--json"]) == 0


def test_a_function_may_answer_its_tables_made(job) -> None:
    """An analysis written the eager way (name -> table) is declared as it is."""

    def eager(r: registry.Ranks, o: registry.Options) -> dict[str, pl.DataFrame]:
        return {"rank_count": pl.DataFrame({"ranks": [len(r)]})}

    a = registry.declare(registry.Analysis("rank_count", "Ranks", eager))  # type: ignore[arg-type]
    try:
        assert registry.table(job.frames(), "rank_count")["ranks"].to_list() == [2]
        assert registry.run(job.frames(), ["rank_count"])["rank_count"].item() == 2
    finally:
        registry.withdraw(a.name)


def test_withdrawn_analysis_is_gone_everywhere(declared: registry.Analysis) -> None:
    registry.withdraw(declared.name)
    assert not registry.known("kernel_counts") and not registry.known("longest_kernels")
    registry.declare(declared)  # the fixture withdraws it again


def test_a_taken_name_is_refused(declared: registry.Analysis) -> None:
    with pytest.raises(ValueError, match="temporal_breakdown"):
        registry.declare(
            registry.Analysis("temporal_breakdown", "again", _kernel_counts)  # type: ignore[arg-type]
        )


def test_every_table_declared_with_its_analysis(job) -> None:
    """The names an analysis declares are the tables it gives: `--only`, `--list` and the API
    rely on them."""
    for a in registry.ANALYSES:
        more = {f: job.frames(f) for f in a.frames}
        lazy = a.lazy(job.frames(), registry.Options(), **more, **({"meta": {}} if a.meta else {}))
        assert set(lazy) == set(a.tables) | set(a.results), a.name


def test_one_table_costs_one_table(job, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking for one table of the distributed view makes none of its others."""

    def refuse(*args: object, **kw: object) -> None:
        raise AssertionError("made a table not asked for")

    monkeypatch.setattr(comm_overview, "comm_comp_per_rank", refuse)
    monkeypatch.setattr(comm_overview, "wait_transfer_per_step", refuse)
    monkeypatch.setattr(comm_stats, "collective_instances", refuse)
    got = registry.table(job.frames(), "comm_ops_stats")
    assert "rank" in got.columns


def test_tables_shared_inside_an_analysis_are_made_once(job, monkeypatch) -> None:
    calls = []
    real = idle.idle_time_breakdown

    def counted(*args: object, **kw: object):
        calls.append(1)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(idle, "idle_time_breakdown", counted)
    got = registry.tables(job.frames(), ["idle_time_breakdown", "idle_interval_stats"])
    assert len(calls) == 1 and set(got) == {"idle_time_breakdown", "idle_interval_stats"}


def test_options_by_hta_names() -> None:
    """HTA's keyword and ours name the same option, in `--set` and in the API's door."""
    assert registry.options_with({"consecutive_kernel_delay": "7"}) == registry.options_with(
        {"consecutive_kernel_delay_us": "7"}
    )
    assert registry.options_from(runtime_cutoff=5).runtime_cutoff_us == 5
    with pytest.raises(ValueError, match="no_such"):
        registry.options_from(no_such=1)
    for a in registry.ANALYSES:
        assert set(a.options) <= set(registry.parameters()) | {"hta_compat"}, a.name


def test_list_says_cost_options_and_frames_of_each() -> None:
    out = io.StringIO()
    cli.list_analyses(out)
    text = out.getvalue()
    assert "options: consecutive_kernel_delay, hta_compat" in text  # HTA's name, not ours
    assert "reads: flows" in text and "reads: memory" in text
    assert "cost: heavy" in text  # the critical path
    assert text.count("cost: ") == len(registry.ANALYSES)


def test_api_methods_answer_what_the_report_gives(job, job_dir: tuple[Path, Path]) -> None:
    ta = TraceAnalysis(job_dir[0], cache=Cache(job_dir[1]))
    report = build_tables(job, names=["idle_time_breakdown", "step_time_breakdown"])
    breakdown, stats = ta.get_idle_time_breakdown(show_idle_interval_stats=True)
    assert_frame_equal(breakdown, report["idle_time_breakdown"])
    assert stats is not None
    assert_frame_equal(stats, report["idle_interval_stats"])
    assert_frame_equal(ta.get_step_selection(), report["step_selection"])
    _, outliers = ta.get_step_time_stats()
    assert_frame_equal(outliers, report["outlier_steps"])


def test_a_declaration_says_what_its_tables_cover(job) -> None:
    """`steps` and `definitions` on a declaration reach `report --json`'s scope for each of
    its tables (analysis/coverage.py reads the registry)."""
    from hta_tui.analysis import coverage

    def both(r: registry.Ranks, o: registry.Options) -> registry.Lazy:
        return {
            "whole_count": lambda: pl.DataFrame({"n": [len(r)]}),
            "whole_too": lambda: pl.DataFrame(),
        }

    a = registry.declare(
        registry.Analysis(
            "whole_count", "Ranks", both, also=("whole_too",), steps="whole", definitions="own"
        )
    )
    try:
        scope = build_report(job, names=["whole_count"])["scope"]
    finally:
        registry.withdraw(a.name)
    assert set(scope) == {"whole_count", "whole_too"}
    for table in scope.values():
        assert table["steps"] is None and table["ranks"] == [0, 1]
        assert table["step_definition"] == coverage.STEPS["whole"]
        assert table["definitions"] == coverage.DEFINITIONS["own"][0]


def test_kernel_and_collective_methods_answer_the_report(job, job_dir) -> None:
    """The API's kernel attribution, backends and collectives-per-stream methods give the
    report's tables (the registry's door), rank by rank too."""
    ta = TraceAnalysis(job_dir[0], cache=Cache(job_dir[1]))
    names = ["kernel_attribution", "collectives_hidden", "step_time_average"]
    report = build_tables(job, names=names)
    assert {"unattributed_kernels", "kernel_backends", "collective_streams"} <= set(report)
    assert_frame_equal(ta.get_kernel_attribution(), report["kernel_attribution"])
    assert_frame_equal(ta.get_unattributed_kernels(), report["unattributed_kernels"])
    assert_frame_equal(ta.get_kernel_backends(), report["kernel_backends"])
    assert_frame_equal(ta.get_collectives_hidden(), report["collectives_hidden"])
    assert_frame_equal(ta.get_collective_streams(), report["collective_streams"])
    assert_frame_equal(ta.get_step_time_average(), report["step_time_average"])
    assert set(ta.get_kernel_backends(ranks=[1])["rank"].to_list()) <= {1}
    assert report["kernel_backends"]["rank"].n_unique() == 2  # both ranks ran kernels


def _analysis_calls(path: Path) -> set[str]:
    """`module.function` of hta_tui.analysis that a file refers to."""
    tree = ast.parse(path.read_text())
    modules: dict[str, str] = {}
    functions: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hta_tui.analysis"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                is_module = (PKG.parent / (full.replace(".", "/") + ".py")).exists()
                (modules if is_module else functions)[a.asname or a.name] = full
    out = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            out.add(f"{modules[node.value.id]}.{node.attr}")
        elif isinstance(node, ast.Name) and node.id in functions:
            out.add(functions[node.id])
    return out


#: Front-end calls of a function the registry wraps, each with why it cannot be the
#: registry's table: a parameter the report does not have, or work on a table already made.
SECOND_DOORS_ALLOWED = {
    ("app/screens/timelines.py", "hta_tui.analysis.queue.queue_length_summary_from_series"),
    ("app/screens/timelines.py", "hta_tui.analysis.queue.time_blocked_on_full_queue"),
    ("app/screens/step_time.py", "hta_tui.analysis.step_time_stats.outlier_steps"),
    ("api_memory.py", "hta_tui.analysis.memory_view.curve"),  # max_points
    ("api.py", "hta_tui.analysis.collectives.calls"),  # ns and every column, as HTA's
    ("api.py", "hta_tui.analysis.queue.time_blocked_on_full_queue"),  # the caller's series
    ("api.py", "hta_tui.analysis.steps.potential_stragglers"),  # num_candidates
    ("api.py", "hta_tui.analysis.steps.straggler_candidates"),  # the caller's steps
    ("api.py", "hta_tui.analysis.kernels.kernel_duration_distribution"),  # bins
    ("api_critical_path.py", "hta_tui.analysis.critical_path.tables.critical_path_tables"),
}


def test_front_ends_call_no_analysis_the_registry_wraps() -> None:
    """The screens, the API and the report reach every table the registry gives through it,
    not by calling the function behind it (which is how options and names drifted)."""
    wrapped = _analysis_calls(PKG / "analysis" / "registry.py") - {
        "hta_tui.analysis.scheduling.run_all",
        "hta_tui.analysis.checkpoint.checkpoint",  # where work gives way, not an analysis
    }
    files = [*(PKG / "app").rglob("*.py"), *PKG.glob("api*.py"), PKG / "report.py"]
    found = {
        (str(f.relative_to(PKG)), call) for f in files for call in _analysis_calls(f) & wrapped
    }
    assert found <= SECOND_DOORS_ALLOWED, sorted(found - SECOND_DOORS_ALLOWED)


def _screens_with_analyses() -> list[type]:
    return [cls for e in SCREENS if getattr(cls := e.load(), "ANALYSES", ())]


def test_screens_declare_registry_tables() -> None:
    screens = _screens_with_analyses()
    assert len(screens) >= 10
    for cls in screens:
        unknown = [n for n in cls.ANALYSES if not registry.known(n)]
        assert not unknown, (cls.__name__, unknown)


def test_every_screen_computes_through_the_registry(job, monkeypatch) -> None:
    """Each screen's computation asks the registry for the tables it declares (recorded at
    the door) and shows what the registry gave."""
    asked: list[str] = []
    real = registry.tables

    def recording(ranks, names, options=None, **kw):
        names = list(names)
        asked.extend(names)
        return real(ranks, names, options, **kw)

    monkeypatch.setattr(registry, "tables", recording)
    # no app: the findings view's kept answers (the app's cache) are off, as with --no-cache
    from types import SimpleNamespace

    from hta_tui.app.screens import findings as findings_screen

    monkeypatch.setattr(findings_screen, "hta_app", lambda _: SimpleNamespace(kept_answers=None))
    frames = job.frames()
    for cls in _screens_with_analyses():
        asked.clear()
        screen = cls.__new__(cls)  # its computation only: no app, no widgets
        params = Params(extra={"operator": "ProfilerStep#1"})
        result = cls.compute_on(screen, job, frames, params)
        assert result is not None
        if cls.LATER:  # the parts a view shows after its numbers ask the registry too
            cls.compute_later(screen, job, frames, params, result)
        want = set(cls.ANALYSES)
        if cls.__name__ == "StepsScreen":  # CPU or GPU annotations, as `g` says
            want -= {"gpu_user_annotation_breakdown"}
        if cls.__name__ == "OperatorsScreen":  # per operator or per input shape, as `v` says
            want -= {"job_operator_stats_by_input_shape"}
        assert want <= set(asked), (cls.__name__, sorted(want - set(asked)))


_SHOWN = "on a table the registry made"
_EXPORT = "writes the file the user asked for (an export): no number shown"
_COVER = "what the numbers cover, for titles"
#: What the app's screens may use of the analyses besides the registry, each with why:
#: where work gives way, display helpers, column names, and reshaping of tables it made.
SCREEN_HELPERS: dict[str, str] = {
    # a large rank's timeline (big27c): the columns its rows are told apart by, for the
    # screen's own read of the rank's distinct rows (reads are the screen's, as frames are)
    "hta_tui.analysis.timeline_rows.lane_keys": "what a read of a large rank's rows selects",
    # a view's window (win26): the memory window's tables as one value to draw, the next
    # window a key asks for, and the timeline's per-key searches of the rows the registry made
    "hta_tui.analysis.memory_window.MemoryWindow": "the window the registry's tables describe",
    "hta_tui.analysis.memory_window.from_tables": "the registry's window tables, to draw",
    "hta_tui.analysis.memory_window.zoom": "the window `+`/`-` asks the registry for next",
    "hta_tui.analysis.memory_window.pan": "the window `[`/`]` asks the registry for next",
    "hta_tui.analysis.timeline_rows.Timeline": "the registry's `timeline_model`",
    "hta_tui.analysis.timeline_counters.QUEUE_LANE": "which counter row a lane is",
    **dict.fromkeys(
        [
            "hta_tui.analysis.timeline_rows.busy_before",
            "hta_tui.analysis.timeline_rows.innermost_at",
            *(
                f"hta_tui.analysis.timeline_events.{n}"
                for n in ("Ref", "details", "flow_partners", "marked", "matching")
            ),
            *(f"hta_tui.analysis.timeline_events.{n}" for n in ("next_event", "range_summary")),
            "hta_tui.analysis.timeline_events.resolve",
        ],
        "a key's search of the rows of the registry's `timeline_model`",
    ),
    "hta_tui.analysis.checkpoint.checkpoint": "where a view's work gives way",
    "hta_tui.analysis.checkpoint.hooked": "where a view's work gives way",
    "hta_tui.analysis.names.fold_name": "display: a kernel's short name",
    "hta_tui.analysis.names.fold_names": "display: short names of a table's names",
    "hta_tui.analysis.scope.describe_steps": _COVER,
    "hta_tui.analysis.scope.every_step_frames": "the frames `H` asks for, before any analysis",
    "hta_tui.analysis.scope.step_scope": _COVER,
    "hta_tui.analysis.scope.StepScope": _COVER,
    "hta_tui.analysis.scope.steps_from_names": _COVER,
    "hta_tui.analysis.gaps.START": "a column's name",
    "hta_tui.analysis.kernel_detail.START": "a column's name",
    "hta_tui.analysis.kernel_owners.ANNOTATED": "a value of a table's column",
    "hta_tui.analysis.idle.IDLE_CATEGORIES": "column names",
    "hta_tui.analysis.tb_roles.CATEGORIES": "column names",
    "hta_tui.analysis.gpu_metric_series.SERIES": "column names",
    "hta_tui.analysis.queue.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM": "a constant said in a note",
    "hta_tui.analysis.kernel_detail.trace_origin": "the ranks' first moment (an origin)",
    "hta_tui.analysis.sequences.pick_rank": "which rank a one-rank view shows",
    "hta_tui.analysis.operator_stacks.has_python_frames": "whether to offer a key (no number)",
    "hta_tui.analysis.downsample.thin_points": "a chart's points, " + _SHOWN,
    "hta_tui.analysis.downsample.step_bucket_max": "a chart's points, " + _SHOWN,
    "hta_tui.analysis.step_compare.step_spread": _SHOWN,
    "hta_tui.analysis.step_compare.step_durations": _SHOWN,
    "hta_tui.analysis.step_time_stats.outlier_steps": _SHOWN,
    "hta_tui.analysis.queue.queue_length_summary_from_series": _SHOWN,
    "hta_tui.analysis.queue.time_blocked_on_full_queue": _SHOWN,
    "hta_tui.analysis.memory.memory_bw_summary_from_series": _SHOWN,
    "hta_tui.analysis.gpu_metrics.trace_buckets": "where the chart's time axis starts",
    "hta_tui.analysis.step_pairs.steps_text": _COVER,
    "hta_tui.analysis.counters_export.write_counters_trace": _EXPORT,
    "hta_tui.analysis.critical_path.export.overlay": _EXPORT,
    # the diff: each side's tables asked once per side, put side by side
    "hta_tui.analysis.diff.compare_summaries": _SHOWN,
    "hta_tui.analysis.diff.ops_from_compare": _SHOWN,
    "hta_tui.analysis.diff.temporal_sides": _SHOWN,
    "hta_tui.analysis.diff.detail_from_sides": _SHOWN,
    "hta_tui.analysis.step_pairs.pair_lengths": _SHOWN,
}
#: Computations not through the registry yet, each with why (issue 26: this list only
#: shrinks).
SCREEN_NOT_YET: dict[str, str] = {}
#: Whole views not moved yet, each with why: what they use of the analyses is theirs.
SCREEN_FILES_NOT_YET: dict[str, str] = {}


def test_screens_compute_only_through_the_registry() -> None:
    """Every screen's numbers come through the registry (issue 26's one door): what a
    screen (or the overview's worker) uses of the analyses otherwise is a helper listed
    with its reason, or a computation listed as not moved yet, with why; that list only
    shrinks (an entry no screen uses any more must go)."""
    files = [*(PKG / "app" / "screens").glob("*.py"), PKG / "app" / "refresh.py"]
    used = {
        (str(f.relative_to(PKG)), call)
        for f in files
        for call in _analysis_calls(f)
        if not call.startswith("hta_tui.analysis.registry")
    }
    unexplained = sorted(
        f"{where}: {call}"
        for where, call in used
        if call not in SCREEN_HELPERS
        and call not in SCREEN_NOT_YET
        and where not in SCREEN_FILES_NOT_YET
    )
    assert not unexplained, unexplained
    stale = sorted(set(SCREEN_NOT_YET) - {call for _, call in used})
    assert not stale, f"moved to the registry: drop them from SCREEN_NOT_YET: {stale}"
    for where in SCREEN_FILES_NOT_YET:  # a view moved to the registry leaves the list
        assert set(_analysis_calls(PKG / where)) - set(SCREEN_HELPERS), where
