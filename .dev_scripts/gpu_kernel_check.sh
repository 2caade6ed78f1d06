#!/usr/bin/env bash
# The CUDA op's robustness checks on a GPU machine, in stages of a few minutes each:
#
#   bash .dev_scripts/gpu_kernel_check.sh build    OUT_DIR   # build in place (and .old/ if present)
#   bash .dev_scripts/gpu_kernel_check.sh tests    OUT_DIR   # op tests with the shape fuzz, AMP backbones
#   bash .dev_scripts/gpu_kernel_check.sh compare  OUT_DIR   # bit-identity with the build in .old/
#                                                            # (or, with OLD_DUMP=FILE, with an earlier
#                                                            # run's op_matrix_new.json: no .old build)
#   bash .dev_scripts/gpu_kernel_check.sh sanitize OUT_DIR   # compute-sanitizer memcheck + racecheck
#   bash .dev_scripts/gpu_kernel_check.sh train    OUT_DIR   # T-1D++/T-2D++ UperNet and Cascade, AMP
#   bash .dev_scripts/gpu_kernel_check.sh jit      OUT_DIR   # CPU-only build + just-in-time CUDA kernels
#   bash .dev_scripts/gpu_kernel_check.sh ncu      OUT_DIR   # ncu of the window gather and weight gradient
#   bash .dev_scripts/gpu_kernel_check.sh shapes   OUT_DIR   # T backbones at detection sizes, fp16, no cudnn.benchmark
#   bash .dev_scripts/gpu_kernel_check.sh learnable OUT_DIR  # interpolated taps: speed against truncation, memory probe
#   bash .dev_scripts/gpu_kernel_check.sh fingerprint OUT_DIR  # the sha1 of csrc/ that every log's header prints
#
# .old/, when present, holds an earlier source tree (e.g. `git archive REV setup.py pyproject.toml
# README.md csrc mmo1d | tar -x -C .old`) to compare against. Logs go to OUT_DIR.
set -uo pipefail
STAGE=$1
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} FORCE_CUDA=1 PYTHONUNBUFFERED=1
header() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
  echo "commit: ${SOURCE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  # A copy of a working tree may carry a stale .git: the sources' own fingerprint, which
  # `bash .dev_scripts/gpu_kernel_check.sh fingerprint` prints for a checkout.
  fingerprint
}
fingerprint() {
  echo "sources: $(find csrc -type f | LC_ALL=C sort | xargs cat | sha1sum | cut -c1-12) (sha1 of csrc/)"
}
case "$STAGE" in
  build)
    start=$(date +%s)
    if [ -d .old ]; then
      (cd .old && MAX_JOBS=4 "$PY" setup.py build_ext --inplace >"$OUT/old_build.log" 2>&1; echo "old build: $?") &
    fi
    MAX_JOBS=12 "$PY" setup.py build_ext --inplace >"$OUT/build.log" 2>&1
    echo "build: $? after $(($(date +%s) - start)) s"
    wait
    echo "builds done after $(($(date +%s) - start)) s"
    ;;
  tests)
    {
      header
      PYTHONPATH=$ROOT:$PYTHONPATH "$PY" -m pytest tests/test_ops tests/test_configs/test_downstream_amp_cuda.py -q \
        -p no:cacheprovider -rs -k 'not bad_inputs' ${PYTEST_ARGS:-}
      echo "pytest exit status: $?"
      PYTHONPATH=$ROOT:$PYTHONPATH "$PY" -m pytest tests/test_ops -q -p no:cacheprovider -k bad_inputs
      echo "pytest exit status (bad inputs): $?"
    } 2>&1 | tee "$OUT/gpu_tests.log" | tail -n 25
    ;;
  compare)
    header | tee "$OUT/compare.log"
    if [ -n "${OLD_DUMP:-}" ]; then
      echo "== new against $OLD_DUMP" | tee -a "$OUT/compare.log"
      PYTHONPATH=$ROOT:$PYTHONPATH "$PY" .dev_scripts/op_matrix.py dump "$OUT/op_matrix_new.json" 2>&1 |
        tee -a "$OUT/compare.log"
      "$PY" .dev_scripts/op_matrix.py compare "$OLD_DUMP" "$OUT/op_matrix_new.json" 2>&1 | tee -a "$OUT/compare.log" |
        tail -n 15
      exit 0
    fi
    repro='import torch; from mmo1d.ops import oriented_angles, oriented_dwconv1d
