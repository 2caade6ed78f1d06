"""tools/analysis_tools/profile_model.py: kernel names land in the right group; a clear message without a GPU."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'profile_model.py'
_spec = importlib.util.spec_from_file_location('profile_model', TOOL)
profile_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(profile_tool)


@pytest.mark.parametrize('name, group', [
    ('void mmo1d::(anonymous namespace)::seg_gather_nchw_kernel<float>(float const*, float*)', 0),
    ('void mmo1d::(anonymous namespace)::wgrad_reduce_kernel<c10::BFloat16, float>(float const*)', 0),
    ('sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64', 1),
    ('void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel<1, float, int>(...)', 1),
    ('sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1', 2),
    ('nvjet_tst_192x192_64x3_2x1_v_bz_coopA_NTT', 2),
    ('void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>', 3),
    ('void mmo1d::(anonymous namespace)::layer_norm_last_fwd_kernel<c10::BFloat16, c10::BFloat16, float, 8, true>', 3),
    ('void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>', 4),
    ('void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>', 5),
])
def test_kernel_groups(name, group):
    assert profile_tool.kernel_group(name) == profile_tool.GROUPS[group]


def test_no_gpu_message():
    if profile_tool.torch.cuda.is_available():
        pytest.skip('a GPU is present')
    result = subprocess.run([sys.executable, str(TOOL), '--no-timm'], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and 'no CUDA device' in result.stderr
