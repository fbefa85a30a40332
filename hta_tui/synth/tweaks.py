"""Knobs that push the generated job toward one bottleneck or away from it, so each finding
(analysis/findings) has a trace where it fires and one where it stays quiet. The defaults
leave the output unchanged (the same random draws are made whatever the knobs)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from hta_tui.synth.kernels import _GEMM_NAMES


@dataclass(frozen=True)
class Tweaks:
    #: DataLoader time per step, scaled (0.02: a loader that keeps up; 1: the stalls as ever)
    input_wait: float = 1.0
    #: every kernel's duration, scaled (0.05: tiny kernels, the host cannot keep up)
    kernel_scale: float = 1.0
    #: bytes the step's `.item()` reads back into pageable host memory (4: the loss)
    readback_bytes: int = 4
    #: the step ends by reading the loss (an event sync and `.item()`); False: it does not
    log_loss: bool = True
    #: every GEMM runs on tensor cores (TF32 on), none of the plain FP32 SGEMMs
    tf32: bool = False


DEFAULT = Tweaks()


def tweak_model(model: Any, tweaks: Tweaks) -> None:
    """What the knobs change in the model's kernels (in place, before any event)."""
    if tweaks.tf32:
        tensorop = _GEMM_NAMES[0]
        for key, k in model.k.items():
            if any(k.name == g[0] for g in _GEMM_NAMES) and "tensorop" not in k.name:
                model.k[key] = dataclasses.replace(
                    k, name=tensorop[0], launcher=tensorop[4], cbid=tensorop[5]
                )
