#!/usr/bin/env bash
# The downstream recipes on GPUs: short train-and-test runs, the timing against the stock configs,
# and data-parallel scaling. Every mode writes fresh demo data under OUT_DIR/data first.
#
#   bash .dev_scripts/gpu_downstream.sh OUT_DIR MODE [options]
#
#   single     1 GPU: UperNet T-1D and T-2D, Cascade Mask R-CNN T-1D and T-2D (the GPU demo configs:
#              512x512 crops / 480-800 px multi-scale, AMP), ITERS (40) iterations each with
#              tools/train.py, then tools/test.py; writes OUT_DIR/downstream_train_test_1gpu_<machine>.json.
#   dist       GPUS (2) GPUs: UperNet T-1D and Cascade T-1D with tools/dist_train.sh and
#              tools/dist_test.sh, 2 images per GPU; writes OUT_DIR/downstream_train_test_<GPUS>gpu_<machine>.json.
#              `dist2` is the same with GPUS=2.
#   cpu-check  the steps of `single` on a CPU with the small demo configs and 2 iterations, to check
#              this script without a GPU (no timings worth reading).
#   bench      tools/analysis_tools/benchmark_downstream.py: our T-1D, T-1D++ and T-2D++ recipes
#              against the stock mmseg/mmdet ConvNeXt-T configs, in one run on one GPU; options after
#              MODE go to it (e.g. `--configs det-stock det-t-1d --iters 50`). Every AMP config's
#              dynamic loss scale starts at 2**-20: without pretrained weights the zero-padded pixels
#              of a batch give float16 gradients that overflow at the usual scales.
#   scaling    per-GPU throughput of the T-1D++ UperNet and Cascade recipes at each count of
#              GPU_COUNTS (default: 1, 2, 4, ... up to the GPUs torch sees, and that number), with
#              the heads' SyncBN and with BN, and the loss check against 1 GPU with the same total
#              batch and data order (mmo1d/benchmark/scaling.py says which runs); MODELS ("seg det")
#              picks the recipes; writes OUT_DIR/scaling_t1dpp_<machine>.json and .md.
#
# Needs mmengine, mmcv (with ops), mmdet, mmseg (and mmpretrain for `bench`) importable and mmo1d
# built (installed, or in place: the repository root is put on PYTHONPATH; on the GPU machine:
# source .device-wheels/mm-env.sh, then build mmo1d in place). SOURCE_COMMIT names the commit that
# was built where the checkout has no .git. If a run of single/dist fails or the script is stopped
# (SIGTERM, e.g. from `timeout`), the runs finished before it are still summarised, with
# "completed": false.
set -euo pipefail
if [ "$#" -lt 2 ]; then
    echo "usage: $0 OUT_DIR single|dist|dist2|cpu-check|bench|scaling [options]" >&2
    exit 2
fi
PYTHON=${PYTHON:-$(command -v python || command -v python3 || echo python)}
export PYTHON
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
MODE=$2
shift 2
cd "$ROOT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

DEMO=configs/demo
SEG_1D=$DEMO/oriented-convnext-tiny-1d_upernet_1xb2-amp-40iter_ade20k-demo-512x512.py
SEG_2D=$DEMO/oriented-convnext-tiny-2d_upernet_1xb2-amp-40iter_ade20k-demo-512x512.py
DET_1D=$DEMO/cascade-mask-rcnn_oriented-convnext-t-1d_fpn_4conv1fc-giou_amp-ms-crop-40iter_coco-demo.py
DET_2D=$DEMO/cascade-mask-rcnn_oriented-convnext-t-2d_fpn_4conv1fc-giou_amp-ms-crop-40iter_coco-demo.py
# The heads' normalisation switched from SyncBN to BN (UperNet: decode and auxiliary heads; Cascade:
# the shared convolutions of its three box heads).
SEG_BN_HEADS=(model.decode_head.norm_cfg.type=BN model.auxiliary_head.norm_cfg.type=BN)
DET_BN_HEADS=(model.roi_head.bbox_head.0.norm_cfg.type=BN model.roi_head.bbox_head.1.norm_cfg.type=BN
              model.roi_head.bbox_head.2.norm_cfg.type=BN)