x = torch.randn(2, 64, 512, 512, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
w = torch.randn(64, 15, device="cuda", dtype=torch.float16)
y = oriented_dwconv1d(x, w, oriented_angles(64).cuda(), None, 2); torch.cuda.synchronize(); print("ok", tuple(y.shape))'
    for build in old new; do
      dir=$ROOT; [ "$build" = old ] && dir=$ROOT/.old
      echo "== $build: the 1D++ stem call (2x64x512x512 fp16 channels_last, K=15, stride 2)"
      (cd "$dir" && "$PY" -c "$repro" 2>&1 | tail -n 1)
      PYTHONPATH=$dir:$PYTHONPATH "$PY" .dev_scripts/op_matrix.py dump "$OUT/op_matrix_$build.json"
    done 2>&1 | tee -a "$OUT/compare.log"
    "$PY" .dev_scripts/op_matrix.py compare "$OUT/op_matrix_old.json" "$OUT/op_matrix_new.json" 2>&1 |
      tee -a "$OUT/compare.log" | tail -n 15
    ;;
  sanitize)
    {
      header
      echo "== memcheck"
      PYTHONPATH=$ROOT:$PYTHONPATH compute-sanitizer --tool memcheck --error-exitcode 9 "$PY" .dev_scripts/sanitize_op.py
      echo "memcheck exit status: $?"
      echo "== racecheck (every case)"
      PYTHONPATH=$ROOT:$PYTHONPATH compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 \
        "$PY" .dev_scripts/sanitize_op.py
      echo "racecheck exit status: $?"
    } 2>&1 | tee "$OUT/sanitizer.log" | grep -v '^(' | tail -n 30
    ;;
  train)
    export PYTHONPATH=$ROOT:$PYTHONPATH
    DATA=$OUT/data
    "$PY" tools/dataset_converters/make_demo_data.py --out "$DATA" --ade-train 16 --ade-val 4 --coco-train 16 \
      --coco-val 4 >"$OUT/demo_data.log" 2>&1 || { tail "$OUT/demo_data.log"; exit 1; }
    SEG=configs/demo/oriented-convnext-tiny-1d_upernet_1xb2-amp-40iter_ade20k-demo-512x512.py
    DET=configs/demo/cascade-mask-rcnn_oriented-convnext-t-1d_fpn_4conv1fc-giou_amp-ms-crop-40iter_coco-demo.py
    ITERS=${ITERS:-12}
    for run in "seg 1dpp $SEG" "seg 2dpp $SEG" "det 1dpp $DET" "det 2dpp $DET"; do
      set -- $run
      if [ "$1" = seg ]; then
        data="train_dataloader.dataset.data_root=$DATA/ade/ADEChallengeData2016 val_dataloader.dataset.data_root=$DATA/ade/ADEChallengeData2016"
      else
        data="train_dataloader.dataset.data_root=$DATA/coco/ val_dataloader.dataset.data_root=$DATA/coco/ val_evaluator.ann_file=$DATA/coco/annotations/instances_val2017.json"
      fi
      start=$(date +%s)
      # shellcheck disable=SC2086
      "$PY" tools/train.py "$3" --work-dir "$OUT/work/$1-$2" --cfg-options model.backbone.variant=$2 \
        train_cfg.max_iters=$ITERS train_cfg.val_interval=1000 default_hooks.logger.interval=4 \
        default_hooks.checkpoint.interval=1000 $data >"$OUT/train_$1-$2.log" 2>&1
      echo "$1 T-$2: exit $? after $(($(date +%s) - start)) s; $(grep -o 'Iter(train) \[ *[0-9]*/[0-9]*\].*loss: [0-9.]*' \
        "$OUT/train_$1-$2.log" | tail -n 1 | cut -c1-160)"
    done | tee "$OUT/train.log"
    ;;
  jit)
    # A copy built without CUDA kernels compiles csrc/cuda/*.cu on its first CUDA call.
    JIT=$(mktemp -d)
    cp -r setup.py pyproject.toml README.md MANIFEST.in csrc mmo1d "$JIT"/
    rm -f "$JIT"/mmo1d/_C*.so
    export TORCH_EXTENSIONS_DIR=$JIT/ext
    (cd "$JIT" && FORCE_CUDA=0 "$PY" setup.py build_ext --inplace >"$OUT/jit_build.log" 2>&1) || { tail "$OUT/jit_build.log"; exit 1; }
    (cd "$JIT" && PYTHONPATH=$JIT:$PYTHONPATH "$PY" - <<'PYEOF') 2>&1 | tee "$OUT/jit.log"
