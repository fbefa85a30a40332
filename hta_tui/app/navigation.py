"""Moving between screens, mixed into HtaApp: numbered screens (each a mode keeping its own
stack), going back, drilling down to a kernel, help and the command palette's entries.

A view's key followed by another view's key already waiting (typed faster than the screens
are built: Textual holds the app's keys while a new screen mounts) is passed over: its screen
is neither built nor computed (issue 27: after a walk through every view, mounting the screens
left behind took the UI thread ~4 s). What it would have shown still counts for the next key
(a section's digit pressed twice steps to the section's next view). While a view's key waits,
the foreground knows (`Foreground.key_waiting`): the view shown, about to be left, starts no
new piece of its work.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from textual import events
from textual.app import App, SystemCommand
from textual.message import Message
from textual.screen import Screen

from hta_tui.app.mixin import AppMixin
from hta_tui.app.screens.help import HelpScreen
from hta_tui.app.screens.navigation import help_rows, nav_bindings, palette_entries
from hta_tui.app.screens.registry import BY_MODE, BY_SECTION, DIFF
from hta_tui.app.widgets.frame_table import FrameTable
from hta_tui.trace.model import TraceSet

#: Why `0` and `F` do nothing without a second run.
NO_DIFF = "0 / F: the diff compares two runs: start hta-tui CONTROL --compare TEST"
#: Why `t` does nothing: the focused table's rows are totals, or no table row is focused.
NO_MOMENT_TABLE = "this table's rows are totals, not moments; t opens the timeline from a row "
NO_MOMENT_TABLE += "that names one (a launch, an idle gap, a sync, a step, a kernel's run)"
NO_MOMENT_HERE = "no table row here names a moment (a launch, an idle gap, a sync, a step, "
NO_MOMENT_HERE += "a kernel's run); t opens the timeline from one"
#: The keys that open a view or a section (the app's and a modal's navigation bindings).
NAV_KEYS = frozenset(k.strip() for b in nav_bindings() for k in b.key.split(","))


class NavigationMixin(AppMixin):
    """The navigating half of HtaApp; the attributes below are set by HtaApp.__init__."""

    compare_set: TraceSet | None
    selected_kernel: str | None
    tb_compat: bool
    _mode_history: list[str]
    #: section key -> the view last shown in it (its digit opens that one)
    _section_last: dict[str, str]

    @property
    def comparing(self) -> bool:
        return self.compare_set is not None

    #: keys posted to the app and not handled yet, oldest first (`post_message`)
    _keys_waiting: deque[events.Key]
    #: the view a passed-over key would have shown (`passed_over`), until a view is shown
    heading: str | None = None

    def post_message(self, message: Message) -> bool:
        """Also notes the keys as they arrive, to tell a view's key that another view's key
        follows (`passed_over`)."""
        if isinstance(message, events.Key):
            if not hasattr(self, "_keys_waiting"):
                self._keys_waiting = deque()
            self._keys_waiting.append(message)
            self._tell_keys_waiting()
        return super().post_message(message)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            waiting = getattr(self, "_keys_waiting", None)
            while waiting:  # this key and any older one never handled (the app closing)
                if waiting.popleft() is event:
                    break
            self._tell_keys_waiting()
        await super().on_event(event)

    def _leads_away(self, key: str) -> bool:
        """`key` opens a view (the diff's only when comparing)."""
        return key in NAV_KEYS and (self.comparing or key not in (DIFF.key, DIFF.section))

    def _tell_keys_waiting(self) -> None:
        """The foreground learns whether a view's key waits to be handled: the view shown
        then starts no new piece of work, to be left in the middle of it."""
        foreground = getattr(self, "foreground", None)
        if foreground is not None:
            waiting = getattr(self, "_keys_waiting", ())
            foreground.key_waiting(any(self._leads_away(k.key) for k in waiting))

    def passed_over(self) -> bool:
        """The key being handled is followed by another view's key, already waiting: its
        view would be shown only to be left at once."""
        waiting = getattr(self, "_keys_waiting", None)
        return bool(waiting) and self._leads_away(waiting[0].key)

    @property
    def where(self) -> str:
        """The view the keys so far lead to: the one shown, or the one a key passed over
        would have shown."""
        return self.heading or self.current_mode

    def action_goto(self, mode: str) -> None:
        """A view's key: show a numbered screen (each keeps its own state: its mode's screen
        stack), unless another view's key already follows (`passed_over`)."""
        if self.passed_over() and (mode != DIFF.mode or self.comparing):
            entry = BY_MODE.get(mode)
            if entry is not None:
                self._section_last[entry.section] = mode
            self.heading = mode
            return
        self.show_view(mode)

    def show_view(self, mode: str) -> None:
        """Show a numbered screen now (a drill-down, a finding's evidence, the palette)."""
        self.heading = None
        if mode == DIFF.mode and not self.comparing:
            self.notify(NO_DIFF, timeout=6)  # `0` and `F` say why they do nothing
            return
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
        if mode == self.current_mode:
            return
        entry = BY_MODE.get(mode)
        if entry is not None:
            self._section_last[entry.section] = mode
        self._mode_history.append(self.current_mode)
        self.switch_mode(mode)

    def action_section(self, key: str) -> None:
        """A section's digit: the view last shown in that section; pressed again inside it,
        the section's next view."""
        if key == DIFF.section and not self.comparing:
            self.notify(NO_DIFF, timeout=6)
            return
        views = BY_SECTION.get(key, (DIFF,) if key == DIFF.section else ())
        modes = [e.mode for e in views]
        if not modes:
            return
        where = self.where
        if where in modes and not isinstance(self.screen, HelpScreen):
            self.action_goto(modes[(modes.index(where) + 1) % len(modes)])
            return
        self.action_goto(self._section_last.get(key, modes[0]))

    def action_go_back(self) -> None:
        """Back to the screen shown before this one (escape on a numbered screen)."""
        self.heading = None
        if len(self.screen_stack) > 1:
            self.pop_screen()
        elif self._mode_history:
            self.switch_mode(self._mode_history.pop())

    def show_kernel(self, name: str) -> None:
        """Drill down: the kernel detail screen for `name`."""
        self.selected_kernel = name
        self.show_view("detail")
        screen = self.screen
        if hasattr(screen, "set_params"):
            screen.set_params(name=name)

    def action_no_timeline(self) -> None:
        """`t` where no table row names a moment: one line saying why (a table of moments
        handles `t` itself)."""
        focused = self.focused
        if isinstance(focused, FrameTable) and focused.moment is None:
            self.notify(f"t: {NO_MOMENT_TABLE}", timeout=6)
        else:
            self.notify(f"t: {NO_MOMENT_HERE}", timeout=6)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        rows = self.binding_rows(self.screen)
        views = len(rows) - len(help_rows(self.comparing))
        self.push_screen(HelpScreen(rows, start=views))  # opens on the list of views

    def binding_rows(self, screen: Screen) -> list[tuple[str, str, str]]:
        """(keys, description, where): the keys of `screen` (shown in the footer or not;
        keys doing the same thing in the same place share a row), then every view by
        section, from the registry."""
        merged: dict[tuple[str, str], list[str]] = {}
        screen_name = type(screen).__name__.removesuffix("Screen").lower() or "screen"
        for key, active in screen.active_bindings.items():
            binding = active.binding
            node = active.node
            if isinstance(node, App):
                if binding.action.startswith(("goto(", "section(")):
                    continue  # listed by section below
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
        rows.sort(key=lambda r: {screen_name: 0, "everywhere": 2}.get(r[2], 1))
        return rows + help_rows(self.comparing)

    def action_plugin_definitions(self) -> None:
        """`X`: the TensorBoard plugin's views switch between its own rules (its numbers
        exactly, `tb_compat`) and this project's (fixed for traces newer than 2021); every
        such view recomputes and its title says which it shows."""
        self.tb_compat = not self.tb_compat
        which = (
            "the TensorBoard plugin's own rules (its numbers exactly)"
            if self.tb_compat
            else "hta-tui's rules (the plugin's, fixed for traces newer than 2021)"
        )
        self.notify(f"Plugin views: {which}", timeout=4)  # screens watch `tb_compat`

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "X Definitions: TensorBoard plugin's own / hta-tui's",
            "Step time, GPU metrics, kernels, operators, distributed: the plugin's rules "
            "exactly, or hta-tui's fixes for newer traces",
            self.action_plugin_definitions,
        )
        yield SystemCommand(
            "Reload", "Discover and load the trace folder again", self.action_reload
        )
        yield SystemCommand("Help", "Show every key binding", self.action_help)
        for title, help_text, mode in palette_entries(self.comparing):
            yield SystemCommand(title, help_text, lambda mode=mode: self.show_view(mode))
