#!/usr/bin/env bash
# Creates (or updates) the project environment in .venv and builds mmo1d into it.
#
#   bash .dev_scripts/setup_env.sh          (what `make setup`, `make demo` and `make test` run)
#
# Idempotent: steps whose result is already there are skipped, so a second run is quick.
# From nothing on 2 cores: torch and the toolboxes download in a few minutes; mmcv is built from source
# (about 12 minutes) unless a wheel of it is found; mmo1d's C++ build takes a few minutes. The CUDA
# kernels are compiled only for FORCE_CUDA=1 or a visible GPU (mmo1d/utils/cuda_build.py): without a
# GPU they could not run, and a GPU that appears later gets them compiled just in time.
# Environment variables:
#   PYTHON              interpreter to create the venv with (default: python3)
#   MMO1D_VENV          venv location (default: <repo>/.venv)
#   PIP_FIND_LINKS      extra wheel folders (pip's own variable); an mmcv 2.1.0 wheel found there
#                       is used if it imports with its compiled ops against the installed torch
#   MMO1D_WHEEL_CACHE   where a locally built mmcv wheel is kept (default: ~/.cache/mmo1d/wheels)
#   FORCE_CUDA, TORCH_CUDA_ARCH_LIST, CUDA_HOME   as for any torch extension build
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
VENV=${MMO1D_VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
VPY="$VENV/bin/python"

TORCH_PIN="torch==2.14.1 torchvision==0.29.1"
MMCV_VERSION=2.1.0
MM_PINS="mmdet==3.3.0 mmsegmentation==1.2.2 mmpretrain==1.2.0 ftfy regex"
# The test tools; ONNX and ONNX Runtime run the export tests (setup.py's extras 'tests').
# pytest-benchmark is there to keep the suite working beside that common plugin (no test may take the
# name of its fixture).
TEST_PINS="pytest pytest-xdist pytest-benchmark ruff onnx==1.23.2 onnxruntime==1.32.0 onnxscript==0.7.2"
TOOL_PINS="setuptools>=77.0.3,<81 wheel ninja"

step() { echo "[setup] $*"; }
# Seconds since a start time ($SECONDS when the step began), said when a long step ends.
took() { step "  took $(( (SECONDS - $1) / 60 )) min $(( (SECONDS - $1) % 60 )) s"; }
fail() { echo "[setup] FAILED: $*" >&2; exit 1; }
pip_install() { "$VPY" -m pip install -q --disable-pip-version-check "$@"; }

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
  fail "Python >= 3.9 is required ($PYTHON is $("$PYTHON" --version 2>&1))"

# 1. Virtual environment. Reuse the interpreter's torch + torchvision if it already has them.
if [ ! -x "$VPY" ]; then
  if "$PYTHON" -c 'import torch, torchvision' 2>/dev/null; then
    step "creating $VENV (reusing the torch and torchvision of $PYTHON)"
    "$PYTHON" -m venv --system-site-packages "$VENV" || fail "step 1: creating the virtual environment"
  else
    step "creating $VENV"
    "$PYTHON" -m venv "$VENV" || fail "step 1: creating the virtual environment"
  fi
fi

# 2. Build tools. setuptools < 81 keeps pkg_resources, which mmcv's build and mmengine's
#    `mmdet::`/`mmseg::` config lookup import.
# shellcheck disable=SC2086
pip_install $TOOL_PINS || fail "step 2: installing build tools ($TOOL_PINS)"

# 3. torch + torchvision (mmpretrain needs torchvision at import).
if ! "$VPY" -c 'import torch, torchvision' 2>/dev/null; then
  step "installing $TORCH_PIN (with its CUDA libraries about 4.5 GB unpacked: a few minutes)"
  start=$SECONDS
  # shellcheck disable=SC2086
  pip_install $TORCH_PIN || fail "step 3: installing $TORCH_PIN"
  took $start
fi
TORCH_VERSION=$("$VPY" -c 'import torch; print(torch.__version__.split("+")[0])')
PY_TAG=$("$VPY" -c 'import sys; print(f"cp{sys.version_info.major}{sys.version_info.minor}")')

# 4. mmengine, then mmcv 2.1.0 with its compiled ops (mmcv imports mmengine; mmdet and mmseg import
#    mmcv._ext, so mmcv-lite is not enough).
pip_install "mmengine==0.10.7" || fail "step 4: installing mmengine 0.10.7"
mmcv_ok() {
  "$VPY" - <<'EOF' >/dev/null 2>&1
import mmcv, torch
from mmcv.ops import nms
assert mmcv.__version__ == '2.1.0'
boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 10., 10.], [20., 20., 30., 30.]])
_, keep = nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
assert keep.tolist() == [0, 2]
EOF
}
CACHE=${MMO1D_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mmo1d/wheels}/torch$TORCH_VERSION-$PY_TAG
if ! mmcv_ok; then
  for dir in ${PIP_FIND_LINKS:-} "$CACHE"; do
    for whl in "$dir"/mmcv-$MMCV_VERSION-"$PY_TAG"-*.whl; do
      [ -f "$whl" ] || continue
      step "trying cached mmcv wheel $whl"
      pip_install --no-deps --force-reinstall "$whl" && mmcv_ok && break 2
      step "  $whl does not load its ops with torch $TORCH_VERSION; not using it"
      "$VPY" -m pip uninstall -q -y mmcv >/dev/null 2>&1 || true
    done
  done
