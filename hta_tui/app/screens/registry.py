"""The numbered screens: key, mode name, title and where the class lives.

The app turns each entry into a Textual mode (so every screen keeps its own state while you
look elsewhere), a number-key binding and a command-palette entry. Classes are imported when
first shown, so startup stays fast.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from textual.screen import Screen


@dataclass(frozen=True)
class ScreenEntry:
    key: str
    mode: str
    title: str
    target: str  # "module:Class"; the overview is the app's default screen

    def load(self) -> type[Screen]:
        module, _, cls = self.target.partition(":")
        return getattr(importlib.import_module(module), cls)


SCREENS: tuple[ScreenEntry, ...] = (
    ScreenEntry("1", "overview", "Overview", "hta_tui.app.screens.overview:OverviewScreen"),
    ScreenEntry("2", "idle", "Idle time", "hta_tui.app.screens.idle:IdleScreen"),
    ScreenEntry("3", "kernels", "Kernels", "hta_tui.app.screens.kernels:KernelsScreen"),
    ScreenEntry("4", "detail", "Kernel detail", "hta_tui.app.screens.detail:KernelDetailScreen"),
    ScreenEntry("5", "overlap", "Comm/comp overlap", "hta_tui.app.screens.overlap:OverlapScreen"),
    ScreenEntry("6", "timelines", "Timelines", "hta_tui.app.screens.timelines:TimelinesScreen"),
    ScreenEntry("7", "launch", "Kernel launches", "hta_tui.app.screens.launch:LaunchScreen"),
    ScreenEntry(
        "8", "sequences", "Kernel sequences", "hta_tui.app.screens.sequences:SequencesScreen"
    ),
    ScreenEntry("9", "steps", "Steps & stragglers", "hta_tui.app.screens.steps:StepsScreen"),
    ScreenEntry("b", "step_time", "Step time", "hta_tui.app.screens.step_time:StepTimeScreen"),
    ScreenEntry("m", "memory", "Memory", "hta_tui.app.screens.memory:MemoryScreen"),
    ScreenEntry(
        "w", "distributed", "Distributed", "hta_tui.app.screens.distributed:DistributedScreen"
    ),
    ScreenEntry("y", "syncs", "Syncs", "hta_tui.app.screens.syncs:SyncsScreen"),
    ScreenEntry("u", "modules", "Modules", "hta_tui.app.screens.modules:ModulesScreen"),
    ScreenEntry("T", "timeline", "Trace timeline", "hta_tui.app.screens.timeline:TimelineScreen"),
)

BY_MODE: dict[str, ScreenEntry] = {e.mode: e for e in SCREENS}

#: Screen 0, only when comparing two runs (`hta-tui CONTROL --compare TEST`): the app adds it as
#: a mode, its first screen, and lists it in the command palette.
DIFF = ScreenEntry("0", "diff", "Diff", "hta_tui.app.screens.diff:DiffScreen")
