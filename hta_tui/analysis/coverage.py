"""What each table's numbers cover, for scripts: the ranks, the steps (and which definition of a
step), and whose definitions the numbers follow. Two tables may both be right and still differ
(HTA's step is the host ProfilerStep range, the TensorBoard plugin's is moved to the GPU work it
launched): `report --json` says per table which one it used (its "scope" key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from hta_tui.analysis import scope
from hta_tui.analysis.lazy import lazy_module
from hta_tui.analysis.registry import Analysis, Options

#: (imported when a rank's steps are found: the report's client, whose are kept, imports
#: neither it nor numpy)
step_breakdown = lazy_module("hta_tui.analysis.step_breakdown")

#: Analysis.steps -> what a step is in that table.
STEPS: dict[str, str] = {
    "hta": "HTA's: the host ProfilerStep ranges, the last one left out (it may be cut short)",
    "plugin": (
        "the TensorBoard plugin's: each ProfilerStep moved to the GPU work it launched, "
        "trailing steps without GPU work left out (step_selection says which and why)"
    ),
    "every": "every ProfilerStep, as recorded on the host",
    "whole": "the whole trace, no step filter",
}

#: Analyses over the whole trace whose shares are of a step time: which steps that is.
SHARES_OF: dict[str, str] = {"syncs": "plugin"}

_PLUGIN_FIXED = (
    "the TensorBoard plugin's, fixed for traces newer than 2021 (cuda_runtime is Runtime, "
    "NCCL kernels are Communication, ...: README, where the numbers differ from the plugin); "
    "--set tb_compat=true gives the plugin's own"
)

#: Analysis.definitions -> (default mode, compat mode) wording.
DEFINITIONS: dict[str, tuple[str, str]] = {
    "hta": (
        "HTA's, in exact nanoseconds (README: where the numbers differ from HTA)",
        "HTA 0.5's exactly, its rounding included (hta_compat)",
    ),
    "plugin": (_PLUGIN_FIXED, "the TensorBoard plugin 0.4.3's exactly (tb_compat)"),
    "own": ("hta-tui's own (no HTA or plugin analysis answers this)",) * 2,
}


def _per_rank(ranks: Mapping[int, pl.DataFrame], steps: Mapping[int, list[int]]) -> dict:
    return {str(r): steps.get(r, []) for r in sorted(ranks)}


def steps_covered(
    kind: str, ranks: Mapping[int, pl.DataFrame], options: Options
) -> dict[str, list[int]] | None:
    """rank (as text) -> the ProfilerStep numbers a table of this kind covers; None for the
    whole trace."""
    if kind == "whole" or not ranks:
        return None
    if kind == "plugin":
        used = step_breakdown.used_steps(ranks, tb_compat=options.tb_compat)
        per = used.group_by("rank").agg(pl.col("step").unique().sort())
        return _per_rank(ranks, dict(zip(per["rank"], per["step"].to_list(), strict=True)))
    found = scope.step_scope(ranks)
    numbers = list(found.steps if kind == "every" else found.kept)
    return _per_rank(ranks, dict.fromkeys(ranks, numbers))


#: The kinds of steps `steps_covered` reads frames for.
RANK_KINDS = ("hta", "every", "plugin")


def ranks_steps(
    ranks: Mapping[int, pl.DataFrame], options: Options
) -> dict[int, dict[str, list[int]]]:
    """rank -> kind (`RANK_KINDS`) -> the steps `steps_covered` gives that rank alone: the
    plugin's made over every rank at once (each rank's are its own), HTA's and every
    ProfilerStep from each rank's own scope (`scope.step_scopes`: ranks of the same step
    names at once): what a report's batch keeps of each rank for its scope (~15 queries a
    tiny rank made rank by rank and kind by kind)."""
    plugin = steps_covered("plugin", ranks, options) or {}
    out: dict[int, dict[str, list[int]]] = {}
    for rank, found in scope.step_scopes(ranks).items():
        out[rank] = {
            "hta": list(found.kept),
            "every": list(found.steps),
            "plugin": list(plugin.get(str(rank), [])),
        }
    return out


def merge_steps(per_rank: Mapping[int, Mapping[str, list[int]]]) -> dict[str, dict[str, list[int]]]:
    """`steps_covered` of every rank from each rank's own (kind -> its steps): the plugin's
    steps are each rank's; HTA's (and every ProfilerStep) are the job's, the union of the
    ranks' (`step_scope` reads each rank's step names alone), told to every rank."""
    out: dict[str, dict[str, list[int]]] = {}
    ranks = sorted(per_rank)
    for kind in RANK_KINDS:
        if kind == "plugin":
            out[kind] = {str(r): list(per_rank[r].get(kind, [])) for r in ranks}
        else:
            union = sorted({s for r in ranks for s in per_rank[r].get(kind, [])})
            out[kind] = {str(r): union for r in ranks}
    return out


def table_scopes(
    analyses: list[Analysis],
    tables: Mapping[str, Any],
    owner: Mapping[str, str],
    ranks: Mapping[int, pl.DataFrame],
    options: Options,
    spans: Mapping[int, dict[str, str]],
    known: Mapping[str, dict[str, list[int]] | None] | None = None,
) -> dict[str, dict[str, Any]]:
    """For every table (name -> its analysis by `owner`): ranks, the span (file) of each,
    steps, what a step is, and whose definitions; computed once per kind of steps (`known`:
    kinds made already, rank by rank: `steps_covered` of one rank, merged by
    `merge_steps`)."""
    by_name = {a.name: a for a in analyses}
    found: dict[str, dict[str, list[int]] | None] = dict(known or {})
    out: dict[str, dict[str, Any]] = {}
    # (every table's the same objects: the report writes an entry's text once for the
    # tables whose entries hold the same, `report._scope_text`)
    every = sorted(ranks)
    where = {str(r): spans.get(r, {}) for r in every}
    for table in tables:
        a = by_name.get(owner.get(table, table))
        if a is None:
            continue
        if a.steps not in found:
            found[a.steps] = steps_covered(a.steps, ranks, options)
        compat = options.tb_compat if a.definitions == "plugin" else options.hta_compat
        out[table] = {
            "ranks": every,
            "spans": where,
            "steps": found[a.steps],
            "step_definition": STEPS[a.steps],
            "definitions": DEFINITIONS[a.definitions][1 if compat else 0],
        }
        if a.name in SHARES_OF:  # "% of step time": the step-time view's steps
            kind = SHARES_OF[a.name]
            if kind not in found:
                found[kind] = steps_covered(kind, ranks, options)
            out[table]["step_time_steps"] = found[kind]
            out[table]["step_time_definition"] = STEPS[kind]
    return out
