"""Fuzz: 500+ seeded mutants of real and synthetic traces, all loaded beside one good rank.

No mutant may raise, hang or take the good rank down: each gets a status and a one-line
reason (or loads, possibly with dropped events), and the good rank keeps its exact numbers,
which come from its raw events. Mutants are rebuilt from (source, kind, seed); none is
committed as a file.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import polars as pl
import pytest

from hta_tui.analysis import catalog
from hta_tui.analysis.overview import file_table, precompute, temporal_table
from hta_tui.synth import make_trace
from hta_tui.trace import load as load_mod
from hta_tui.trace.cache import Cache
from hta_tui.trace.discover import discover
from hta_tui.trace.limits import Limits
from hta_tui.trace.load import load_files
from hta_tui.trace.model import TraceSet
from tests import dialects
from tests.conftest import SHARED
from tests.mutants import HUGE_RANK_NAME, KINDS, meta_swap, mutate

N_MUTANTS = 520
#: Real traces small enough to mutate 500 times in the suite's budget (bytes on disk, JSON).
SHARED_MAX_BYTES = 300_000
SHARED_MAX_JSON = 2_000_000
STATUSES = {"loaded", "incomplete", "not_trace", "error"}
#: Sources above this size (JSON bytes) get each kind once over all of them instead of each
#: kind each: most of the parsing time otherwise (each kind twice was 60 MB of JSON through the
#: pool per run, once is 30 MB), and the small ones mutate the same layouts.
BIG_SOURCE = 300_000


def schedule(srcs: list[tuple[str, bytes]], n: int) -> list[tuple[int, str]]:
    """(source index, kind) of each of `n` mutants: every kind on every small source in turn,
    and each kind once on a large source (the large ones in turn)."""
    big = [i for i, (_, data) in enumerate(srcs) if len(data) > BIG_SOURCE]
    small = [i for i in range(len(srcs)) if i not in big]
    plan = [(big[j % len(big)], KINDS[j % len(KINDS)]) for j in range(len(KINDS))] if big else []
    j = 0
    while len(plan) < n:
        plan.append((small[j % len(small)], KINDS[(j // len(small)) % len(KINDS)]))
        j += 1
    return plan[:n]


def sources() -> list[tuple[str, bytes]]:
    """Synthetic traces always; real ones from ../shared when it is there."""
    out = [
        ("synth", orjson.dumps(make_trace(1, world_size=2, steps=2, seed=5, kernels_per_step=15))),
        ("current", orjson.dumps(dialects.current(rank=1))),
        ("legacy", orjson.dumps(dialects.legacy())),
        ("rocm", orjson.dumps(dialects.rocm())),
        ("nanoseconds", orjson.dumps(dialects.nanoseconds())),
    ]
    traces = SHARED / "traces"
    cases: set[Path] = set()
    if traces.is_dir():
        for path in sorted(traces.rglob("*.json*")):
            if path.parent in cases or path.stat().st_size > SHARED_MAX_BYTES:
                continue  # one file per case: the ranks of a case are alike
            raw = path.read_bytes()
            data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
            if (
                len(data) <= SHARED_MAX_JSON
                and data.lstrip()[:1] == b"{"
                and b'"traceEvents"' in data
            ):
                cases.add(path.parent)
                out.append((path.relative_to(traces).as_posix(), data))
    return out


def good_rank() -> tuple[dict, dict[str, float]]:
    """The good rank and what its file row must say, from its raw events: complete events,
    GPU busy time (the union of its kernel and memcpy intervals) and duration, in us."""
    trace = dialects.current(rank=0)
    complete = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    gpu = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in complete if e["cat"] in ("kernel", "gpu_memcpy")
    )
    busy, end = 0.0, float("-inf")
    for start, stop in gpu:
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    first = min(e["ts"] for e in complete)
    last = max(e["ts"] + e["dur"] for e in complete)
    return trace, {"events": len(complete), "gpu_busy_us": busy, "duration_us": last - first}


def check_good_rank(ts: TraceSet, expected: dict[str, float]) -> None:
    (row,) = file_table(ts).filter(pl.col("path").str.ends_with("good.json")).to_dicts()
    assert row["status"] == "loaded" and row["dropped_events"] == []
    assert {k: row[k] for k in expected} == expected


@pytest.mark.heavy
def test_fuzz_mutants_never_take_a_load_down(tmp_path: Path, monkeypatch) -> None:
    srcs = sources()
    root = tmp_path / "fuzz"
    root.mkdir()
    trace, expected = good_rank()
    dialects.write(trace, root / "good.json")
    recipe: dict[str, str] = {}
    for i, (source, kind) in enumerate(schedule(srcs, N_MUTANTS)):
        name, data = srcs[source]
        mutant = mutate(data, kind, seed=i)
        file = f"m{i:03d}.json" + (".gz" if kind.startswith("gzip") else "")
        if kind == "huge_digits":  # and in the file name: no rank fits in it
            file = f"{HUGE_RANK_NAME}-{file}"
        (root / file).write_bytes(mutant)
        recipe[file] = f"{kind} of {name}, seed {i}"
    # every file through the process pool, as a large rank would be: per-file time limit
    monkeypatch.setattr(load_mod, "INLINE_BYTES", 0)
    cache = Cache(tmp_path / "cache")
    files = discover(root)
    ts = TraceSet(root)
    ts.add_pending_many(files)
    results = list(
        load_files(files, cache, workers=2, after_parse=precompute, limits=Limits(timeout_s=60))
    )
    assert len(results) == len(files)
    for r in results:
        ts.apply(r)
        what = recipe.get(r.file.path.name, "good rank")
        assert r.status in STATUSES, what
        assert r.detail is None, f"{what}: {r.error}\n{r.detail}"  # no unexpected exception
        assert r.error is None or ("\n" not in r.error and len(r.error) <= 300), what
    good = {r.file.path.name: r for r in results}["good.json"]
    assert good.status == "loaded"
    # the overview over the whole set: every loaded mutant is summarised, the good rank exact
    loaded_mutants = [r for r in results if r.ok and r.file.path.name != "good.json"]
    assert loaded_mutants, "no mutant loaded: the mutations are too coarse to test repair"
    files_table = file_table(ts)
    assert files_table.height == len(files)
    for r in loaded_mutants[::4]:  # beside the good rank alone, a sample (reads are slow)
        one = TraceSet(root)
        for res in (good, r):
            one.apply(res)
        check_good_rank(one, expected)
        temporal_table(one)  # the mutant's row too, from its own summary


@pytest.mark.heavy
def test_every_analysis_runs_on_loaded_mutants(tmp_path: Path) -> None:
    """A sample of mutants that load, through every analysis of the report: odd but
    accepted values (huge numbers, odd ids, reordered keys) must not crash one."""
    srcs = sources()[:5]
    cache = Cache(tmp_path / "cache")
    checked = 0
    for i, kind in enumerate(["type_swap", "huge_numbers", "bad_events", "nan_times",
                              "reorder_keys", "duplicate_keys", "top_level_swap"]):  # fmt: skip
        for name, data in srcs:
            root = tmp_path / f"{kind}-{name}"
            root.mkdir()
            (root / "rank-0.json").write_bytes(mutate(data, kind, seed=1000 + i))
            ts = TraceSet(root)
            files = discover(root)
            for r in load_files(files, cache, after_parse=precompute):
                assert r.detail is None, f"{kind} of {name}: {r.error}\n{r.detail}"
                ts.apply(r)
            if ts.loaded():
                tables = catalog.run(
                    ts.frames(), [a.name for a in catalog.ANALYSES], catalog.Options()
                )
                assert tables
                checked += 1
    assert checked >= 15


#: Mutants that raised out of `load_one` on main before issue 10 (measured: 130 of these 520
#: did), as (kind, source, seed, status now, reason or dropped events now).
REGRESSIONS = [
    ("nan_times", "synth", 32, "loaded", "ts is not a number"),  # polars InvalidOperationError
    ("type_swap", "nanoseconds", 4, "loaded", "dur is not a number"),  # the same, in dur
    ("huge_numbers", "synth", 64, "loaded", ""),  # TypeError: an Int128 pid in the threads
    ("huge_numbers", "current", 65, "loaded", "ts out of range"),  # InvalidOperationError
    ("gzip_flip", "synth", 320, "error", "corrupt gzip"),  # IsalError
    ("deep_nesting", "current", 385, "error", "nested too deeply"),  # RecursionError
    # found when issue 25's kinds moved the seeds: a text stream beside numbers in a legacy
    # "stream N" trace (TypeError building the stream column's nulls)
    ("type_swap", "legacy", 427, "loaded", "dur is not a number"),
]


@pytest.mark.parametrize(("kind", "source", "seed", "status", "why"), REGRESSIONS)
def test_mutants_that_used_to_crash_load_beside_a_good_rank(
    kind: str, source: str, seed: int, status: str, why: str, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    trace, expected = good_rank()
    dialects.write(trace, root / "good.json")
    data = dict(sources())[source]
    (root / f"m.json{'.gz' if kind.startswith('gzip') else ''}").write_bytes(
        mutate(data, kind, seed)
    )
    ts = TraceSet(root)
    for r in load_files(discover(root), Cache(tmp_path / "c"), after_parse=precompute):
        assert r.detail is None, r.error
        ts.apply(r)
    check_good_rank(ts, expected)
    (bad,) = [e for e in ts.entries.values() if e.path.name.startswith("m.json")]
    assert bad.status == status
    if status == "loaded":
        assert why in bad.meta["dropped_events"] if why else True
    else:
        assert why in bad.error


def test_cache_entries_of_wrong_types_are_damage(tmp_path: Path) -> None:
    """Seeded meta.json mutants of a stored entry (fields of wrong types): each lookup finds
    the damage, the trace is parsed again and the good rank keeps its exact numbers."""
    import json
    import random

    from hta_tui.trace.cache import META_FILE, take_notices

    root = tmp_path / "t"
    trace, expected = good_rank()
    dialects.write(trace, root / "good.json")
    cache = Cache(tmp_path / "c")
    (tf,) = discover(root)
    list(load_files([tf], cache, after_parse=precompute))
    meta_path = cache.entry_dir(tf) / META_FILE
    for seed in range(30):
        meta = orjson.loads(meta_path.read_bytes())
        # the standard library writes integers beyond 64 bits too (orjson then cannot read it)
        meta_path.write_text(json.dumps(meta_swap(meta, random.Random(seed))))
        take_notices()
        ts = TraceSet(root)
        for r in load_files([tf], cache, after_parse=precompute):
            assert r.detail is None and not r.cached, (seed, r.error)
            ts.apply(r)
        assert any("cache entry damaged" in n for n in take_notices()), seed
        check_good_rank(ts, expected)
