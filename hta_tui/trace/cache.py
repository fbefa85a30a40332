"""Parsed frames as Parquet under the user cache dir, so a second open reads no JSON.

Keyed by absolute path, size, mtime and parser version: any change to the file, or to what the
parser produces, misses. Entries are written to a temporary folder and renamed into place, so
a crash or a concurrent writer never leaves a half entry. Nothing is ever written beside the
traces. The cache is kept under a size limit (`prune`): GPU boxes often have small home quotas.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import polars as pl
from platformdirs import user_cache_dir

from hta_tui.trace.discover import TraceFile
from hta_tui.trace.parse import PARSER_VERSION, ParsedTrace
from hta_tui.trace.schema import FRAME_SCHEMAS

META_FILE = "meta.json"

#: Size of the cache above which the least recently used entries go (GB); $HTA_TUI_CACHE_MAX_GB.
DEFAULT_MAX_GB = 10.0
#: Entries used this recently are never pruned: an open app may still read their frames (s).
KEEP_RECENT_S = 3600.0


def max_cache_bytes() -> int:
    try:
        gb = float(os.environ.get("HTA_TUI_CACHE_MAX_GB", DEFAULT_MAX_GB))
    except ValueError:
        gb = DEFAULT_MAX_GB
    return int(gb * 2**30)


def default_root() -> Path:
    """$HTA_TUI_CACHE, else the XDG user cache dir (~/.cache/hta-tui)."""
    env = os.environ.get("HTA_TUI_CACHE")
    return Path(env) if env else Path(user_cache_dir("hta-tui", appauthor=False))


class Cache:
    """Where parsed frames live. With `enabled=False` (--no-cache) a private temporary folder
    is used instead, never read back by a later run and removed at exit."""

    def __init__(self, root: str | Path | None = None, *, enabled: bool = True) -> None:
        self.enabled = enabled
        if enabled:
            self.root = Path(root) if root is not None else default_root()
        else:
            self.root = Path(tempfile.mkdtemp(prefix="hta-tui-nocache-"))
            atexit.register(shutil.rmtree, self.root, True)
        self.root = self.root / f"v{PARSER_VERSION}"

    def entry_dir(self, tf: TraceFile) -> Path:
        path, size, mtime = tf.key
        digest = hashlib.sha1(f"{Path(path).resolve()}\0{size}\0{mtime}".encode()).hexdigest()
        return self.root / digest[:2] / digest

    def lookup(self, tf: TraceFile) -> dict[str, Any] | None:
        """The cached metadata when this exact version of the file was parsed before."""
        if not self.enabled:
            return None
        meta_path = self.entry_dir(tf) / META_FILE
        try:
            meta = orjson.loads(meta_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        with contextlib.suppress(OSError):  # the mtime says when it was last used (prune)
            os.utime(meta_path)
        return meta

    def store(self, tf: TraceFile, parsed: ParsedTrace) -> Path:
        final = self.entry_dir(tf)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
        try:
            for name, frame in parsed.frames.items():
                frame.write_parquet(tmp / f"{name}.parquet", compression="lz4", statistics=False)
            (tmp / META_FILE).write_bytes(orjson.dumps(parsed.meta, default=str))
            try:
                os.rename(tmp, final)
            except OSError:  # another process stored it first: theirs is as good
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def prune(self, max_bytes: int | None = None, *, now: float | None = None) -> int:
        """Remove what a later open cannot use (other parser versions, abandoned temporary
        folders), then the least recently used entries until the cache fits `max_bytes`
        (default: `max_cache_bytes()`). Entries used within KEEP_RECENT_S stay whatever the
        size. Returns the bytes freed."""
        if not self.enabled:
            return 0
        limit = max_cache_bytes() if max_bytes is None else max_bytes
        now = time.time() if now is None else now
        freed = 0
        for other in self.root.parent.glob("v*"):
            if other.is_dir() and other != self.root:
                freed += _tree_bytes(other)
                shutil.rmtree(other, ignore_errors=True)
        entries: list[tuple[float, int, Path]] = []
        for shard in self.root.glob("??"):
            for entry in shard.iterdir():
                size = _tree_bytes(entry)
                if entry.name.startswith(".tmp-"):
                    if now - _mtime(entry) > KEEP_RECENT_S:  # a writer died
                        shutil.rmtree(entry, ignore_errors=True)
                        freed += size
                    continue
                entries.append((_mtime(entry / META_FILE), size, entry))
        total = sum(size for _, size, _ in entries)
        for used, size, entry in sorted(entries, key=lambda e: e[0]):
            if total <= limit or now - used < KEEP_RECENT_S:
                break
            shutil.rmtree(entry, ignore_errors=True)
            total -= size
            freed += size
        return freed


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _tree_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(dirpath, name)).st_size
    return total


def read_frame(entry: Path, name: str, columns: list[str] | None = None) -> pl.DataFrame:
    """One frame of a cache entry (only the named columns, when given)."""
    path = entry / f"{name}.parquet"
    if not path.exists():
        return pl.DataFrame(schema=FRAME_SCHEMAS[name]).select(columns or pl.all())
    return pl.read_parquet(path, columns=columns)
