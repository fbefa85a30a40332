"""One module per screen."""

from hta_tui.app.screens.help import HelpScreen
from hta_tui.app.screens.overview import OverviewScreen

__all__ = ["HelpScreen", "OverviewScreen"]
