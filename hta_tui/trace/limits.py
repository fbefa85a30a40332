"""How much one file may cost a load: bytes read (after gunzip) and seconds.

A trace folder is shared space: a runaway writer, a gzip bomb or a file that never ends must
not hold the other ranks back. Over a limit, a file gets a reason; the others load.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Uncompressed JSON held in memory at once (MB, 10**6 bytes); $HTA_TUI_MAX_FILE_MB. A larger
#: file is parsed in pieces (`stream`), whatever its size; only one that cannot be split is
#: held whole, and refused beyond this (a 4 GB rank held whole needs about 12 GB to parse).
DEFAULT_MAX_MB = 4_000.0
#: Seconds one file may take to read, parse and store, for each TIMEOUT_BYTES of it on disk
#: (`Limits.seconds_for`); $HTA_TUI_FILE_TIMEOUT. A 500 MB rank parses in about 6 s on a
#: slow core.
DEFAULT_TIMEOUT_S = 300.0
#: A file gets the time limit once for each this many bytes of it (on disk): the limit
#: stops a file that does not progress (stuck, a gzip bomb: small on disk, endless inside),
#: not a large one that does. A 10 GB rank (2 minutes on a quiet 2-core machine, several
#: times that on a busy one) gets 10 times 300 s.
TIMEOUT_BYTES = 1_000_000_000


def _env_float(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass(frozen=True)
class Limits:
    max_bytes: int = int(DEFAULT_MAX_MB * 1_000_000)
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_env(cls, *, max_mb: float | None = None, timeout_s: float | None = None) -> Limits:
        """The given values, else $HTA_TUI_MAX_FILE_MB / $HTA_TUI_FILE_TIMEOUT, else defaults."""
        mb = max_mb if max_mb is not None else _env_float("HTA_TUI_MAX_FILE_MB", DEFAULT_MAX_MB)
        secs = (
            timeout_s
            if timeout_s is not None
            else _env_float("HTA_TUI_FILE_TIMEOUT", DEFAULT_TIMEOUT_S)
        )
        return cls(max_bytes=int(mb * 1_000_000), timeout_s=float(secs))

    def seconds_for(self, size: int) -> float:
        """The time limit of a file of `size` bytes on disk: `timeout_s` for each started
        TIMEOUT_BYTES of it."""
        return self.timeout_s * max(1, -(-size // TIMEOUT_BYTES))
