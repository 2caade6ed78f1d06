#!/usr/bin/env bash
# Data-parallel scaling of the T-1D++ downstream recipes over the GPUs of one machine: the GPU demo
# configs of UperNet (512x512 crops, AMP) and Cascade Mask R-CNN (480-800 px multi-scale, AMP) with
# model.backbone.variant=1dpp, trained on the demo data at 2 images per GPU.
#
#   bash .dev_scripts/gpu_scaling.sh OUT_DIR
#
# Per model, with randomness.seed=0 and the training sampler's seed 0:
#   1gpu-b2   1 GPU, 2 images (tools/train.py), alone on the machine: the throughput baseline;
#   2gpu-b2   2 GPUs, 2 images each (tools/dist_train.sh), alone on the machine;
#   1gpu-b4   1 GPU, 4 images: the 2-GPU run's total batch and data order (the sampler gives rank r
#             the r-th of every world-size indices), the reference of the loss check;
#   1gpu-b4-order2   the same with sampler seed 1: another data order, the noise of the check.
# The two 4-image runs share the machine (GPUs 0 and 1): only their losses are read.
# Then .dev_scripts/summarize_scaling.py writes OUT_DIR/scaling.json and scaling.md. ITERS (default
# 40) sets the iterations of every run.
set -euo pipefail
source "$(dirname "$0")/gpu_script_env.sh"
gpu_script_env 1 "$0 OUT_DIR" "$@"
ITERS=${ITERS:-40}
found=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")
if [ "$found" -lt 2 ]; then
    echo "$0: needs 2 GPUs, torch sees $found" >&2
    exit 1
fi

DEMO=configs/demo
SEG=$DEMO/oriented-convnext-tiny-1d_upernet_1xb2-amp-40iter_ade20k-demo-512x512.py
DET=$DEMO/cascade-mask-rcnn_oriented-convnext-t-1d_fpn_4conv1fc-giou_amp-ms-crop-40iter_coco-demo.py
DATA=$OUT/data
"$PYTHON" tools/dataset_converters/make_demo_data.py --out "$DATA" > "$OUT/demo_data.log" 2>&1
ADE=$DATA/ade/ADEChallengeData2016
COCO=$DATA/coco/

# train NAME MODEL CONFIG GPUS [--cfg-options ...]: one run into OUT/work/MODEL/NAME (log: train.log).
train() {
    local name=$1 model=$2 config=$3 gpus=$4
    shift 4
    local work=$OUT/work/$model/$name
    rm -rf "$work"
    mkdir -p "$work"
    local data
    if [ "$model" = seg ]; then
        data=(train_dataloader.dataset.data_root="$ADE")
    else
        data=(train_dataloader.dataset.data_root="$COCO")
    fi
    local opts=("${data[@]}" model.backbone.variant=1dpp randomness.seed=0 train_dataloader.sampler.seed=0
                train_cfg.max_iters="$ITERS" default_hooks.logger.interval=5
                default_hooks.checkpoint.interval=100000 default_hooks.checkpoint.save_last=False
                val_cfg=None val_dataloader=None val_evaluator=None "$@")
    echo "== $model $name: $gpus GPU(s), $ITERS iterations"
    if [ "$gpus" -gt 1 ]; then
        PORT=29531 bash tools/dist_train.sh "$config" "$gpus" --work-dir "$work/train" --cfg-options "${opts[@]}" \
            > "$work/train.log" 2>&1 || { tail -n 40 "$work/train.log" >&2; return 1; }
    else
        "$PYTHON" tools/train.py "$config" --work-dir "$work/train" --cfg-options "${opts[@]}" \
            > "$work/train.log" 2>&1 || { tail -n 40 "$work/train.log" >&2; return 1; }
    fi
}

for run in "seg $SEG" "det $DET"; do
    read -r model config <<< "$run"
    CUDA_VISIBLE_DEVICES=0 train 1gpu-b2 "$model" "$config" 1
    CUDA_VISIBLE_DEVICES=0,1 train 2gpu-b2 "$model" "$config" 2
    CUDA_VISIBLE_DEVICES=0 train 1gpu-b4 "$model" "$config" 1 train_dataloader.batch_size=4 &
    first=$!
    CUDA_VISIBLE_DEVICES=1 train 1gpu-b4-order2 "$model" "$config" 1 train_dataloader.batch_size=4 \
        train_dataloader.sampler.seed=1 &
    second=$!
    wait "$first"
    wait "$second"
done
"$PYTHON" .dev_scripts/summarize_scaling.py "$OUT" --iters "$ITERS"
