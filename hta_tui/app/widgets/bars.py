"""Horizontal stacked bars made of text: one row per rank, one coloured segment per category.

Each category has its own glyph as well as its own colour, so the chart stays readable with
NO_COLOR and in a 16-colour terminal; `ascii=True` swaps the Unicode blocks for `# = .` when
the terminal cannot show them. Rendering is pure arithmetic on a few numbers per row: cheap on
every resize, and deterministic for snapshots. Lines are drawn one at a time (Textual's Line
API: only those on screen), so a chart of 10,000 ranks in a scrolled box costs a screenful
(every row as one Text took 3 s of the UI thread at 10,000 rows, 0.2 s at 1,000).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual, visualize
from textual.widget import Widget

#: (category, legend label, Unicode glyph, ASCII glyph)
TEMPORAL_CATEGORIES: tuple[tuple[str, str, str, str], ...] = (
    ("compute", "compute", "█", "#"),
    ("non-compute", "non-compute", "▒", "="),
    ("idle", "idle", "░", "."),
)


@dataclass(frozen=True)
class BarRow:
    label: str
    values: tuple[float, ...]  # one per category, any unit; drawn as shares of their sum


def split_cells(values: tuple[float, ...], width: int) -> list[int]:
    """Cells per segment: shares of `width`, rounded by largest remainder so they sum exactly,
    and any non-zero share gets at least one cell when there is room."""
    total = sum(v for v in values if v > 0)
    if width <= 0 or total <= 0:
        return [0] * len(values)
    exact = [max(v, 0) / total * width for v in values]
    cells = [int(x) for x in exact]
    order = sorted(range(len(values)), key=lambda i: exact[i] - cells[i], reverse=True)
    for i in order[: width - sum(cells)]:
        cells[i] += 1
    # Make tiny but non-zero segments visible, taken from the largest one.
    for i, v in enumerate(values):
        if v > 0 and cells[i] == 0:
            big = max(range(len(cells)), key=lambda j: cells[j])
            if cells[big] > 1:
                cells[big] -= 1
                cells[i] = 1
    return cells


class LinesOnScreen(Widget):
    """A widget of one line per row: `render()` joins every line (what snapshots and text
    selection read), the Line API makes only the lines on screen, each kept until a change
    (`forget_lines`). Subclasses say how many lines there are and how one is drawn."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lines: dict[tuple[int, int, Style], Strip] = {}  # drawn lines, until a change

    def line_count(self) -> int:
        raise NotImplementedError

    def line_text(self, y: int, width: int) -> Text:
        raise NotImplementedError

    def forget_lines(self) -> None:
        """The rows changed: draw again (and measure again) what is shown."""
        self.lines.clear()
        self.refresh(layout=True)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.lines.clear()

    def get_content_height(self, container, viewport, width: int) -> int:  # type: ignore[override]
        return self.line_count()

    def render(self) -> Text:
        width = self.content_size.width or self.size.width
        lines = [self.line_text(y, width) for y in range(self.line_count())]
        return Text("\n", no_wrap=True).join(lines)

    def render_line(self, y: int) -> Strip:
        """Line `y` as `render()` would draw it, made only when on screen."""
        width = self.content_size.width or self.size.width
        style = self.visual_style
        if not 0 <= y < self.line_count():
            return Strip.blank(width, style.rich_style)
        key = (y, width, style.rich_style)
        strip = self.lines.get(key)
        if strip is None:
            self.lines[key] = strip = line_strip(self, self.line_text(y, width), y, width, style)
        return strip


class StackedBars(LinesOnScreen):
    """A legend line, then one labelled bar per row."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "stacked-bars--label",
        "stacked-bars--compute",
        "stacked-bars--non-compute",
        "stacked-bars--idle",
    }

    DEFAULT_CSS = """
    StackedBars { height: auto; }
    """

    def __init__(
        self,
        categories: tuple[tuple[str, str, str, str], ...] = TEMPORAL_CATEGORIES,
        *,
        ascii: bool = False,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.categories = categories
        self.ascii = ascii
        self.rows: list[BarRow] = []
        self.label_width = 0

    def set_rows(self, rows: list[BarRow]) -> None:
        if rows != self.rows:
            self.rows = list(rows)
            self.label_width = max((len(r.label) for r in self.rows), default=0)
            self.forget_lines()

    def line_count(self) -> int:
        return 1 + len(self.rows)

    def _glyph(self, i: int) -> str:
        return self.categories[i][3 if self.ascii else 2]

    def _style(self, name: str):
        return self.get_component_rich_style(f"stacked-bars--{name}", partial=True)

    def _legend(self, width: int) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        for long in (True, False):
            text = Text(no_wrap=True, overflow="ellipsis")
            for i, (name, label, _, _) in enumerate(self.categories):
                if i:
                    text.append(" ")
                text.append(self._glyph(i), style=self._style(name))
                text.append(" " + (label if long else label[:4]))
            if text.cell_len <= width:
                break
        return text

    def line_text(self, y: int, width: int) -> Text:
        """Line `y`: the legend, then one bar per row."""
        if y == 0:
            return self._legend(width)
        row = self.rows[y - 1]
        label_w = self.label_width
        line = Text(no_wrap=True, overflow="crop")
        line.append(row.label.rjust(label_w) + " ", style=self._style("label"))
        for i, n in enumerate(split_cells(row.values, max(width - label_w - 1, 0))):
            if n:
                line.append(self._glyph(i) * n, style=self._style(self.categories[i][0]))
        return line


def line_strip(widget: Widget, line: Text, y: int, width: int, style: VisualStyle) -> Strip:
    """One line of a widget's `render()`, drawn alone as the whole would draw it at line `y`
    (a Line-API widget makes only the lines on screen)."""
    text = Text("\n", no_wrap=True).join([line])
    strips = Visual.to_strips(widget, visualize(widget, text), width, 1, style)
    strip = strips[0] if strips else Strip.blank(width, style.rich_style)
    return _on_line(strip, y)


def _on_line(strip: Strip, y: int) -> Strip:
    """`strip`, drawn alone as line 0, as line `y` of the whole (text selection reads each
    segment's (x, y) offset)."""
    if y == 0:
        return strip
    segments = []
    for segment in strip:
        style = segment.style
        offset = style.meta.get("offset") if style is not None else None
        if offset is not None and style is not None:
            style = style + Style.from_meta({"offset": (offset[0], y)})
        segments.append(Segment(segment.text, style, segment.control))
    return Strip(segments, strip.cell_length)
