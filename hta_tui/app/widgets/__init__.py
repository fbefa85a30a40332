"""Widgets shared by the screens."""

from hta_tui.app.widgets.bars import BarRow, StackedBars
from hta_tui.app.widgets.status import StatusBar, StatusInfo

__all__ = ["BarRow", "StackedBars", "StatusBar", "StatusInfo"]
