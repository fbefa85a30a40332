"""The timeline as a Line-API widget: `render_line(y)` draws one row of the trace at the current
zoom, from `analysis.timeline_cells` (work per cell, never per event), so only visible rows
cost anything and a frame of millions of events stays cheap.

Line 0 is a time ruler that stays put; the others are rank/device group headers (collapsible)
and rows. A cell shows its busy fraction with eighth blocks (an event edge inside a cell keeps
sub-cell precision; reversed glyphs draw right-aligned edges), its colour is the dominant kind
(theme variables in timeline.tcss), names are printed inside events wide enough for them.
With NO_COLOR the blocks and names still read; `ascii=True` swaps glyphs for `# = -`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from hta_tui.analysis.names import fold_name
from hta_tui.analysis.timeline_cells import row_cells, runs
from hta_tui.analysis.timeline_rows import NONE, Row, Timeline, search
from hta_tui.printable import printable
from hta_tui.trace.schema import KINDS

LABEL_WIDTH = 16
LEFT = "▏▎▍▌▋▊▉"
LEVELS = "▁▂▃▄▅▆▇█"
ASCII_LEVELS = "_.-=#"
#: kind -> style class (several kinds share a colour)
KIND_STYLE = {
    "kernel": "kernel",
    "memcpy": "memcpy",
    "memset": "memcpy",
    "sync": "sync",
    "gpu_annotation": "annotation",
    "runtime": "runtime",
    "driver": "runtime",
    "cpu_op": "op",
    "annotation": "annotation",
    "python": "python",
    "trace_span": "other",
    "other": "other",
}
STYLE_OF_CODE = [KIND_STYLE[k] for k in KINDS]


@lru_cache(maxsize=4096)
def short_name(name: str) -> str:
    """A kernel's name without return type, parameters and template arguments (`fold_name`),
    kept per name: a frame draws the same few names on every row."""
    return fold_name(name, keep=0)


@dataclass(frozen=True)
class Item:
    """A line of the view: a group header (row is None) or a row of the timeline."""

    group: tuple[int, str, int]
    row: int | None


#: flag bits of a cell's style key (the low byte is the kind code)
REV, NAME, MATCH, SELECTED, MARK, CURSOR, UTIL = (1 << b for b in range(8, 15))
FLAG_STYLES = (
    (NAME, "name"),
    (UTIL, "util"),
    (MATCH, "match"),
    (SELECTED, "selected"),
    (MARK, "mark"),
    (CURSOR, "cursor"),
)
_LEFT = np.array(list(LEFT))
_LEVELS = np.array([" ", *LEVELS])
_ASCII_LEVELS = np.array([" ", *ASCII_LEVELS])


def glyphs(
    busy: np.ndarray, left_in: np.ndarray, right_in: np.ndarray, ascii: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's character, and whether it is drawn reversed: an event that starts inside
    a cell fills its right part, drawn as the complementary left block in reverse."""
    idle = busy <= 0
    if ascii:
        ch = np.where(busy >= 0.875, "#", np.where(busy >= 0.375, "=", "-"))
        return np.where(idle, " ", ch), np.zeros(len(busy), dtype=bool)
    n = np.minimum(np.maximum(np.rint(busy * 8).astype(np.int64), 1), 8)
    full = (n == 8) | (left_in & right_in & (busy >= 0.5))
    ends_here = left_in & ~right_in & ~full
    starts_here = right_in & ~left_in & ~full
    shade = np.where(busy >= 0.625, "▓", np.where(busy >= 0.375, "▒", "░"))
    ch = np.where(full, "█", shade)
    ch = np.where(ends_here, _LEFT[np.minimum(np.maximum(n - 1, 0), 6)], ch)
    ch = np.where(starts_here, _LEFT[np.minimum(np.maximum(7 - n, 0), 6)], ch)
    return np.where(idle, " ", ch), starts_here & ~idle


def level_glyphs(busy: np.ndarray, ascii: bool) -> np.ndarray:
    """A counter track: the level as a bar height (eighths, or five ASCII steps)."""
    levels = _ASCII_LEVELS if ascii else _LEVELS
    n = np.minimum(
        np.maximum(np.rint(busy * (len(levels) - 1)).astype(np.int64), 0), len(levels) - 1
    )
    return levels[n]


