"""Issue 17, point 8, for every key the report has (the catalog's and README's list): `--only`
takes it, and its text table fits 80 columns with every column kept, says how many rows it
left out and how to get them, prints whole numbers as integers (one format per column), and
lists named things most time first.

The trace: two GPU ranks with memory events (a leak), and the sync story (syncs, modules,
Python stacks) as a third rank, so that every table but five has rows.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import orjson
import pytest

from hta_tui.analysis import catalog
from hta_tui.cli import main
from hta_tui.report import run_report
from hta_tui.report_text import DEFAULT_ROWS, TIME_ORDER
from hta_tui.trace.cache import Cache
from tests.conftest import REPO
from tests.shared_sets import cases_cache
from tests.test_report_text import _column, _section

ALL_KEYS = [*catalog.BY_NAME, *catalog.TABLE_OWNER]

#: Tables that list named things, and the time (or size) they are listed by, most first
#: within a rank.
BY_TIME: dict[str, str] = {
    **TIME_ORDER,
    "kernel_view": "total (us)",
    "kernel_view_by_op": "total (us)",
    "operator_stats": "device_self_duration (us)",
    "operator_stats_by_input_shape": "device_self_duration (us)",
    "operator_call_stacks": "device_self_duration (us)",
    "unattributed_kernels": "time (us)",
    "kernel_backends": "time (us)",
    "kernel_modules": "time (us)",
    "collectives_hidden": "exposed (us)",
    "memory_peak": "live_mb",
    "memory_window_peak": "live_mb",  # (win26: the memory view's window)
    "memory_leaks": "never_freed_mb",
    "sync_summary": "blocked (us)",
    "collective_stragglers": "cost_us",
    "frequent_cuda_kernel_sequences": "count",
    # the app's views' tables (registry: screens)
    "kernel_table": "sum us",
    "kernel_view_job": "total (us)",
    "kernel_view_job_by_op": "total (us)",
    "kernel_launchers": "sum us",
    "kernel_runs": "dur (us)",
    "launching_operators": "gpu us",
    "longest_gaps": "gap (us)",
    "comm_kernels_exposed": "time (us)",
    "job_operator_stats": "device_self_duration (us)",
    "job_operator_stats_by_input_shape": "device_self_duration (us)",
    "job_operator_call_stacks": "device_self_duration (us)",
    "operator_python_stacks": "host total (us)",
    # the overview and the diff's sides (registry: path26)
    "diff_side_ops": "total_duration",
    "diff_side_item_kernels": "sum",
}
#: The other tables, and the order they keep instead.
OTHER_ORDER: dict[str, str] = {
    **dict.fromkeys(
        (
            "temporal_breakdown",
            "comm_comp_overlap",
            "straggler_scores",
            "potential_stragglers",
            "sync_verdict",
            "kernel_attribution",
            "distributed_hierarchy",
            "step_time_stats",
            "step_time_average",
            "kernel_launch_summary",
        ),
        "by rank",
    ),
    **dict.fromkeys(
        (
            "idle_time_breakdown",
            "idle_interval_stats",
            "queue_length_summary",
            "time_spent_blocked_on_full_queue",
            "collective_streams",
        ),
        "by rank and stream",
    ),
    **dict.fromkeys(
        (
            "gpu_metrics",
            "gpu_devices",
            "memory_device_peaks",
            "memory_no_curve",
            "memory_bw_summary",
        ),
        "by rank and device (or copy kind)",
    ),
    **dict.fromkeys(
        (
            "profiler_steps",
            "iterations",
            "step_time_breakdown",
            "step_selection",
            "outlier_steps",
            "memory_step_peaks",
            "comm_comp_per_rank",
            "comm_wait_transfer",
            "critical_path",
            "critical_path_what_if",
        ),
        "by rank and step",
    ),
    **dict.fromkeys(
        (
            "queue_length_time_series",
            "memory_bw_time_series",
            "cuda_kernel_launch_stats",
            "gpu_utilization_series",
            "gpu_sm_efficiency_series",
            "gpu_metric_series",
            "memory_curve",
            "memory_events",
            "collectives",
            "collective_instances",
            "syncs",
        ),
        "in time order",
    ),
    "comm_ops_stats": "by rank and collective kind",
    "memory_stats": "by rank, device and operator",
    "module_stats": "the module tree",
    "process_groups": "as distributedInfo lists them",
    "critical_path_edges": "by rank and step, in path order",
    "findings": "worst first: severity, then time at stake",
    "finding_evidence": "in the findings' order, each finding's rows in order",
    "kernel_backend_by_name": "one row per kernel name",
    # a view's window (the memory view's zoom, the timeline's rows)
    "memory_window": "in time order",
    "memory_window_events": "in time order",
    "memory_window_summary": "by rank",
    "memory_window_steps": "by rank and step",
    "memory_window_stats": "by rank and operator",
    "timeline_rows": "the timeline's: by rank, threads before streams, then counters",
    "kernel_verdict": "one sentence",
    "kernel_detail": "one row: the kernel described",
    "kernel_duration_summary": "by rank",
    "kernel_duration_histogram": "by rank and bin",
    "kernel_streams": "by rank and stream",
    "exposed_comm_per_rank": "by rank",
    "collective_last_calls": "by process group and sequence",
    "overview_files": "by rank, then path",
    "overview_temporal": "by rank",
    "overview_steps": "by rank and step",
    "diff_side_temporal": "HTA's temporal metrics, in its order",
    **dict.fromkeys(("diff_side_iterations", "diff_side_steps"), "by step"),
    "diff_side_item": "one row: the op or kernel described",
    "diff_side_item_ops": "one row",
    **dict.fromkeys(
        (
            "kernel_occurrences",
            "kernel_launches",
            "short_gpu_kernels",
            "runtime_outliers",
            "launch_delay_outliers",
        ),
        "by rank, in time order",
    ),
}


def readme_keys() -> list[str]:
    """The keys in README's table under 'Every analysis, headless'."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Every analysis, headless", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    return [k.strip() for row in rows for k in row.split("|")[1].split(",")]


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hta_tui.synth import write_trace_dir
    from hta_tui.synth.files import write_trace
    from hta_tui.synth.memory import MemoryOptions
    from hta_tui.synth.sync_story import make_sync_story

    d = tmp_path_factory.mktemp("every_key")
    memory = MemoryOptions(leak_op="aten::linear")
    write_trace_dir(d, ranks=2, steps=3, seed=3, kernels_per_step=40, memory=memory)
    story = make_sync_story(steps=2)
    # its own rank: a file of another process that says rank 0 is a conflict, not rank 0
    story["distributedInfo"]["rank"] = 2
    write_trace(story, d / "rank-2.json")
    return d


