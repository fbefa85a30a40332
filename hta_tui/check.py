"""`hta-tui check PATH`: the findings (and, against a baseline, the relative gates) as a CI
verdict.

Exit status: 0 pass, 1 fail (a finding of a failing severity, or a gate), 2 no verdict
(nothing loaded, a bad config, or every rule the config requires abstained; with no rule
required, every rule and gate abstained). Each failing rule is one line with its evidence;
`--json` gives one object, `--junit FILE` a JUnit XML file (one testcase per rule or gate,
an abstained one skipped) for CI dashboards.

The config is TOML (stdlib `tomllib`):

    fail_on = ["fail"]              # severities that fail the job: fail, warn, info
    required = ["gpu.util.low"]     # all of these abstaining: no verdict (exit 2)
    disabled = ["memory.growth"]    # rules not run
    [rules."gpu.util.low"]          # a rule's thresholds (info / warn / fail)
    warn = 60
    fail = 40
    [baseline]                      # the relative gates (analysis/baseline_gate.py)
    step_pct = 5                    # median step slower by more than 5% ...
    step_floor_us = 1000            # ... and more than 1 ms
    op_pct = 10                     # any op or kernel slower per step by more than 10% ...
    op_floor_us = 100               # ... and more than 100 us
    self_time = true                # CPU operators by their self time
"""

from __future__ import annotations

import dataclasses
import socket
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

import orjson
import polars as pl

from hta_tui.analysis import registry
from hta_tui.analysis.baseline_gate import (
    EVIDENCE_SCHEMA,
    FINDING_SCHEMA,
    GateConfig,
    baseline_gates,
)
from hta_tui.analysis.findings import BY_ID, RuleConfig
from hta_tui.analysis.overview import precompute
from hta_tui.printable import json_printable, printable
from hta_tui.session import open_session
from hta_tui.trace.cache import Cache
from hta_tui.trace.model import TraceSet

EXIT_PASS, EXIT_FAIL, EXIT_NO_VERDICT = 0, 1, 2
SEVERITIES = ("fail", "warn", "info", "ok", "abstain")
#: Severities a config may say fail the job.
FAILING = ("fail", "warn", "info")
VERDICT = {EXIT_PASS: "pass", EXIT_FAIL: "fail", EXIT_NO_VERDICT: "no verdict"}
THRESHOLDS = ("info", "warn", "fail")


class ConfigError(ValueError):
    """A config the check cannot use: one line saying what and where."""


@dataclass(frozen=True)
class CheckConfig:
    """What fails the job, which rules must speak, the rules' thresholds, the gates'."""

    fail_on: frozenset[str] = frozenset({"fail"})
    required: tuple[str, ...] = ()
    disabled: frozenset[str] = frozenset()
    #: rule id -> {"info" | "warn" | "fail": threshold}
    thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    gates: GateConfig = field(default_factory=GateConfig)


def _strings(doc: Mapping[str, Any], key: str) -> list[str]:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of strings")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where} must be a number, not {value!r}")
    return float(value)


def parse_config(doc: Mapping[str, Any], known_rules: frozenset[str] | None = None) -> CheckConfig:
    """A TOML document (as `tomllib` reads it) -> CheckConfig; ConfigError names the key."""
    unknown = set(doc) - {"fail_on", "required", "disabled", "rules", "baseline"}
    if unknown:
        raise ConfigError(
            f"unknown key {sorted(unknown)[0]!r} (fail_on, required, disabled, rules, baseline)"
        )
    fail_on = _strings(doc, "fail_on") if "fail_on" in doc else ["fail"]
    bad = [s for s in fail_on if s not in FAILING]
    if bad:
        raise ConfigError(f"fail_on: {bad[0]!r} is not one of {', '.join(FAILING)}")
    required, disabled = _strings(doc, "required"), _strings(doc, "disabled")
    rules = doc.get("rules", {})
    if not isinstance(rules, dict):
        raise ConfigError("rules must be a table of rule ids")
    thresholds: dict[str, dict[str, float]] = {}
    for rule, values in rules.items():
        if not isinstance(values, dict):
            raise ConfigError(f"rules.{rule} must be a table (info / warn / fail)")
        extra = set(values) - set(THRESHOLDS)
        if extra:
            raise ConfigError(f"rules.{rule}: unknown key {sorted(extra)[0]!r} (info, warn, fail)")
        thresholds[rule] = {k: _number(v, f"rules.{rule}.{k}") for k, v in values.items()}
    if known_rules is not None:
        named = [*required, *disabled, *thresholds]
        strange = [r for r in named if r not in known_rules]
        if strange:
            raise ConfigError(
                f"unknown rule {strange[0]!r} (one of {', '.join(sorted(known_rules))})"
            )
    base = doc.get("baseline", {})
    if not isinstance(base, dict):
        raise ConfigError("baseline must be a table")
    fields = {f.name: f for f in dataclasses.fields(GateConfig)}
    gate_values: dict[str, Any] = {}
    for key, value in base.items():
        if key not in fields:
            raise ConfigError(f"baseline: unknown key {key!r} ({', '.join(fields)})")
        if key == "self_time":
            if not isinstance(value, bool):
                raise ConfigError("baseline.self_time must be true or false")
            gate_values[key] = value
        else:
            gate_values[key] = _number(value, f"baseline.{key}")
    return CheckConfig(
        fail_on=frozenset(fail_on),
        required=tuple(required),
        disabled=frozenset(disabled),
        thresholds=thresholds,
        gates=GateConfig(**gate_values),
    )


