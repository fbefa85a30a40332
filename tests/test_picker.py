"""One picker modal: the column, side and stream pickers are declarations of `Picker` (lists
and a title; the rank picker, which searches, is its own), and each kind of pick returns what
its screen expects."""

from __future__ import annotations

from typing import Any

import pytest
from textual.app import App
from textual.widgets import OptionList

from hta_tui.app.screens.base import RankPicker
from hta_tui.app.screens.diff import SidePicker
from hta_tui.app.screens.timelines import StreamPicker
from hta_tui.app.widgets.frame_table import ColumnPicker
from hta_tui.app.widgets.picker import Picker


# The rank picker is a modal of its own: it searches ranks by number, for thousands of them
# (rank_picker.py); its picks are tested below all the same.
@pytest.mark.parametrize("cls", [ColumnPicker, SidePicker, StreamPicker])
def test_every_picker_is_the_one_modal(cls: type) -> None:
    """No picker draws, highlights or answers by itself: only its lists differ."""
    assert issubclass(cls, Picker)
    own = set(vars(cls)) & {"compose", "on_mount", "_picked", "action_cancel", "action_apply"}
    assert not own, own


async def _pick(picker: Picker, keys: list[str]) -> Any:
    results: list[Any] = []

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(picker, results.append)

    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*keys)
        await pilot.pause()
    return results[0] if results else "no answer"


async def test_one_list_highlights_the_current_value_and_answers_a_value() -> None:
    assert await _pick(RankPicker([0, 1, 2], 1), ["down", "enter"]) == 2
    assert await _pick(RankPicker([0, 1, 2], None), ["enter"]) == -1  # all ranks
    assert await _pick(ColumnPicker(["name", "dur"], "dur"), ["enter"]) == "dur"
    assert await _pick(ColumnPicker(["name", "dur"], None), ["escape"]) is None


async def test_a_list_per_side_answers_both_sides() -> None:
    picker = SidePicker("Rank compared", [("r0", 0), ("r1", 1)], [("t0", 10), ("t1", 11)], (1, 10))
    assert await _pick(picker, ["enter", "down", "enter"]) == (1, 11)


async def test_ticks_answer_the_ticked_values_in_list_order() -> None:
    picker = StreamPicker([(7, 10), (13, 1), (20, 5)], [20])
    assert await _pick(picker, ["space", "enter"]) == [7, 20]


async def test_labels_are_data_not_markup() -> None:
    picker = ColumnPicker(["[bold]x", "y"], None)

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(picker)

    async with Host().run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        options = picker.query_one(OptionList)
        assert str(options.get_option_at_index(0).prompt) == "[bold]x"