def fmt_time(ns: float) -> str:
    """A time or duration in the unit that keeps it short."""
    a = abs(ns)
    if a >= 3.6e12:  # ranks profiled hours apart: "5h", not "1.8e+04s"
        return f"{ns / 3.6e12:.3g}h"
    if a >= 1e12:
        return f"{ns / 6e10:.3g}min"
    if a >= 1e9:
        return f"{ns / 1e9:.3g}s"
    if a >= 1e6:
        return f"{ns / 1e6:.4g}ms"
    if a >= 1e3:
        return f"{ns / 1e3:.4g}us"
    return f"{ns:.0f}ns"


class TimelineView(ScrollView, can_focus=True, inherit_bindings=False):
    """Rows of a `Timeline` between `t0` and `t0 + span` (ns from the origin). The scroll
    keys are not inherited: with more rows than fit, a scroll view's up/down would scroll
    instead of moving the cursor (the screen's keys move it and keep it in view)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        f"timeline--{n}"
        for n in (
            "kernel",
            "memcpy",
            "sync",
            "runtime",
            "op",
            "annotation",
            "python",
            "other",
            "util",
            "label",
            "group",
            "ruler",
            "cursor",
            "mark",
            "match",
            "selected",
            "name",
        )
    }

    def __init__(self, *, ascii: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii = ascii
        self.timeline: Timeline | None = None
        self.items: list[Item] = []
        self.collapsed: set[tuple[int, str, int]] = set()
        self.t0 = 0.0
        self.span = 1.0
        self.cursor = 0  # index into items
        self.cursor_t = 0.0
        self.selected: tuple[int, int] | None = None  # (row, pos)
        self.mark: tuple[float, float | None] | None = None
        self.matches: dict[int, np.ndarray] = {}
        self._strips: dict[tuple, Strip] = {}
        self._styles: dict[str, Style] = {}
        self._combos: dict[int, Style] = {}
        self._match_cum: dict[int, np.ndarray] = {}

    # -- model ---------------------------------------------------------------------------------
    def set_timeline(self, tl: Timeline) -> None:
        first = self.timeline is None
        keep = self.current_row_key
        self.timeline = tl
        self.matches = {}
        self._match_cum = {}
        self.selected = None
        self._rebuild_items()
        if first:
            self.t0, self.span = 0.0, float(tl.span_ns)
            self.cursor_t = tl.span_ns / 2
        if keep is not None:
            self.goto_row_key(keep)
        self.cursor = min(self.cursor, max(len(self.items) - 1, 0))
        self.changed()

    def _rebuild_items(self) -> None:
        items: list[Item] = []
        tl = self.timeline
        if tl is not None:
            last = None
            for i, row in enumerate(tl.rows):
                if row.group != last:
                    items.append(Item(row.group, None))
                    last = row.group
                if row.group not in self.collapsed:
                    items.append(Item(row.group, i))
        self.items = items
        self.virtual_size = Size(self.size.width, len(items) + 1)

    @property
    def current_item(self) -> Item | None:
        return self.items[self.cursor] if 0 <= self.cursor < len(self.items) else None

    @property
    def current_row(self) -> int | None:
        item = self.current_item
        return None if item is None else item.row

    @property
    def current_row_key(self) -> tuple | None:
        row = self.current_row
        if self.timeline is None or row is None:
            return None
        return self.timeline.rows[row].key

    def goto_row(self, row: int) -> None:
        tl = self.timeline
        if tl is None:
            return
        self.collapsed.discard(tl.rows[row].group)
        self._rebuild_items()
        for i, item in enumerate(self.items):
            if item.row == row:
                self.cursor = i
        self._keep_cursor_visible()

    def goto_row_key(self, key: tuple) -> None:
        if self.timeline is not None:
            row = self.timeline.row_of(key)  # type: ignore[arg-type]
            if row is not None:
                self.goto_row(row)

    # -- window --------------------------------------------------------------------------------
    @property
    def track_width(self) -> int:
        return max(self.size.width - LABEL_WIDTH, 1)

    def cell_of(self, t: float) -> int:
        return int((t - self.t0) / self.span * self.track_width)

    def show_range(self, t0: float, t1: float) -> None:
        self.span = max(t1 - t0, 1.0)
        self.t0 = t0
        self.changed()

    def zoom(self, factor: float) -> None:
        """Zoom around the cursor: it keeps its place on the screen."""
        frac = (self.cursor_t - self.t0) / self.span
        full = float(self.timeline.span_ns) if self.timeline else self.span
        self.span = min(max(self.span * factor, float(self.track_width)), full * 4)
        self.t0 = self.cursor_t - frac * self.span
        self.changed()

    def pan(self, fraction: float) -> None:
        """Move the window (and the cursor with it) by a fraction of its width."""
        d = self.span * fraction
        self.t0 += d
        self.cursor_t += d
        self.changed()

    def move_cursor_time(self, cells: int) -> None:
        self.cursor_t += cells * self.span / self.track_width
        self.follow_cursor()

    def follow_cursor(self) -> None:
        """Bring the cursor's time into the window (pan, never zoom)."""
        if not self.t0 <= self.cursor_t < self.t0 + self.span:
            self.t0 = self.cursor_t - self.span / 2
        self.changed()

    def move_cursor_row(self, delta: int) -> None:
        if self.items:
            self.cursor = min(max(self.cursor + delta, 0), len(self.items) - 1)
            self._keep_cursor_visible()
            self.changed()

    def _keep_cursor_visible(self) -> None:
        line = self.cursor + 1
        top = int(self.scroll_offset.y)
        room = max(self.size.height - 1, 1)
        if line <= top:
            self.scroll_to(y=max(line - 1, 0), animate=False)
        elif line > top + room:
            self.scroll_to(y=line - room, animate=False)

    def toggle_group(self) -> None:
        item = self.current_item
        if item is None:
            return
        if item.group in self.collapsed:
            self.collapsed.discard(item.group)
        else:
            self.collapsed.add(item.group)
        self._rebuild_items()
        self.cursor = next(i for i, it in enumerate(self.items) if it.group == item.group)
        self._keep_cursor_visible()
        self.changed()

    def set_matches(self, matches: dict[int, np.ndarray]) -> None:
        self.matches = matches
        self._match_cum = {}
        self.changed()

    def changed(self) -> None:
        self._strips.clear()
        self.refresh()

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.items) + 1)
        self.changed()

    # -- drawing -------------------------------------------------------------------------------
    def _style(self, name: str) -> Style:
        hit = self._styles.get(name)
        if hit is None:
            hit = self._styles[name] = self.get_component_rich_style(
                f"timeline--{name}", partial=True
            )
        return hit

    @property
    def _base(self) -> Style:
        """The widget's own style (Textual computes `rich_style` afresh on every call)."""
        hit = self._styles.get("")
        if hit is None:
            hit = self._styles[""] = self.rich_style
        return hit

    def _combo(self, key: int) -> Style:
        """The style of a cell from its packed key: kind code and flag bits."""
        hit = self._combos.get(key)
        if hit is None:
            code = key & 0xFF
            style = self._base if code == NONE else self._style(STYLE_OF_CODE[code])
            if key & REV:
                style += Style(reverse=True)
            for bit, name in FLAG_STYLES:
                if key & bit:
                    style += self._style(name)
            hit = self._combos[key] = style
        return hit

    def notify_style_update(self) -> None:
        self._styles.clear()
        self._combos.clear()
        self._strips.clear()
        super().notify_style_update()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            return self._ruler(width)
        index = y - 1 + int(self.scroll_offset.y)
        if self.timeline is None or not 0 <= index < len(self.items):
            return Strip.blank(width, self._base)
        key = (index, width, index == self.cursor)
        hit = self._strips.get(key)
        if hit is None:
            hit = self._strips[key] = self._line(self.items[index], index == self.cursor, width)
        return hit

    def _ruler(self, width: int) -> Strip:
        style = self._style("ruler")
        track = self.track_width
        text = list(" " * track)
        step = max(track // 4, 12)
        for c in range(0, track, step):
            label = "|" + fmt_time(self.t0 + c / track * self.span)
            for j, ch in enumerate(label[: max(track - c, 0)]):
                text[c + j] = ch
        head = f" {fmt_time(self.span)} shown"[:LABEL_WIDTH].ljust(LABEL_WIDTH)
        return Strip([Segment(head + "".join(text), style)], width)

    def _line(self, item: Item, on_cursor: bool, width: int) -> Strip:
        tl = self.timeline
        assert tl is not None
        label_style = self._style("cursor" if on_cursor else "label")
        if item.row is None:
            mark = "▸" if item.group in self.collapsed else "▾"
            if self.ascii:
                mark = "+" if item.group in self.collapsed else "-"
            text = printable(f"{mark} {tl.group_labels.get(item.group, '')}")
            style = self._style("cursor" if on_cursor else "group")
            return Strip([Segment(text[:width].ljust(width), style)], width)
        row = tl.rows[item.row]
        label = printable(row.label)[: LABEL_WIDTH - 1].ljust(LABEL_WIDTH)
        segs = [Segment(label, label_style)]
        segs += self._track(item.row, row, on_cursor)
        return Strip(segs, width).adjust_cell_length(width, self._base)

    def _track(self, index: int, row: Row, on_cursor: bool) -> list[Segment]:
        """The row's cells as segments: glyphs and style keys per cell are numpy arrays;
        Python only walks the runs of equal style."""
        track = self.track_width
        cells = row_cells(row, self.t0, self.t0 + self.span, track)
        if row.counter:
            chars = level_glyphs(cells.busy, self.ascii)
            keys = np.full(track, KINDS.index("kernel") | UTIL, dtype=np.int64)
        else:
            chars, rev = glyphs(cells.busy, cells.left_in, cells.right_in, self.ascii)
            keys = cells.kind.astype(np.int64) | np.where(rev, REV, 0)
            self._names(index, row, cells.event, chars, keys)
        self._overlays(chars, keys, on_cursor)
        change = np.flatnonzero(np.diff(keys)) + 1
        bounds = [0, *change.tolist(), track]
        key_list = keys[bounds[:-1]].tolist()
        text = "".join(chars.tolist())
        return [
            Segment(text[a:b], self._combo(k))
            for a, b, k in zip(bounds[:-1], bounds[1:], key_list, strict=True)
        ]

    def _names(
        self, index: int, row: Row, event: np.ndarray, chars: np.ndarray, keys: np.ndarray
    ) -> None:
        """Names inside events wide enough; selected and matching events flagged."""
        tl = self.timeline
        assert tl is not None
        names = tl.frames[row.rank]["name"]
        hits = self.matches.get(index)
        ev = np.maximum(event, 0)
        if hits is not None:
            # cells showing a match, and (zoomed out) cells where a match starts
            keys[(event >= 0) & hits[ev]] |= MATCH
            cum = self._match_cum.get(index)
            if cum is None:
                cum = self._match_cum[index] = np.concatenate(([0], np.cumsum(hits)))
            edges = self.t0 + np.arange(len(chars) + 1) * (self.span / len(chars))
            keys[np.diff(cum[search(row.starts, edges, side="left")]) > 0] |= MATCH
        sel = self.selected
        if sel is not None and sel[0] == index:
            keys[event == sel[1]] |= SELECTED
        for first, length, pos in runs(event, min_length=4):
            raw = names[int(row.idx[pos])] or ""
            name = printable(raw)
            if len(name) > length:  # a kernel's short name first (enter shows the full one)
                name = printable(short_name(raw))
            text = name if len(name) <= length else name[: length - 1] + "…"
            flags = keys[first] & (MATCH | SELECTED)
            chars[first : first + len(text)] = list(text)
            keys[first : first + len(text)] = int(row.kinds[pos]) | NAME | flags

    def _overlays(self, chars: np.ndarray, keys: np.ndarray, on_cursor: bool) -> None:
        track = len(chars)
        if self.mark is not None:
            a = self.mark[0]
            b = self.mark[1] if self.mark[1] is not None else self.cursor_t
            lo, hi = sorted((self.cell_of(a), self.cell_of(b)))
            keys[max(lo, 0) : max(min(hi + 1, track), 0)] |= MARK
        c = self.cell_of(self.cursor_t)
        if 0 <= c < track and on_cursor:
            keys[c] |= CURSOR
            if chars[c] == " ":
                chars[c] = "|" if self.ascii else "│"
