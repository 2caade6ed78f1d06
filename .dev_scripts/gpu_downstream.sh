#!/usr/bin/env bash
# Short downstream runs on GPUs: the real UperNet and Cascade Mask R-CNN ConvNeXt-T recipes (T-1D
# and the ConvNeXt-T 2D baseline; 512x512 crops / 480-800 px multi-scale, AMP) trained for a few
# iterations on the demo data, then tested; iteration time, peak memory and the test metrics go to
# OUT_DIR/downstream_<mode>.json.
#
#   bash .dev_scripts/gpu_downstream.sh OUT_DIR [single|dist2|cpu-check]
#
#   single     1 GPU: UperNet T-1D, UperNet T-2D, Cascade T-1D, Cascade T-2D; 40 iterations each
#              (tools/train.py, tools/test.py).
#   dist2      2 GPUs: UperNet T-1D and Cascade T-1D with tools/dist_train.sh / tools/dist_test.sh,
#              40 iterations of 2 images per GPU.
#   cpu-check  the same steps on a CPU with the small demo configs and 2 iterations, to check this
#              script without a GPU (no timings worth reading).
#
# Needs mmengine, mmcv (with ops), mmdet, mmseg importable and mmo1d built (installed, or in place:
# the repository root is put on PYTHONPATH). ITERS overrides the number of training iterations;
# SOURCE_COMMIT names the commit that was built where the checkout has no .git (default: git
# rev-parse HEAD). If a run fails or the script is stopped (SIGTERM, e.g. from `timeout`), the
# runs finished before it are still written to the JSON file, with "completed": false.
set -euo pipefail
source "$(dirname "$0")/gpu_script_env.sh"
gpu_script_env 2 "$0 OUT_DIR [single|dist2|cpu-check]" "$@"
MODE=${2:-single}

DEMO=configs/demo
SEG_1D=$DEMO/oriented-convnext-tiny-1d_upernet_1xb2-amp-40iter_ade20k-demo-512x512.py
SEG_2D=$DEMO/oriented-convnext-tiny-2d_upernet_1xb2-amp-40iter_ade20k-demo-512x512.py
DET_1D=$DEMO/cascade-mask-rcnn_oriented-convnext-t-1d_fpn_4conv1fc-giou_amp-ms-crop-40iter_coco-demo.py
DET_2D=$DEMO/cascade-mask-rcnn_oriented-convnext-t-2d_fpn_4conv1fc-giou_amp-ms-crop-40iter_coco-demo.py
DATA_ARGS=()
case "$MODE" in
    single)
        RUNS=("seg-t-1d $SEG_1D" "seg-t-2d $SEG_2D" "det-t-1d $DET_1D" "det-t-2d $DET_2D")
        GPUS=1; ITERS=${ITERS:-40}; LOG_INTERVAL=10 ;;
    dist2)
        RUNS=("seg-t-1d $SEG_1D" "det-t-1d $DET_1D")
        GPUS=2; ITERS=${ITERS:-40}; LOG_INTERVAL=10 ;;
    cpu-check)
        RUNS=("seg-demo-1d $DEMO/oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py"
              "seg-demo-2d $DEMO/oriented-convnext-demo-2d_upernet_1xb8-500iter_ade20k-demo-128x128.py"
              "det-demo-1d $DEMO/cascade-mask-rcnn_oriented-convnext-demo-1d_fpn_4conv1fc-giou_ms-crop-200iter_coco-demo.py"
              "det-demo-2d $DEMO/cascade-mask-rcnn_oriented-convnext-demo-2d_fpn_4conv1fc-giou_ms-crop-200iter_coco-demo.py")
        GPUS=0; ITERS=${ITERS:-2}; LOG_INTERVAL=1
        DATA_ARGS=(--ade-train 8 --ade-val 4 --coco-train 4 --coco-val 2) ;;
    *)
        echo "$0: unknown mode '$MODE' (single, dist2 or cpu-check)" >&2
        exit 2 ;;
esac

