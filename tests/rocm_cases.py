"""The ROCm traces the ROCm tests run on: the generator's ROCm shape and the shared MI300
trace (skipped without ../shared). Each has HTA's answers in tests/data/hta/<name>."""

from __future__ import annotations

from pathlib import Path

import pytest

from hta_tui.synth.shapes import write_shape
from tests.conftest import SHARED

MI300 = "tracelens_mi300_ddp_resnet18"
#: the generator's shape name, the shared case
NAMES = ["rocm", MI300]


def rocm_trace(name: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of one case: the shared MI300 trace, or a shape of the generator
    (`hta_tui.synth.shapes`: rocm, mtia, epoch_ns)."""
    if name == MI300:
        path = SHARED / "traces" / MI300
        if not path.is_dir():
            pytest.skip("../shared is absent")
        return path
    path = tmp_path_factory.mktemp(name) / name
    write_shape(name, path)
    return path
