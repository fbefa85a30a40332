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
