"""The sync finder and module view as TraceAnalysis methods (beyond HTA: it has neither)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl

from hta_tui.trace.model import TraceSet


class SyncFinderMethods:
    """Mixed into `TraceAnalysis`, which provides `table` (the registry's door)."""

    trace_set: TraceSet

    def table(self, name: str, ranks: Iterable[int] | None = None, **options: Any) -> pl.DataFrame:
        raise NotImplementedError

    def get_syncs(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Every host-device sync: blocked time, GPU work in flight, operator stack, module,
        call site; backward syncs attributed to the forward op that created them."""
        return self.table("syncs", ranks)

    def get_sync_summary(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Blocked time by rank, phase, module, operator and call site, costliest first."""
        return self.table("sync_summary", ranks)

    def get_sync_verdict(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """One line per rank: how much of the step the host waited, and where most."""
        return self.table("sync_verdict", ranks)

    def get_module_stats(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """The TensorBoard plugin's module view: nn.Module tree with host and device time."""
        return self.table("module_stats", ranks)
