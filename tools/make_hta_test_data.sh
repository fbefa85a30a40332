#!/bin/sh
# Regenerate tests/data/hta/: HTA 0.5's own answers on the generator's parity shapes
# (hta_tui.synth.shapes) and on shared traces HTA's oracle does not cover.
# HTA runs in its own venv (never a project dependency): HTA_PYTHON, default /work/.htavenv.
# Run from the repo root with the project's venv active.
set -eu
HTA_PYTHON=${HTA_PYTHON:-/work/.htavenv/bin/python}
SHARED=${HTA_TUI_SHARED:-../shared}
OUT=tests/data/hta
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
python -m hta_tui.synth.shapes "$TMP" >/dev/null
for shape in epoch_ns rocm mtia; do
    rm -rf "$OUT/$shape"
    "$HTA_PYTHON" tools/hta_reference.py "$TMP/$shape" "$OUT/$shape" 2>/dev/null
done
for case in tracelens_mi300_ddp_resnet18; do
    rm -rf "$OUT/$case"
    "$HTA_PYTHON" tools/hta_reference.py "$SHARED/traces/$case" "$OUT/$case" 2>/dev/null
done
# HTA with its ns rounding off (HTA_DISABLE_NS_ROUNDING=1): the exact-time figures the
# default mode is held to (within 0.1%); only the breakdowns are kept.
for pair in "rocm:$TMP/rocm" "tracelens_mi300_ddp_resnet18:$SHARED/traces/tracelens_mi300_ddp_resnet18"; do
    name=${pair%%:*}
    rm -rf "$OUT/$name/exact"
    HTA_DISABLE_NS_ROUNDING=1 "$HTA_PYTHON" tools/hta_reference.py "${pair#*:}" "$OUT/$name/exact" 2>/dev/null
    find "$OUT/$name/exact" -name '*.json' ! -name 'meta.json' ! -name 'temporal_*' \
        ! -name 'idle_*' ! -name 'gpu_kernel_breakdown*' -delete
done
du -sh "$OUT"/*