import time
import torch
from mmo1d.ops import _ext, oriented_angles, oriented_dwconv1d, oriented_dwconv1d_path
assert not _ext._C.cuda_compiled(), 'this build has compiled-in CUDA kernels'
g = torch.Generator().manual_seed(0)
x = torch.randn(2, 64, 40, 36, generator=g)
w = torch.randn(64, 15, generator=g) / 4
t = oriented_angles(64)
start = time.time()
y = oriented_dwconv1d(x.cuda().half().contiguous(memory_format=torch.channels_last), w.cuda().half(), t.cuda(),
                      None, 2)
print(f'first CUDA call (JIT compile) {time.time() - start:.0f} s; path',
      oriented_dwconv1d_path(x.cuda().half().contiguous(memory_format=torch.channels_last), w.cuda().half(), 2))
ref = oriented_dwconv1d(x, w, t, None, 2)
err = ((y.float().cpu() - ref).norm() / ref.norm()).item()
print(f'relative difference to the CPU kernel: {err:.2e}')
assert err < 3e-3
print('jit ok')
PYEOF
    ;;
  ncu)
    # The T-1D++ stage-1 "++" convolution (bf16, 64 x 384 x 56 x 56, K=31): the window gather at
    # 0 and 22.5 degrees and in the 8-direction layout, and the weight gradient.
    export PYTHONPATH=$ROOT:$PYTHONPATH
    header > "$OUT/ncu.log"
    for run in "win_gather 0 forward" "win_gather 22.5 forward" "win_gather mixed forward" \
               "vec_wgrad mixed backward"; do
      set -- $run
      angle=(); [ "$2" != mixed ] && angle=(--angle "$2")
      echo "== $1, angle $2, $3" >> "$OUT/ncu.log"
      ncu --kernel-name "regex:$1" --launch-skip 2 --launch-count 1 --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
        --section WarpStateStats --section LaunchStats --section Occupancy --section InstructionStats \
        "$PY" .dev_scripts/profile_op_case.py "${angle[@]}" --pass "$3" >> "$OUT/ncu.log" 2>&1
    done
    grep -E '^==|Duration|Executed Ipc|Issue Slots Busy|Compute \(SM\) Throughput|Memory Throughput|Shared|Stall|Bank|Wavefronts|Warp Cycles Per Issued|Registers|Achieved Occupancy' \
      "$OUT/ncu.log" | head -n 120
    ;;
  shapes)
    { header; PYTHONPATH=$ROOT:$PYTHONPATH "$PY" .dev_scripts/profile_backbone_shapes.py; } 2>&1 |
      tee "$OUT/backbone_shapes.log" | grep -v '^    '
    ;;
  learnable)
    export PYTHONPATH=$ROOT:$PYTHONPATH
    { header; "$PY" tools/analysis_tools/benchmark_interp.py --out-dir "$OUT/learnable"; } 2>&1 |
      tee "$OUT/interp_speed.log" | grep -A 12 '^| dtype, layout | C'
    { header; "$PY" .dev_scripts/probe_interp_memory.py; } 2>&1 | tee "$OUT/memory_probe.log"
    ;;
  fingerprint) fingerprint ;;
  *) echo "unknown stage $STAGE" >&2; exit 2 ;;
esac
