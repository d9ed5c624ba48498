#!/usr/bin/env bash
# One device call's worth of GPU validation (an H200 session allows 30 min, 10 per call):
#   bash scripts/bench/gpu_session.sh tests|suite|bench|probe|aot|gap|two_gpu [extra args]   (OUT=<dir> for the files)
# - tests: the gpu-marked tests (or the test files given), serially, full log (never cut with tail: the failures are the point),
#   -v so that a log cut by the call limit still names each result (a -q log cut before its summary named none)
# - suite: scripts/bench/suite_gpu.py --jobs $JOBS (8) over the given task ids (default: all), incremental JSON
# - bench: scripts/bench/bench_eval.py with its defaults (8 tasks, 2 mutants each, 4 jobs); e.g.
#   `bench --skip shares --alt-jobs --label <commit>` fits one call (about 7 min); `--skip naive cv shares` measures
#   the agreement alone (about 2 min)
# - probe: scripts/bench/timing_probe.py (placement and timing-loop variants, about 80 s)
# - aot: scripts/bench/bench_aot.py --gpu over bench_eval's 8 tasks (cold vs AOT-seeded Triton cache,
#   about 5 min: give it a call of its own) and the AOT GPU test
# - gap: scripts/bench/dobench_gap.py (our loop's feed modes, do_bench and graph replay, about 60 s), with the
#   GPU's clocks and power sampled every 100 ms by nvidia-smi into $OUT/smi.csv
# - two_gpu (nvidia-h200-x2): scripts/bench/bench_two_gpu.py. Ray is not in the image and its wheel
#   is over the carry limit, so it comes in two parts: call 1 carries .whl (part aa + jsonschema,
#   referencing, rpds, omegaconf wheels) and runs `mkdir -p /tmp/rayparts && cp .whl/* /tmp/rayparts`;
#   call 2, at once (the machine goes back after 30 s idle), carries .whl2 (part ab) and .snap
# Each step has its own timeout inside the 600 s call limit and leaves its files in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/kbx_gpu}
mkdir -p "$OUT"
step=${1:-tests}; shift || true
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
case "$step" in
  tests) files=("$@"); [ ${#files[@]} -eq 0 ] && files=(tests/gpu)  # serially: one GPU, no -n
         timeout ${TESTS_S:-560} python -m pytest "${files[@]}" -v -p no:cacheprovider --timeout 120 \
           -rfE --durations=15 > "$OUT/gpu_tests_$(basename "${files[0]}" .py).log" 2>&1
         tail -15 "$OUT/gpu_tests_$(basename "${files[0]}" .py).log" ;;
  suite) inc=(); [ $# -gt 0 ] && inc=(--include "$@")
         timeout ${SUITE_S:-560} python scripts/bench/suite_gpu.py --jobs ${JOBS:-8} --out "$OUT/suite_h200.json" "${inc[@]}" \
           > "$OUT/suite_h200.log" 2>&1; tail -3 "$OUT/suite_h200.log" ;;
  bench) cp scripts/bench/results/bench_eval_h200.json "$OUT/"  # --skip keeps the skipped figures
         timeout 560 python scripts/bench/bench_eval.py --out "$OUT/bench_eval_h200.json" "$@" \
           > "$OUT/bench_eval.log" 2>&1; tail -5 "$OUT/bench_eval.log" ;;
  probe) timeout 300 python scripts/bench/timing_probe.py --out "$OUT/timing_probe_h200.json" "$@" \
           > "$OUT/timing_probe.log" 2>&1; tail -3 "$OUT/timing_probe.log" ;;
  aot) timeout 150 python -m pytest tests/gpu/test_gpu_eval.py -q -p no:cacheprovider -k aot \
         > "$OUT/gpu_tests_aot.log" 2>&1; tail -3 "$OUT/gpu_tests_aot.log"
       timeout 400 python scripts/bench/bench_aot.py --gpu --out "$OUT/bench_aot_h200.json" \
         --include activation/relu math/exp reduce/sum normalization/layer_norm fusion/add_gelu \
         matrix_multiply/matmul loss/cross_entropy index/index_select "$@" \
         > "$OUT/bench_aot.log" 2>&1; tail -3 "$OUT/bench_aot.log" ;;
  gap) nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu \
         --format=csv -lms 100 > "$OUT/smi.csv" 2>&1 & smi=$!
       timeout 240 python scripts/bench/dobench_gap.py --out "$OUT/dobench_gap_h200.json" "$@" \
         > "$OUT/dobench_gap.log" 2>&1; kill $smi; tail -8 "$OUT/dobench_gap.log" ;;
  two_gpu) whl=/tmp/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
         cat /tmp/rayparts/raypart_aa "${WHL2:-../.whl2}/raypart_ab" > "$whl" || exit 3
         python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$whl" \
           /tmp/rayparts/*.whl > "$OUT/pip.log" 2>&1 || { tail -5 "$OUT/pip.log"; exit 3; }
         export PYTHONPATH=/tmp/site:$PWD
         cp scripts/bench/results/bench_engine.json "$OUT/bench_engine.json"
         timeout 540 python scripts/bench/bench_two_gpu.py --out "$OUT/bench_engine.json" "$@" \
           > "$OUT/two_gpu.log" 2>&1; tail -4 "$OUT/two_gpu.log" ;;
  *) echo "usage: gpu_session.sh tests|suite|bench|probe|aot|gap|two_gpu [args]"; exit 2 ;;
esac
