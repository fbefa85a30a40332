"""Kernels of a launch and collectives per stream and layer as TraceAnalysis methods
(beyond HTA: graph launches, kernel time with no operator, backends, FSDP overlap)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl

from hta_tui.analysis import kernel_owners


class KernelOwnerMethods:
    """Mixed into `TraceAnalysis`, which provides `table` (the registry's door) and `events`."""

    def table(self, name: str, ranks: Iterable[int] | None = None, **options: Any) -> pl.DataFrame:
        raise NotImplementedError

    def events(self, rank: int) -> pl.DataFrame:
        raise NotImplementedError

    def get_kernel_owners(self, rank: int) -> pl.DataFrame:
        """Every GPU op of a rank with its launch call (a graph launch owns all of its
        graph's kernels), the operator, module, step and compiled region around the launch,
        its backend, and why it has no operator when it has none."""
        return kernel_owners.kernel_owners(self.events(rank))

    def get_kernel_attribution(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Per rank: kernel time with no operator, its share and why; graph launches, those
        recorded without kernels; GPU ops overlapping on a stream; a one-line verdict."""
        return self.table("kernel_attribution", ranks)

    def get_unattributed_kernels(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """The kernel time with no operator per rank, reason and launch."""
        return self.table("unattributed_kernels", ranks)

    def get_kernel_backends(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Kernel time per rank, backend (cuBLAS, Triton, NCCL, MIOpen...) and compiled
        region."""
        return self.table("kernel_backends", ranks)

    def get_collectives_hidden(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """NCCL kernels per rank, process group, stream, kind, step and layer: time, the part
        computation hides, the exposed rest."""
        return self.table("collectives_hidden", ranks)

    def get_collective_streams(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """Per rank and stream: the collective kinds on it, flagged where all-gathers and
        reduce-scatters serialise."""
        return self.table("collective_streams", ranks)
