"""Findings: what to fix first, with its evidence (issue 28).

Small declarative rules over the tables other analyses make (`rules.RULES`), evaluated by
`engine.evaluate_all` into two frames, `findings` (one row per rule, worst first) and
`finding_evidence` (rows of existing tables the app opens). Pure polars: no textual here.
"""

from hta_tui.analysis.findings.engine import evaluate_all, needed_tables
from hta_tui.analysis.findings.model import (
    EVIDENCE_SCHEMA,
    FINDINGS_SCHEMA,
    SEVERITIES,
    Rule,
    RuleConfig,
    RuleResult,
    Thresholds,
)
from hta_tui.analysis.findings.rules import BY_ID, RULES

__all__ = [
    "BY_ID",
    "EVIDENCE_SCHEMA",
    "FINDINGS_SCHEMA",
    "RULES",
    "SEVERITIES",
    "Rule",
    "RuleConfig",
    "RuleResult",
    "Thresholds",
    "evaluate_all",
    "needed_tables",
]
