"""The kernel path of each oriented convolution of a model: every call of the op recorded, as the
architecture defines them, and the paths the dispatcher names for them."""
import pytest
import torch

from mmo1d.benchmark.model_paths import PASSES, layer_paths, paths_table, short_kernel_name
from mmo1d.models import OrientedConvNeXt
from mmo1d.ops import oriented_dwconv1d_paths

DEPTHS, CHANNELS = [1, 1, 2, 1], [8, 16, 16, 24]


def expected_calls(variant, size):
    """(C, H, K, stride) -> calls, from the architecture: the 1D stem's two stride-2 convolutions at 64
    channels (K=15 for 1D++, 31 for 1D), then per block the oriented 1xK1 on C channels and, in 1D++,
    the 1xK2 on 4C, each stage at half the size of the one before."""
    k1, k2 = (15, 31) if variant == '1dpp' else (31, None)
    calls = {(64, size, k1, 2): 1, (64, size // 2, k1, 2): 1}
    h = size // 4
    for depth, c in zip(DEPTHS, CHANNELS):
        for key in [(c, h, k1, 1)] + ([(4 * c, h, k2, 1)] if k2 else []):
            calls[key] = calls.get(key, 0) + depth
        h //= 2
    return calls


@pytest.mark.parametrize('variant,rounding', [('1dpp', 'trunc'), ('1d', 'bilinear')])
def test_every_call_of_the_architecture_is_listed(variant, rounding):
    model = OrientedConvNeXt(arch=dict(depths=DEPTHS, channels=CHANNELS), variant=variant, rounding=rounding,
                             learnable_angles=rounding == 'bilinear').eval()
    rows = layer_paths(model, torch.randn(2, 3, 64, 64))
    got = {(r['shape'][1], r['shape'][2], r['k'], r['stride']): r['count'] for r in rows}
    assert got == expected_calls(variant, 64)
    assert all(r['rounding'] == rounding and r['dtype'] == 'float32' for r in rows)
    assert all(r[p] == 'cpu' for r in rows for p in PASSES)
    table = paths_table(rows)
    assert len(table) == 2 + len(rows) and table[2].startswith('| 2 x 64 x 64 x 64 | float32')


def test_rows_as_the_dispatcher_receives_the_calls_under_autocast():
    model = OrientedConvNeXt(arch=dict(depths=DEPTHS, channels=CHANNELS), variant='1dpp').eval()
    model = model.to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 64, 64).contiguous(memory_format=torch.channels_last)
    rows = layer_paths(model, x, torch.bfloat16)
    assert {(r['dtype'], r['layout']) for r in rows} == {('bfloat16', 'channels_last')}


def test_kernel_names_and_no_kernels_on_the_cpu():
    assert short_kernel_name('void mmo1d::cuda::win_gather_nhwc_kernel<c10::BFloat16, 4, 1, false, true, true>'
                             '(mmo1d::cuda::WinSmallParams<c10::BFloat16>)') == (
                                 'win_gather_nhwc_kernel<BFloat16, 4, 1, false, true, true>')
    assert short_kernel_name('void mmo1d::(anonymous namespace)::gelu_bias_rows_kernel<c10::Half>(c10::Half*, int)'
                             ) == 'gelu_bias_rows_kernel<Half>'
    assert short_kernel_name('void mmo1d::cuda::wgrad_reduce_kernel(float const*, float*)') == 'wgrad_reduce_kernel'
    model = OrientedConvNeXt(arch=dict(depths=DEPTHS, channels=CHANNELS), variant='1dpp').eval()
    with pytest.raises(ValueError, match='on a GPU'):
        layer_paths(model, torch.randn(1, 3, 32, 32), kernels=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')
def test_the_paths_are_the_dispatchers_and_their_kernels_run():
    """Every path is one of the compiled families, and each pass launches a kernel of its family (the
    window gather's path runs the window kernel)."""
    model = OrientedConvNeXt(arch=dict(depths=DEPTHS, channels=CHANNELS), variant='1dpp').cuda().eval()
    model = model.to(memory_format=torch.channels_last)
    x = torch.randn(4, 3, 128, 128, device='cuda').contiguous(memory_format=torch.channels_last)
    rows = layer_paths(model, x, torch.float16, kernels=True)
    assert sum(r['count'] for r in rows) == sum(expected_calls('1dpp', 128).values())
    names = set(oriented_dwconv1d_paths())
    assert all(r[p] in names and r[f'{p} kernels'] != '-' for r in rows for p in PASSES)
    window = [r for r in rows if r['forward'] in ('win_gather', 'win_gather_ring')]
    assert window and all('win_gather_nhwc_kernel<Half' in r['forward kernels'] for r in window)
    assert len(paths_table(rows)[0].split(' | ')) == 6 + 2 * len(PASSES)
