"""Step-time statistics and outlier steps, on breakdowns whose values the test chose."""

from __future__ import annotations

import statistics

import polars as pl
import pytest

from hta_tui.analysis import tb_roles
from hta_tui.analysis.step_time_stats import outlier_steps, step_time_stats


def breakdown(times: list[float], slow_kernel: float) -> pl.DataFrame:
    """One rank; each step is CPU Exec, the last one also spends `slow_kernel` us in Kernel."""
    rows = []
    for i, t in enumerate(times):
        row = {f"{c} (us)": 0.0 for c in tb_roles.CATEGORIES}
        row["CPU Exec (us)"] = t
        if i == len(times) - 1:
            row["Kernel (us)"] = slow_kernel
        total = t + (slow_kernel if i == len(times) - 1 else 0.0)
        rows.append({"rank": 0, "step": i, "step_time (us)": total, **row})
    return pl.DataFrame(rows)


def test_stats_and_outlier_cause() -> None:
    times = [100.0, 102.0, 98.0, 101.0, 99.0, 100.0]
    df = breakdown(times, slow_kernel=400.0)
    totals = df["step_time (us)"].to_list()
    stats = step_time_stats(df).row(0, named=True)
    assert stats["steps"] == 6
    assert stats["mean (us)"] == pytest.approx(statistics.mean(totals))
    assert stats["p50 (us)"] == pytest.approx(statistics.median(totals))
    assert stats["max (us)"] == 500.0
    assert stats["jitter"] == pytest.approx(statistics.stdev(totals) / statistics.mean(totals))
    out = outlier_steps(df)
    assert out["step"].to_list() == [5]
    assert out["cause"].to_list() == ["Kernel"]
    assert out["cause_excess (us)"][0] == pytest.approx(400.0)
    # every category's change: Kernel +400; CPU Exec is 100 us, the median of its CPU Exec
    assert out["+Kernel (us)"][0] == pytest.approx(400.0)
    assert out["+CPU Exec (us)"][0] == pytest.approx(100.0 - statistics.median(times))


def test_steady_steps_have_no_outlier() -> None:
    assert outlier_steps(breakdown([100.0, 101.0, 99.0, 100.0], slow_kernel=0.0)).is_empty()
