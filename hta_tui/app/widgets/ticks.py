"""Chart ticks a reader can use: round values (1, 2, 5 times a power of ten), evenly spaced
on a linear axis, one per decade step on a log axis; plotext's own ticks are the axis range
cut in equal parts (0.60, 0.94, 1.28: neither round nor, on a log axis, in the data's unit)."""

from __future__ import annotations

import math

#: The round multipliers of a power of ten a tick may sit on.
STEPS = (1.0, 2.0, 5.0)


def label(value: float) -> str:
    """A tick label: no trailing zeros, thousands separated (1,000 not 1e+03)."""
    if value == 0:
        return "0"
    if abs(value) >= 1:
        return f"{value:,.0f}" if value == round(value) else f"{value:,.1f}"
    return f"{value:.3g}"


def linear_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round values from `lo` to `hi`, evenly spaced."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))

    def ticks_with(step: float) -> int:
        return math.floor(hi / step + 1e-9) - math.ceil(lo / step - 1e-9) + 1

    # the smallest round step that gives at most one tick more than asked for
    step = next(
        (m * power for m in (*STEPS, 10.0) if ticks_with(m * power) <= count + 1), 10 * power
    )
    first = math.ceil(lo / step - 1e-9) * step
    n = math.floor((hi - first) / step + 1e-9) + 1
    return [round(first + i * step, 12) for i in range(max(n, 0))]


def log_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """Round values (1, 2, 5 x 10^k, thinned to about `count`) between `lo` and `hi` > 0,
    for an axis drawn in log10."""
    if lo <= 0 or hi <= 0 or not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    values = [
        m * 10.0**e
        for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        for m in STEPS
    ]
    inside = [v for v in values if lo <= v <= hi]
    if len(inside) > count:
        decades = [v for v in inside if math.log10(v) == round(math.log10(v))]
        keep = 2 <= len(decades) <= count
        inside = decades if keep else inside[:: math.ceil(len(inside) / max(count, 1))]
    return inside if len(inside) >= 2 else [lo, hi]
