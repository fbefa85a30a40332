"""The findings the overview's block and the Findings view show: the registry's `findings`
and `finding_evidence` tables of every loaded rank, made once per trace-set generation (the
block and the view share them), in a worker thread only.

Also the block's lines: severity, time at stake per step, rule and title, worst first, cut
to the width, so the top of the overview says what to fix first at 80x24.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from hta_tui.analysis import registry
from hta_tui.analysis.checkpoint import hooked
from hta_tui.app.format import elide_end, fmt_us
from hta_tui.exec.split import run_split
from hta_tui.trace.model import TraceSet

T = TypeVar("T")

#: The overview's findings run this much nicer (lower priority) than the app: their first
#: computation is every analysis of every rank (~200 s of CPU at 1,000 small ranks), and the
#: UI thread, and a parser of a file that lands meanwhile, come first.
BACKGROUND_NICE = 10

#: A rule that says something: worth a line on the overview.
FIRED = ("fail", "warn", "info")
SEVERITY_LABEL = {"fail": "FAIL", "warn": "WARN", "info": "info", "ok": "ok", "abstain": "n/a"}


@dataclass(frozen=True)
class Findings:
    """The two tables of one trace-set generation (`generation` says which)."""

    findings: pl.DataFrame
    evidence: pl.DataFrame
    generation: int


_lock = threading.Lock()
_last: dict[tuple[Path, int], Findings] = {}


def compute_findings(ts: TraceSet, cache_root: Path | None = None) -> Findings:
    """Worker thread: the findings of every loaded rank of `ts` (a snapshot), through the
    registry; the last generation's kept, so the block and the view make them once.
    `cache_root` (the app's cache): made as the report makes them (`exec.split`), each
    rank's part and the whole answer kept there, so the next open with no file changed
    reads them back (at 1,000 small ranks: 200 s of CPU made once, not at every open)."""
    key = (ts.root, ts.generation)
    with _lock:
        kept = _last.get(key)
    if kept is not None:
        return kept
    if cache_root is not None:
        tables = run_split(ts, ["findings"], registry.Options(), cache_root=cache_root)
    else:
        tables = registry.tables(
            ts.frames(),
            ["findings", "finding_evidence"],
            registry.Options(),
            frames=ts.frames,
            meta=registry.trace_meta(ts),
        )
    made = Findings(tables["findings"], tables["finding_evidence"], ts.generation)
    with _lock:
        _last.clear()
        _last[key] = made
    return made


def in_background(
    fn: Callable[..., T], *args: Any, checkpoint: Callable[[], None] | None = None
) -> T:
    """`fn(*args)`, waited for, on a thread of its own at BACKGROUND_NICE lower priority
    (threads it starts inherit it), `checkpoint` its checkpoints' hook there (hooks are a
    thread's own). A thread of its own: Textual's workers run on a pool whose threads live
    on, and a thread cannot raise its priority back without privileges. Where priorities
    cannot be set, at the same priority."""
    out: dict[str, Any] = {}

    def run() -> None:
        with contextlib.suppress(OSError, AttributeError):  # not Linux, or not allowed
            tid = threading.get_native_id()
            nice = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, min(19, nice + BACKGROUND_NICE))
        try:
            if checkpoint is None:
                out["value"] = fn(*args)
            else:
                with hooked(checkpoint):
                    out["value"] = fn(*args)
        except BaseException as exc:  # raised again in the caller's thread
            out["error"] = exc

    thread = threading.Thread(target=run, name="hta-background", daemon=True)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


#: Columns of an evidence row naming its moment on the timeline (`with_moments`).
MOMENT_COLUMNS = ("m_t", "m_dur", "m_name")


def with_moments(evidence: pl.DataFrame) -> pl.DataFrame:
    """Evidence rows with their moment: the row's time window and event (us from the trace
    start), or else its step (the rank's `ProfilerStep#N`, which the timeline finds by name);
    null where a row names neither."""
    timed = pl.col("start_us").is_not_null()
    stepped = pl.col("step").is_not_null()
    return evidence.with_columns(
        pl.when(timed).then(pl.col("start_us")).when(stepped).then(0.0).alias("m_t"),
        pl.when(timed)
        .then((pl.col("end_us") - pl.col("start_us")).fill_null(0.0).clip(0.0))
        .otherwise(0.0)
        .alias("m_dur"),
        pl.when(timed)
        .then(pl.col("event"))
        .when(stepped)
        .then(pl.format("ProfilerStep#{}", pl.col("step")))
        .alias("m_name"),
    )


def counts_text(findings: pl.DataFrame) -> str:
    """ "2 fail, 1 warn, 9 quiet, 2 abstained": what the rules said, in one clause."""
    by = dict(findings.group_by("severity").len().iter_rows())
    parts = [f"{by[s]} {s}" for s in FIRED if by.get(s)]
    if by.get("ok"):
        parts.append(f"{by['ok']} quiet")
    if by.get("abstain"):
        parts.append(f"{by['abstain']} abstained")
    return ", ".join(parts) or "no rule ran"


def stake_text(row: dict) -> str:
    """Time at stake per step and its share: "78.0 ms/step 35%"."""
    us = row.get("at_stake_us") or 0.0
    pct = row.get("at_stake_pct")
    share = f" {pct:.0f}%" if pct is not None else ""
    return f"{fmt_us(us)}/step{share}" if us > 0 else "-"


def finding_line(row: dict, width: int) -> str:
    """One finding in `width` columns: severity, time at stake, rule id and title."""
    head = f"{SEVERITY_LABEL.get(row['severity'], row['severity']):<4} {stake_text(row):>17}  "
    return elide_end(f"{head}{row['id']}: {row['title']}", width)


def block_lines(findings: pl.DataFrame, width: int, most: int) -> list[str]:
    """The block under its title: the `most` worst findings that fired, one line each, or
    one line saying none did."""
    fired = findings.filter(pl.col("severity").is_in(FIRED))
    if fired.is_empty():
        return [elide_end(f"No finding fired ({counts_text(findings)}).", width)]
    return [finding_line(row, width) for row in fired.head(most).iter_rows(named=True)]
