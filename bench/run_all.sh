#!/usr/bin/env bash
# Every benchmark in one run, on a quiet machine (~10 minutes with HTA 0.5 installed; set
# HTA_PYTHON to its python). Each script writes its own file; RESULTS.md collects them.
set -euo pipefail
cd "$(dirname "$0")"
python bench_open.py          # -> OPEN.md      (issue 2: open speed and memory)
python bench_analyses.py      # -> ANALYSES.md  (issue 3: every analysis, against HTA)
python bench_keys.py          # -> KEYS.md      (issue 4: key latency with 8 x 100 MB loaded)
python bench_diff.py          # -> DIFF.md      (issue 5: trace diff)
python bench_tb_plugin.py     # -> TB_PLUGIN.md (issue 11: against the TensorBoard plugin)
python bench_memory.py        # -> MEMORY.md    (issue 12: 1 M memory events, the memory screen's keys)
python bench_timeline.py      # -> TIMELINE.md  (issue 15: timeline frame time per zoom, 8 x 100 MB)
python bench_frame_view.py    # -> FRAME_VIEW.md (issue 26: keys on a table of a million rows)
python bench_findings.py      # -> FINDINGS.md  (issue 28: findings against the analyses they read)
# ... and one big rank, when one is given (generate it with
# `python -m hta_tui.synth BIG --ranks 1 --target-mb 2000 --slow-rank -1`; not committed)
if [ -n "${HTA_TUI_BIG_TRACE:-}" ]; then
  python bench_timeline.py --folder "$HTA_TUI_BIG_TRACE" --label "1 x 2 GB (one rank)" --append
fi
# ... and the real-shaped sets (issue 27), when built (`bench/make_real_sets.sh`, ~20 min):
# their sections are added to ANALYSES.md and MEMORY.md beside the generator's
for set in "${HTA_TUI_REAL_SETS:-/tmp/realsets}"/*_8x100MB; do
  [ -d "$set" ] || continue
  python bench_analyses.py --set "$set" --no-hta --append
  case "$set" in *memory*) python bench_memory.py --set "$set" --repeats 1 --append ;; esac
done
python bench_layouts.py       # -> LAYOUTS.md   (issue 10: every file layout, mixed-layout open)
python bench_metadata.py --data "${TMPDIR:-/tmp}/hta-tui-metadata-heavy"  # -> LAYOUTS.md (issue 27)
# ... and one very large rank, when one is given (built by ../shared/tools/scale_trace.py, see
# bench_big_rank.py; never inside the repo)
if [ -n "${HTA_TUI_BIG_RANK:-}" ]; then
  python bench_big_rank.py "$HTA_TUI_BIG_RANK"   # -> BIG_RANK.md (issue 27: a rank in pieces)
fi
python bench_hostile.py       # -> HOSTILE.md   (issue 25: hostile files beside a good rank)
python bench_many_ranks.py --files 1000 --full --out MANY_RANKS.md   # (issue 26: many small ranks)
python bench_many_ranks.py --files 10000 --no-app --out MANY_RANKS.md
python bench_dask.py --small 1024 --big 64 --big-mb 100 --out DASK.md   # (issue 30: Dask; DASK.md's text by hand)
{
  echo "# Benchmark results"
  echo
  echo "Collected by \`bench/run_all.sh\` from the files below, each written by its script."
  for f in OPEN.md ANALYSES.md KEYS.md DIFF.md MEMORY.md TB_PLUGIN.md LAYOUTS.md TIMELINE.md FRAME_VIEW.md HOSTILE.md MANY_RANKS.md FINDINGS.md BIG_RANK.md DASK.md; do
    [ -f "$f" ] || continue
    echo; sed 's/^# /## /' "$f"
  done
} > RESULTS.md
