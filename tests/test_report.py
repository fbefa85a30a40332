"""`hta-tui report`: exit codes, the JSON shape, and HTA's numbers on every shared case."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import orjson
import polars as pl
import pytest

from hta_tui.cli import main
from hta_tui.report import run_report
from hta_tui.synth import write_trace_dir
from hta_tui.trace.cache import Cache
from tests import dialects
from tests.conftest import oracle_frame
from tests.shared_sets import cases_cache

TEMPORAL_COLUMNS = [
    "rank",
    "idle_time(us)",
    "compute_time(us)",
    "non_compute_time(us)",
    "kernel_time(us)",
    "idle_time_pctg",
    "compute_time_pctg",
    "non_compute_time_pctg",
]


TEMPORAL = ["temporal_breakdown"]


def report_json(
    path: Path, tmp_path: Path, *, cache: Cache | None = None, **kw
) -> tuple[int, dict]:
    """The JSON report of `path`, through `cache` (a new one in `tmp_path` by default)."""
    out = io.StringIO()
    cache = cache or Cache(tmp_path / "cache")
    rc = run_report(path, as_json=True, out=out, cache=cache, **kw)
    return rc, orjson.loads(out.getvalue())


def shared_cases(shared_root: Path) -> list[str]:
    """Every folder of ../shared/traces that holds files (what a user would point at)."""
    traces = shared_root / "traces"
    return sorted(
        p.relative_to(traces).as_posix()
        for p in traces.rglob("*")
        if p.is_dir() and any(c.is_file() for c in p.iterdir())
    )


def test_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good"
    dialects.write(dialects.current(rank=0), good / "rank-0.json")
    bad = tmp_path / "bad"
    (bad).mkdir()
    (bad / "x.json").write_bytes(b"{ nope")
    assert main(["report", str(good), "--json"]) == 0
    assert main(["report", str(bad), "--json"]) == 1
    assert main(["report", str(tmp_path / "missing")]) == 2
    with pytest.raises(SystemExit) as info:
        main(["report", "--bogus"])
    assert info.value.code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 1
    capsys.readouterr()


def test_json_shape(tmp_path: Path) -> None:
    d = tmp_path / "t"
    dialects.write(dialects.current(rank=0), d / "rank-0.json")
    dialects.write(dialects.cpu_only(rank=1), d / "rank-1.json")
    (d / "rank-2.json").write_bytes(b"")
    rc, doc = report_json(d, tmp_path)
    assert rc == 0
    keys = ["path", "rank", "span", "shown", "worker", "timestamp", "conflict", "status"]
    keys += ["error", "dropped_events", "overlapping_on_stream"]
    assert [sorted(f) for f in doc["files"]] == [sorted(keys)] * 3
    assert [(f["path"], f["rank"], f["status"]) for f in doc["files"]] == [
        ("rank-0.json", 0, "loaded"),
        ("rank-1.json", 1, "loaded"),
        ("rank-2.json", 2, "incomplete"),
    ]
    assert doc["files"][2]["error"] == "empty file"
    (row,) = doc["temporal_breakdown"]  # the CPU-only rank has no GPU time: no row
    assert list(row) == TEMPORAL_COLUMNS
    # one 30 us kernel and a 10 us memcpy with a 10 us gap: idle 10, compute 30, other 10
    assert (row["rank"], row["kernel_time(us)"], row["idle_time(us)"]) == (0, 50.0, 10.0)
    assert (row["compute_time(us)"], row["non_compute_time(us)"]) == (30.0, 10.0)
    assert row["idle_time_pctg"] == 20.0


def test_text_report(tmp_path: Path) -> None:
    d = tmp_path / "t"
    dialects.write(dialects.current(rank=0), d / "rank-0.json")
    out = io.StringIO()
    assert run_report(d, out=out, cache=Cache(tmp_path / "cache"), width=200) == 0
    text = out.getvalue()
    assert "rank-0.json" in text and "idle_time_pctg" in text
    temporal = text.split("# temporal_breakdown\n", 1)[1].splitlines()
    header = [c.strip() for c in temporal[0].strip("|").split("|")]
    row = [c.strip() for c in temporal[2].strip("|").split("|")]
    assert row[header.index("idle_time_pctg")] == "20"  # 20.0: a whole number, no decimals


def test_module_entry_point(tmp_path: Path) -> None:
    """`python -m hta_tui report`: the program ends once its report is written
    (`cli._end_now`, no teardown), its output whole and flushed, the exit handlers run (one
    registered by the program, as multiprocessing's and the log's are), nothing said on
    stderr."""
    d = tmp_path / "t"
    dialects.write(dialects.current(rank=0), d / "rank-0.json")
    ran = tmp_path / "exit-handler-ran"
    code = (
        "import atexit, pathlib, sys; from hta_tui import cli\n"
        f"atexit.register(pathlib.Path({str(ran)!r}).write_text, 'yes')\n"
        "sys.exit(cli.main())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "report", str(d), "--json", "--no-cache"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert json.loads(proc.stdout)["files"][0]["rank"] == 0
    assert ran.read_text() == "yes"


@pytest.mark.shared
def test_every_shared_case_against_hta(shared: Path, tmp_path: Path) -> None:
    """HTA-compatible mode equals HTA's file exactly; every case loads or says why."""
    cases = shared_cases(shared)
    assert len(cases) >= 14
    for case in cases:  # (the frames other tests parsed: the parse is theirs, ~3 s of CPU)
        rc, doc = report_json(  # the other analyses on every case: test_api, test_hta_parity
            shared / "traces" / case,
            tmp_path,
            cache=cases_cache(),
            hta_compat=True,
            only=["temporal_breakdown"],
        )
        statuses = {f["status"] for f in doc["files"]}
        assert statuses <= {"loaded", "not_trace"}, (case, doc["files"])
        assert all(f["error"] for f in doc["files"] if f["status"] != "loaded"), case
        assert rc == (0 if "loaded" in statuses else 1), case
        if not (shared / "oracle" / case).is_dir():  # newer cases: oracle-tb only, no HTA run
            continue
        oracle_path = shared / "oracle" / case / "temporal_breakdown.json"
        ours = doc["temporal_breakdown"]
        if not oracle_path.exists():  # HTA raised (no GPU kernels): we answer empty
            meta = json.loads((shared / "oracle" / case / "meta.json").read_text())
            if "get_temporal_breakdown" in meta.get("apis", {}):
                assert meta["apis"]["get_temporal_breakdown"]["result"] == "error", case
            assert ours == [], case
            continue
        expected = oracle_frame(oracle_path)
        assert [list(r.values()) for r in ours] == [list(r) for r in expected.rows()], case


