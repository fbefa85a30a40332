"""Where the analyses run, headless: one executor interface with three back-ends (this
process, local worker processes, a Dask cluster), the per-rank unit of work and its results
kept beside the frames, and the client's reduction of them.

    backends   Backend (in-process), PoolBackend, DaskBackend; `open_backend`
    blobs      named tables <-> bytes (Arrow IPC): what crosses the network and is cached
    rank_work  one rank's file -> its rank-wise analyses' tables (`RankJob`, `rank_tables`)
    split      the client: rank-wise tables gathered and concatenated, the rest run here,
               whole answers kept per job (`run_split`)
    parts      a long rank-wise table as its ranks' parts, read one at a time (`RankParts`)
"""

from __future__ import annotations

from hta_tui.exec.backends import (
    INSTALL_HINT,
    Backend,
    BackendError,
    DaskBackend,
    PoolBackend,
    open_backend,
)

__all__ = [
    "INSTALL_HINT",
    "Backend",
    "BackendError",
    "DaskBackend",
    "PoolBackend",
    "open_backend",
]