def load_config(path: Path, known_rules: frozenset[str] | None = None) -> CheckConfig:
    """The config file at `path`; ConfigError (one line) when unreadable or wrong."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        raise ConfigError("--config needs Python 3.11 or newer (tomllib)") from None
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{printable(path)}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{printable(path)}: not TOML: {exc}") from None
    try:
        return parse_config(doc, known_rules)
    except ConfigError as exc:
        raise ConfigError(f"{printable(path)}: {exc}") from None


# -- the verdict -------------------------------------------------------------------------------


def failing(findings: pl.DataFrame, config: CheckConfig) -> pl.DataFrame:
    """The rows that fail the job: of a severity the config fails on."""
    return findings.filter(pl.col("severity").is_in(sorted(config.fail_on)))


def verdict(findings: pl.DataFrame, config: CheckConfig, *, loaded: bool) -> int:
    """EXIT_PASS, EXIT_FAIL or EXIT_NO_VERDICT (see the module docstring)."""
    if not loaded:
        return EXIT_NO_VERDICT
    spoke = findings.filter(pl.col("severity") != "abstain")
    if config.required:
        if spoke.filter(pl.col("id").is_in(list(config.required))).is_empty():
            return EXIT_NO_VERDICT
    elif spoke.is_empty():
        return EXIT_NO_VERDICT
    return EXIT_FAIL if failing(findings, config).height else EXIT_PASS


# -- running it --------------------------------------------------------------------------------


@dataclass
class CheckResult:
    """The check of one run: its findings and gates (one frame, rules first) and their
    evidence, the exit code, and what was checked."""

    path: Path
    findings: pl.DataFrame
    evidence: pl.DataFrame
    code: int
    baseline: Path | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def rule_config(config: CheckConfig) -> RuleConfig:
    """The rules' config: each rule's thresholds the config names (the others its own)."""
    thresholds = {}
    for rule_id, given in config.thresholds.items():
        own = BY_ID[rule_id].thresholds
        thresholds[rule_id] = tuple(float(given.get(k, getattr(own, k))) for k in THRESHOLDS)
    return RuleConfig(thresholds=thresholds, off=frozenset(config.disabled))


def rule_findings(ts: TraceSet, config: CheckConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The rules' findings and evidence over every loaded rank, with the config's thresholds
    and without its disabled rules (through the registry: only the tables they read)."""
    made = registry.findings_tables(
        ts.frames(),
        registry.Options(),
        frames=ts.frames,
        meta=registry.trace_meta(ts),
        config=rule_config(config),
    )
    return made["findings"], made["finding_evidence"]


def known_rule_ids() -> frozenset[str]:
    return frozenset(BY_ID)


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root)) or path.name
    except ValueError:
        return path.name


def _side(ts: TraceSet, rank: int | None) -> tuple[int, pl.DataFrame] | None:
    loaded = ts.loaded()
    chosen = rank if rank is not None else min(loaded, default=None)
    if chosen is None or chosen not in loaded:
        return None
    return chosen, loaded[chosen].events


