"""One line at the bottom of every screen: loading progress, errors, watch state."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, ProgressBar

from hta_tui.app.access import hta_app
from hta_tui.app.format import elide_middle
from hta_tui.printable import printable

#: The most cells the folder's name takes in the status bar.
ROOT_WIDTH = 40


@dataclass(frozen=True)
class StatusInfo:
    """What the status bar shows; the app makes one from its TraceSet and watcher."""

    root: str = ""  # the trace folder's name (never an absolute path)
    total: int = 0  # files in the set
    done: int = 0  # files whose load finished (any status)
    loaded: int = 0
    errors: int = 0  # error + not_trace
    incomplete: int = 0
    watch: str = "off"  # watching / polling / off
    scanning: bool = False  # the folder is still being listed

    @property
    def loading(self) -> bool:
        return self.scanning or self.done < self.total


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class StatusBar(Horizontal):
    """Docked above the footer. The app pushes a `StatusInfo` into every instance it finds, at
    each change of the session; a newly mounted bar asks the app for the current one."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.info = StatusInfo()

    def compose(self) -> ComposeResult:
        yield Label(id="status-files")
        yield ProgressBar(id="status-progress", show_eta=False)
        yield Label(id="status-problems")
        yield Label(id="status-watch")

    def on_mount(self) -> None:
        self.show(hta_app(self).status_info, force=True)

    def show(self, info: StatusInfo, *, force: bool = False) -> None:
        if info == self.info and not force:
            return
        self.info = info
        if not self.query("#status-files"):
            return  # not composed yet (a screen being pushed): on_mount shows the latest
        files = Text()
        if info.root:
            # a name is data: as written, and cut so that the counts stay in view
            files.append(elide_middle(printable(info.root), ROOT_WIDTH), style="bold")
            files.append("  ")
        if info.scanning and info.total == 0:
            files.append("scanning…")
        elif info.loading:
            files.append(f"loading {info.done}/{info.total}")
        elif info.total == 0:
            files.append("no trace files")
        else:
            files.append(f"{info.loaded}/{info.total} loaded")
        self.query_one("#status-files", Label).update(files)

        bar = self.query_one("#status-progress", ProgressBar)
        bar.display = info.loading and info.total > 0
        if bar.display:
            bar.update(total=max(info.total, 1), progress=info.done)

        problems = []
        if info.errors:
            problems.append(_plural(info.errors, "error"))
        if info.incomplete:
            problems.append(f"{info.incomplete} incomplete")
        label = self.query_one("#status-problems", Label)
        label.update("  ".join(problems))
        label.set_class(bool(info.errors), "-errors")
        label.set_class(bool(info.incomplete) and not info.errors, "-incomplete")

        watch = self.query_one("#status-watch", Label)
        watch.update(info.watch)
        watch.set_class(info.watch != "off", "-on")
