#!/usr/bin/env bash
# Training iterations of the downstream configs against the stock OpenMMLab ConvNeXt configs on one
# GPU, in one run of tools/analysis_tools/benchmark_downstream.py: mmseg's UperNet ConvNeXt-T and
# mmdet's Cascade Mask R-CNN ConvNeXt-T configs (mmpretrain's ConvNeXt) and our T-1D, T-1D++ and
# T-2D++ recipes, on freshly written demo data, 2 images per GPU, 10 warm-up + 30 timed iterations
# each (each config in a process of its own). Every AMP config's dynamic loss scale starts at 2**-20:
# without pretrained weights the zero-padded pixels of a batch give float16 gradients that overflow at
# the usual scales, and a skipped step skips the optimizer (benchmarks/kernel_notes.md, "float16
# overflow in the randomly initialised Cascade runs"). Writes OUT_DIR/downstream_<gpu>.json and .md,
# and each config's log and mmengine work directory under OUT_DIR/logs/.
#
#   bash .dev_scripts/gpu_downstream_bench.sh OUT_DIR [benchmark_downstream.py options]
#
# e.g. `--configs det-stock det-t-1d --iters 50`. Needs mmengine, mmcv (with ops), mmdet, mmseg,
# mmpretrain and a built mmo1d importable (on the GPU machine: source .device-wheels/mm-env.sh, then
# build mmo1d in place); the repository root is put on PYTHONPATH. SOURCE_COMMIT names the commit
# that was built where the checkout has no .git.
set -euo pipefail
source "$(dirname "$0")/gpu_script_env.sh"
gpu_script_env any "$0 OUT_DIR [benchmark_downstream.py options]" "$@"
shift

"$PYTHON" -c "import mmengine, mmcv.ops, mmdet, mmseg, mmpretrain, mmo1d.ops" || {
    echo "$0: mmengine, mmcv (with ops), mmdet, mmseg, mmpretrain and a built mmo1d must be importable" \
         "(on the GPU machine: source .device-wheels/mm-env.sh, then build mmo1d in place)" >&2
    exit 1
}
"$PYTHON" tools/dataset_converters/make_demo_data.py --out "$OUT/data" --ade-train 100 --ade-val 1 \
    --coco-train 100 --coco-val 1
"$PYTHON" tools/analysis_tools/benchmark_downstream.py --data-root "$OUT/data" --out-dir "$OUT" \
    --work-dir "$OUT/logs" --init-loss-scale 9.5367431640625e-07 "$@"