@pytest.fixture(scope="module")
def key_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("key-cache")


@pytest.fixture(scope="module")
def outputs(trace_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """Every table once as JSON and once as text at 80 columns."""
    cache = Cache(tmp_path_factory.mktemp("cache"))
    doc, text = io.StringIO(), io.StringIO()
    run_report(trace_dir, as_json=True, only=ALL_KEYS, out=doc, cache=cache)
    run_report(trace_dir, only=ALL_KEYS, out=text, cache=cache, width=80)
    return orjson.loads(doc.getvalue()), text.getvalue()


def test_every_key_is_in_readme_and_has_an_order() -> None:
    assert set(readme_keys()) == set(ALL_KEYS)
    assert sorted([*BY_TIME, *OTHER_ORDER]) == sorted(ALL_KEYS)


def test_the_trace_fills_every_table_but_nine(outputs: tuple[dict, str]) -> None:
    doc, _ = outputs
    empty = {k for k in ALL_KEYS if not doc[k]}
    # a queue never full, no step straggler among the ranks (the collective straggler is rank
    # 1, last at every all_reduce of the two generated ranks), no call stacks in 2.x traces,
    # every kernel launched inside an operator (so no verdict on them either), no operator
    # named for its Python stacks nor for the diff's drill-down, memory events with totals
    assert empty == {
        "memory_no_curve",
        "time_spent_blocked_on_full_queue",
        "potential_stragglers",
        "operator_call_stacks",
        "job_operator_call_stacks",
        "unattributed_kernels",
        "kernel_verdict",
        "operator_python_stacks",
        "diff_side_item_kernels",  # no op named (`diff_item`)
    }


@pytest.mark.heavy
@pytest.mark.parametrize("key", sorted(set(ALL_KEYS) | set(readme_keys())))
def test_only_takes_every_key(
    trace_dir: Path,
    key_cache: Path,
    key: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A table's name gives that table; an analysis's name all of its tables."""
    monkeypatch.setenv("HTA_TUI_CACHE", str(key_cache))  # the files parsed once for every key
    assert main(["report", str(trace_dir), "--only", key, "--json"]) == 0, key
    doc = orjson.loads(capsys.readouterr().out)
    siblings = {t for t, owner in catalog.TABLE_OWNER.items() if owner == key}
    assert set(doc) == {"files", "scope", key} | siblings
    assert set(doc["scope"]) == {key} | siblings  # what each covers (issue 24, point 5)


@pytest.mark.parametrize("key", ALL_KEYS)
def test_text_table_of_every_key(outputs: tuple[dict, str], key: str) -> None:
    doc, text = outputs
    assert max(len(line) for line in text.splitlines()) <= 80
    lines = _section(text, key)
    records = doc[key]
    if not records:
        assert lines == ["(no rows: the loaded traces have nothing for this table)"]
        return
    if key in catalog.LIST_KEYS:
        records = [{catalog.LIST_KEYS[key]: v} for v in records]
    shown = min(len(records), DEFAULT_ROWS)
    note = " ".join(lines)
    if len(records) > DEFAULT_ROWS:
        left = len(records) - DEFAULT_ROWS
        assert f"({left:,} more rows of {len(records):,} not shown: --rows 0 shows them all;" in (
            note
        )
        assert "--json or --csv DIR write every row)" in note
    else:
        assert "more rows" not in note
    for column in records[0]:
        if (key, column) == ("findings", "evidence"):  # nested: the finding_evidence table
            continue
        cells = _column(lines, column)  # every column is printed, in some column group
        assert len(cells) == shown, column
        values = [r[column] for r in records]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if not numbers or len(numbers) != len([v for v in values if v is not None]):
            continue
        written = [c for c in cells if c]
        if all(float(v).is_integer() for v in numbers):
            assert all(re.fullmatch(r"-?\d+", c) for c in written), (column, written[:5])
        else:  # one format for the column: the same number of decimals in every cell
            assert len({len(c.partition(".")[2]) for c in written}) == 1, (column, written[:5])
    if key in BY_TIME:
        by = BY_TIME[key]
        ranks = _column(lines, "rank") if "rank" in records[0] else ["0"] * shown
        values = [float(v) for v in _column(lines, by)]
        for rank in set(ranks):
            mine = [v for r, v in zip(ranks, values, strict=True) if r == rank]
            assert mine == sorted(mine, reverse=True), (key, rank, mine)


#: Shared traces with long kernel, operator and module names (C++ templates, lambdas).
LONG_NAMES = ["tracelens_h100_bert_memory", "pytorch_cpu_vit_memory"]


@pytest.mark.shared
@pytest.mark.parametrize("case", LONG_NAMES)
def test_every_table_of_real_traces_fits_80_columns(shared: Path, case: str) -> None:
    """Real names are long: a text column is cut to fit beside the key columns its group
    repeats (aten-op kernel sequences, nn.Module paths), never past the width. The files
    table alone keeps its paths whole."""
    out = io.StringIO()
    root = shared / "traces" / case
    run_report(root, only=ALL_KEYS, out=out, cache=cases_cache(), width=80)
    sections = ("\n" + out.getvalue()).split("\n# ")[1:]
    assert len(sections) == len(ALL_KEYS) + 1
    for section in sections:
        title, *lines = section.splitlines()
        if title.startswith("Files in"):
            continue
        assert max(map(len, lines), default=0) <= 80, title