fi
if ! mmcv_ok; then
  step "building mmcv $MMCV_VERSION with ops from source (about 12 minutes on 2 cores, once per machine;" \
    "a wheel of it in PIP_FIND_LINKS or $CACHE skips this)"
  start=$SECONDS
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$VPY" -m pip download -q --no-deps --no-binary :all: --no-build-isolation "mmcv==$MMCV_VERSION" -d "$work" ||
    fail "step 4: downloading the mmcv $MMCV_VERSION source"
  tar -xzf "$work"/mmcv-$MMCV_VERSION.tar.gz -C "$work" || fail "step 4: unpacking the mmcv source"
  # torch >= 2.14 headers require C++20; mmcv's setup.py hard-codes -std=c++17.
  sed -i 's/-std=c++17/-std=c++20/g' "$work/mmcv-$MMCV_VERSION/setup.py"
  MMCV_WITH_OPS=1 MAX_JOBS=${MAX_JOBS:-$(nproc)} "$VPY" -m pip wheel -q --no-build-isolation --no-deps \
    "$work/mmcv-$MMCV_VERSION" -w "$work/dist" || fail "step 4: building mmcv $MMCV_VERSION"
  # Drop the debug information (tens of MB) before caching the wheel.
  "$VPY" -m wheel unpack -d "$work/unpacked" "$work"/dist/mmcv-*.whl >/dev/null
  find "$work/unpacked" -name '_ext*.so' -exec strip --strip-debug {} +
  mkdir -p "$CACHE"
  "$VPY" -m wheel pack -d "$CACHE" "$work"/unpacked/mmcv-$MMCV_VERSION >/dev/null ||
    fail "step 4: repacking the mmcv wheel"
  pip_install --no-deps --force-reinstall "$CACHE"/mmcv-$MMCV_VERSION-"$PY_TAG"-*.whl ||
    fail "step 4: installing the built mmcv wheel"
  mmcv_ok || fail "step 4: the mmcv built from source does not import with its ops"
  step "mmcv wheel cached in $CACHE"
  took $start
fi

# 5. The OpenMMLab toolboxes and the test tools.
if ! "$VPY" -c 'import mmdet, mmseg, mmpretrain, pytest, xdist, onnx, onnxruntime' 2>/dev/null; then
  step "installing mmdet, mmsegmentation, mmpretrain and the test tools (a minute or two)"
fi
# shellcheck disable=SC2086
pip_install $MM_PINS $TEST_PINS || fail "step 5: installing $MM_PINS $TEST_PINS"

# 6. mmo1d itself (compiles mmo1d._C; the CUDA kernels too for FORCE_CUDA=1, or with a toolkit and a GPU).
# A CUDA toolkit root has bin/nvcc and include/cuda_runtime.h (an nvcc on PATH may be a wrapper).
if [ -z "${CUDA_HOME:-}" ] && command -v nvcc >/dev/null 2>&1; then
  for dir in /usr/local/cuda "$(dirname "$(readlink -f "$(command -v nvcc)")")/.."; do
    if [ -x "$dir/bin/nvcc" ] && [ -f "$dir/include/cuda_runtime.h" ]; then
      CUDA_HOME=$(cd "$dir" && pwd)
      export CUDA_HOME
      break
    fi
  done
fi
# "cuda <why>" or "cpu <why>": setup.py applies the same rule.
decision=$("$VPY" mmo1d/utils/cuda_build.py) || fail "step 6: deciding whether to compile the CUDA kernels"
kernels=${decision%% *}
# The stamp records what was built: the sources, and the kernels with their architectures.
stamp="$VENV/.mmo1d-build"
digest=$(cat setup.py pyproject.toml mmo1d/version.py mmo1d/ops/cuda_env.py mmo1d/utils/cuda_build.py \
  $(find csrc -type f | sort) | sha1sum | cut -d' ' -f1)-$kernels
[ "$kernels" = cpu ] || digest=$digest-${TORCH_CUDA_ARCH_LIST:-}
if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ] || ! "$VPY" -c 'import mmo1d._C' 2>/dev/null; then
  if [ "$kernels" = cpu ]; then
    step "building mmo1d, C++ and CPU kernels (pip install --no-build-isolation -e .; about 3 minutes on 2 cores)"
  else
    step "building mmo1d with its CUDA kernels (pip install --no-build-isolation -e .; about 12 minutes on" \
      "2 cores for the default architectures, 9 for one TORCH_CUDA_ARCH_LIST entry)"
  fi
  step "  ${decision#* }"
  start=$SECONDS
  rm -f "$stamp"
  MAX_JOBS=${MAX_JOBS:-$(nproc)} "$VPY" -m pip install -q --disable-pip-version-check --no-build-isolation \
    --use-pep517 --no-deps -e . || fail "step 6: building mmo1d"
  echo "$digest" > "$stamp"
  took $start
fi

"$VPY" - <<'EOF' || fail "step 7: the installed environment does not import"
import mmo1d._C, mmo1d.ops, mmdet.models, mmseg.models, mmpretrain.models  # noqa: F401
from mmo1d.ops import _ext
print(f'[setup] ready: mmo1d with CUDA kernels: {_ext._C.cuda_compiled()}')
EOF
