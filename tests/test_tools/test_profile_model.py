"""tools/analysis_tools/profile_model.py: kernel names land in the right group; a clear message without a GPU; the
op and backbone options' arguments; the kernel paths of a classifier; an ncu SASS page read into regions."""
import csv
import importlib.util
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
    for argv in (['--no-timm'], ['--op'], ['--external', '--no-timm', '--steps', '1']):
        with pytest.raises(SystemExit, match='no CUDA device'):
            profile_tool.main(argv)


def test_arguments_of_the_op_and_backbone_options(capsys):
    args = profile_tool.parse_args(['--op', '--op-angle', '22.5', '--backbone-sizes', '800x960'])
    assert (args.op_angle, args.op_shape, args.op_passes, args.backbone_sizes) == (22.5, [64, 384, 56, 31], ['fwd'],
                                                                                   [(800, 960)])
    for bad, message in ((['--backbone-sizes', '800'], 'HEIGHTxWIDTH'), (['--op-angle', 'x'], "degrees or 'mixed8'")):
        with pytest.raises(SystemExit):
            profile_tool.parse_args(bad)
        assert message in capsys.readouterr().err


def test_paths_of_a_classifier(capsys):
    """--paths lists the T-1D++ classifier's oriented convolutions, stage by stage (on the CPU every
    path is the CPU's)."""
    if profile_tool.torch.cuda.is_available():
        pytest.skip('a GPU is present: the GPU tests list real paths')
    text = profile_tool.main(['--paths', '--variants', '1dpp', '--modes', 'fp32', '--batch-size', '1',
                              '--img-size', '32'])
    assert '## ConvNeXt-T-1D++ (mmo1d), fp32' in text and text in capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith('| 1 x ')]
    # The stem's two stride-2 calls, then the 1xK1 on C and the 1xK2 on 4C of each stage's blocks.
    assert [(r.split(' | ')[2], r.split(' | ')[5]) for r in rows] == [('15', '1'), ('15', '1')] + [
        (k, str(d)) for d in (3, 3, 9, 3) for k in ('15', '31')]
    assert all(r.endswith('| cpu | cpu | cpu |') for r in rows)


def test_depthwise_layout_is_restored():
    conv = profile_tool.backbones.DepthwiseConv2d
    auto = conv.computes_in_nchw
    with pytest.raises(RuntimeError):
        with profile_tool.backbones.depthwise_layout('2dpp-nhwc'):
            assert conv.computes_in_nchw(None, None) is False
            raise RuntimeError('a failed step')
    assert conv.computes_in_nchw is auto


def test_ncu_sass_page(tmp_path):
    path = tmp_path / 'k.csv'
    with open(path, 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(['Kernel Name', 'void k()'])
        w.writerow(['Address', 'Source', 'Warp Stall Sampling (All Samples)', 'Instructions Executed'])
        for i, (src, executed, samples) in enumerate([('LDG', 2, 9), ('FFMA', 8, 1), ('FFMA', 8, 1), ('EXIT', 2, 0)]):
            w.writerow([hex(i), src, samples, executed])
    out = profile_tool.main(['--ncu-sass', str(path), '--top', '1']).splitlines()
    assert out[:2] == ['void k()', '20 warp instructions executed, 11 stall samples']
    assert out[4].split()[:4] == ['1-2', '2', '8', '80.0%'] and out[-1].split()[:3] == ['0', '9', 'LDG']


@pytest.mark.parametrize('archs, variants, device, name', [
    (['tiny'], ['2d', '1d', '1dpp', '2dpp'], 'NVIDIA H100 80GB HBM3', 'profile_tiny_h100'),
    (['tiny', 'base'], ['1d', '1d-la'], 'NVIDIA H200', 'profile_tiny_base_la_h200'),
])
def test_results_name(archs, variants, device, name):
    """The names benchmarks/README.md indexes (profile_tiny_h100.md)."""
    assert profile_tool.results_name(archs, variants, device) == name
