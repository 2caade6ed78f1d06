#!/usr/bin/env bash
# Every GPU job of the project, one stage of a few minutes at a time; logs and results go to OUT_DIR:
#
#   bash .dev_scripts/gpu.sh build       OUT_DIR   # build in place (and .old/, .mid*/ if present): build.log;
#                                                  # a tree whose build matches its sources is reused
#   bash .dev_scripts/gpu.sh pack        OUT_DIR   # each tree's build, stripped, as NAME_build.tar.xz (new,
#                                                  # old, mid...): put them in .builds/ and carry it, and the
#                                                  # next machine's `build` unpacks and reuses them
#   bash .dev_scripts/gpu.sh tests       OUT_DIR   # op tests with the shape fuzz, AMP configs, the layers'
#                                                  # GPU cases: gpu_tests.log
#   bash .dev_scripts/gpu.sh compare     OUT_DIR   # bit-identity of the trees of op-steps (.old, .mid*,
#                                                  # this one), each build against the one before (or, with
#                                                  # OLD_DUMP=FILE, with an earlier run's op_matrix_new.json:
#                                                  # no .old build): compare.log; MATRIX=grown compares
#                                                  # op_matrix.py's --grown calls (large grids) instead
#   bash .dev_scripts/gpu.sh sanitize    OUT_DIR   # compute-sanitizer memcheck + racecheck, every case, side by
#                                                  # side in SHARDS (4) processes each
#   bash .dev_scripts/gpu.sh verify      OUT_DIR   # tests and sanitize side by side (about 6 minutes on an H200)
#   bash .dev_scripts/gpu.sh op          OUT_DIR [benchmark_op.py options]     # e.g. --ab .old ...
#   bash .dev_scripts/gpu.sh models      OUT_DIR [benchmark_model.py options]
#   bash .dev_scripts/gpu.sh models-ab   OUT_DIR [benchmark_model.py options]  # the models of the build in
#                                                  # .old/, then of this tree (OLD_COMMIT names .old's commit),
#                                                  # one size: models_ab.md, kernel ms new / old; OLD_DIR and
#                                                  # NEW_DIR (NEW_COMMIT) pick other trees; MID_DIR=.mid
#                                                  # (MID_COMMIT) times trees between them, several
#                                                  # separated by spaces: each build / the one before
#   bash .dev_scripts/gpu.sh op-steps    OUT_DIR [benchmark_op.py options]     # the same trees (OLD_DIR,
#                                                  # MID_DIR, NEW_DIR) as models-ab: each build's op against
#                                                  # the one before (--ab), OUT_DIR/NAME/ per pair: op_steps.log
#   bash .dev_scripts/gpu.sh train       OUT_DIR   # T-1D++/T-2D++ UperNet and Cascade, AMP, ITERS (12) iterations
#   bash .dev_scripts/gpu.sh jit         OUT_DIR   # CPU-only build + just-in-time CUDA kernels
#   bash .dev_scripts/gpu.sh paths       OUT_DIR [profile_model.py options]  # the kernel path of each oriented
#                                                  # convolution of the classifiers, e.g. --variants 1dpp-la
#   bash .dev_scripts/gpu.sh ncu         OUT_DIR [profile_model.py --op options]   # ncu of the window gather
#                                                  # and weight gradient, e.g. --op-shape 64 1536 14 31
#   bash .dev_scripts/gpu.sh ncu-sass    OUT_DIR KERNEL_REGEX ANGLE PASS [options] # one kernel's regions of
#                                                  # instructions and stall samples (ncu source counters)
#   bash .dev_scripts/gpu.sh ncu-step    OUT_DIR KERNEL_REGEX [profile_model.py options]  # ncu of the kernels
#                                                  # whose demangled names match, in one training step of each
#                                                  # classifier named (e.g. '::gather_nhwc_kernel<' --variants
#                                                  # 1dpp-la --modes bf16): ncu_step.log
#   bash .dev_scripts/gpu.sh shapes      OUT_DIR   # T backbones at detection sizes, fp16, no cudnn.benchmark
#   bash .dev_scripts/gpu.sh learnable   OUT_DIR   # interpolated taps against truncation: speed and memory
#   bash .dev_scripts/gpu.sh fingerprint OUT_DIR   # the sha1 of csrc/ that every log's header prints
#   bash .dev_scripts/gpu.sh downstream  OUT_DIR [MODE [options]]   # .dev_scripts/gpu_downstream.sh (single)
#   bash .dev_scripts/gpu.sh host        OUT_DIR [options]  # block host times; UperNet against stock in ROUNDS (3)
#                                                           # rounds with kernel times and host profiles
#   bash .dev_scripts/gpu.sh scaling     OUT_DIR [options]          # .dev_scripts/gpu_downstream.sh scaling
#
# .old/, when present, holds an earlier source tree (e.g. `git archive REV setup.py pyproject.toml
# README.md MANIFEST.in csrc mmo1d | tar -x -C .old`) to compare against; .mid/ (or .mid1/, .mid2/, ...)
# the steps of a branch between them, timed on one machine each against the one before. PYTHON picks the
# interpreter (default: python, else python3); TORCH_CUDA_ARCH_LIST defaults to the visible GPU's
# architecture; PYTEST_ARGS adds pytest options to `tests`; SOURCE_COMMIT names the commit built where
# the checkout has no .git. The repository root goes first on PYTHONPATH.
set -uo pipefail
if [ "$#" -lt 2 ]; then
  echo "usage: $0 STAGE OUT_DIR [options]   (stages: see the head of this script)" >&2
  exit 2
