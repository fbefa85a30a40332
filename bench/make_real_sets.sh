#!/usr/bin/env bash
# Real-shaped trace sets for the benchmarks (issue 27): a real public trace repeated in time and
# written as N ranks by scale_trace.py (ids, flows and steps kept consistent). Never written
# into the repository: the default output is /tmp/realsets (the benches take `--set DIR`).
#
#   bench/make_real_sets.sh [OUT] [RANKS] [MB]      # default /tmp/realsets 8 100
#
# SHARED (default ../shared next to the repository's parent: /work/shared) holds traces/ and
# tools/scale_trace.py. Each set is rebuilt only when its folder is missing.
set -euo pipefail
OUT=${1:-/tmp/realsets}
RANKS=${2:-8}
MB=${3:-100}
SHARED=${SHARED:-/work/shared}
PY=${PYTHON:-python}
SCALE="$SHARED/tools/scale_trace.py"
declare -A SOURCES=(
  [resnet18]="$SHARED/traces/tracelens_mi300_ddp_resnet18/mi300_ddp_resnet18_train.json.gz"
  [vit_memory]="$SHARED/traces/pytorch_cpu_vit_memory/worker0.1795489276434075715.pt.trace.json.gz"
)
for name in resnet18 vit_memory; do
  dest="$OUT/${name}_${RANKS}x${MB}MB"
  if [ -d "$dest" ] && [ -n "$(ls -A "$dest")" ]; then
    echo "$dest: exists"
    continue
  fi
  "$PY" "$SCALE" "${SOURCES[$name]}" --out "$dest" --ranks "$RANKS" --target-mb "$MB" --gzip
  echo "$dest: built"
done
