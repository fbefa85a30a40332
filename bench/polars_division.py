"""The float trap of a batch made at once (bench/MANY_RANKS.md, tiny19): how polars divides a
column by a number, and whether a sum over a group is the sum over the group's rows alone.

    POLARS_MAX_THREADS=1 python bench/polars_division.py   (and =2)

Prints, per engine, which rows of a column of n rows `col / 1000` divides exactly (E) and which
by the reciprocal (i), and how many group sums equal the sums of each group's rows alone.
"""

import numpy as np
import polars as pl

rng = np.random.default_rng(3)
values = np.array([x for x in rng.integers(1, 10**7, 20_000) / 2.0 if x / 1000 != x * 0.001])


def divided(engine: str, n: int) -> str:
    frame = pl.DataFrame({"v": values[:n]})
    with pl.Config(engine_affinity=engine):
        out = frame.lazy().select(pl.col("v") / 1000).collect()["v"].to_numpy()
    return "".join("E" if e else "i" for e in out == values[:n] / 1000)


for engine in ("in-memory", "streaming"):
    print(engine, {n: divided(engine, n) for n in (1, 2, 3, 4, 5)})

parts = [
    rng.random(int(rng.integers(1, 300))) * 10.0 ** int(rng.integers(0, 9)) for _ in range(300)
]
table = pl.DataFrame(
    {"rank": np.repeat(np.arange(300), [p.size for p in parts]), "v": np.concatenate(parts)}
)
alone = [pl.Series(p).sum() for p in parts]
for flagged in (False, True):
    ranks = table.with_columns(pl.col("rank").set_sorted()) if flagged else table
    sums = ranks.group_by("rank", maintain_order=True).agg(pl.col("v").sum())["v"].to_list()
    print(
        "rank flagged sorted" if flagged else "rank hashed",
        sum(map(float.__eq__, sums, alone)),
        "of 300",
    )
