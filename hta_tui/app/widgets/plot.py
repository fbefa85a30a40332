"""A plotext chart drawn off the UI thread, that never takes the app down.

plotext lays a chart out in pure Python: 40-60 ms for a scatter of a few thousand points,
every time the chart is shown or resized. Done in `render`, as textual-plotext does, that is
a frozen UI for as long; here the figure is built in a thread and the widget shows the last
built picture until the new one lands.

plotext raises from inside its layout code in corner cases (a log axis squeezed to a few
cells, a one-point range after a resize). A chart is an illustration of numbers the screen
also shows as a table, so a failed draw becomes a one-line note instead of a crash.

Labels are kernel and stream names: the figure a screen draws on (`plt`) writes every text
it is given as `printable` text. plotext's output is read back as ANSI (`Text.from_ansi`),
so an escape sequence in a label would otherwise become a style, a link or worse.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from rich.text import Text
from textual import work
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from hta_tui.printable import printable

#: Seconds a screen waits after showing its tables before drawing its charts, so the tables
#: get a frame of their own first.
CHART_DELAY = 1 / 30

_BLANK = Text("")


def _printable_arg(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, str) for v in value):
        return [printable(v) if isinstance(v, str) else v for v in value]
    return value


class PrintableFigure:
    """A plotext figure whose methods get every text argument (titles, labels, tick labels)
    made printable first."""

    def __init__(self, figure: Plot) -> None:
        self._figure = figure

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._figure, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kw: Any) -> Any:
            args = tuple(map(_printable_arg, args))
            return attr(*args, **{k: _printable_arg(v) for k, v in kw.items()})

        return call


class SafePlot(PlotextPlot):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        #: the figure the UI thread draws on (`plt`); handed to a build when shown
        self._staged: Plot | None = None
        #: the figure last handed over: builds (one at a time) read it, nothing writes it
        self._figure: Plot = self._plot
        self._version = 0  # bumped whenever `plt` is handed out (the figure may change)
        self._shown: tuple[Any, ...] | None = None  # what `_text` was built for
        self._text: Text = _BLANK
        self._wanted: tuple[Any, ...] | None = None  # what the latest build is for
        self._build_lock = threading.Lock()
        #: the picture's lines as last drawn, and what for (`render_line`)
        self._lines: list[Strip] = []
        self._lines_for: tuple[Any, ...] | None = None

    @property
    def plt(self) -> Plot:
        """The figure to draw on, on the UI thread. Each chart is drawn from scratch: the
        first `plt` after a chart was shown is a new, empty figure."""
        if self._staged is None:
            self._staged = Plot()
        self._version += 1
        self.refresh()
        return PrintableFigure(self._staged)  # type: ignore[return-value]

    @property
    def picture(self) -> Text:
        """The chart as on the screen now."""
        return self._text

    @property
    def building(self) -> bool:
        """The picture on the screen is not the latest figure yet: being built, or about to
        be (the figure changed and the chart is on the screen, so it will render; a chart
        on a screen in the background is built when its screen comes back)."""
        if self._wanted is not None and self._wanted != self._shown:
            return True
        changed = self._shown is None or self._shown[3] != self._version
        return changed and self.is_attached and self.screen.is_current and self.region.area > 0

    def render(self) -> Any:
        width, height = self.size
        key = (width, height, self._get_plotext_theme_name(self.app.theme), self._version)
        if key != self._shown and key != self._wanted and width > 0 and height > 0:
            if self._staged is not None:
                self._figure, self._staged = self._staged, None
            self._wanted = key
            self._build(self._figure, key)
        return self._text

    def render_line(self, y: int) -> Strip:
        """A line of the picture: its lines are made once per picture, size and style, not
        on every repaint (each of a 1,000-rank chart's 5-6 repaints as a view is shown
        again or re-scoped made them all anew from the picture's text: ~8 ms each)."""
        text = self.render()  # starts a build when the size, theme or figure changed
        width, height = self.size
        style = self.visual_style
        key = (width, height, style)
        if self._lines_for is None or self._lines_for[0] is not text or self._lines_for[1] != key:
            self._lines = Visual.to_strips(self, visualize(self, text), width, height, style)
            self._lines_for = (text, key)
        if 0 <= y < len(self._lines):
            return self._lines[y]
        return Strip.blank(width, style.rich_style)

    @work(thread=True, group="plot-build", exit_on_error=False)
    def _build(self, figure: Plot, key: tuple[Any, ...]) -> None:
        with self._build_lock:
            if key != self._wanted:
                return  # a newer size, theme or figure came meanwhile
            width, height, theme, _ = key
            try:
                figure.plotsize(width, height)
                figure._set_size(width, height)  # as textual-plotext does (its issue 5)
                figure.theme(theme)
                text = Text.from_ansi(figure.build())
            except Exception as exc:  # any plotext failure becomes a note
                note = f"(chart not drawn at this size: {type(exc).__name__})"
                text = Text(note, style="dim")
        with contextlib.suppress(RuntimeError):  # the app is closing
            self.app.call_from_thread(self._landed, key, text)

    def _landed(self, key: tuple[Any, ...], text: Text) -> None:
        if key == self._wanted:
            self._shown, self._text = key, text
            self.refresh()
