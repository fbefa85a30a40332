"""Horizontal stacked bars made of text: one row per rank, one coloured segment per category.

Each category has its own glyph as well as its own colour, so the chart stays readable with
NO_COLOR and in a 16-colour terminal; `ascii=True` swaps the Unicode blocks for `# = .` when
the terminal cannot show them. Rendering is pure arithmetic on a few numbers per row: cheap on
every resize, and deterministic for snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
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


class StackedBars(Widget):
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

    def set_rows(self, rows: list[BarRow]) -> None:
        if rows != self.rows:
            self.rows = list(rows)
            self.refresh(layout=True)

    def get_content_height(self, container, viewport, width: int) -> int:  # type: ignore[override]
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

    def render(self) -> Text:
        width = self.content_size.width or self.size.width
        lines = [self._legend(width)]
        label_w = max((len(r.label) for r in self.rows), default=0)
        bar_w = max(width - label_w - 1, 0)
        label_style = self._style("label")
        for row in self.rows:
            line = Text(no_wrap=True, overflow="crop")
            line.append(row.label.rjust(label_w) + " ", style=label_style)
            for i, n in enumerate(split_cells(row.values, bar_w)):
                if n:
                    line.append(self._glyph(i) * n, style=self._style(self.categories[i][0]))
            lines.append(line)
        return Text("\n", no_wrap=True).join(lines)
