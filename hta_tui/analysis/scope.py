"""What a set of numbers covers: which ranks and which profiler steps. Screens and the report
state it, so two views with different totals say why (HTA's analyses leave out the last
ProfilerStep; a file list counts every event).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from hta_tui.analysis.hta_view import every_step, keeps_every_step, profiler_step_names
from hta_tui.analysis.steps import STEP_NUMBER, profiler_steps, ranks_profiler_steps


@dataclass(frozen=True)
class StepScope:
    """`ranks` analysed; `steps`: every numbered ProfilerStep in their files; `kept`: those
    HTA's view keeps (all of them when the step filter is off or does not apply)."""

    ranks: tuple[int, ...]
    steps: tuple[int, ...]
    kept: tuple[int, ...]
    #: HTA's ProfilerStep filter would apply (the job has >= 2 step names)
    filtered: bool = False

    @property
    def left_out(self) -> tuple[int, ...]:
        return tuple(s for s in self.steps if s not in self.kept)


def _numbers(names: set[str]) -> list[int]:
    return list(_numbers_of(tuple(sorted(names))))


@functools.lru_cache(maxsize=256)
def _numbers_of(names: tuple[str, ...]) -> tuple[int, ...]:
    """(once per set of step names: every rank of a job has the same few, and the extraction
    is a polars query each time, ~4 a tiny rank in a report's batch)"""
    found = pl.Series(names, dtype=pl.String).str.extract(STEP_NUMBER, 1)
    return tuple(sorted(set(found.cast(pl.Int64, strict=False).drop_nulls().to_list())))


def step_scope(ranks: Mapping[int, pl.DataFrame]) -> StepScope:
    names = profiler_step_names(ranks)
    numbers = _numbers(names)
    kept = tuple(profiler_steps(ranks))
    return StepScope(tuple(sorted(ranks)), tuple(numbers), kept, filtered=len(names) >= 2)


def step_scopes(ranks: Mapping[int, pl.DataFrame]) -> dict[int, StepScope]:
    """rank -> `step_scope({rank: events})`, each rank alone, their kept steps found for
    ranks of the same step names at once (`ranks_profiler_steps`)."""
    kept = ranks_profiler_steps(ranks)
    out = {}
    for rank, events in sorted(ranks.items()):
        names = profiler_step_names({rank: events})
        numbers = tuple(_numbers(names))
        out[rank] = StepScope((rank,), numbers, tuple(kept[rank]), filtered=len(names) >= 2)
    return out


def _span(steps: tuple[int, ...]) -> str:
    if not steps:
        return "none"
    if list(steps) == list(range(steps[0], steps[-1] + 1)):
        return str(steps[0]) if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"
    return ", ".join(map(str, steps))


def describe_steps(scope: StepScope, *, every_step: bool, key: str = "H") -> str:
    """The steps part of a screen's scope line (short: it shares the title line), with the
    key that changes it."""
    if not scope.steps:
        return "whole trace (no ProfilerStep)"
    if scope.left_out:
        # one step kept: "step 6 only, 7 ...", not "steps 6, 7 left out" (both left out?)
        kept = f"step {scope.kept[0]} only" if len(scope.kept) == 1 else _steps(scope.kept)
        return f"{kept}, {_span(scope.left_out)} left out as HTA ({key})"
    if every_step and scope.filtered:
        return f"{_steps(scope.steps)}, the last included ({key})"
    return _steps(scope.steps)


def _steps(steps: tuple[int, ...]) -> str:
    return f"step {steps[0]}" if len(steps) == 1 else f"steps {_span(steps)}"


def steps_from_names(names: set[str], *, every_step: bool = False) -> str:
    """The steps HTA's analyses cover, from the job's ProfilerStep names alone (the overview
    reads no frame): with two names or more, the last step is left out unless `every_step`."""
    numbers = tuple(_numbers(names))
    filtered = len(names) >= 2
    kept = numbers[:-1] if filtered and not every_step else numbers
    return describe_steps(StepScope((), numbers, kept, filtered=filtered), every_step=every_step)


def every_step_frames(ranks: Mapping[int, pl.DataFrame]) -> dict[int, pl.DataFrame]:
    """The frames with HTA's ProfilerStep filter off (see hta_view.every_step)."""
    return {r: every_step(f) for r, f in ranks.items()}


def is_every_step(ranks: Mapping[int, pl.DataFrame]) -> bool:
    return bool(ranks) and all(keeps_every_step(f) for f in ranks.values())