"$PYTHON" -c "import mmengine, mmcv.ops, mmdet, mmseg, mmo1d" || {
    echo "$0: mmengine, mmcv (with ops), mmdet, mmseg and mmo1d must be importable" \
         "(on the GPU machine: source .device-wheels/mm-env.sh, then build mmo1d in place)" >&2
    exit 1
}
if [ "$GPUS" -gt 0 ]; then
    found=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")
    if [ "$found" -lt "$GPUS" ]; then
        echo "$0: mode $MODE needs $GPUS GPUs, torch sees $found" >&2
        exit 1
    fi
fi

DATA=$OUT/data
"$PYTHON" tools/dataset_converters/make_demo_data.py --out "$DATA" "${DATA_ARGS[@]}"
ADE=$DATA/ade/ADEChallengeData2016
COCO=$DATA/coco/

# Collect iteration times, peak memory and test metrics of the finished runs (DONE) into
# OUT/downstream_<mode>.json; $1 is "true" when every run of the mode finished.
summarize() {
    "$PYTHON" .dev_scripts/summarize_downstream.py "$OUT" "$MODE" "$GPUS" "$ITERS" "$1" "${DONE[@]}"
}

DONE=()
on_exit() {
    local rc=$?
    trap - EXIT
    if [ "$rc" -ne 0 ] && [ "${#DONE[@]}" -gt 0 ]; then
        echo "$0: stopped (exit status $rc) after ${#DONE[@]} of ${#RUNS[@]} runs; summarising those" >&2
        summarize false || true
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 143' TERM INT

for run in "${RUNS[@]}"; do
    read -r name config <<< "$run"
    work=$OUT/work/$MODE/$name
    rm -rf "$work"
    mkdir -p "$work"
    if [[ $name == seg-* ]]; then
        data=(train_dataloader.dataset.data_root="$ADE" val_dataloader.dataset.data_root="$ADE"
              test_dataloader.dataset.data_root="$ADE")
        test_only=()
    else
        data=(train_dataloader.dataset.data_root="$COCO" val_dataloader.dataset.data_root="$COCO"
              test_dataloader.dataset.data_root="$COCO"
              val_evaluator.ann_file="${COCO}annotations/instances_val2017.json"
              test_evaluator.ann_file="${COCO}annotations/instances_val2017.json")
        # After a few iterations few scores pass 0.05: keep every box so that CocoMetric (bbox and
        # segm, with mask pasting) runs on a full set of detections.
        test_only=(model.test_cfg.rcnn.score_thr=0.0)
    fi
    train_opts=("${data[@]}" train_cfg.max_iters="$ITERS" default_hooks.checkpoint.interval="$ITERS"
                default_hooks.logger.interval="$LOG_INTERVAL" val_cfg=None val_dataloader=None
                val_evaluator=None)
    echo "== $MODE $name: train $ITERS iterations ($config)"
    if [ "$MODE" = dist2 ]; then
        PORT=29511 bash tools/dist_train.sh "$config" "$GPUS" --work-dir "$work/train" \
            --cfg-options "${train_opts[@]}" > "$work/train.log" 2>&1 \
            || { tail -n 60 "$work/train.log" >&2; exit 1; }
    else
        "$PYTHON" tools/train.py "$config" --work-dir "$work/train" --cfg-options "${train_opts[@]}" \
            > "$work/train.log" 2>&1 || { tail -n 60 "$work/train.log" >&2; exit 1; }
    fi
    echo "== $MODE $name: test"
    if [ "$MODE" = dist2 ]; then
        PORT=29512 bash tools/dist_test.sh "$config" "$work/train/iter_$ITERS.pth" "$GPUS" \
            --work-dir "$work/test" --cfg-options "${data[@]}" "${test_only[@]}" > "$work/test.log" 2>&1 \
            || { tail -n 60 "$work/test.log" >&2; exit 1; }
    else
        "$PYTHON" tools/test.py "$config" "$work/train/iter_$ITERS.pth" --work-dir "$work/test" \
            --cfg-options "${data[@]}" "${test_only[@]}" > "$work/test.log" 2>&1 \
            || { tail -n 60 "$work/test.log" >&2; exit 1; }
    fi
    DONE+=("$run")
done

summarize true
