#!/usr/bin/env bash
# The downstream demo, on a CPU in a few minutes: write the ADE20K-style demo data, train a small
# UperNet with a ConvNeXt-1D backbone with tools/train.py, evaluate it with tools/test.py and print
# its mIoU. Run from the repository root with the environment active (`make demo` does both).
#   bash tools/misc/demo.sh [1d|2d|both]    (default 1d; 2d is the ConvNeXt baseline for comparison)
# Environment: DEMO_DIR (data, default data/demo), WORK_DIR (default work_dirs/demo),
# MIN_MIOU (fail below this mIoU, default 50; predicting "floor" everywhere scores about 18),
# OMP_NUM_THREADS (default 1).
set -euo pipefail
# The interpreter: $PYTHON, else python, else python3.
PYTHON=${PYTHON:-$(command -v python || command -v python3 || echo python)}

VARIANTS=${1:-1d}
case "$VARIANTS" in
    1d|2d) ;;
    both) VARIANTS="1d 2d" ;;
    *) echo "usage: $0 [1d|2d|both]" >&2; exit 2 ;;
esac
# One compute thread: on a small shared machine two OpenMP threads that wait for each other can be
# ten times slower than one; alone, the second thread saves little (the data loader uses it).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
DEMO_DIR=${DEMO_DIR:-data/demo}
WORK_DIR=${WORK_DIR:-work_dirs/demo}
MIN_MIOU=${MIN_MIOU:-50}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
"$PYTHON" -c "import mmo1d, mmseg" 2>/dev/null || {
    echo "$0: mmo1d and mmsegmentation must be importable: activate the environment first" >&2
    exit 1
}

mkdir -p "$WORK_DIR"
start=$(date +%s)
"$PYTHON" tools/dataset_converters/make_demo_data.py --which ade --out "$DEMO_DIR"
for variant in $VARIANTS; do
    config=configs/demo/oriented-convnext-demo-${variant}_upernet_1xb8-500iter_ade20k-demo-128x128.py
    run_dir=$WORK_DIR/upernet-$variant
    options=(train_dataloader.dataset.data_root="$DEMO_DIR/ade/ADEChallengeData2016"
             val_dataloader.dataset.data_root="$DEMO_DIR/ade/ADEChallengeData2016"
             test_dataloader.dataset.data_root="$DEMO_DIR/ade/ADEChallengeData2016")
    echo "== training UperNet ConvNeXt-$variant (500 iterations) -> $run_dir"
    "$PYTHON" tools/train.py "$config" --work-dir "$run_dir" --cfg-options "${options[@]}" > "$run_dir.train.log" 2>&1 \
        || { tail -n 40 "$run_dir.train.log" >&2; exit 1; }
    echo "== testing $run_dir/iter_500.pth"
    "$PYTHON" tools/test.py "$config" "$run_dir/iter_500.pth" --work-dir "$run_dir/test" \
        --cfg-options "${options[@]}" > "$run_dir.test.log" 2>&1 \
        || { tail -n 40 "$run_dir.test.log" >&2; exit 1; }
    "$PYTHON" - "$run_dir/test" "$variant" "$MIN_MIOU" <<'EOF'
import json, pathlib, sys
test_dir, variant, min_miou = pathlib.Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
run = sorted(p for p in test_dir.iterdir() if p.is_dir())[-1]
metrics = json.loads((run / f'{run.name}.json').read_text())
print(f'ConvNeXt-{variant} UperNet demo: mIoU {metrics["mIoU"]:.2f}, mAcc {metrics["mAcc"]:.2f}, '
      f'aAcc {metrics["aAcc"]:.2f} (5 classes; all-"floor" scores mIoU ~18)')
if metrics['mIoU'] < min_miou:
    sys.exit(f'mIoU {metrics["mIoU"]:.2f} is below {min_miou}: the demo did not learn')
EOF
done
echo "== demo done in $(( $(date +%s) - start )) s; logs and checkpoints in $WORK_DIR"
