"""Relative gates of `hta-tui check --baseline`: did the run get slower than its baseline?

Two gates, both read through the trace diff (`diff.compare_traces`), one rank per side:
- `baseline.step_time`: the median ProfilerStep (HTA's step: the host range of
  `ProfilerStep#N`, every step of each side) slower by more than `step_pct` percent AND by
  more than `step_floor_us` microseconds (the noise floor: a 2 us step 50% slower is noise);
- `baseline.ops`: any operator or kernel whose time per step grew by more than `op_pct`
  percent AND `op_floor_us` microseconds (one that appeared counts from zero). Per step: each
  side's time over its steps divided by its step count, so runs of different lengths compare;
  CPU operators by their self time (`self_time`), so a slower kernel launcher does not also
  flag every operator around it.

Each gate is one row shaped like a finding (`findings` / `finding_evidence` of the rules):
severity "fail", "ok" or "abstain" (no ProfilerStep on a side: nothing to compare), the
evidence the ops that grew most, opening the diff view.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from hta_tui.analysis import diff
from hta_tui.analysis.findings.model import EVIDENCE_SCHEMA, FINDINGS_SCHEMA

#: A gate is a row of the rules' findings frame, its evidence rows of theirs.
FINDING_SCHEMA = FINDINGS_SCHEMA

STEP_GATE = "baseline.step_time"
OPS_GATE = "baseline.ops"
STEP_TITLE, STEP_METRIC = "Step time vs baseline", "median step time growth (%)"
OPS_TITLE, OPS_METRIC = "Operators and kernels vs baseline", "ops slower per step"
#: Evidence rows of the ops gate (the slower ops, largest growth first) and of the step gate
#: (what grew most, whatever its share).
MAX_EVIDENCE = 20
STEP_EVIDENCE = 5
_STEP_NAME = r"^ProfilerStep\s*#\s*\d+$"


@dataclass(frozen=True)
class GateConfig:
    """Thresholds of the relative gates (`[baseline]` in the check's TOML)."""

    step_pct: float = 5.0
    step_floor_us: float = 1000.0
    op_pct: float = 10.0
    op_floor_us: float = 100.0
    self_time: bool = True


def step_lengths(events: pl.DataFrame) -> pl.DataFrame:
    """iteration, length (us) of each ProfilerStep on the host, as the diff sees the side."""
    view = diff.side_view(events)
    return (
        view.filter(~pl.col("gpu") & pl.col("name").str.contains(_STEP_NAME))
        .group_by("iteration")
        .agg((pl.col("dur").max().cast(pl.Float64) / 1000).alias("length"))
        .sort("iteration")
    )


def per_step_diff(
    control: pl.DataFrame, test: pl.DataFrame, config: GateConfig = GateConfig()
) -> pl.DataFrame:
    """`compare_traces` over every step of each side, per step (the steps' own rows left
    out): name, Control_total_duration, Test_total_duration, diff_duration (us per step)."""
    table = diff.compare_traces(
        control,
        test,
        control_iteration=diff.step_numbers(control),
        test_iteration=diff.step_numbers(test),
        average_iterations=True,
        self_time=config.self_time,
    )
    return table.filter(~pl.col("name").str.contains(_STEP_NAME))


def _row(**values: object) -> pl.DataFrame:
    return pl.DataFrame([values], schema=FINDING_SCHEMA)


def _abstain(gate: str, title: str, metric: str, reason: str, ranks: str) -> pl.DataFrame:
    return _row(
        id=gate,
        severity="abstain",
        title=title,
        metric=metric,
        value=None,
        threshold=None,
        at_stake_us=0.0,
        at_stake_pct=0.0,
        advice="",
        reason=reason,
        ranks=ranks,
    )


def _evidence(gate: str, grown: pl.DataFrame, rank: int, k: int) -> pl.DataFrame:
    """The `k` ops that grew most, each a line opening the diff view."""
    top = grown.head(k)
    pct = (pl.col("diff_duration") / pl.col("Control_total_duration") * 100).round(0)
    label = pl.format(
        "{}: {} -> {} us/step ({})",
        pl.col("name"),
        pl.col("Control_total_duration").round(1),
        pl.col("Test_total_duration").round(1),
        pl.when(pl.col("Control_total_duration") > 0)
        .then(pl.format("+{}%", pct.cast(pl.Int64)))
        .otherwise(pl.lit("new")),
    )
    return top.select(
        pl.lit(gate).alias("id"),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("n"),
        pl.lit("diff").alias("view"),
        pl.lit("compare_traces").alias("table"),
        pl.lit(rank, pl.Int64).alias("rank"),
        pl.lit(None, pl.Int64).alias("step"),
        pl.col("name").alias("event"),
        pl.lit(None, pl.Float64).alias("start_us"),
        pl.lit(None, pl.Float64).alias("end_us"),
        label.alias("label"),
    ).cast(EVIDENCE_SCHEMA)


def _names(grown: pl.DataFrame, k: int = 3) -> str:
    return ", ".join(
        f"{n} (+{d:,.0f} us)" for n, d in grown.head(k).select("name", "diff_duration").iter_rows()
    )


def baseline_gates(
    control: pl.DataFrame,
    test: pl.DataFrame,
    config: GateConfig = GateConfig(),
    *,
    control_rank: int = 0,
    test_rank: int = 0,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(gates, evidence): the step-time and ops gates of `test` against `control` (the
    baseline), each rank's events frame, as rows shaped like the rules' findings. A diff
    that fails makes both abstain with its one-line reason (bad input costs only them)."""
    try:
        return _gates(control, test, config, control_rank=control_rank, test_rank=test_rank)
    except Exception as exc:
        text = str(exc).strip().splitlines()
        reason = f"the diff failed: {type(exc).__name__}" + (f": {text[0]}" if text else "")
        ranks = f"{test_rank} (baseline {control_rank})"
        gates = pl.concat(
            [
                _abstain(STEP_GATE, STEP_TITLE, STEP_METRIC, reason, ranks),
                _abstain(OPS_GATE, OPS_TITLE, OPS_METRIC, reason, ranks),
            ]
        )
        return gates, pl.DataFrame(schema=EVIDENCE_SCHEMA)


def _gates(
    control: pl.DataFrame,
    test: pl.DataFrame,
    config: GateConfig = GateConfig(),
    *,
    control_rank: int = 0,
    test_rank: int = 0,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    ranks = f"{test_rank} (baseline {control_rank})"
    c_steps, t_steps = step_lengths(control), step_lengths(test)
    missing = [side for side, s in (("baseline", c_steps), ("run", t_steps)) if s.is_empty()]
    if missing:
        reason = f"no ProfilerStep in the {' and the '.join(missing)}: no step to compare"
        gates = pl.concat(
            [
                _abstain(STEP_GATE, STEP_TITLE, STEP_METRIC, reason, ranks),
                _abstain(OPS_GATE, OPS_TITLE, OPS_METRIC, reason, ranks),
            ]
        )
        return gates, pl.DataFrame(schema=EVIDENCE_SCHEMA)
    table = per_step_diff(control, test, config)
    grown = table.filter(pl.col("diff_duration") > 0).sort("diff_duration", descending=True)
    slower = grown.filter(
        (pl.col("diff_duration") > config.op_floor_us)
        & (
            (pl.col("Control_total_duration") <= 0)
            | (pl.col("diff_duration") > pl.col("Control_total_duration") * config.op_pct / 100)
        )
    )
    c_med = float(c_steps["length"].median())  # type: ignore[arg-type]
    t_med = float(t_steps["length"].median())  # type: ignore[arg-type]
    delta = t_med - c_med
    pct = delta / c_med * 100 if c_med > 0 else 0.0
    step_fail = pct > config.step_pct and delta > config.step_floor_us
    step_row = _row(
        id=STEP_GATE,
        severity="fail" if step_fail else "ok",
        title=STEP_TITLE,
        metric=STEP_METRIC,
        value=pct,
        threshold=config.step_pct,
        at_stake_us=max(delta, 0.0),
        at_stake_pct=max(delta, 0.0) / t_med * 100 if t_med > 0 else 0.0,
        advice=(
            f"median step {c_med:,.0f} -> {t_med:,.0f} us ({pct:+.1f}%, "
            f"{c_steps.height} vs {t_steps.height} steps)"
            + (f"; grew most: {_names(grown)}" if grown.height else "")
        ),
        reason="",
        ranks=ranks,
    )
    at_stake = float(slower["diff_duration"].sum())
    ops_row = _row(
        id=OPS_GATE,
        severity="fail" if slower.height else "ok",
        title=OPS_TITLE,
        metric=OPS_METRIC,
        value=float(slower.height),
        threshold=config.op_pct,
        at_stake_us=at_stake,
        at_stake_pct=at_stake / t_med * 100 if t_med > 0 else 0.0,
        advice=(
            f"{slower.height} slower by > {config.op_pct:g}% and > {config.op_floor_us:g} "
            f"us/step: {_names(slower)}"
            if slower.height
            else f"none slower by > {config.op_pct:g}% and > {config.op_floor_us:g} us/step"
        ),
        reason="",
        ranks=ranks,
    )
    evidence = pl.concat(
        [
            _evidence(STEP_GATE, grown, test_rank, STEP_EVIDENCE),
            _evidence(OPS_GATE, slower, test_rank, MAX_EVIDENCE),
        ]
    )
    return pl.concat([step_row, ops_row]), evidence
