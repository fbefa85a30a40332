"""One modal for every pick: a rank, a column to sort by, one choice per side of a compare,
the streams to draw. The pickers of the screens are this one with their own lists.

- one list: enter picks (the value), escape cancels (None);
- a list per side (`Choices.label` set): enter picks in a list and moves to the next; in the
  last one it closes with every side's value, as a tuple;
- `multiple`: space ticks, enter (the screen's priority binding to `apply`) closes with the
  ticked values in the lists' order.
Labels are data (column and kernel names): shown as written, never as markup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import OptionList, SelectionList, Static
from textual.widgets.option_list import Option

from hta_tui.app.safe_text import as_text


@dataclass(frozen=True)
class Choices:
    """One list of a picker: (label, value) options, the value highlighted (or ticked, a
    list of them) at first, and the list's own label where the picker has several."""

    options: list[tuple[str, Any]]
    current: Any = None
    label: str | None = None
    id: str | None = None
    #: the option highlighted when `current` is none of the values (None: no highlight)
    fallback: int | None = 0
    values: list[Any] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", [v for _, v in self.options])


class Picker(ModalScreen[Any]):
    """The modal every picker is (see the module docstring)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self,
        title: str,
        lists: list[Choices],
        *,
        box_id: str,
        hint: str = "",
        hint_class: str = "picker-hint",
        multiple: bool = False,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.lists = lists
        self.box_id = box_id
        self.hint = hint
        self.hint_class = hint_class
        self.multiple = multiple
        self.picked: list[Any] = [c.current for c in lists]

    def compose(self) -> ComposeResult:
        with Vertical(id=self.box_id):
            yield Static(self.title_text, classes="picker-title")
            if len(self.lists) == 1 and self.lists[0].label is None:
                yield self._list(self.lists[0])
            else:
                with Horizontal(id=f"{self.box_id}-lists"):
                    for choices in self.lists:
                        with Vertical(classes=f"{self.box_id}-side"):
                            yield Static(choices.label or "", classes=f"{self.box_id}-label")
                            yield self._list(choices)
            if self.hint:
                yield Static(self.hint, classes=self.hint_class)

    def _list(self, choices: Choices) -> Widget:
        if self.multiple:
            ticked = choices.current or []
            return SelectionList[Any](
                *[(label, value, value in ticked) for label, value in choices.options],
                id=choices.id,
            )
        options = [
            Option(as_text(label), id=str(i)) for i, (label, _) in enumerate(choices.options)
        ]
        return OptionList(*options, id=choices.id)

    def on_mount(self) -> None:
        if not self.multiple:
            for choices, options in zip(self.lists, self.query(OptionList), strict=True):
                if choices.current in choices.values:
                    options.highlighted = choices.values.index(choices.current)
                elif choices.fallback is not None and choices.values:
                    options.highlighted = choices.fallback
        self.query(SelectionList if self.multiple else OptionList).first().focus()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        lists = list(self.query(OptionList))
        n = lists.index(event.option_list)
        self.picked[n] = self.lists[n].values[int(event.option.id or 0)]
        if n + 1 < len(lists):
            lists[n + 1].focus()
        else:
            self.dismiss(self.picked[0] if len(lists) == 1 else tuple(self.picked))

    def action_apply(self) -> None:
        """Close with the ticked values (`multiple`), in the order of the list."""
        ticked = set(self.query_one(SelectionList).selected)
        self.dismiss([v for v in self.lists[0].values if v in ticked])

    def action_cancel(self) -> None:
        self.dismiss(None)
