"""The Textual front end: `HtaApp` and `run_app` (what `hta-tui PATH` runs)."""

from hta_tui.app.app import HtaApp, run_app

__all__ = ["HtaApp", "run_app"]
