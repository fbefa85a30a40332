"""The critical path as TraceAnalysis methods, with HTA 0.6's signature
(`critical_path_analysis(rank, annotation, instance_id)`), plus "what if" and the path
across ranks, which HTA does not have."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from hta_tui.analysis.critical_path import export, path, tables
from hta_tui.analysis.critical_path.longest import CycleError
from hta_tui.trace.model import TraceSet


@dataclass
class CriticalPath:
    """One rank's critical path (HTA's CPGraph, answered in polars)."""

    rank_path: path.RankPath
    annotation: str
    instance_id: int | tuple[int, int] | None

    @property
    def length_us(self) -> float:
        return self.rank_path.length_ns / path.NS_PER_US

    def get_critical_path_breakdown(self) -> pl.DataFrame:
        """Every edge on the path, in path order: type, duration (us), event, bound_by."""
        return path.edges_table(self.rank_path)

    def summary(self) -> pl.DataFrame:
        """% of the path per bound type (HTA's `summary()`), with the time in us."""
        b = path.breakdown(self.rank_path)
        total = self.rank_path.length_ns or 1
        return pl.DataFrame(
            {
                "bound_by": list(b),
                "duration_us": [v / path.NS_PER_US for v in b.values()],
                "pct": [100 * v / total for v in b.values()],
            }
        ).filter(pl.col("duration_us") > 0)

    def what_if(
        self, scale: Mapping[str, float] | None = None, events: Mapping[int, float] | None = None
    ) -> str:
        """The path re-run with weights scaled, along today's dependencies: a bound type
        (`{"gpu_compute_bound": 0.5}`: GPU compute 2x faster) or events by trace idx; one
        sentence with the step time before and after."""
        new, _ = path.what_if(self.rank_path, scale, events)
        what = ", ".join(
            [f"{k} x{v:g}" for k, v in (scale or {}).items()]
            + [f"event {i} x{v:g}" for i, v in (events or {}).items()]
        )
        return path.sentence(self.rank_path.length_ns, new, what or "nothing changed")


class CriticalPathMethods:
    """Mixed into `TraceAnalysis`, which provides `trace_set`, `_ranks` and `hta_compat`."""

    trace_set: TraceSet
    hta_compat: bool

    def _ranks(self, ranks: Iterable[int] | None = None) -> dict[int, pl.DataFrame]:
        raise NotImplementedError

    def critical_path_analysis(
        self,
        rank: int,
        annotation: str = "ProfilerStep",
        instance_id: int | tuple[int, int] | None = 0,
        data_load_events: list[str] | None = None,
    ) -> tuple[CriticalPath | None, bool]:
        """HTA's signature: the path of one rank over the `instance_id`-th (or a range of)
        CPU-side events whose name contains `annotation` ("" = the whole trace).
        Returns (path, True), or (None, False) when there is no such rank, window or path."""
        events = self._ranks([rank]).get(rank)
        if events is None:
            return None, False
        ev = path.prepared(events, hta_compat=self.hta_compat)
        window = path.windows(ev, annotation, instance_id)
        if window is None:
            return None, False
        loading = "|".join(f"(?:{p})" for p in data_load_events) if data_load_events else None
        try:
            rp = path.rank_path(
                ev, rank, window, hta_launches=self.hta_compat, data_loading=loading
            )
        except CycleError:
            return None, False
        return CriticalPath(rp, annotation, instance_id), True

    def get_critical_path(
        self, annotation: str = "ProfilerStep", instance_ids: list[int] | None = None
    ) -> dict[str, pl.DataFrame]:
        """Every rank's path per step and the path across ranks (the report's tables)."""
        return tables.critical_path_tables(
            self._ranks(), annotation, instance_ids, hta_compat=self.hta_compat
        )

    def overlay_critical_path_analysis(
        self,
        rank: int,
        critical_path_graph: CriticalPath,
        output_dir: str | Path,
        only_show_critical_events: bool = False,
    ) -> Path | None:
        """The rank's trace with the path overlaid, written to `output_dir` (never inside
        the trace folder) as `overlaid_critical_path_<trace name>`; None without that rank."""
        entry = self.trace_set.selected(rank)
        if entry is None:
            return None
        out = Path(output_dir) / f"overlaid_critical_path_{entry.path.name}"
        return export.overlay(
            entry.path, critical_path_graph.rank_path, out, only_critical=only_show_critical_events
        )
