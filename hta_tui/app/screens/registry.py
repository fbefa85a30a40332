"""Every view of the app, grouped into sections: the one list navigation is built from.

The app turns each entry into a Textual mode (so every view keeps its own state while you look
elsewhere), its key bindings, `?` help rows and command-palette entries; tests check README's
table against it. Classes are imported when first shown, so startup stays fast.

Keys: a digit opens a section (the view last shown in it; the same digit again steps to the
section's next view) and an upper-case letter opens one view directly, from anywhere - so any
view is one or two keystrokes away. Upper-case letters, because the views' own keys are lower
case (`d` device, `v` tables, `r` rank, `/` filter, `s` sort, `e` export, `t` timeline here)
and the few upper-case ones of tables (`S` reverse, `G` bottom) and the timeline (`A`, `D`
page) are left alone.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from textual.screen import Screen


@dataclass(frozen=True)
class Section:
    key: str  # a digit
    title: str


@dataclass(frozen=True)
class ScreenEntry:
    section: str  # its Section's key
    key: str  # upper-case letter: straight to this view
    mode: str
    title: str
    target: str  # "module:Class"; the overview is the app's default screen

    def load(self) -> type[Screen]:
        module, _, cls = self.target.partition(":")
        return getattr(importlib.import_module(module), cls)

    @property
    def keys(self) -> str:
        """How the view is reached, as `?` and the palette say it: "2 K"."""
        return f"{self.section} {self.key}"


def _screen(section: str, key: str, mode: str, title: str, module: str, cls: str) -> ScreenEntry:
    return ScreenEntry(section, key, mode, title, f"hta_tui.app.screens.{module}:{cls}")


SECTIONS: tuple[Section, ...] = (
    Section("1", "Overview"),
    Section("2", "GPU kernels"),
    Section("3", "Memory"),
    Section("4", "Distributed"),
    Section("5", "Host"),
    Section("6", "Timelines"),
)

SCREENS: tuple[ScreenEntry, ...] = (
    _screen("1", "O", "overview", "Overview", "overview", "OverviewScreen"),
    _screen("1", "Z", "findings", "Findings", "findings", "FindingsScreen"),
    _screen("1", "B", "step_time", "Step time", "step_time", "StepTimeScreen"),
    _screen("1", "V", "gpu_metrics", "GPU metrics", "gpu_metrics", "GpuMetricsScreen"),
    _screen("1", "J", "critical_path", "Critical path", "critical_path", "CriticalPathScreen"),
    _screen("2", "K", "kernels", "Kernels", "kernels", "KernelsScreen"),
    _screen("2", "E", "detail", "Kernel detail", "detail", "KernelDetailScreen"),
    _screen("2", "L", "launch", "Kernel launches", "launch", "LaunchScreen"),
    _screen("2", "Q", "sequences", "Kernel sequences", "sequences", "SequencesScreen"),
    _screen("2", "I", "idle", "Idle time", "idle", "IdleScreen"),
    _screen("3", "M", "memory", "Memory", "memory", "MemoryScreen"),
    _screen("4", "W", "distributed", "Distributed", "distributed", "DistributedScreen"),
    _screen("4", "C", "overlap", "Comm/comp overlap", "overlap", "OverlapScreen"),
    _screen("4", "P", "steps", "Steps & stragglers", "steps", "StepsScreen"),
    _screen("5", "R", "operators", "Operators", "operators", "OperatorsScreen"),
    _screen("5", "Y", "syncs", "Syncs", "syncs", "SyncsScreen"),
    _screen("5", "U", "modules", "Modules", "modules", "ModulesScreen"),
    _screen("6", "T", "timeline", "Trace timeline", "timeline", "TimelineScreen"),
    _screen("6", "N", "timelines", "Timelines", "timelines", "TimelinesScreen"),
)

BY_MODE: dict[str, ScreenEntry] = {e.mode: e for e in SCREENS}
BY_SECTION: dict[str, tuple[ScreenEntry, ...]] = {
    s.key: tuple(e for e in SCREENS if e.section == s.key) for s in SECTIONS
}
SECTION_TITLE: dict[str, str] = {s.key: s.title for s in SECTIONS}

#: The letters views had before sections, kept where no view uses them inside (`m` and `w`
#: are gone: the trace timeline marks and zooms with them).
OLD_KEYS: dict[str, str] = {
    "b": "step_time",
    "y": "syncs",
    "u": "modules",
}

#: Section 0, only when comparing two runs (`hta-tui CONTROL --compare TEST`): the app adds it
#: as a mode, its first screen, and lists it in `?` and the command palette.
DIFF = ScreenEntry("0", "F", "diff", "Diff", "hta_tui.app.screens.diff:DiffScreen")
DIFF_SECTION = Section("0", "Diff")
