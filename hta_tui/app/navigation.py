"""Moving between screens, mixed into HtaApp: numbered screens (each a mode keeping its own
stack), going back, drilling down to a kernel, help and the command palette's entries."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import App, SystemCommand
from textual.screen import Screen

from hta_tui.app.mixin import AppMixin
from hta_tui.app.screens.help import HelpScreen
from hta_tui.app.screens.registry import DIFF, SCREENS
from hta_tui.trace.model import TraceSet


class NavigationMixin(AppMixin):
    """The navigating half of HtaApp; the attributes below are set by HtaApp.__init__."""

    compare_set: TraceSet | None
    selected_kernel: str | None
    _mode_history: list[str]

    @property
    def comparing(self) -> bool:
        return self.compare_set is not None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # key 0 does nothing unless comparing
        return not (action == "goto" and parameters == (DIFF.mode,) and not self.comparing)

    def action_goto(self, mode: str) -> None:
        """Show a numbered screen (each keeps its own state: its mode's screen stack)."""
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
        if mode == self.current_mode:
            return
        self._mode_history.append(self.current_mode)
        self.switch_mode(mode)

    def action_go_back(self) -> None:
        """Back to the screen shown before this one (escape on a numbered screen)."""
        if len(self.screen_stack) > 1:
            self.pop_screen()
        elif self._mode_history:
            self.switch_mode(self._mode_history.pop())

    def show_kernel(self, name: str) -> None:
        """Drill down: the kernel detail screen for `name`."""
        self.selected_kernel = name
        self.action_goto("detail")
        screen = self.screen
        if hasattr(screen, "set_params"):
            screen.set_params(name=name)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        self.push_screen(HelpScreen(self.binding_rows(self.screen)))

    def binding_rows(self, screen: Screen) -> list[tuple[str, str, str]]:
        """(keys, description, where) for every active binding of `screen`, shown in the
        footer or not; keys doing the same thing in the same place share a row."""
        merged: dict[tuple[str, str], list[str]] = {}
        screen_name = type(screen).__name__.removesuffix("Screen").lower() or "screen"
        for key, active in screen.active_bindings.items():
            binding = active.binding
            node = active.node
            if isinstance(node, App):
                where = "everywhere"
            elif isinstance(node, Screen):
                where = screen_name
            else:
                where = node.id or type(node).__name__
            desc = binding.description or binding.action.replace("_", " ")
            keys = merged.setdefault((desc, where), [])
            display = self.get_key_display(binding) or key
            if display not in keys:
                keys.append(display)
        rows = [(", ".join(keys), desc, where) for (desc, where), keys in merged.items()]
        rows.sort(key=lambda r: {"everywhere": 0, screen_name: 1}.get(r[2], 2))
        return rows

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Reload", "Discover and load the trace folder again", self.action_reload
        )
        yield SystemCommand("Help", "Show every key binding", self.action_help)
        entries = (DIFF, *SCREENS) if self.comparing else SCREENS
        for entry in entries:
            yield SystemCommand(
                f"{entry.key} {entry.title}",
                f"Show the {entry.title.lower()} screen",
                lambda mode=entry.mode: self.action_goto(mode),
            )
