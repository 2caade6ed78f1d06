#!/usr/bin/env bash
# The op's checks on a CUDA machine: build the extension in place, run the op tests (every CUDA case
# of tests/test_ops) and, unless SKIP_BENCH=1, the op benchmark. Logs and results go to OUT_DIR:
# build.log, gpu_tests.log (pytest output, GPU name and driver first), <gpu>.json / <gpu>.md.
#
#   bash .dev_scripts/gpu_op_check.sh OUT_DIR
#
# TORCH_CUDA_ARCH_LIST defaults to the visible GPU's architecture; PYTEST_ARGS adds pytest options
# (e.g. -x); BENCH_ARGS adds tools/analysis_tools/benchmark_op.py options.
set -uo pipefail
source "$(dirname "$0")/gpu_script_env.sh"
gpu_script_env 1 "$0 OUT_DIR" "$@"

start=$(date +%s)
echo "[gpu_op_check] building mmo1d in place"
if ! FORCE_CUDA=1 "$PYTHON" setup.py build_ext --inplace >"$OUT/build.log" 2>&1; then
    tail -n 40 "$OUT/build.log"
    echo "[gpu_op_check] build failed (see build.log)" >&2
    exit 1
fi
echo "[gpu_op_check] built in $(($(date +%s) - start)) s"

{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
    echo "commit: ${SOURCE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    # shellcheck disable=SC2086
    "$PYTHON" -m pytest tests/test_ops -q -p no:cacheprovider -rs -k 'not bad_inputs' ${PYTEST_ARGS:-}
    echo "pytest exit status: $?"
    # The bad-input checks in a process of their own: on some torch builds an exception thrown by
    # the compiled extension has ended the process instead of raising.
    "$PYTHON" -m pytest tests/test_ops -q -p no:cacheprovider -k bad_inputs
    echo "pytest exit status (bad inputs): $?"
} 2>&1 | tee "$OUT/gpu_tests.log" | tail -n 30
tests_rc=$(grep -c '^pytest exit status.*: [^0]' "$OUT/gpu_tests.log")
echo "[gpu_op_check] tests done at $(($(date +%s) - start)) s"

if [ "${SKIP_BENCH:-0}" != 1 ]; then
    # shellcheck disable=SC2086
    "$PYTHON" tools/analysis_tools/benchmark_op.py --out-dir "$OUT" ${BENCH_ARGS:-} >"$OUT/benchmark.log" 2>&1 ||
        { tail -n 40 "$OUT/benchmark.log"; exit 1; }
    sed -n '/^# Oriented/,$p' "$OUT/benchmark.log"
    echo "[gpu_op_check] benchmark done at $(($(date +%s) - start)) s"
fi
exit "$tests_rc"