fi
STAGE=$1
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
shift 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
PY=${PYTHON:-$(command -v python || command -v python3 || echo python)}
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1)
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-${arch:-9.0}} FORCE_CUDA=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
header() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
  echo "commit: ${SOURCE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  # A copy of a working tree may carry a stale .git: the sources' own fingerprint, which
  # `bash .dev_scripts/gpu.sh fingerprint OUT_DIR` prints for a checkout.
  fingerprint
}
# The AMP config tests need the toolboxes: a run without them would report their absence as errors.
need_toolboxes() {
  for pkg in mmengine mmcv mmdet mmseg; do
    "$PY" -c "import $pkg" 2>/dev/null || {
      echo "$1: $pkg must be importable (on the GPU machine: source .device-wheels/mm-env.sh)" >&2
      return 1
    }
  done
}
# The ncu sections of the ncu and ncu-step stages: throughput, memory, warp states, launch and occupancy.
NCU_SECTIONS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
  --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section LaunchStats --section Occupancy
  --section InstructionStats)
fingerprint() {
  echo "sources: $(find csrc -type f | LC_ALL=C sort | xargs cat | sha1sum | cut -c1-12) (sha1 of csrc/)"
}
# A build's stamp (in the tree's mmo1d/.build_stamp): its sources, torch and architectures.
stamp() {
  echo "$(fingerprint); torch $("$PY" -c 'import torch; print(torch.__version__)'); arch $TORCH_CUDA_ARCH_LIST"
}
# Whether the tree $1 holds a build whose stamp is $2 (a build of its sources, this torch and these
# architectures).
built() {
  compgen -G "$1/mmo1d/_C*.so" >/dev/null && [ -f "$1/mmo1d/.build_stamp" ] &&
    [ "$(cat "$1/mmo1d/.build_stamp")" = "$2" ]
}
tree_name() {
  if [ "$1" = . ]; then echo new; else echo "${1#.}"; fi
}
# The trees a stage builds or packs: this one, then .old and .mid* where present.
trees() {
  for tree in . .old .mid*; do [ -d "$tree/mmo1d" ] && echo "$tree"; done
}
# The trees of an A/B in build order, as names, dirs and commits: .old (OLD_DIR; OLD_COMMIT), the trees of
# MID_DIR (MID_COMMIT; several separated by spaces), this one (NEW_DIR; NEW_COMMIT or SOURCE_COMMIT).
chain() {
  local mid_dirs mid_commits i dir
  read -r -a mid_dirs <<<"${MID_DIR:-}"
  read -r -a mid_commits <<<"${MID_COMMIT:-}"
  names=(old) dirs=("$ROOT/${OLD_DIR:-.old}") commits=("${OLD_COMMIT:-old}")
  for i in "${!mid_dirs[@]}"; do
    names+=("mid$([ "${#mid_dirs[@]}" -gt 1 ] && echo $((i + 1)))")
    dirs+=("$ROOT/${mid_dirs[$i]}")
    commits+=("${mid_commits[$i]:-${names[-1]}}")
  done
  names+=(new) dirs+=("$ROOT/${NEW_DIR:-.}") commits+=("${NEW_COMMIT:-${SOURCE_COMMIT:-}}")
  for dir in "${dirs[@]}"; do
    if [ ! -d "$dir/mmo1d" ]; then echo "$STAGE: no tree in $dir (see the head of $0)" >&2; exit 2; fi
  done
}
case "$STAGE" in
  build)
    start=$(date +%s)
    # Each tree is reused where it holds a build of its sources, or where a build packed on an earlier
    # machine (.builds/NAME_build.tar.xz) has the tree's stamp; the others are built.
    todo=() pids=()
    while read -r tree; do
      name=$(tree_name "$tree") want=$(cd "$tree" && stamp)
      if [ -f ".builds/${name}_build.tar.xz" ] && ! built "$tree" "$want"; then
        unpacked=$(mktemp -d)
        tar -xJf ".builds/${name}_build.tar.xz" -C "$unpacked"
        if [ "$(cat "$unpacked/mmo1d/.build_stamp" 2>/dev/null)" = "$want" ]; then
          cp "$unpacked"/mmo1d/_C*.so "$unpacked/mmo1d/.build_stamp" "$tree/mmo1d/"
        else
          echo ".builds/${name}_build.tar.xz: built from other sources, torch or architectures; not used"
        fi
        rm -rf "$unpacked"
      fi
      if built "$tree" "$want"; then echo "$name build: reused"; else todo+=("$tree"); fi
    done < <(trees)
    jobs=$(nproc 2>/dev/null || echo 8)
    jobs=$(((jobs + ${#todo[@]} - 1) / (${#todo[@]} > 0 ? ${#todo[@]} : 1)))  # every build at once, cores shared
    for tree in ${todo[@]+"${todo[@]}"}; do
      name=$(tree_name "$tree") log=$OUT/$([ "$tree" = . ] && echo build || echo "${tree#.}_build").log
      (cd "$tree" && MAX_JOBS=$jobs "$PY" setup.py build_ext --inplace >"$log" 2>&1 && stamp >mmo1d/.build_stamp
       rc=$?
       echo "$name build: $rc after $(($(date +%s) - start)) s"
       [ "$rc" = 0 ] || tail -n 40 "$log"
       exit "$rc") &
      pids+=($!)
    done
    rc=0
    for pid in ${pids[@]+"${pids[@]}"}; do wait "$pid" || rc=1; done
    echo "builds done after $(($(date +%s) - start)) s"
    exit "$rc"
    ;;
  pack)
    # Each built tree's extension, stripped of its host symbols (about 24 MB, 4 MB packed for sm_90).
    while read -r tree; do
      name=$(tree_name "$tree") archive=$OUT/${name}_build.tar.xz
      built "$tree" "$(cd "$tree" && stamp)" || { echo "$name: no build of its current sources to pack"; continue; }
      staged=$(mktemp -d)
      mkdir "$staged/mmo1d"
      for so in "$tree"/mmo1d/_C*.so; do strip -o "$staged/mmo1d/$(basename "$so")" "$so"; done
      cp "$tree/mmo1d/.build_stamp" "$staged/mmo1d/"
      tar -cJf "$archive" -C "$staged" mmo1d
      rm -rf "$staged"
      echo "$archive: $(du -k "$archive" | cut -f1) KiB"
    done < <(trees)
    ;;
  tests)
    need_toolboxes tests || exit 2
    {
      header
      # shellcheck disable=SC2086
      # The model layers' GPU cases (the stem's padded Linear, the 2D models' depthwise convolution) and
      # the benchmarks' profiler readings (kernel times, where the GPU waits, the models' kernel paths) too.
      "$PY" -m pytest tests/test_ops tests/test_configs/test_downstream_amp_cuda.py tests/test_models/test_linear.py \
        tests/test_models/test_depthwise.py tests/test_benchmark/test_kernels.py tests/test_benchmark/test_gpu_waits.py \
        tests/test_benchmark/test_model_paths.py -q -p no:cacheprovider -rs -k 'not bad_inputs' ${PYTEST_ARGS:-}
      echo "pytest exit status: $?"
      # The bad-input checks in a process of their own: on the GPU machine's torch 2.11 build a check
      # whose message streamed an integer ended the process instead of raising (csrc/common.h).
      "$PY" -m pytest tests/test_ops -q -p no:cacheprovider -k bad_inputs
      echo "pytest exit status (bad inputs): $?"
    } 2>&1 | tee "$OUT/gpu_tests.log" | tail -n 25
    ! grep -q '^pytest exit status.*: [^0]' "$OUT/gpu_tests.log"
    ;;
  compare)
    header | tee "$OUT/compare.log"
    matrix=(); [ "${MATRIX:-}" = grown ] && matrix=(--grown)
    if [ -n "${OLD_DUMP:-}" ]; then
      echo "== new against $OLD_DUMP" | tee -a "$OUT/compare.log"
      "$PY" .dev_scripts/op_matrix.py dump ${matrix[@]+"${matrix[@]}"} "$OUT/op_matrix_new.json" 2>&1 | tee -a "$OUT/compare.log"
      "$PY" .dev_scripts/op_matrix.py compare "$OLD_DUMP" "$OUT/op_matrix_new.json" 2>&1 | tee -a "$OUT/compare.log" |
        tail -n 15
      exit 0
    fi
    repro='import torch; from mmo1d.ops import oriented_angles, oriented_dwconv1d
x = torch.randn(2, 64, 512, 512, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
w = torch.randn(64, 15, device="cuda", dtype=torch.float16)
y = oriented_dwconv1d(x, w, oriented_angles(64).cuda(), None, 2); torch.cuda.synchronize(); print("ok", tuple(y.shape))'
    # The trees of op-steps in order (OLD_DIR, MID_DIR, NEW_DIR): each one's dump as soon as it is made,
    # compared with the one before it.
    chain
    for i in "${!names[@]}"; do
      name=${names[$i]} dir=${dirs[$i]}
      {
        echo "== $name: the 1D++ stem call (2x64x512x512 fp16 channels_last, K=15, stride 2)"
        (cd "$dir" && PYTHONPATH=$dir:$PYTHONPATH "$PY" -c "$repro" 2>&1 | tail -n 1)
        PYTHONPATH=$dir:$PYTHONPATH "$PY" .dev_scripts/op_matrix.py dump ${matrix[@]+"${matrix[@]}"} \
          "$OUT/op_matrix_$name.json"
      } 2>&1 | tee -a "$OUT/compare.log"
      [ "$i" -gt 0 ] || continue
      prev=${names[$((i - 1))]}
      echo "== $name against $prev" | tee -a "$OUT/compare.log"
      "$PY" .dev_scripts/op_matrix.py compare "$OUT/op_matrix_$prev.json" "$OUT/op_matrix_$name.json" 2>&1 |
        tee -a "$OUT/compare.log" | tail -n 15
    done
    ;;
  sanitize)
    # memcheck and racecheck side by side, each over every case in SHARDS (4) processes
    # (sanitize_op.py --shard); the shards' logs, in order, make sanitizer.log.
    shards=${SHARDS:-4}
    mkdir -p "$OUT/sanitize"
    header > "$OUT/sanitizer.log"
    start=$(date +%s)
    for tool in memcheck racecheck; do
      extra=(); [ "$tool" = racecheck ] && extra=(--racecheck-report hazard)
      for ((i = 0; i < shards; i++)); do
        (compute-sanitizer --tool $tool ${extra[@]+"${extra[@]}"} --error-exitcode 9 "$PY" .dev_scripts/sanitize_op.py \
          --shard "$i/$shards" >"$OUT/sanitize/$tool-$i.log" 2>&1; echo "$tool shard $i/$shards exit status: $?" \
          >>"$OUT/sanitize/$tool-$i.log") &
      done
    done
    wait
    for tool in memcheck racecheck; do
      echo "== $tool (every case, $shards shards side by side)"
      cat "$OUT/sanitize/$tool"-*.log
    done >> "$OUT/sanitizer.log"
    rm -rf "$OUT/sanitize"  # all of it is in sanitizer.log
    # Every path of the compiled families reached by some shard.
    "$PY" .dev_scripts/sanitize_op.py --covered "$OUT/sanitizer.log" 2>&1 | tee -a "$OUT/sanitizer.log"
    echo "sanitizer: $(($(date +%s) - start)) s" | tee -a "$OUT/sanitizer.log"
    grep -E 'ERROR SUMMARY|exit status|paths covered|Error|Hazard' "$OUT/sanitizer.log" | sort | uniq -c | head -n 40
    ! grep -qE 'exit status: [^0]|not covered' "$OUT/sanitizer.log"
    ;;
  verify)
    # tests and sanitize side by side (PYTEST_ARGS defaults to -n 5 here, SHARDS to 5): gpu_tests.log
    # and sanitizer.log; the exit status is non-zero if either failed.
    need_toolboxes verify || exit 2  # before the sanitizer's minutes, not after them
    PYTEST_ARGS=${PYTEST_ARGS:--n 5} bash "$ROOT/.dev_scripts/gpu.sh" tests "$OUT" >"$OUT/tests.out" 2>&1 &
    tests_pid=$!
    SHARDS=${SHARDS:-5} bash "$ROOT/.dev_scripts/gpu.sh" sanitize "$OUT" >"$OUT/sanitize.out" 2>&1
    sanitize_rc=$?
    wait "$tests_pid"
    tests_rc=$?
    grep -E 'passed|failed|error' "$OUT/gpu_tests.log" | tail -n 3
    tail -n 14 "$OUT/sanitize.out"
    echo "tests: exit $tests_rc; sanitizer: exit $sanitize_rc"
    [ "$tests_rc" = 0 ] && [ "$sanitize_rc" = 0 ]
    ;;
  op)
    { header; "$PY" tools/analysis_tools/benchmark_op.py --out-dir "$OUT" "$@"; } 2>&1 | tee "$OUT/benchmark_op.log" |
      sed -n '/^# /,$p'
    ;;
  models)
    { header; "$PY" tools/analysis_tools/benchmark_model.py --out-dir "$OUT" "$@"; } 2>&1 |
      tee "$OUT/benchmark_model.log" | sed -n '/^# /,$p'
    ;;
  models-ab)
    # old, [mid ...,] new: each tree's models in turn, each build against the one before it as soon as
    # both are timed (so that a run cut short keeps its finished pairs).
    chain
    : >"$OUT/models_ab.md"
    for i in "${!names[@]}"; do
      build=${names[$i]} dir=${dirs[$i]}
      echo "== $build build ($dir): $OUT/models_ab_$build.log"
      if ! (cd "$dir" && PYTHONPATH=$dir:$PYTHONPATH SOURCE_COMMIT=${commits[$i]} "$PY" \
        "$ROOT/tools/analysis_tools/benchmark_model.py" --out-dir "$OUT/$build" --kernel-times "$@" \
        >"$OUT/models_ab_$build.log" 2>&1); then
        tail -n 20 "$OUT/models_ab_$build.log"
        exit 1
      fi
      if [ "$i" -gt 0 ]; then
        a=("$OUT/${names[$((i - 1))]}"/models_*.json) b=("$OUT/$build"/models_*.json)
        "$PY" tools/analysis_tools/benchmark_model.py --compare "${a[0]}" "${b[0]}" | tee -a "$OUT/models_ab.md"
      fi
    done
    ;;
  op-steps)
    # old, [mid ...,] new: each build's op against the one before it (benchmark_op.py --ab with the given
    # options, run by the later tree's package), pair by pair into OUT_DIR/NAME/ (the later tree's name),
    # so that a run cut short keeps its finished pairs.
    chain
    header >"$OUT/op_steps.log"
    for i in "${!names[@]}"; do
      [ "$i" -gt 0 ] || continue
      echo "== ${names[$i]} against ${names[$((i - 1))]}" | tee -a "$OUT/op_steps.log"
      if ! PYTHONPATH=${dirs[$i]}:$PYTHONPATH SOURCE_COMMIT=${commits[$i]} "$PY" tools/analysis_tools/benchmark_op.py \
        --ab "${dirs[$((i - 1))]}" --out-dir "$OUT/${names[$i]}" "$@" >"$OUT/op_steps_${names[$i]}.log" 2>&1; then
        tail -n 20 "$OUT/op_steps_${names[$i]}.log"
        exit 1
      fi
      sed -n '/^# /,$p' "$OUT/op_steps_${names[$i]}.log" | tee -a "$OUT/op_steps.log"
    done
    ;;
  train)
    DATA=$OUT/data
    "$PY" tools/dataset_converters/make_demo_data.py --out "$DATA" --ade-train 16 --ade-val 4 --coco-train 16 \
      --coco-val 4 >"$OUT/demo_data.log" 2>&1 || { tail "$OUT/demo_data.log"; exit 1; }
    SEG=configs/demo/oriented-convnext-tiny-1d_upernet_1xb2-amp-40iter_ade20k-demo-512x512.py
    DET=configs/demo/cascade-mask-rcnn_oriented-convnext-t-1d_fpn_4conv1fc-giou_amp-ms-crop-40iter_coco-demo.py
    ITERS=${ITERS:-12}
    for run in "seg 1dpp $SEG" "seg 2dpp $SEG" "det 1dpp $DET" "det 2dpp $DET"; do
      # shellcheck disable=SC2086  # the words of a run
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
  paths)
    { header; "$PY" tools/analysis_tools/profile_model.py --paths "$@"; } 2>&1 | grep -v Warning | tee "$OUT/paths.log" ;;
  ncu)
    # The T-1D++ stage-1 "++" convolution (bf16 channels_last, 64 x 384 x 56 x 56, K=31, residual; or
    # the case the options name): the window gather at 0 and 22.5 degrees and in the 8-direction
    # layout, and the weight gradient.
    opts=("$@")
    { header; echo "case options: ${opts[*]:-(the default case)}"; } > "$OUT/ncu.log"
    for run in "win_gather 0 fwd" "win_gather 22.5 fwd" "win_gather mixed8 fwd" "vec_wgrad mixed8 bwd_weight"; do
      # shellcheck disable=SC2086  # the words of a run
      set -- $run
      echo "== $1, angle $2, $3" >> "$OUT/ncu.log"
      ncu --kernel-name "regex:$1" --launch-skip 2 --launch-count 1 "${NCU_SECTIONS[@]}" \
        "$PY" tools/analysis_tools/profile_model.py --op --external --steps 4 --op-angle "$2" --op-passes "$3" \
        ${opts[@]+"${opts[@]}"} >> "$OUT/ncu.log" 2>&1
    done
    grep -E '^==|Duration|Executed Ipc|Issue Slots Busy|Compute \(SM\) Throughput|Memory Throughput|Shared|Stall|Bank|Wavefronts|Warp Cycles Per Issued|Registers|Achieved Occupancy' \
      "$OUT/ncu.log" | head -n 120
    ;;
  ncu-step)
    # One step of each model (profile_model.py --external --steps 1 --no-timm, after its warm-up) under
    # ncu --profile-from-start off: every launch of the step whose demangled name matches KERNEL_REGEX.
    if [ "$#" -lt 1 ]; then echo "usage: $0 ncu-step OUT_DIR KERNEL_REGEX [profile_model.py options]" >&2; exit 2; fi
    kernel=$1
    shift
    { header; echo "kernels $kernel, options: ${*:-(the default models)}"; } > "$OUT/ncu_step.log"
    ncu --profile-from-start off --kernel-name-base demangled --kernel-name "regex:$kernel" "${NCU_SECTIONS[@]}" \
      --section SchedulerStats "$PY" tools/analysis_tools/profile_model.py --external --steps 1 --no-timm "$@" \
      >> "$OUT/ncu_step.log" 2>&1 || { tail -n 20 "$OUT/ncu_step.log"; exit 1; }
    grep -E '^  void|steps run|Duration|L1/TEX Cache|Issue Slots Busy|way bank|Achieved Occupancy' "$OUT/ncu_step.log" |
      head -n 80
    ;;
  ncu-sass)
    # Where one kernel's instructions and stall samples go (ncu's source counters, grouped into
    # regions by profile_model.py --ncu-sass): KERNEL_REGEX ANGLE PASS [profile_model.py --op
    # options], e.g. `vec_wgrad 0 bwd_weight --op-shape 64 1536 14 31`: ncu_sass.md.
    if [ "$#" -lt 3 ]; then echo "usage: $0 ncu-sass OUT_DIR KERNEL_REGEX ANGLE PASS [options]" >&2; exit 2; fi
    kernel=$1 angle=$2 pass=$3
    shift 3
    { header; echo "kernel $kernel, angle $angle, $pass, options: ${*:-(the default case)}"; } > "$OUT/ncu_sass.md"
    ncu --kernel-name "regex:$kernel" --launch-skip 2 --launch-count 1 --section SourceCounters \
      --section WarpStateStats --import-source yes -f -o "$OUT/sass" \
      "$PY" tools/analysis_tools/profile_model.py --op --external --steps 4 --op-angle "$angle" --op-passes "$pass" \
      "$@" > "$OUT/ncu_sass.log" 2>&1 || { tail -n 20 "$OUT/ncu_sass.log"; exit 1; }
    ncu --import "$OUT/sass.ncu-rep" --page source --csv --print-source sass > "$OUT/sass.csv"
    "$PY" tools/analysis_tools/profile_model.py --ncu-sass "$OUT/sass.csv" >> "$OUT/ncu_sass.md"
    rm -f "$OUT/sass.ncu-rep" "$OUT/sass.csv"
    tail -n 30 "$OUT/ncu_sass.md"
    ;;
  shapes)
    { header; "$PY" tools/analysis_tools/profile_model.py --steps 5 \
        --backbone-sizes 512x512 704x736 800x960 896x768 1344x800 "$@"; } 2>&1 | tee "$OUT/backbone_shapes.log"
    ;;
  learnable)
    { header; "$PY" tools/analysis_tools/benchmark_op.py --rounding bilinear gaussian --out-dir "$OUT/learnable" "$@"; } \
      2>&1 | tee "$OUT/interp_speed.log" | grep -A 12 '^| dtype, layout | C'
    ;;
  fingerprint) fingerprint ;;
  downstream) exec bash .dev_scripts/gpu_downstream.sh "$OUT" "${@:-single}" ;;
  host)
    { header; "$PY" .dev_scripts/block_host_time.py --size 14; } 2>&1 | grep -v Warning | tee "$OUT/block_host.log"
    exec bash .dev_scripts/gpu_downstream.sh "$OUT" bench --configs seg-stock seg-t-1d seg-t-1dpp seg-t-2dpp \
      --warmup 8 --iters 25 --max-time 40 --timeout 120 --rounds "${ROUNDS:-3}" --kernel-times 5 --host-profile 5 "$@" ;;
  scaling) exec bash .dev_scripts/gpu_downstream.sh "$OUT" scaling "$@" ;;
  *) echo "unknown stage $STAGE (stages: see the head of $0)" >&2; exit 2 ;;
esac
