"""The watcher reports added, modified and deleted trace files once they stop growing."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import orjson
import pytest
import watchfiles

from hta_tui.trace.cache import Cache
from hta_tui.trace.discover import describe
from hta_tui.trace.load import load_one
from hta_tui.trace.watch import Change, collapse, settled, watch
from tests import dialects


async def next_batch(gen, timeout: float = 10.0) -> list[Change]:
    return await asyncio.wait_for(gen.__anext__(), timeout)


async def wait_for(gen, predicate, timeout: float = 15.0) -> list[Change]:
    """Batches until one satisfies `predicate` (native events may arrive split)."""
    seen: list[Change] = []
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate(seen):
        remaining = deadline - asyncio.get_running_loop().time()
        assert remaining > 0, f"timed out; saw {seen}"
        seen.extend(await next_batch(gen, remaining))
    return seen


@pytest.mark.parametrize("poll", [False, True])
async def test_add_modify_delete(tmp_path: Path, poll: bool) -> None:
    stop = asyncio.Event()
    gen = watch(tmp_path, poll=poll, debounce_ms=100, settle_ms=100, stop_event=stop)
    pending = asyncio.ensure_future(next_batch(gen, 30))
    path = tmp_path / "rank-0.json"
    body = orjson.dumps(dialects.current(rank=0))
    seen: list[Change] = []
    # The watcher starts on its own time: write until it has seen the file at least once.
    for i in range(40):
        path.write_bytes(body + b" " * i)
        (tmp_path / "notes.txt").write_text(f"ignored {i}")
        done, _ = await asyncio.wait({pending}, timeout=0.5)
        if done:
            seen = pending.result()
            break
    assert {c.path for c in seen} == {path}  # notes.txt is not a trace candidate
    assert {c.kind for c in seen} <= {"added", "modified"}
    await asyncio.sleep(0.3)
    path.write_bytes(body + b"  " * 50)
    if poll:  # notify's poll watcher compares whole-second mtimes: a rewrite within the same
        # second would go unseen, so the mtime is moved past it (a test artefact: profilers
        # write a file once; waiting 1.1 s for the clock did the same)
        later = path.stat().st_mtime + 2
        os.utime(path, (later, later))
    seen = await wait_for(gen, lambda s: any(c.path == path for c in s))
    assert any(c.kind in ("modified", "added") for c in seen if c.path == path)
    path.unlink()
    seen = await wait_for(gen, lambda s: any(c.kind == "deleted" for c in s))
    assert [c.path for c in seen if c.kind == "deleted"] == [path]
    stop.set()
    await gen.aclose()


async def test_settled_waits_for_growth_to_stop(tmp_path: Path) -> None:
    path = tmp_path / "growing.json"
    path.write_bytes(b"{")

    async def grow() -> None:
        for _ in range(4):
            await asyncio.sleep(0.05)
            with path.open("ab") as f:
                f.write(b" " * 100)

    writer = asyncio.ensure_future(grow())
    t0 = asyncio.get_running_loop().time()
    assert await settled(path, settle_ms=120)
    await writer
    assert asyncio.get_running_loop().time() - t0 >= 0.2  # it waited past the writes
    assert path.stat().st_size == 401
    assert not await settled(tmp_path / "gone.json", settle_ms=10)


def test_collapse_keeps_one_change_per_path(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    b.write_text("{}")
    raw = {
        (watchfiles.Change.added, str(a)),
        (watchfiles.Change.modified, str(a)),
        (watchfiles.Change.deleted, str(b)),  # but b exists again: replaced
    }
    assert collapse(raw) == [Change("added", a), Change("modified", b)]


def test_partial_file_is_retried_until_complete(tmp_path: Path) -> None:
    """What the app does on each change: a half-written file is 'incomplete', then loads."""
    import orjson

    path = tmp_path / "rank-0.json"
    full = orjson.dumps(dialects.current(rank=0))
    path.write_bytes(full[: len(full) // 3])
    cache = Cache(tmp_path / "cache")
    first = load_one(describe(path), cache)
    assert first.status == "incomplete"
    path.write_bytes(full)
    second = load_one(describe(path), cache)
    assert second.status == "loaded" and not second.cached
