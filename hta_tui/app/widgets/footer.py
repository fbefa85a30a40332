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
    groups are not used in hta-tui, so each action is one key.

    Built cheaper than Textual's (every screen has one, and a footer was about a third of a
    new screen's UI time, issue 27): a key gets its compact class when made, not restyled
    once mounted, and the keys are made again only when the keys to show changed (Textual
    remakes them on every change of focus)."""

    FIRST: ClassVar[tuple[str, ...]] = FIRST
    #: the screen has told its bindings (Footer's own flag is private)
    bindings_ready = False
    #: what the keys shown were made from (`shown_keys`), None before they are
    composed: tuple[tuple[object, ...], ...] | None = None

    def bindings_changed(self, screen: Screen) -> None:
        self.bindings_ready = True
        same = self.composed is not None and self.is_attached and screen is self.screen
        if same and self.shown_keys() == self.composed:
            return
        super().bindings_changed(screen)

    def shown_keys(self) -> tuple[tuple[object, ...], ...]:
        """(key, display, description, action, enabled, tooltip, classes) of each key to
        show, in order, the command palette's last."""
        actions: dict[str, tuple] = {}
        for _node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show and binding.action not in actions:
                actions[binding.action] = (binding, enabled, tooltip)
        first = [actions.pop(a) for a in self.FIRST if a in actions]
        compact = "-compact" if self.compact else ""
        keys = [
            (b.key, self.app.get_key_display(b), b.description, b.action, on, tip, compact)
            for b, on, tip in (*first, *actions.values())
        ]
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            found = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
            if found is not None:  # compact always, as Textual makes it
                _node, b, on, _tip = found
                tip = b.tooltip or b.description
                palette = "-command-palette -compact"
                display = self.app.get_key_display(b)
                keys.append((b.key, display, b.description, b.action, on, tip, palette))
        return tuple(keys)

    def compose(self) -> ComposeResult:
        if not self.bindings_ready:
            return
        self.composed = keys = self.shown_keys()
        self.styles.grid_size_columns = sum("-command-palette" not in k[-1] for k in keys)
        for key, display, description, action, enabled, tooltip, classes in keys:
            made = FooterKey(
                key,
                display,
                description,
                action,
                disabled=not enabled,
                tooltip=tooltip,
                classes=classes,
            )
            yield made if "-command-palette" in classes else made.data_bind(compact=Footer.compact)
