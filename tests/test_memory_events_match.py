"""`memory_events.memory_events` matches each address's events from one sort of the rank's
(`_matched`): the pairs, the allocations never freed and the frees without their allocation,
by device (a CPU and a GPU allocation may share an address), a null size neither allocating
nor freeing, each part placed and rounded as on its own."""

from __future__ import annotations

import polars as pl

from hta_tui.analysis.memory_events import FREE_ONLY, FREED, KB, NOT_FREED, memory_events

_SCHEMA = {
    "ts": pl.Int64,
    "device": pl.String,
    "addr": pl.Int64,
    "bytes": pl.Int64,
    "op": pl.String,
    "parent": pl.String,
}


def test_addresses_matched_per_device() -> None:
    recs = pl.DataFrame(
        [
            (4, "GPU0", 1, 100, "aten::mm", None),
            (20, "CPU", 1, 8, "aten::add", None),  # the same address on another device
            (34, "GPU0", 1, -100, None, None),  # frees the first
            (40, "GPU0", 2, -50, "aten::x", None),  # no allocation before it
            (45, "GPU0", 2, None, None, None),  # no size: neither
            (50, "GPU0", 2, -50, None, None),
            (60, "GPU0", 3, 64, "aten::empty", "fwd"),
            (70, "GPU0", None, 64, None, None),  # no address: left out
        ],
        schema=_SCHEMA,
        orient="row",
    )
    got = memory_events(recs, 0)
    assert got["device"].to_list() == ["CPU", "GPU0", "GPU0", "GPU0"]
    assert got["status"].to_list() == [NOT_FREED, FREED, NOT_FREED, FREE_ONLY]
    assert got["operator"].to_list() == ["aten::add", "aten::mm", "fwd (aten::empty)", "<unknown>"]
    assert got["addr"].to_list() == [1, 1, 3, 2]
    assert got["alloc_ts"].to_list() == [20, 4, 60, None]
    assert got["free_ts"].to_list() == [None, 34, None, 50]  # the last free of address 2
    assert got["size_kb"].to_list() == [8 / KB, 100 / KB, 64 / KB, 50 / KB]
    # the one pair divided as a part of one row is (not by the reciprocal of a million)
    assert got["duration_ms"].to_list() == [None, (34 - 4) / 1e6, None, None]
    assert got["release_ms"].to_list() == [None, 34 / 1e6, None, 50 / 1e6]


def test_allocations_after_the_last_free_placed_at_their_first() -> None:
    recs = pl.DataFrame(
        [
            (1, "GPU0", 7, 10, "a", None),
            (2, "GPU0", 8, 30, "c", None),  # never freed, placed first of the two
            (3, "GPU0", 7, -10, None, None),
            (4, "GPU0", 7, 20, "b", None),  # overwritten by the next
            (5, "GPU0", 7, 20, "b2", None),  # never freed, placed at the one before
        ],
        schema=_SCHEMA,
        orient="row",
    )
    got = memory_events(recs, 0)
    assert got["status"].to_list() == [FREED, NOT_FREED, NOT_FREED]
    assert got["operator"].to_list() == ["a", "c", "b2"]