need() {
    "$PYTHON" -c "import $1" || {
        echo "$0: $1 must be importable (on the GPU machine: source .device-wheels/mm-env.sh, then build mmo1d in place)" >&2
        exit 1
    }
}
need_gpus() {
    local found
    found=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")
    if [ "$found" -lt "$1" ]; then
        echo "$0: mode $MODE needs $1 GPUs, torch sees $found" >&2
        exit 1
    fi
}
make_data() {
    "$PYTHON" tools/dataset_converters/make_demo_data.py --out "$OUT/data" "$@" > "$OUT/demo_data.log" 2>&1 ||
        { cat "$OUT/demo_data.log" >&2; exit 1; }
}
ADE=$OUT/data/ade/ADEChallengeData2016
COCO=$OUT/data/coco/

# train_run WORK CONFIG GPUS PORT OPTION...: tools/train.py (1 GPU or CPU) or tools/dist_train.sh
# into WORK/train, its output in WORK/train.log; the log's tail on failure.
train_run() {
    local work=$1 config=$2 gpus=$3 port=$4
    shift 4
    rm -rf "$work"
    mkdir -p "$work"
    if [ "$gpus" -gt 1 ]; then
        PORT=$port bash tools/dist_train.sh "$config" "$gpus" --work-dir "$work/train" --cfg-options "$@" \
            > "$work/train.log" 2>&1 || { tail -n 60 "$work/train.log" >&2; return 1; }
    else
        "$PYTHON" tools/train.py "$config" --work-dir "$work/train" --cfg-options "$@" \
            > "$work/train.log" 2>&1 || { tail -n 60 "$work/train.log" >&2; return 1; }
    fi
}

# ---- bench: one process per config, timed by benchmark_downstream.py -------------------------------
if [ "$MODE" = bench ]; then
    need "mmengine, mmcv.ops, mmdet, mmseg, mmpretrain, mmo1d.ops"
    make_data --ade-train 100 --ade-val 1 --coco-train 100 --coco-val 1
    exec "$PYTHON" tools/analysis_tools/benchmark_downstream.py --data-root "$OUT/data" --out-dir "$OUT" \
        --work-dir "$OUT/logs" --init-loss-scale 9.5367431640625e-07 "$@"
fi

