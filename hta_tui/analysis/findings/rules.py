"""The rule set, in one list: ids are the contract (the report, check and the app key on them)."""

from __future__ import annotations

from hta_tui.analysis.findings import comm, gpu, host, memory, variance
from hta_tui.analysis.findings.model import Rule
from hta_tui.analysis.findings.quality import QUALITY

RULES: list[Rule] = [
    QUALITY,
    *host.RULES,
    *gpu.RULES,
    *comm.RULES,
    *memory.RULES,
    *variance.RULES,
]
BY_ID: dict[str, Rule] = {r.id: r for r in RULES}
