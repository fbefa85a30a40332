"""A plotext chart that never takes the app down.

plotext raises from inside its layout code in corner cases (a log axis squeezed to a few
cells, a one-point range after a resize). A chart is an illustration of numbers the screen
also shows as a table, so a failed draw becomes a one-line note instead of a crash.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual_plotext import PlotextPlot

#: Seconds a screen waits after showing its tables before drawing its charts: plotext draws
#: on the UI thread (40-60 ms a chart), so the tables get a frame of their own first.
CHART_DELAY = 1 / 30


class SafePlot(PlotextPlot):
    def render(self) -> Any:
        try:
            return super().render()
        except (ValueError, ZeroDivisionError, IndexError, OverflowError) as exc:
            return Text(f"(chart not drawn at this size: {type(exc).__name__})", style="dim")
