"""The idle breakdown's kernel order (rank, stream, start, idx) against Python's sort of the
same tuples, on both of its paths: rows per rank in file order (radix sort by a 16-bit rank
and stream code) and anything else (lexsort)."""

import numpy as np
import polars as pl
import pytest

from hta_tui.analysis.idle import _stream_order


def _rows(rng: np.random.Generator, n: int, *, streams: list[int], shuffled: bool) -> pl.DataFrame:
    rank = np.sort(rng.integers(0, 3, n))
    idx = np.arange(n)
    if shuffled:
        idx = rng.permutation(n)
    return pl.DataFrame(
        {
            "rank": rank,
            "stream": rng.choice(streams, n),
            "start": rng.integers(0, 20, n),  # many equal starts
            "idx": idx.astype(np.uint32),
        }
    )


@pytest.mark.parametrize("streams", [[7, 13, 20], [7, 2**40]])
@pytest.mark.parametrize("shuffled", [False, True])
def test_order_is_rank_stream_start_idx(streams: list[int], shuffled: bool) -> None:
    rng = np.random.default_rng(len(streams) + shuffled)
    rows = _rows(rng, 300, streams=streams, shuffled=shuffled)
    keys = list(rows.select("rank", "stream", "start", "idx").iter_rows())
    want = sorted(range(rows.height), key=lambda i: keys[i])
    assert _stream_order(rows).tolist() == want
