#!/usr/bin/env bash
# Distributed testing with torchrun: one process per GPU, on one or several nodes.
#   bash tools/dist_test.sh CONFIG CHECKPOINT GPUS [test.py arguments...]
# Several nodes: run the same command on every node with
#   NNODES=<nodes> NODE_RANK=<0..NNODES-1> MASTER_ADDR=<address of node 0> PORT=<free port>
set -euo pipefail
# The interpreter: $PYTHON, else python, else python3.
PYTHON=${PYTHON:-$(command -v python || command -v python3 || echo python)}

if [ "$#" -lt 3 ]; then
    echo "usage: $0 CONFIG CHECKPOINT GPUS [test.py arguments...]" >&2
    exit 2
fi
CONFIG=$1
CHECKPOINT=$2
GPUS=$3
if ! [[ "$GPUS" =~ ^[1-9][0-9]*$ ]]; then
    echo "$0: GPUS must be a positive integer, got '$GPUS'" >&2
    exit 2
fi
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
HERE=$(cd "$(dirname "$0")" && pwd)

PYTHONPATH="$HERE/..${PYTHONPATH:+:$PYTHONPATH}" \
exec "$PYTHON" -m torch.distributed.run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --master_port="$PORT" \
    --nproc_per_node="$GPUS" \
    "$HERE/test.py" "$CONFIG" "$CHECKPOINT" --launcher pytorch "${@:4}"
