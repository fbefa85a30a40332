"""The memory curve's downsampling (`memory_curve.lttb`) picks the points of the plugin's
`lttb_sample`, written here as the plugin does it (numpy per bin), whichever of its two loops
(plain Python for small bins, most of their points guessed at once beforehand; numpy for large
ones) it takes, ties included."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from hta_tui.analysis.memory_curve import lttb


def _plugin_lttb(data: np.ndarray, n_out: int) -> np.ndarray:
    n = len(data)
    bins = np.array_split(np.arange(1, n - 1), n_out - 2)
    keep = [0]
    a = data[0]
    for i, b in enumerate(bins):
        c = data[bins[i + 1]].mean(axis=0) if i + 1 < len(bins) else data[n - 1]
        bs = data[b]
        areas = 0.5 * np.abs((a[0] - c[0]) * (bs[:, 1] - a[1]) - (a[0] - bs[:, 0]) * (c[1] - a[1]))
        best = int(b[0] + np.argmax(areas))
        keep.append(best)
        a = data[best]
    return data[[*keep, n - 1]]


@pytest.mark.parametrize(("n", "n_out"), [(5_003, 500), (20_000, 700), (40_000, 400), (1_000, 3)])
def test_lttb_keeps_the_plugins_points(n: int, n_out: int) -> None:
    rng = np.random.default_rng(n)
    time_ms = np.cumsum(rng.random(n))
    allocated = np.cumsum(rng.normal(size=n)).round(0)  # whole MB: many equal areas
    curve = pl.DataFrame(
        {"device": "GPU0", "time_ms": time_ms, "allocated_mb": allocated, "reserved_mb": allocated}
    )
    ours = lttb(curve, n_out)
    want = _plugin_lttb(curve.select("time_ms", "allocated_mb", "reserved_mb").to_numpy(), n_out)
    assert ours.height == n_out
    assert (ours["device"] == "GPU0").all()
    assert np.array_equal(ours.select("time_ms", "allocated_mb", "reserved_mb").to_numpy(), want)