def run_check(
    path: Path,
    *,
    config: CheckConfig | None = None,
    baseline: Path | None = None,
    rank: int | None = None,
    baseline_rank: int | None = None,
    cache: Cache | None = None,
    workers: int | None = None,
) -> CheckResult:
    """Load `path` (and `baseline`), evaluate the rules and the gates, decide."""
    started = time.monotonic()
    config = config or CheckConfig()
    session = open_session(
        path,
        cache if cache is not None else Cache(),
        compare=baseline,
        workers=workers,
        after_parse=precompute,
    )
    ts, base = session.trace_set, session.compare_set
    notes = [n.text for n in session.notices]
    for entry in ts.entries.values():  # a bad file costs only itself, and says why
        if entry.status != "loaded":
            why = f": {entry.error}" if entry.error else ""
            notes.append(f"{_relative(entry.path, ts.root)}: {entry.status}{why}")
    findings = pl.DataFrame(schema=FINDING_SCHEMA)
    evidence = pl.DataFrame(schema=EVIDENCE_SCHEMA)
    loaded = bool(ts.loaded())
    if not loaded:
        notes.append(f"no trace loaded from {printable(path)}")
    else:
        findings, evidence = rule_findings(ts, config)
    if base is not None and loaded:
        run_side, base_side = _side(ts, rank), _side(base, baseline_rank)
        if base_side is None:
            notes.append(f"no trace loaded from the baseline {printable(baseline)}")
            loaded = False
        elif run_side is None:
            notes.append(f"rank {rank} is not loaded")
            loaded = False
        else:
            gates, gate_evidence = baseline_gates(
                base_side[1],
                run_side[1],
                config.gates,
                control_rank=base_side[0],
                test_rank=run_side[0],
            )
            findings = pl.concat([findings.cast(FINDING_SCHEMA), gates], how="vertical")
            evidence = pl.concat([evidence.cast(EVIDENCE_SCHEMA), gate_evidence])
    code = verdict(findings, config, loaded=loaded)
    return CheckResult(path, findings, evidence, code, baseline, notes, time.monotonic() - started)


# -- output ------------------------------------------------------------------------------------


def _evidence_of(evidence: pl.DataFrame, rule: str) -> pl.DataFrame:
    return evidence.filter(pl.col("id") == rule).sort("n")


