"""Idle time is never negative outside --hta-compat (issue 17, point 3): kernels of one stream
that overlap give HTA a negative gap, which it sums; hta-tui measures from the latest end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hta_tui.analysis.idle import idle_time_breakdown
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import open_set
from tests import dialects

T0 = 1_700_000_000_000_000


def _overlapping_stream() -> dict[str, Any]:
    """Three kernels on stream 7, all launched early: [0, 100), [50, 80) inside the first,
    [105, 130). The stream is idle 5 us (100 -> 105); HTA's gaps are -50 and +25."""
    cpu = {"pid": 100, "tid": 100}
    gpu = {"pid": 0, "tid": 7}
    ev: list[dict[str, Any]] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            **cpu,
            "ts": T0 - 20,
            "dur": 200,
            "args": {"External id": 1},
        },
    ]
    for i, (start, end) in enumerate([(0, 100), (50, 80), (105, 130)]):
        corr = 10 + i
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                **cpu,
                "ts": T0 - 15 + i,
                "dur": 1,
                "args": {"correlation": corr},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k{i}",
                **gpu,
                "ts": T0 + start,
                "dur": end - start,
                "args": {"correlation": corr, "stream": 7, "device": 0},
            }
        )
    return {"schemaVersion": 1, "traceEvents": ev}


@pytest.fixture
def ranks(tmp_path: Path) -> Any:
    dialects.write(_overlapping_stream(), tmp_path / "t" / "rank-0.json")
    return open_set(tmp_path / "t", Cache(tmp_path / "cache")).frames()


def test_overlapping_kernels_give_no_negative_idle_time(ranks: Any) -> None:
    got, stats = idle_time_breakdown(ranks, show_idle_interval_stats=True)
    times = dict(zip(got["idle_category"], got["idle_time"], strict=True))
    assert times == {"kernel_wait": 5.0, "other": 0.0}  # the real gap 100 -> 105; k0 has none
    assert stats is not None and stats["min"].min() == 0.0


def test_hta_compat_keeps_htas_signed_gaps(ranks: Any) -> None:
    got, _ = idle_time_breakdown(ranks, hta_compat=True)
    times = dict(zip(got["idle_category"], got["idle_time"], strict=True))
    assert times == {
        "kernel_wait": -25.0,
        "other": 0.0,
    }  # (50 - 100) + (105 - 80), as HTA sums them


def test_longest_gaps_are_never_negative(ranks: Any) -> None:
    """The idle screen's longest gaps come from the same gaps: the one real gap, 5 us after
    k0 (the kernel that ended last), before k2."""
    from hta_tui.analysis.gaps import longest_gaps

    got = longest_gaps(ranks)
    # times from the trace's start, the CPU op 20 us before k0 (issue 24, point 15)
    at = "start (us from trace start)"
    assert got.select("gap (us)", at, "before", "after").rows() == [
        (5.0, 120.0, "k0", "k2"),
        (0.0, 120.0, "k0", "k1"),  # k1 runs inside k0: no gap
    ]
    hta = longest_gaps(ranks, hta_compat=True)  # HTA's signed gaps, from the previous kernel
    assert hta.select("gap (us)", at, "before").rows() == [
        (25.0, 100.0, "k1"),
        (-50.0, 120.0, "k0"),
    ]
