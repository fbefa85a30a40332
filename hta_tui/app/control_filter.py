"""The last guard between a trace's names and the terminal: a line filter that drops every
control, bidi and separator character (`printable.UNPRINTABLE`) from what widgets draw.

Names are made visible (`\\x1b`) where they enter the screens (`printable`); this filter
makes sure a place that forgot cannot reach the terminal raw. They are zero cells wide to
Rich, so dropping them changes no layout. Textual's own escape sequences are written outside
the widgets' lines and never pass here.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from hta_tui.printable import UNPRINTABLE, has_unprintable

_DROP = dict.fromkeys(UNPRINTABLE)


class ControlFilter(LineFilter):
    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if not has_unprintable("".join(s.text for s in segments)):
            return segments
        return [
            Segment(s.text.translate(_DROP), s.style, s.control) if s.control is None else s
            for s in segments
        ]
