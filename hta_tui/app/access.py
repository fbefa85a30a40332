"""Typed access to the app from screens and their widgets (posting's `cast("Posting",
self.app)`): `hta_app(self).every_step` instead of `getattr(self.app, "every_step", False)`,
so a renamed attribute is a type error, not a silent default."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.dom import DOMNode

if TYPE_CHECKING:
    from hta_tui.app.app import HtaApp


def hta_app(node: DOMNode) -> HtaApp:
    """The HtaApp a screen of hta-tui runs in (screens run in no other app)."""
    return cast("HtaApp", node.app)
