"""The module view against the TensorBoard plugin's /module output on every shared case that has
one (../shared/oracle-tb/<case>/<worker>/<span>/module.json)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from hta_tui.analysis.module_view import module_view, rank_module_view
from hta_tui.synth import make_trace, write_trace
from hta_tui.synth.sync_story import make_sync_story
from hta_tui.trace.parse import parse_bytes, read_bytes
from tests.shared_sets import parsed

TOLERANCE = 1e-3  # 0.1 %


def _cases(shared: Path) -> list[tuple[Path, Path]]:
    """(trace file, the plugin's module.json) for every file the plugin made a module view of."""
    out = []
    for meta_path in sorted((shared / "oracle-tb").glob("**/meta.json")):
        case = meta_path.parent
        meta = json.loads(meta_path.read_text())
        for f in meta["files"]:
            module = case / f["worker"] / str(f["span"]) / "module.json"
            trace = shared / "traces" / case.relative_to(shared / "oracle-tb") / f["source"]
            if module.is_file() and trace.is_file():
                out.append((trace, module))
    return out


def _oracle_rows(path: Path) -> pl.DataFrame:
    rows: list[dict] = []

    def walk(node: dict, parent: str | None) -> None:
        rows.append(
            {
                "module": node["name"],
                "module_id": node["id"],
                "parent": parent,
                "occurrences": node["occurences"],
                "operators": node["operators"],
                "host": float(node["host_duration"]),
                "host_self": float(node["self_host_duration"]),
                "device": float(node["device_duration"]),
                "device_self": float(node["self_device_duration"]),
                "avg": float(node["avg_duration"]),
            }
        )
        for child in node["children"]:
            walk(child, node["name"])

    for node in json.loads(path.read_text())["data"]:
        walk(node, None)
    return pl.DataFrame(rows).unique(["module", "module_id", "parent"])


def _close(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    return (a - b).abs() <= TOLERANCE * b.abs() + 1e-6


@pytest.mark.shared
def test_module_view_matches_the_plugin(shared: Path) -> None:
    cases = _cases(shared)
    assert len(cases) >= 5  # vit (2 spans), h100 bert, mi300 resnet, b200
    for trace, oracle_path in cases:
        events = parsed(trace).frames["events"]
        ours = rank_module_view(events)
        oracle = _oracle_rows(oracle_path)
        # The same hierarchy: every (module, parent) edge of the plugin's tree, and no other.
        keys = ["module", "module_id", "parent"]
        assert (
            ours.select(keys)
            .unique()
            .sort(keys, nulls_last=True)
            .equals(oracle.select(keys).sort(keys, nulls_last=True))
        ), trace.name
        both = oracle.join(ours, on=keys, nulls_equal=True)
        assert both.height == oracle.height
        bad = both.filter(
            (pl.col("occurrences") != pl.col("occurrences_right"))
            | (pl.col("operators") != pl.col("operators_right"))
            | ~_close(pl.col("host total (us)"), pl.col("host"))
            | ~_close(pl.col("host self (us)"), pl.col("host_self"))
        )
        assert bad.is_empty(), (trace.name, bad.head())
        has_gpu = events.filter(pl.col("kind") == "kernel").height > 0
        if not has_gpu:
            # CPU-only: no device time, as in the plugin, and avg is the host average.
            assert (both["device total (us)"] == 0).all()
            assert both.filter(~_close(pl.col("avg (us)"), pl.col("avg"))).is_empty()
        else:
            # DEVIATION: the plugin reports 0 device time on every PyTorch >= 1.10 trace (it
            # only links legacy `Runtime` events); ours is the GPU work the module launched.
            assert (both["device"] == 0).all()
            assert (both["device total (us)"] >= both["device self (us)"]).all()
            gpu_us = events.filter(pl.col("kind").is_in(("kernel", "memcpy", "memset")))
            top = ours.filter(pl.col("depth") == 0)["device total (us)"].sum()
            assert 0 < top <= gpu_us["dur"].sum() / 1000 + 1e-6


def test_no_modules_is_an_empty_table(tmp_path: Path) -> None:
    """The default synthetic trace has no nn.Module frames; the story has four modules."""

    plain = write_trace(make_trace(0, world_size=1, steps=2, seed=0), tmp_path / "a.json")
    assert module_view({0: parse_bytes(read_bytes(plain)).frames["events"]}).is_empty()
    story = write_trace(make_sync_story(steps=2), tmp_path / "b.json")
    table = module_view({3: parse_bytes(read_bytes(story)).frames["events"]})
    assert sorted(table["path"]) == [
        "Net_0",
        "Net_0/CrossEntropyLoss_0",
        "Net_0/Linear_0",
        "Net_0/PatchDrop_0",
    ]
    assert (table["rank"] == 3).all() and (table["occurrences"] == 2).all()
    # Linear_0's sgemm (800 us a step, as generated) is its own device time.
    linear = table.filter(pl.col("module") == "Linear_0").row(0, named=True)
    assert linear["device total (us)"] == linear["device self (us)"] == 1600


def test_a_batch_makes_only_its_ranks_with_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside a batch (`views_at_once`) the ranks without a module frame (every tiny rank of
    a synthetic job: two queries each on main) are found in one query and left out, as
    their empty tables were: the same table as rank by rank, the others made alone."""
    from polars.testing import assert_frame_equal

    from hta_tui.analysis import hta_view
    from hta_tui.analysis import module_view as view

    plain = write_trace(make_trace(0, world_size=1, steps=2, seed=0), tmp_path / "a.json")
    story = write_trace(make_sync_story(steps=2), tmp_path / "b.json")

    def ranks() -> dict[int, pl.DataFrame]:  # (afresh: nothing kept for them yet)
        files = {0: plain, 3: story, 4: plain, 5: story}
        return {r: parse_bytes(read_bytes(f)).frames["events"] for r, f in files.items()}

    alone = module_view(ranks())
    made: list[int] = []
    real = view.rank_module_view
    monkeypatch.setattr(view, "rank_module_view", lambda ev: made.append(1) or real(ev))
    with hta_view.views_at_once():
        together = module_view(ranks())
    assert_frame_equal(together, alone, check_exact=True)
    assert together["rank"].unique().sort().to_list() == [3, 5] and len(made) == 2


@pytest.mark.shared
def test_enclosing_among_operators_and_modules(shared: Path) -> None:
    """The module view's device times nest only operators and module frames around each
    launch (`enclosing(..., among=)`): the same pairs as nesting every context event and
    keeping those, on a real GPU trace with Python frames around its launches."""
    from hta_tui.analysis.host_context import enclosing
    from hta_tui.analysis.module_view import _is_module

    folder = shared / "traces" / "tracelens_mi300_ddp_resnet18"
    events = parse_bytes(read_bytes(folder / "mi300_ddp_resnet18_train.json.gz")).frames["events"]
    launches = events.filter(
        pl.col("kind").is_in(("runtime", "driver")) & pl.col("correlation").is_not_null()
    ).select("idx", "pid", "tid", "ts", "dur")
    wanted = _is_module() | (pl.col("kind") == "cpu_op")
    every = enclosing(events, launches)
    some = enclosing(events, launches, among=wanted)
    kept = every.join(events.filter(wanted).select(c_idx="idx"), on="c_idx", how="semi")
    assert every["c_kind"].cast(pl.String).unique().to_list().count("python") == 1  # frames there
    assert some.height and some.height < every.height
    assert some.equals(kept)


def _story_events(tmp_path: Path) -> pl.DataFrame:
    story = write_trace(make_sync_story(steps=2), tmp_path / "story.json")
    return parse_bytes(read_bytes(story)).frames["events"]


def test_repeated_idx_costs_only_its_rank(tmp_path: Path) -> None:
    """A frame whose idx repeats (the story's Python frames listed again a second later, as
    two reads concatenated would) is answered, not a ShapeError from `enclosing`'s gather:
    the launches' enclosing events are those of the frame without the copies, and the other
    rank's table is unchanged."""
    from hta_tui.analysis.host_context import enclosing

    events = _story_events(tmp_path)
    copies = events.filter(pl.col("kind") == "python").with_columns(pl.col("ts") + 10**9)
    repeated = pl.concat([events, copies])
    assert repeated["idx"].n_unique() < repeated.height
    launches = events.filter(pl.col("kind") == "runtime").select("idx", "pid", "tid", "ts", "dur")
    assert enclosing(repeated, launches).equals(enclosing(events, launches))
    alone = module_view({0: events})
    both = module_view({0: events, 1: repeated})
    assert both.filter(pl.col("rank") == 0).equals(alone)
    assert sorted(both.filter(pl.col("rank") == 1)["path"]) == sorted(alone["path"])


def test_null_ts_costs_only_its_event(tmp_path: Path) -> None:
    """An operator of null ts, on a rank where the shared nesting is refused (a zero-length
    operator): `_own_graph` nests the other nodes, not a negative level from a node placed
    nowhere. The table is the one without that operator, and the other rank's is unchanged;
    a launch of null ts too is answered."""
    events = _story_events(tmp_path)
    op = events.filter(pl.col("kind") == "cpu_op")["idx"]
    launch = events.filter(pl.col("kind") == "runtime")["idx"][1]
    events = events.with_columns(  # a zero-length operator: `_shared_graph` refuses the rank
        pl.when(pl.col("idx") == op[0]).then(0).otherwise(pl.col("dur")).alias("dur")
    )
    timeless = events.with_columns(
        pl.when(pl.col("idx") == op[1]).then(None).otherwise(pl.col("ts")).alias("ts")
    )
    alone = module_view({0: events})
    both = module_view({0: events, 1: timeless})
    assert both.filter(pl.col("rank") == 0).equals(alone)
    expected = module_view({1: events.filter(pl.col("idx") != op[1])})
    assert not expected.is_empty()
    assert both.filter(pl.col("rank") == 1).equals(expected)
    no_launch_time = timeless.with_columns(
        pl.when(pl.col("idx") == launch).then(None).otherwise(pl.col("ts")).alias("ts")
    )
    assert module_view({1: no_launch_time})["path"].sort().equals(expected["path"].sort())
