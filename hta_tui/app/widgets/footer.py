"""The footer with `?` (help) and `q` (quit) first: a narrow terminal cuts the footer's right
end, and `?` is how a user finds every other key."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

#: Actions shown before the screen's own keys, in this order: `v`, a view's next table, is
#: one key everywhere and must not fall off the right end at 80 columns.
FIRST = ("help", "quit", "next_table")


class KeysFooter(Footer):
    """Textual's Footer (pinned version) with FIRST's keys moved to the front. Binding
    groups are not used in hta-tui, so each action is one key."""

    FIRST: ClassVar[tuple[str, ...]] = FIRST
    #: the screen has told its bindings (Footer's own flag is private)
    bindings_ready = False

    def bindings_changed(self, screen: Screen) -> None:
        self.bindings_ready = True
        super().bindings_changed(screen)

    def compose(self) -> ComposeResult:
        if not self.bindings_ready:
            return
        actions: dict[str, tuple] = {}
        for _node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show and binding.action not in actions:
                actions[binding.action] = (binding, enabled, tooltip)
        first = [actions.pop(a) for a in self.FIRST if a in actions]
        ordered = [*first, *actions.values()]
        self.styles.grid_size_columns = len(ordered)
        for binding, enabled, tooltip in ordered:
            yield FooterKey(
                binding.key,
                self.app.get_key_display(binding),
                binding.description,
                binding.action,
                disabled=not enabled,
                tooltip=tooltip,
            ).data_bind(compact=Footer.compact)
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            try:
                _node, binding, enabled, tooltip = self.screen.active_bindings[
                    self.app.COMMAND_PALETTE_BINDING
                ]
            except KeyError:
                return
            yield FooterKey(
                binding.key,
                self.app.get_key_display(binding),
                binding.description,
                binding.action,
                classes="-command-palette",
                disabled=not enabled,
                tooltip=binding.tooltip or binding.description,
            )
