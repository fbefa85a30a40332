"""The Kernel detail view's time chart at many ranks: a few series, not one per rank.

At 1,000 ranks the chart drew one scatter (and ran one filter) per rank on the UI thread:
the view's numbers held the UI 0.1 s of its CPU (bench/MANY_RANKS.md, keys17). The ranks
past the legend are drawn together by the style each has on its own."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import polars as pl

from hta_tui.app.screens.detail import LEGEND_RANKS, RANK_MARKERS, KernelDetailScreen

#: The chart's colours, a rank's by its place among the ranks (the theme's variables).
COLOURS = ("primary", "warning", "success", "error", "accent", "secondary")


class _Plt:
    """What the chart is told: every scatter's points, marker, colour and label."""

    def __init__(self) -> None:
        self.scatters: list[tuple[list, list, str, object, str | None]] = []

    def scatter(self, xs, ys, *, marker, color, label=None) -> None:
        self.scatters.append((list(xs), list(ys), marker, color, label))

    def __getattr__(self, name: str):  # ticks, title, frame: not looked at here
        return lambda *a, **k: None


def _draw(occ: pl.DataFrame) -> _Plt:
    plt = _Plt()
    fake = SimpleNamespace(
        _plot=lambda widget_id: (SimpleNamespace(refresh=lambda: None), plt),
        _ascii=False,
        _colour=lambda var: var,  # the theme's variable name stands for its colour
    )
    KernelDetailScreen._draw_time(fake, occ)  # type: ignore[arg-type]
    return plt


def test_time_chart_at_1000_ranks_draws_few_series_with_each_ranks_style() -> None:
    ranks = [3 * k + 1 for k in range(1000)]  # not 0..n-1: a rank's style is its place
    occ = pl.DataFrame(
        {
            "rank": [r for r in reversed(ranks) for _ in range(3)],
            "time (ms)": [float(r) + j for r in reversed(ranks) for j in range(3)],
            "dur (us)": [float(r % 97 + j) for r in reversed(ranks) for j in range(3)],
            "n": [1] * 3000,
        }
    )
    plt = _draw(occ)
    assert len(plt.scatters) <= LEGEND_RANKS + 24  # not 1,000
    # every point drawn once, in the marker and colour its rank has when drawn alone
    place = {r: i for i, r in enumerate(sorted(ranks))}
    want = Counter(
        (t, d, RANK_MARKERS[place[r] % len(RANK_MARKERS)], COLOURS[place[r] % len(COLOURS)])
        for r, t, d in occ.select("rank", "time (ms)", "dur (us)").iter_rows()
    )
    got = Counter(
        (x, y, marker, colour)
        for xs, ys, marker, colour, _ in plt.scatters
        for x, y in zip(xs, ys, strict=True)
    )
    assert got == want
    # the legend names the first ranks, first, each alone
    labels = [s[4] for s in plt.scatters if s[4] is not None]
    assert labels == [f"r{r}" for r in sorted(ranks)[:LEGEND_RANKS]]
    assert [s[4] for s in plt.scatters[:LEGEND_RANKS]] == labels
    named = [s for s in plt.scatters if s[4] is not None]
    assert all(len(s[0]) == 3 for s in named)


def test_time_chart_few_ranks_one_series_each() -> None:
    occ = pl.DataFrame(
        {"rank": [2, 0, 2], "time (ms)": [1.0, 2.0, 3.0], "dur (us)": [5.0, 6.0, 7.0], "n": [1] * 3}
    )
    plt = _draw(occ)
    assert [(s[0], s[1], s[4]) for s in plt.scatters] == [
        ([2.0], [6.0], "r0"),
        ([1.0, 3.0], [5.0, 7.0], "r2"),
    ]
