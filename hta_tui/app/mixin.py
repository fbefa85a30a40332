"""The base of HtaApp's mixins (loading, refresh, navigation): for a type checker the App
they are mixed into, at run time nothing (Textual's metaclass is the App's alone)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.app import App

    AppMixin = App[int]
else:
    AppMixin = object
