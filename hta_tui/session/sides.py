"""What a session is made of and what it announces: the sides, their changes, the notices for
the user, and an executor that runs work in the caller (no textual here either)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hta_tui.trace.model import TraceSet

#: The two sides: the session's own (the control when comparing) and the test side.
MAIN, TEST = "main", "test"


def one_line(exc: BaseException | None) -> str:
    """An error in one line, for a file's reason or a notice."""
    if exc is None:
        return "unknown error"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]


class InlineExecutor(Executor):
    """Runs each task at once in the caller's thread: the report, the API and tests, where
    nothing else waits for the session."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kw: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kw))
        except BaseException as exc:  # handed to the future, as a pool does
            future.set_exception(exc)
        return future


@dataclass(frozen=True)
class Notice:
    """Something a front end should tell the user once: `severity` is Textual's."""

    text: str
    severity: str = "warning"


@dataclass(frozen=True)
class Change:
    """What one `apply_pending` did to one side: its TraceSet's generation after it, the files
    added, changed or removed, whether its folder is still being listed, its watcher's state
    and what to tell the user."""

    side: str
    generation: int
    paths: frozenset[Path] = frozenset()
    scanning: bool = False
    watch: str = "off"
    notices: tuple[Notice, ...] = ()


@dataclass
class Side:
    """One trace set and its loading state. `scan` numbers the side's full scans (work of an
    older one is dropped); `before`: the files known when the current scan started (those it
    does not list again are gone); `incomplete`: file -> key of the files left incomplete
    (read by the recheck under the session's lock)."""

    name: str
    root: Path
    trace_set: TraceSet
    scan: int = 0
    scanning: bool = False
    watch: str = "off"
    before: set[Path] = field(default_factory=set)
    incomplete: dict[Path, tuple[str, int, int]] = field(default_factory=dict)
    rechecking: bool = False