# ---- scaling: 1, 2, 4, ... GPUs, SyncBN and BN heads, the loss check ------------------------------
if [ "$MODE" = scaling ]; then
    need "mmengine, mmcv.ops, mmdet, mmseg, mmo1d"
    ITERS=${ITERS:-40}
    found=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")
    if [ -z "${GPU_COUNTS:-}" ]; then
        GPU_COUNTS=$("$PYTHON" -c "
n = $found
counts, c = [], 1
while c <= n:
    counts.append(c)
    c *= 2
print(' '.join(map(str, sorted(set(counts) | {n}))))")
    fi
    read -r -a counts <<< "$GPU_COUNTS"
    for n in "${counts[@]}"; do
        need_gpus "$n"
    done
    read -r -a models <<< "${MODELS:-seg det}"
    make_data
    # scale_run MODEL NAME GPUS PORT OPTION...: one run of the T-1D++ recipe into OUT/work/MODEL/NAME.
    scale_run() {
        local model=$1 name=$2 gpus=$3 port=$4 config root
        shift 4
        if [ "$model" = seg ]; then config=$SEG_1D root=$ADE; else config=$DET_1D root=$COCO; fi
        echo "== $model $name: $gpus GPU(s), $ITERS iterations"
        train_run "$OUT/work/$model/$name" "$config" "$gpus" "$port" train_dataloader.dataset.data_root="$root" \
            model.backbone.variant=1dpp randomness.seed=0 train_dataloader.sampler.seed=0 \
            train_cfg.max_iters="$ITERS" default_hooks.logger.interval=5 default_hooks.checkpoint.interval=100000 \
            default_hooks.checkpoint.save_last=False val_cfg=None val_dataloader=None val_evaluator=None "$@"
    }
    for model in "${models[@]}"; do
        if [ "$model" = seg ]; then bn=("${SEG_BN_HEADS[@]}"); else bn=("${DET_BN_HEADS[@]}"); fi
        # Throughput runs, each alone on the machine.
        CUDA_VISIBLE_DEVICES=0 scale_run "$model" 1gpu-b2 1 29530
        for n in "${counts[@]}"; do
            [ "$n" -gt 1 ] || continue
            devices=$(seq -s, 0 $((n - 1)))
            CUDA_VISIBLE_DEVICES=$devices scale_run "$model" "${n}gpu-b2" "$n" 29531
            CUDA_VISIBLE_DEVICES=$devices scale_run "$model" "${n}gpu-b2-bn" "$n" 29532 "${bn[@]}"
        done
        # The loss references: 1-GPU runs whose times are not read, as many at once as there are GPUs.
        jobs_=()
        slot=0
        for n in "${counts[@]}"; do
            [ "$n" -gt 1 ] || continue
            total=$((2 * n))
            for order in 0 1; do
                name=1gpu-b$total
                [ "$order" = 0 ] || name=$name-order2
                CUDA_VISIBLE_DEVICES=$slot scale_run "$model" "$name" 1 0 train_dataloader.batch_size="$total" \
                    train_dataloader.sampler.seed="$order" &
                jobs_+=($!)
                slot=$((slot + 1))
                if [ "$slot" -ge "$found" ]; then
                    for job in "${jobs_[@]}"; do wait "$job"; done
                    jobs_=()
                    slot=0
                fi
            done
        done
        for job in "${jobs_[@]}"; do wait "$job"; done
    done
    "$PYTHON" -m mmo1d.benchmark.scaling "$OUT" --iters "$ITERS" --counts "${counts[@]}" --models "${models[@]}"
    exit 0
fi

# ---- single / dist / cpu-check: train, then test ---------------------------------------------------
DATA_ARGS=()
case "$MODE" in
    single)
        RUNS=("seg-t-1d $SEG_1D" "seg-t-2d $SEG_2D" "det-t-1d $DET_1D" "det-t-2d $DET_2D")
        GPUS=1; ITERS=${ITERS:-40}; LOG_INTERVAL=10 ;;
    dist|dist2)
        [ "$MODE" = dist ] || GPUS=2
        MODE=dist
        RUNS=("seg-t-1d $SEG_1D" "det-t-1d $DET_1D")
        GPUS=${GPUS:-2}; ITERS=${ITERS:-40}; LOG_INTERVAL=10 ;;
    cpu-check)
        RUNS=("seg-demo-1d $DEMO/oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py"
              "seg-demo-2d $DEMO/oriented-convnext-demo-2d_upernet_1xb8-500iter_ade20k-demo-128x128.py"
              "det-demo-1d $DEMO/cascade-mask-rcnn_oriented-convnext-demo-1d_fpn_4conv1fc-giou_ms-crop-200iter_coco-demo.py"
              "det-demo-2d $DEMO/cascade-mask-rcnn_oriented-convnext-demo-2d_fpn_4conv1fc-giou_ms-crop-200iter_coco-demo.py")
        GPUS=0; ITERS=${ITERS:-2}; LOG_INTERVAL=1
        DATA_ARGS=(--ade-train 8 --ade-val 4 --coco-train 4 --coco-val 2) ;;
    *)
        echo "$0: unknown mode '$MODE' (single, dist, dist2, cpu-check, bench or scaling)" >&2
        exit 2 ;;
esac
need "mmengine, mmcv.ops, mmdet, mmseg, mmo1d"
[ "$GPUS" -eq 0 ] || need_gpus "$GPUS"
make_data "${DATA_ARGS[@]}"

# Collect iteration times, peak memory and test metrics of the finished runs (DONE) into
# OUT/downstream_<mode>.json; $1 is "true" when every run of the mode finished.
summarize() {
    "$PYTHON" -m mmo1d.benchmark.downstream_runs "$OUT" "$MODE" "$GPUS" "$ITERS" "$1" "${DONE[@]}"
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
    echo "== $MODE $name: train $ITERS iterations ($config)"
    train_run "$work" "$config" "$GPUS" 29511 "${data[@]}" train_cfg.max_iters="$ITERS" \
        default_hooks.checkpoint.interval="$ITERS" default_hooks.logger.interval="$LOG_INTERVAL" val_cfg=None \
        val_dataloader=None val_evaluator=None || exit 1
    echo "== $MODE $name: test"
    if [ "$GPUS" -gt 1 ]; then
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
