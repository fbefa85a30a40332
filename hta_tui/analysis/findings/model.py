"""What a rule is and what it answers: the findings contract's types and frames.

A rule reads tables other analyses already make (through the registry, by name), computes one
metric, and says how much step time is at stake: what fixing it could save at most, per step.
The engine (`engine.evaluate_all`) turns its value into a severity through the rule's
thresholds (configurable per rule id) and lays every answer out as one row of `findings`, its
evidence as rows of `finding_evidence` that the app opens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import polars as pl

#: Severities, worst first (the findings frame is ordered by this, then time at stake).
SEVERITIES = ("fail", "warn", "info", "ok", "abstain")

FINDINGS_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(),
    "severity": pl.String(),
    "title": pl.String(),
    "metric": pl.String(),
    "value": pl.Float64(),
    "threshold": pl.Float64(),
    "at_stake_us": pl.Float64(),
    "at_stake_pct": pl.Float64(),
    "advice": pl.String(),
    "reason": pl.String(),
    "ranks": pl.String(),
}

EVIDENCE_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(),
    "n": pl.Int64(),
    "view": pl.String(),
    "table": pl.String(),
    "rank": pl.Int64(),
    "step": pl.Int64(),
    "event": pl.String(),
    "start_us": pl.Float64(),
    "end_us": pl.Float64(),
    "label": pl.String(),
}
#: The columns a rule's evidence frame gives (the engine adds id and n).
EVIDENCE_COLUMNS = {k: v for k, v in EVIDENCE_SCHEMA.items() if k not in ("id", "n")}

Tables = Mapping[str, pl.DataFrame]


@dataclass(frozen=True)
class Thresholds:
    """Where a value becomes info, warn, fail; `lower_is_worse` for a metric that is bad when
    small (GPU utilization). A value crosses a threshold when strictly beyond it."""

    info: float
    warn: float
    fail: float
    lower_is_worse: bool = False

    def severity(self, value: float) -> tuple[str, float]:
        """(severity, the threshold crossed, else the warn one)."""
        for name in ("fail", "warn", "info"):
            bound = getattr(self, name)
            if (value < bound) if self.lower_is_worse else (value > bound):
                return name, bound
        return "ok", self.warn


@dataclass(frozen=True)
class RuleResult:
    """One rule's answer. `value` None means it abstained (`reason` says why)."""

    value: float | None
    #: per step, what fixing it could save at most (us)
    at_stake_us: float = 0.0
    #: the step time `at_stake_us` is a share of (us); None: no share
    step_us: float | None = None
    advice: str = ""
    reason: str = ""
    ranks: str = ""
    evidence: pl.DataFrame | None = None
    #: data.quality only: the flaws found (`quality.FLAW_TEXT` keys)
    flaws: tuple[str, ...] = ()
    #: the worst severity it may have (a second condition unmet: sync.host under 1 ms)
    cap: str | None = None


def abstain(reason: str) -> RuleResult:
    return RuleResult(value=None, reason=reason)


@dataclass(frozen=True)
class RuleConfig:
    """Thresholds per rule id (info, warn, fail), rules turned off."""

    thresholds: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
    off: frozenset[str] = frozenset()

    def thresholds_of(self, rule: Rule) -> Thresholds:
        given = self.thresholds.get(rule.id)
        if given is None:
            return rule.thresholds
        info, warn, fail = (float(x) for x in given)
        return Thresholds(info, warn, fail, rule.thresholds.lower_is_worse)


@dataclass(frozen=True)
class Rule:
    """One declarative check over existing analyses' tables."""

    id: str
    title: str
    metric: str
    thresholds: Thresholds
    #: registry tables it reads
    needs: tuple[str, ...]
    #: (tables by name, its thresholds) -> its answer
    evaluate: Callable[[Tables, Thresholds], RuleResult]
    #: data.quality flaws that make it abstain
    trusts: tuple[str, ...] = ()
    #: registry tables it reads when they can be made: one that cannot leaves the part of
    #: the rule reading it out, not the whole rule (data.quality's checks are independent)
    reads: tuple[str, ...] = ()


def evidence_frame(rows: pl.DataFrame | list[dict[str, object]]) -> pl.DataFrame:
    """A rule's evidence rows with the contract's columns and types (missing ones null)."""
    df = pl.DataFrame(rows, infer_schema_length=None) if isinstance(rows, list) else rows
    if df.is_empty() and not df.columns:
        return pl.DataFrame(schema=EVIDENCE_COLUMNS)
    return df.select(
        [
            (pl.col(c) if c in df.columns else pl.lit(None)).cast(t).alias(c)
            for c, t in EVIDENCE_COLUMNS.items()
        ]
    )


def ranks_text(ranks: list[int], every: int) -> str:
    """ "all" when every loaded rank is named, else "0,3"."""
    ranks = sorted(set(ranks))
    if ranks and len(ranks) == every and every > 1:
        return "all"
    return ",".join(str(r) for r in ranks)


def fmt_us(value: float) -> str:
    """A duration for advice text: us below 1 ms, else ms."""
    if value is None or math.isnan(value):
        return "?"
    if abs(value) >= 1000:
        return f"{value / 1000:.1f} ms"
    return f"{value:.0f} us"


def short(name: str | None, width: int = 60) -> str:
    """An event name cut for one line of advice."""
    text = (name or "?").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"
