"""Changes to trace files in a folder, as they happen, once each file has stopped growing.

watchfiles gives native events (inotify) or, with `poll=True`, stat polling - the choice for
NFS/Lustre scratch on GPU clusters, where native events are unreliable. A file still being
written is reported only when its size has held still for `settle_ms`; a file that was caught
half-written anyway comes back as "incomplete" from the parser and is retried on its next change.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import watchfiles

from hta_tui.trace.discover import is_candidate

ChangeKind = Literal["added", "modified", "deleted"]

_KIND: dict[watchfiles.Change, ChangeKind] = {
    watchfiles.Change.added: "added",
    watchfiles.Change.modified: "modified",
    watchfiles.Change.deleted: "deleted",
}


@dataclass(frozen=True)
class Change:
    kind: ChangeKind
    path: Path


def _filter(change: watchfiles.Change, path: str) -> bool:
    return is_candidate(Path(path))


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


async def settled(path: Path, *, settle_ms: int = 300, max_wait_s: float = 30.0) -> bool:
    """Wait until the file's size holds still for `settle_ms`; False when it vanished."""
    last = _size(path)
    waited = 0.0
    while last is not None and waited < max_wait_s:
        await asyncio.sleep(settle_ms / 1000)
        waited += settle_ms / 1000
        now = _size(path)
        if now == last:
            return True
        last = now
    return last is not None


def collapse(raw: set[tuple[watchfiles.Change, str]]) -> list[Change]:
    """One change per path: the last word wins, and added-then-modified stays added."""
    out: dict[Path, ChangeKind] = {}
    for change, p in sorted(raw, key=lambda c: (c[1], c[0].value)):
        path = Path(p)
        kind = _KIND[change]
        prev = out.get(path)
        if prev == "added" and kind == "modified":
            continue
        out[path] = kind
    # A deleted path that exists again was replaced (editors, rsync): a modification.
    for path, kind in out.items():
        if kind == "deleted" and path.exists():
            out[path] = "modified"
    return [Change(kind, path) for path, kind in sorted(out.items())]


async def watch(
    root: Path,
    *,
    poll: bool = False,
    debounce_ms: int = 300,
    settle_ms: int = 300,
    stop_event: asyncio.Event | None = None,
) -> AsyncIterator[list[Change]]:
    """Yield batches of changes to trace candidates under `root` until `stop_event` is set."""
    async for raw in watchfiles.awatch(
        root,
        watch_filter=_filter,
        debounce=debounce_ms,
        step=50,
        stop_event=stop_event,
        force_polling=poll,
        poll_delay_ms=max(100, debounce_ms),
        recursive=True,
        ignore_permission_denied=True,
    ):
        changes = collapse(raw)
        ready: list[Change] = []
        for ch in changes:
            if ch.kind == "deleted" or await settled(ch.path, settle_ms=settle_ms):
                ready.append(ch)
            else:
                ready.append(Change("deleted", ch.path))
        if ready:
            yield ready