def _number_text(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def failure_line(row: Mapping[str, Any], evidence: pl.DataFrame) -> str:
    """One line: severity, rule, what it measured against what, time at stake, evidence."""
    ev = _evidence_of(evidence, row["id"])
    first = ev["label"][0] if ev.height else ""
    more = f" (+{ev.height - 1} more)" if ev.height > 1 else ""
    stake = row.get("at_stake_us") or 0.0
    parts = [
        f"{row['severity'].upper()} {row['id']}: {row['title']}",
        f"{row['metric']} {_number_text(row['value'])}"
        f" (threshold {_number_text(row['threshold'])})",
        f"at stake {stake:,.0f} us/step ({row.get('at_stake_pct') or 0.0:.1f}%)",
    ]
    if first:
        parts.append(f"evidence: {first}{more}")
    return printable(" · ".join(parts))


def write_text(result: CheckResult, config: CheckConfig, out: TextIO) -> None:
    """Each failing rule one line with its evidence, then the warnings, abstentions and
    the verdict."""
    for note in result.notes:
        print(f"note: {printable(note)}", file=out)
    fails = failing(result.findings, config)
    for row in fails.iter_rows(named=True):
        print(failure_line(row, result.evidence), file=out)
    rest = result.findings.filter(~pl.col("id").is_in(fails["id"].to_list()))
    for row in rest.filter(pl.col("severity").is_in(["warn", "info"])).iter_rows(named=True):
        print(f"({row['severity']}, not failing) " + failure_line(row, result.evidence), file=out)
    for row in rest.filter(pl.col("severity") == "abstain").iter_rows(named=True):
        print(printable(f"abstained {row['id']}: {row['reason']}"), file=out)
    counts = result.findings.group_by("severity").len()
    by = dict(counts.iter_rows())
    summary = ", ".join(f"{by[s]} {s}" for s in SEVERITIES if by.get(s))
    print(
        f"hta-tui check: {VERDICT[result.code].upper()} ({summary or 'nothing checked'})", file=out
    )


def document(result: CheckResult, config: CheckConfig) -> dict[str, Any]:
    """The JSON object: the verdict, its exit code, the failing ids, every finding and gate
    with its evidence."""
    rows = []
    for row in result.findings.iter_rows(named=True):
        ev = _evidence_of(result.evidence, row["id"]).drop("id")
        rows.append({**row, "evidence": ev.to_dicts()})
    return {
        "verdict": VERDICT[result.code],
        "exit": result.code,
        "path": str(result.path),
        "baseline": None if result.baseline is None else str(result.baseline),
        "fail_on": sorted(config.fail_on),
        "required": list(config.required),
        "failing": failing(result.findings, config)["id"].to_list(),
        "notes": result.notes,
        "findings": rows,
    }


def junit_xml(result: CheckResult, config: CheckConfig) -> bytes:
    """JUnit XML (the Ant schema CI dashboards read): one testcase per rule or gate, a
    failure with its evidence where it fails the job, skipped where it abstained."""
    fails = set(failing(result.findings, config)["id"].to_list())
    skipped = result.findings.filter(pl.col("severity") == "abstain").height
    name = f"hta-tui check {result.path}"
    counts = {
        "tests": str(result.findings.height),
        "failures": str(len(fails)),
        "errors": "0" if result.code != EXIT_NO_VERDICT else "1",
        "skipped": str(skipped),
        "time": f"{result.seconds:.3f}",
    }
    suites = ET.Element("testsuites", {"name": "hta-tui check", **counts})
    suite = ET.SubElement(
        suites,
        "testsuite",
        {
            "name": name,
            "id": "0",
            "package": "hta_tui.check",
            "hostname": socket.gethostname() or "localhost",
            "timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
            **counts,
        },
    )
    props = ET.SubElement(suite, "properties")
    for key, value in (
        ("verdict", VERDICT[result.code]),
        ("fail_on", ",".join(sorted(config.fail_on))),
        ("baseline", "" if result.baseline is None else str(result.baseline)),
    ):
        ET.SubElement(props, "property", {"name": key, "value": value})
    for row in result.findings.iter_rows(named=True):
        group = "baseline" if row["id"].startswith("baseline.") else "rules"
        case = ET.SubElement(
            suite,
            "testcase",
            {"classname": f"hta_tui.check.{group}", "name": row["id"], "time": "0"},
        )
        if row["id"] in fails:
            failure = ET.SubElement(
                case,
                "failure",
                {"message": failure_line(row, result.evidence), "type": row["severity"]},
            )
            lines = [printable(row["advice"] or "")]
            lines += [printable(t) for t in _evidence_of(result.evidence, row["id"])["label"]]
            failure.text = "\n".join(line for line in lines if line)
        elif row["severity"] == "abstain":
            ET.SubElement(case, "skipped", {"message": printable(row["reason"] or "abstained")})
    if result.code == EXIT_NO_VERDICT:
        case = ET.SubElement(
            suite, "testcase", {"classname": "hta_tui.check", "name": "verdict", "time": "0"}
        )
        why = "; ".join(result.notes) or "every rule the config requires abstained"
        ET.SubElement(
            case, "error", {"message": printable(f"no verdict: {why}"), "type": "no verdict"}
        )
        counts_tests = int(suite.get("tests", "0")) + 1
        suite.set("tests", str(counts_tests))
        suites.set("tests", str(counts_tests))
    ET.SubElement(suite, "system-out").text = "\n".join(printable(n) for n in result.notes)
    ET.SubElement(suite, "system-err")
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"


def main_check(
    path: Path,
    *,
    config_path: Path | None = None,
    baseline: Path | None = None,
    rank: int | None = None,
    baseline_rank: int | None = None,
    as_json: bool = False,
    junit: Path | None = None,
    no_cache: bool = False,
    workers: int | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """The `check` command: its exit code; the lines (or JSON) on `out`."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        config = (
            load_config(config_path, known_rule_ids()) if config_path is not None else CheckConfig()
        )
    except ConfigError as exc:
        print(f"hta-tui check: config: {exc}", file=err)
        return EXIT_NO_VERDICT
    result = run_check(
        path,
        config=config,
        baseline=baseline,
        rank=rank,
        baseline_rank=baseline_rank,
        cache=Cache(enabled=not no_cache),
        workers=workers,
    )
    if as_json:
        doc = document(result, config)
        out.write(json_printable(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()) + "\n")
    else:
        write_text(result, config, out)
    if junit is not None:
        try:
            junit.write_bytes(junit_xml(result, config))
        except OSError as exc:
            print(f"hta-tui check: --junit {printable(junit)}: {exc.strerror or exc}", file=err)
            return EXIT_NO_VERDICT
    return result.code
