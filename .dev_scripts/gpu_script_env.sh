# Sourced by the GPU scripts of this folder, after `set -euo pipefail`:
#
#   source "$(dirname "$0")/gpu_script_env.sh"
#   gpu_script_env MAX_ARGS "USAGE" "$@"
#
# checks that the script got OUT_DIR and at most MAX_ARGS arguments (`any`: no limit; else prints
# `usage: USAGE` and exits 2), then sets PYTHON (default: python, else python3), ROOT (the repository: the working
# directory from here on, and first on PYTHONPATH) and OUT (OUT_DIR, created, as an absolute path).
gpu_script_env() {
    local max=$1 usage=$2
    shift 2
    export PYTHON=${PYTHON:-$(command -v python || command -v python3 || echo python)}
    if [ "$#" -lt 1 ] || { [ "$max" != any ] && [ "$#" -gt "$max" ]; }; then
        echo "usage: $usage" >&2
        exit 2
    fi
    ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    mkdir -p "$1"
    OUT=$(cd "$1" && pwd)
    cd "$ROOT"
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
}
