"""Every rule evaluated over tables fetched by name: the findings frame and its evidence.

Rules never see events: they read the tables the registry's analyses make (`get_table`), each
fetched once however many rules read it. A table that cannot be made (no such data, an error)
makes the rules that need it abstain with the one-line reason; data.quality runs first and
its flaws make the rules that trust the flawed data abstain too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import polars as pl

from hta_tui.analysis.findings.model import (
    EVIDENCE_SCHEMA,
    FINDINGS_SCHEMA,
    SEVERITIES,
    Rule,
    RuleConfig,
    RuleResult,
    abstain,
    evidence_frame,
)
from hta_tui.analysis.findings.quality import FLAW_TEXT, QUALITY_ID
from hta_tui.analysis.findings.rules import RULES

#: At most this many evidence rows per finding (the worst first).
MAX_EVIDENCE = 8


def needed_tables(config: RuleConfig | None = None, rules: list[Rule] | None = None) -> list[str]:
    """The tables the rules turned on read, each once, in order."""
    config = config or RuleConfig()
    names: dict[str, None] = {}
    for rule in rules or RULES:
        if rule.id not in config.off:
            names.update(dict.fromkeys((*rule.needs, *rule.reads)))
    return list(names)


def evaluate_all(
    get_table: Callable[[str], pl.DataFrame],
    config: RuleConfig | None = None,
    *,
    rules: list[Rule] | None = None,
    context: Mapping[str, Any] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(findings, evidence) of every rule turned on: one row per rule, worst first.

    `context` carries what is not a table (data.quality's file metadata: "meta")."""
    config = config or RuleConfig()
    chosen = [r for r in (rules or RULES) if r.id not in config.off]
    chosen.sort(key=lambda r: r.id != QUALITY_ID)  # data.quality first: its flaws count
    made: dict[str, pl.DataFrame] = {}
    failed: dict[str, str] = {}
    flaws: tuple[str, ...] = ()
    rows: list[dict[str, Any]] = []
    evidence: list[pl.DataFrame] = []
    for rule in chosen:
        result = _evaluate(rule, config, get_table, made, failed, flaws, context or {})
        if rule.id == QUALITY_ID:
            flaws = result.flaws
        row = _row(rule, config, result)
        rows.append(row)
        ev = result.evidence
        if ev is not None and not ev.is_empty() and row["severity"] in SEVERITIES[:3]:
            ev = evidence_frame(ev).head(MAX_EVIDENCE)
            evidence.append(
                ev.with_columns(
                    pl.lit(rule.id).alias("id"), pl.int_range(pl.len(), dtype=pl.Int64).alias("n")
                )
            )
    findings = pl.DataFrame(rows, schema=FINDINGS_SCHEMA)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    findings = findings.sort(
        pl.col("severity").replace_strict(order, return_dtype=pl.Int32),
        pl.col("at_stake_us").fill_null(0),
        pl.col("id"),
        descending=[False, True, False],
        maintain_order=True,
    )
    ev_all = (
        pl.concat(evidence).select(list(EVIDENCE_SCHEMA))
        if evidence
        else pl.DataFrame(schema=EVIDENCE_SCHEMA)
    )
    rank_of = {rid: i for i, rid in enumerate(findings["id"].to_list())}
    ev_all = ev_all.sort(
        pl.col("id").replace_strict(rank_of, return_dtype=pl.Int32), "n", maintain_order=True
    )
    return findings, ev_all.cast(EVIDENCE_SCHEMA)


def _evaluate(
    rule: Rule,
    config: RuleConfig,
    get_table: Callable[[str], pl.DataFrame],
    made: dict[str, pl.DataFrame],
    failed: dict[str, str],
    flaws: tuple[str, ...],
    context: Mapping[str, Any],
) -> RuleResult:
    """One rule's answer; a missing table, a distrusted input or an error abstains."""
    distrusted = [f for f in rule.trusts if f in flaws]
    if distrusted:
        return abstain("data.quality: " + "; ".join(FLAW_TEXT[f] for f in distrusted))
    for name in rule.needs:
        _fetch(name, get_table, made, failed)
        if name in failed:
            return abstain(failed[name])
    for name in rule.reads:  # one that cannot be made is left out of its tables
        _fetch(name, get_table, made, failed)
    tables = {n: made[n] for n in (*rule.needs, *rule.reads) if n in made}
    if context:
        tables = {**tables, **{f"@{k}": v for k, v in context.items()}}
    try:
        return rule.evaluate(tables, config.thresholds_of(rule))
    except Exception as exc:  # a rule's own fault costs only that rule
        return abstain(f"{rule.id} failed: {_one_line(exc)}")


def _fetch(
    name: str,
    get_table: Callable[[str], pl.DataFrame],
    made: dict[str, pl.DataFrame],
    failed: dict[str, str],
) -> None:
    """Make table `name` once; one that cannot be made is kept with its one-line reason."""
    if name not in made and name not in failed:
        try:
            made[name] = get_table(name)
        except Exception as exc:  # bad input costs only the rules reading it
            failed[name] = f"{name} could not be made: {_one_line(exc)}"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _row(rule: Rule, config: RuleConfig, result: RuleResult) -> dict[str, Any]:
    th = config.thresholds_of(rule)
    if result.value is None:
        severity, threshold = "abstain", th.warn
        value = at_stake = pct = None
    else:
        value = float(result.value)
        severity, threshold = th.severity(value)
        if result.cap is not None and SEVERITIES.index(severity) < SEVERITIES.index(result.cap):
            severity = result.cap
        at_stake = float(result.at_stake_us or 0.0)
        pct = 100 * at_stake / result.step_us if result.step_us else None
    return {
        "id": rule.id,
        "severity": severity,
        "title": rule.title,
        "metric": rule.metric,
        "value": value,
        "threshold": float(threshold),
        "at_stake_us": at_stake,
        "at_stake_pct": pct,
        "advice": result.advice if result.value is not None and severity != "ok" else "",
        "reason": result.reason if result.value is None else "",
        "ranks": result.ranks,
    }
