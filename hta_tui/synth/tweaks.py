"""Knobs that push the generated job toward one bottleneck or away from it, so each finding
(analysis/findings) has a trace where it fires and one where it stays quiet. The defaults
leave the output unchanged (the same random draws are made whatever the knobs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tweaks:
    #: DataLoader time per step, scaled (0.02: a loader that keeps up; 1: the stalls as ever)
    input_wait: float = 1.0


DEFAULT = Tweaks()
