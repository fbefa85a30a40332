"""The sync finder and module view as TraceAnalysis methods (beyond HTA: it has neither)."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from hta_tui.analysis import module_view, sync_summary, syncs
from hta_tui.trace.model import TraceSet


class SyncFinderMethods:
    """Mixed into `TraceAnalysis`, which provides `trace_set` and `_ranks`."""

    trace_set: TraceSet

    def _ranks(self, ranks: Iterable[int] | None = None) -> dict[int, pl.DataFrame]:
        raise NotImplementedError

    def get_syncs(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Every host-device sync: blocked time, GPU work in flight, operator stack, module,
        call site; backward syncs attributed to the forward op that created them."""
        events = self._ranks(ranks)
        flows = self.trace_set.frames("flows")
        return syncs.syncs(events, {r: flows[r] for r in events if r in flows})

    def get_sync_summary(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Blocked time by rank, phase, module, operator and call site, costliest first."""
        return sync_summary.sync_summary(
            self.get_syncs(ranks), sync_summary.step_time(self._ranks(ranks))
        )

    def get_sync_verdict(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """One line per rank: how much of the step the host waited, and where most."""
        frames = self._ranks(ranks)
        steps = sync_summary.step_time(frames)
        return sync_summary.sync_verdict(
            sync_summary.sync_summary(self.get_syncs(ranks), steps),
            steps,
            sync_summary.cpu_only_ranks(frames),
        )

    def get_module_stats(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """The TensorBoard plugin's module view: nn.Module tree with host and device time."""
        return module_view.module_view(self._ranks(ranks))