@pytest.mark.shared
def test_exact_mode_deviates_only_by_rounding(shared: Path, tmp_path: Path) -> None:
    """Default mode keeps ns timestamps. On traces written in whole microseconds it equals
    HTA; on fractional ones HTA's rounding (start up, end down, per event) shortens every
    event by up to 1 us, which on nccl_parser_config moves idle time by 0.7%."""

    def temporal(case: str, hta_compat: bool) -> dict:
        path = shared / "traces" / case
        return report_json(
            path, tmp_path, cache=cases_cache(), hta_compat=hta_compat, only=TEMPORAL
        )[1]

    exact, compat = temporal("trace_filter", False), temporal("trace_filter", True)
    assert exact["temporal_breakdown"] == compat["temporal_breakdown"]
    exact, compat = temporal("nccl_parser_config", False), temporal("nccl_parser_config", True)
    (ours,), (hta,) = exact["temporal_breakdown"], compat["temporal_breakdown"]
    assert hta["idle_time(us)"] == 338781.0  # HTA's number, from the oracle
    assert ours["idle_time(us)"] == pytest.approx(336419.714, abs=1e-3)
    assert ours["kernel_time(us)"] == pytest.approx(hta["kernel_time(us)"], rel=1e-5)
    assert abs(ours["idle_time(us)"] - hta["idle_time(us)"]) / hta["idle_time(us)"] < 0.01


def test_set_passes_analysis_parameters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--set NAME=VALUE` gives the analyses HTA's parameters: here frequent kernel sequences
    of another operator than the default ProfilerStep, as the API computes them."""
    from hta_tui.analysis import kernel_detail, sequences
    from hta_tui.synth import write_trace_dir
    from hta_tui.trace.model import open_set

    root = tmp_path / "traces"
    write_trace_dir(root, ranks=1, steps=2, seed=0)
    frames = open_set(root, Cache(tmp_path / "cache")).frames()
    ops = kernel_detail.launching_operators(frames)
    op = ops.filter(~pl.col("operator").str.starts_with("ProfilerStep"))["operator"][0]
    want = sequences.frequent_cuda_kernel_sequences(frames, op, min_pattern_len=2)
    assert not want.is_empty()
    args = ["report", str(root), "--json", "--only", "frequent_cuda_kernel_sequences"]
    assert main([*args, "--set", f"operator_name={op}", "--set", "min_pattern_len=2"]) == 0
    got = orjson.loads(capsys.readouterr().out)["frequent_cuda_kernel_sequences"]
    assert got == want.to_dicts()
    assert main(args) == 0  # the default operator: another table
    assert orjson.loads(capsys.readouterr().out)["frequent_cuda_kernel_sequences"] != got
    for bad in ("top_k=many", "no_such=1", "top_k"):
        with pytest.raises(SystemExit) as info:
            main([*args, "--set", bad])
        assert info.value.code == 2
        assert "--set" in capsys.readouterr().err


def test_plugin_views_come_without_only(tmp_path: Path) -> None:
    """Issue 11's Operator, Kernel-by-op and GPU-metric-series keys are default analyses:
    the report gives them unasked, the same rows as when named, every kernel of the files
    counted once and every operator event once."""
    root = tmp_path / "t"
    write_trace_dir(root, ranks=2, steps=3, seed=5)
    rc, doc = report_json(root, tmp_path)
    assert rc == 0
    keys = ["gpu_metric_series", "kernel_view_by_op", "operator_stats"]
    assert set(keys) <= set(doc)
    for key in keys:
        _, named = report_json(root, tmp_path, only=[key])
        assert named[key] == doc[key], key
    for rank, path in enumerate(sorted(root.iterdir())):
        raw = orjson.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        kernels = sum(e.get("ph") == "X" and e.get("cat") == "kernel" for e in raw)
        ops = [e for e in raw if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
        by_op = [r for r in doc["kernel_view_by_op"] if r["rank"] == rank]
        assert sum(r["calls"] for r in by_op) == kernels > 0
        stats = [r for r in doc["operator_stats"] if r["rank"] == rank]
        # the plugin folds an op into its same-named only child: at most every cpu_op event
        assert 0 < sum(r["calls"] for r in stats) <= len(ops)
        assert {r["name"] for r in stats} <= {e["name"] for e in ops}
