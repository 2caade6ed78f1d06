#!/usr/bin/env bash
# Do learnable orientations train? Three CPU demo runs on the same demo data with the same seed and
# schedule (500 iterations of 8 images), each trained with tools/train.py and tested with
# tools/test.py:
#   trunc            fixed 8 directions, taps by truncation (the paper's op; the 1d demo config)
#   bilinear-fixed   fixed 8 directions, taps read bilinearly (the -la config, learnable_angles=False)
#   learnable        learned angles from the 8 directions, taps read bilinearly (the -la config)
# Prints a table of mIoU / mAcc / aAcc, draws the learned angles (visualize_angles.py on the last
# checkpoint of the learnable run) and writes a JSON summary. Run from the repository root with the
# environment active:
#   bash tools/misc/demo_learnable_angles.sh [--out JSON] [--figure PREFIX] [--reference] [--dry-run | --summarize]
#     --out        summary JSON (default $OUT, else WORK_DIR/demo_angles.json)
#     --figure     angles figure, writes PREFIX.png and PREFIX.json
#                  (default $FIGURE, else WORK_DIR/learned_angles_demo)
#     --reference  write the committed reference files instead: benchmarks/results/learnable_demo_angles_cpu.json
#                  and docs/figures/learned_angles_demo.{png,json} (also REFERENCE=1)
#     --dry-run    print the commands without running them
#     --summarize  train nothing: print the table and write the JSON from the runs in WORK_DIR
# Environment: DEMO_DIR (data, default data/demo), WORK_DIR (default work_dirs/demo_angles),
# SEED (default 0, the configs' own), OMP_NUM_THREADS (default 1), PYTHON.
# Everything a run writes stays under WORK_DIR unless --out, --figure or --reference say otherwise.
set -euo pipefail
PYTHON=${PYTHON:-$(command -v python || command -v python3 || echo python)}

# usage [STATUS]: the options of the header above, on stderr; exits with STATUS (default 2).
usage() { sed -n '11,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }
REFERENCE=${REFERENCE:-0}
MODE=run
while [ $# -gt 0 ]; do
    case "$1" in
        --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
        --figure) [ $# -ge 2 ] || usage; FIGURE=$2; shift 2 ;;
        --reference) REFERENCE=1; shift ;;
        --dry-run) MODE=dry-run; shift ;;
        --summarize) MODE=summarize; shift ;;
        -h|--help) usage 0 ;;
        *) echo "$0: unknown argument '$1'" >&2; usage ;;
    esac
done
# One compute thread, as in demo.sh: on a small shared machine two OpenMP threads that wait for
# each other can be ten times slower than one.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
DEMO_DIR=${DEMO_DIR:-data/demo}
WORK_DIR=${WORK_DIR:-work_dirs/demo_angles}
SEED=${SEED:-0}
if [ "$REFERENCE" = 1 ]; then
    OUT=${OUT:-benchmarks/results/learnable_demo_angles_cpu.json}
    FIGURE=${FIGURE:-docs/figures/learned_angles_demo}
else
    OUT=${OUT:-$WORK_DIR/demo_angles.json}
    FIGURE=${FIGURE:-$WORK_DIR/learned_angles_demo}
fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

CONFIGS=configs/demo
BASE_CONFIG=$CONFIGS/oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py
LA_CONFIG=$CONFIGS/oriented-convnext-demo-1d-la_upernet_1xb8-500iter_ade20k-demo-128x128.py
RUNS=(trunc bilinear-fixed learnable)
declare -A CONFIG=([trunc]=$BASE_CONFIG [bilinear-fixed]=$LA_CONFIG [learnable]=$LA_CONFIG)
declare -A EXTRA=([trunc]="" [bilinear-fixed]="model.backbone.learnable_angles=False" [learnable]="")
DATA_ROOT=$DEMO_DIR/ade/ADEChallengeData2016
COMMON=(train_dataloader.dataset.data_root="$DATA_ROOT"
        val_dataloader.dataset.data_root="$DATA_ROOT"
        test_dataloader.dataset.data_root="$DATA_ROOT"
        randomness.seed="$SEED")

# run LOG COMMAND...: run COMMAND with its output in LOG (its tail on failure), or print it (--dry-run).
run() {
    local log=$1; shift
    if [ "$MODE" = dry-run ]; then
        printf '%q ' "$@"; printf '> %q\n' "$log"
        return
    fi
    "$@" > "$log" 2>&1 || { tail -n 40 "$log" >&2; echo "$0: failed, see $log" >&2; exit 1; }
}

