"""The rank picker (`r` on every analysis screen): one rank, or all of them, by moving or by
typing the rank's number. At thousands of ranks the list shows the ranks whose number starts
with what is typed, at most `MAX_SHOWN` of them, so it opens and filters at once."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

#: Options listed at once: more ranks than this are found by typing their number.
MAX_SHOWN = 200


def matching(ranks: list[int], typed: str, limit: int = MAX_SHOWN) -> tuple[list[int], int]:
    """The ranks whose number starts with `typed` (every rank when nothing is typed), in
    rank order, at most `limit` of them, and how many more match."""
    found = [r for r in ranks if str(r).startswith(typed)] if typed else ranks
    return found[:limit], max(len(found) - limit, 0)


class RankPicker(ModalScreen[int | None]):
    """Pick one rank, or all ranks (returns -1 for all; dismissing returns None).

    Its background is opaque: a modal's default (the view beneath, dimmed) drew the whole
    view again under it, blended, as it opened: the longest of its steps 54-79 ms of the UI
    thread over a view of 1,000 ranks, 34-48 ms opaque."""

    DEFAULT_CSS = """
    RankPicker { background: $background; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("down", "move(1)", "Down", show=False),
        Binding("up", "move(-1)", "Up", show=False),
        Binding("pagedown", "move(10)", "Page down", show=False),
        Binding("pageup", "move(-10)", "Page up", show=False),
    ]

    def __init__(self, ranks: list[int], current: int | None) -> None:
        super().__init__()
        self.ranks = ranks
        self.current = current
        self.ids: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="rank-picker"):
            yield Static(f"Rank ({len(self.ranks)})", classes="picker-title")
            yield Input(placeholder="type a rank number", id="rank-search", restrict=r"[0-9]*")
            yield OptionList(id="rank-options")
            yield Static(id="rank-more", markup=False)

    def on_mount(self) -> None:
        self._fill("")
        want = "all" if self.current is None else str(self.current)
        if want not in self.ids and self.current in self.ranks:  # past the ranks listed
            self.ids.append(want)
            self.query_one(OptionList).add_option(Option(f"rank {want}", id=want))
        self._highlight(want)
        self.query_one(Input).focus()

    def _fill(self, typed: str) -> None:
        shown, more = matching(self.ranks, typed)
        options = self.query_one(OptionList)
        options.clear_options()
        items = [] if typed else [Option("all ranks", id="all")]
        items += [Option(f"rank {r}", id=str(r)) for r in shown]
        options.add_options(items)
        self.ids = [str(o.id) for o in items]
        options.highlighted = 0 if items else None
        note = self.query_one("#rank-more", Static)
        note.display = bool(more) or not items
        note.update(f"+{more} more: type a number" if more else "no such rank")

    def _highlight(self, want: str) -> None:
        if want in self.ids:
            self.query_one(OptionList).highlighted = self.ids.index(want)

    @on(Input.Changed, "#rank-search")
    def _typed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    @on(Input.Submitted, "#rank-search")
    def _submitted(self) -> None:
        index = self.query_one(OptionList).highlighted
        if index is not None and 0 <= index < len(self.ids):
            self._pick(self.ids[index])

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self._pick(str(event.option.id))

    def _pick(self, option_id: str) -> None:
        self.dismiss(-1 if option_id == "all" else int(option_id))

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        if not self.ids:
            return
        at = options.highlighted if options.highlighted is not None else 0
        options.highlighted = min(max(at + step, 0), len(self.ids) - 1)

    def action_cancel(self) -> None:
        self.dismiss(None)
