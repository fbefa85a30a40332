"""The overview's cached per-file summaries give the same numbers as the full analysis."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from hta_tui.analysis.overview import file_table, precompute, temporal_table
from hta_tui.analysis.temporal import temporal_breakdown
from hta_tui.synth import make_trace, write_trace, write_trace_dir
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import RankData, open_set


@pytest.mark.parametrize("hta_compat", [False, True])
def test_summaries_equal_the_full_temporal_breakdown(tmp_path: Path, hta_compat: bool) -> None:
    write_trace_dir(tmp_path / "t", ranks=3, steps=3, seed=4)
    ts = open_set(tmp_path / "t", Cache(tmp_path / "cache"), after_parse=precompute)
    full = temporal_breakdown(ts.frames(), hta_compat=hta_compat)
    assert full.height == 3
    assert_frame_equal(temporal_table(ts, hta_compat=hta_compat), full)


def test_warm_open_reads_no_frames(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_trace_dir(tmp_path / "t", ranks=2, steps=3, seed=1)
    cache = Cache(tmp_path / "cache")
    first = temporal_table(open_set(tmp_path / "t", cache, after_parse=precompute))
    busy = file_table(open_set(tmp_path / "t", cache))["gpu_busy_us"]

    def no_frames(self: RankData, name: str = "events") -> pl.DataFrame:
        raise AssertionError("a warm overview must not read frames")

    monkeypatch.setattr(RankData, "frame", no_frames)
    warm = open_set(tmp_path / "t", cache)
    assert all(e.cached for e in warm.entries.values())
    assert_frame_equal(temporal_table(warm), first)
    assert file_table(warm)["gpu_busy_us"].to_list() == busy.to_list()
    assert all(b > 0 for b in busy)


def test_step_filter_follows_the_whole_job(tmp_path: Path) -> None:
    """HTA filters every rank by ProfilerStep when the JOB has >= 2 step names. A rank whose
    own file has a single step is precomputed unfiltered in its worker; the overview must
    notice and recompute it with the filter, like the full analysis does."""
    d = tmp_path / "t"
    d.mkdir()
    write_trace(make_trace(0, world_size=2, steps=3, seed=2), d / "rank-0.json")
    one = make_trace(1, world_size=2, steps=1, seed=2)
    write_trace(one, d / "rank-1.json")
    ts = open_set(d, Cache(tmp_path / "cache"), after_parse=precompute)
    assert len(ts.loaded()[1].meta["step_names"]) == 1
    assert_frame_equal(temporal_table(ts), temporal_breakdown(ts.frames()))


def _overlapping(trace: dict) -> int:
    """GPU ops that start before an earlier one of their stream ended, from the raw events."""
    by_stream: dict[int, list[tuple[float, float]]] = {}
    for e in trace["traceEvents"]:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            by_stream.setdefault(e["args"]["stream"], []).append((e["ts"], e["ts"] + e["dur"]))
    count = 0
    for spans in by_stream.values():
        reach = None
        for start, end in sorted(spans, key=lambda se: (se[0], -se[1])):
            count += reach is not None and start < reach
            reach = end if reach is None else max(reach, end)
    return count


def test_files_count_the_gpu_ops_that_overlap_on_their_stream(tmp_path: Path) -> None:
    """Issue 31 point 3: the overview's data quality line (and report --json's files) count
    the GPU ops a timeline with one lane per stream would drop; a file without says nothing."""
    from hta_tui.app.format import file_rows
    from hta_tui.synth.graph_replay import make_graph_replay
    from tests.test_report import report_json

    root = tmp_path / "t"
    root.mkdir()
    overlap = make_graph_replay(steps=2, kernels=12, overlap=True)
    plain = make_graph_replay(steps=2, kernels=12)
    plain["distributedInfo"] = {**plain["distributedInfo"], "rank": 1, "world_size": 2}
    overlap["distributedInfo"]["world_size"] = 2
    write_trace(overlap, root / "rank-0.json")
    write_trace(plain, root / "rank-1.json")
    expected = _overlapping(overlap)
    assert expected > 0 and _overlapping(plain) == 0
    files = file_table(open_set(root, Cache(tmp_path / "cache"), after_parse=precompute))
    assert files.sort("rank")["overlapping_on_stream"].to_list() == [expected, 0]
    _, doc = report_json(root, tmp_path, only=["kernel_attribution"])
    assert [f["overlapping_on_stream"] for f in doc["files"]] == [expected, 0]
    rows = {r.rank: r for r in file_rows(files, watching=False)}
    assert rows[0].reason.startswith(f"{expected} GPU ops overlap on their stream: ")
    assert "Perfetto would drop them (one lane per stream)" in rows[0].reason
    assert rows[1].reason == ""


def test_a_report_missing_summaries_makes_the_breakdown_rank_by_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report --hta-compat` (whose summaries the parser does not make) or a `derived/` gone:
    the temporal breakdown is made rank by rank as the other analyses (on workers, one
    rank's frames at a time), not by summarising every rank in the client; the same JSON as
    from the summaries, once they are there. Ranks that disagree on HTA's step filter still
    go through the summaries (only they give the job's numbers)."""
    import io
    import shutil

    from hta_tui.analysis import overview
    from hta_tui.exec import Backend
    from hta_tui.report import run_report
    from hta_tui.trace.cache import JOBS_DIR

    d = tmp_path / "t"
    write_trace_dir(d, ranks=2, steps=3, seed=1)
    cache = Cache(tmp_path / "cache")
    summarised: list[bool] = []
    summary = overview.rank_summary

    def counted(*args: object, **kw: bool) -> pl.DataFrame:
        summarised.append(kw["hta_compat"])
        return summary(*args, **kw)  # type: ignore[arg-type]

    def report() -> str:
        out = io.StringIO()
        only = ["temporal_breakdown"]
        kw = {"cache": cache, "backend": Backend(), "only": only, "hta_compat": True}
        assert run_report(d, as_json=True, out=out, **kw) == 0  # type: ignore[arg-type]
        return out.getvalue()

    monkeypatch.setattr(overview, "rank_summary", counted)
    rank_wise = report()
    assert True not in summarised  # no compat summary made here
    ts = open_set(d, cache)
    assert not overview.summaries_decide(ts, hta_compat=True)
    for data in ts.loaded().values():  # the summaries made: the report reads them
        overview.summary(data, step_filter=True, hta_compat=True)
    assert overview.summaries_decide(open_set(d, cache), hta_compat=True)
    shutil.rmtree(cache.root / JOBS_DIR)  # (the answer kept per job: made again)
    tables: list[bool] = []
    table = overview.temporal_table
    monkeypatch.setattr(
        overview, "temporal_table", lambda *a, **kw: tables.append(True) or table(*a, **kw)
    )
    assert report() == rank_wise
    assert tables == [True]  # from the summaries, this time
    # a rank with one step in a job of several: the job's filter differs from its own
    write_trace(make_trace(2, world_size=3, steps=1, seed=1), d / "rank-2.json")
    assert overview.summaries_decide(open_set(d, cache, after_parse=precompute), hta_compat=True)