if [ "$MODE" != summarize ]; then
    if [ "$MODE" = run ]; then
        "$PYTHON" -c "import mmo1d, mmseg" 2>/dev/null || {
            echo "$0: mmo1d and mmsegmentation must be importable: activate the environment first" >&2
            exit 1
        }
        mkdir -p "$WORK_DIR"
    fi
    start=$(date +%s)
    run "$WORK_DIR/make_demo_data.log" "$PYTHON" tools/dataset_converters/make_demo_data.py --which ade --out "$DEMO_DIR"
    for name in "${RUNS[@]}"; do
        config=${CONFIG[$name]}
        run_dir=$WORK_DIR/$name
        # shellcheck disable=SC2206  # EXTRA holds zero or more space-free options
        options=("${COMMON[@]}" ${EXTRA[$name]})
        echo "== $name: training $config${EXTRA[$name]:+ with ${EXTRA[$name]}} -> $run_dir"
        t0=$(date +%s.%N)
        run "$run_dir.train.log" "$PYTHON" tools/train.py "$config" --work-dir "$run_dir" --cfg-options "${options[@]}"
        [ "$MODE" = dry-run ] || awk "BEGIN { print $(date +%s.%N) - $t0 }" > "$run_dir/train_seconds"
        echo "== $name: testing $run_dir/iter_500.pth"
        run "$run_dir.test.log" "$PYTHON" tools/test.py "$config" "$run_dir/iter_500.pth" \
            --work-dir "$run_dir/test" --cfg-options "${options[@]}"
    done
    echo "== drawing the learned angles -> $FIGURE.png"
    run "$WORK_DIR/visualize_angles.log" "$PYTHON" tools/analysis_tools/visualize_angles.py \
        "$WORK_DIR/learnable/iter_500.pth" --out "$FIGURE"
    [ "$MODE" = dry-run ] || echo "== runs done in $(( $(date +%s) - start )) s; logs and checkpoints in $WORK_DIR"
fi
if [ "$MODE" = dry-run ]; then
    echo "would write $OUT"
    exit 0
fi

# The table and the JSON: per run its config, options, metrics of tools/test.py and training time;
# for the learnable run the change of its angles from visualize_angles.py.
run_args=()
for name in "${RUNS[@]}"; do
    run_args+=("$name" "${CONFIG[$name]}" "${EXTRA[$name]}")
done
"$PYTHON" - "$WORK_DIR" "$OUT" "$FIGURE.json" "$SEED" "${run_args[@]}" <<'EOF'
import json, os, pathlib, platform, sys

work_dir, out, angles_path = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
seed, run_args = int(sys.argv[4]), sys.argv[5:]


def test_metrics(run_dir):
    test_dir = run_dir / 'test'
    tests = sorted(p for p in test_dir.iterdir() if p.is_dir()) if test_dir.is_dir() else []
    if not tests:
        sys.exit(f'no tools/test.py results in {test_dir}: run the script without --summarize first')
    metrics = json.loads((tests[-1] / f'{tests[-1].name}.json').read_text())
    return {k: round(metrics[k], 2) for k in ('mIoU', 'mAcc', 'aAcc') if k in metrics}


def cpu_model():
    cpuinfo = pathlib.Path('/proc/cpuinfo')
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        if line.startswith('model name'):
            return line.split(':', 1)[1].strip()
    return platform.processor() or platform.machine()


runs = {}
for name, config, extra in zip(run_args[0::3], run_args[1::3], run_args[2::3]):
    run_dir = work_dir / name
    seconds = run_dir / 'train_seconds'
    runs[name] = dict(config=config, options=extra.split(), **test_metrics(run_dir),
                      train_seconds=round(float(seconds.read_text()), 1) if seconds.exists() else None)
if not angles_path.exists():
    sys.exit(f'no angles summary {angles_path}: visualize_angles.py did not run')
angles = json.loads(angles_path.read_text())
if 'all' not in angles:
    sys.exit(f'{angles_path} has no angle changes: the checkpoint has no config with the initial angles')
runs['learnable']['angle_change'] = dict(all=angles['all'], layers=angles['layers'],
                                         figure=angles_path.with_suffix('.png').as_posix())

try:
    import torch
    torch_version = torch.__version__
except ImportError:
    torch_version = None
summary = dict(command='bash tools/misc/demo_learnable_angles.sh', seed=seed, cpu=cpu_model(),
               omp_num_threads=os.environ.get('OMP_NUM_THREADS'), torch=torch_version, runs=runs)
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps(summary, indent=1) + '\n')

print(f'{"run":<16}{"mIoU":>8}{"mAcc":>8}{"aAcc":>8}{"train s":>10}')
for name, run in runs.items():
    cells = ''.join(f'{run[k]:>8.2f}' if k in run else f'{"-":>8}' for k in ('mIoU', 'mAcc', 'aAcc'))
    seconds = f'{run["train_seconds"]:>10.0f}' if run['train_seconds'] is not None else f'{"-":>10}'
    print(f'{name:<16}{cells}{seconds}')
change = angles['all']
print(f'learnable: {change["count"]} angles, mean |change| {change["mean_abs_change_deg"]:.3f} deg, '
      f'max |change| {change["max_abs_change_deg"]:.3f} deg')
print(f'wrote {out}')
EOF
