"""mmo1d.benchmark.kernels: the kernel time of a step from profiler events (device events only, per step,
largest first), the fallback to the old attribute name, and the real profiler's events."""
from types import SimpleNamespace

import pytest
import torch

from mmo1d.benchmark.kernels import device_self_us, kernel_summary, profile_kernels, short_kernel_name

CUDA, CPU = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU


def event(name, us, count, device_type=CUDA, attr='self_device_time_total'):
    return SimpleNamespace(key=name, count=count, device_type=device_type, **{attr: us})


def test_kernel_summary_sums_device_events_per_step():
    events = [event('gemm', 3000.0, 4), event('aten::mm', 9e6, 4, device_type=CPU), event('ln_fwd', 1000.0, 8),
              event('Memset (Device)', 500.0, 2), event('dwconv', 4500.0, 4)]
    out = kernel_summary(events, steps=2, top=3)
    # (3 + 1 + 0.5 + 4.5) ms over 2 steps; the CPU op's time does not count.
    assert out['kernel_ms'] == pytest.approx(4.5)
    assert out['kernel_steps'] == 2
    assert out['top_kernels'] == [{'name': 'dwconv', 'total_ms': 4.5, 'count': 4},
                                  {'name': 'gemm', 'total_ms': 3.0, 'count': 4},
                                  {'name': 'ln_fwd', 'total_ms': 1.0, 'count': 8}]


def test_own_kernels_are_all_of_this_projects_kernels():
    events = [event('void mmo1d::cuda::vec_wgrad_nhwc_kernel<float, 7, 1, true>(int)', 200.0, 2),
              event('gemm', 3000.0, 4), event('void mmo1d::cuda::win_gather_nhwc_kernel<float>(int)', 900.0, 4),
              event('void mmo1d::layer_norm_kernel<float>(int)', 100.0, 2)]
    out = kernel_summary(events, steps=2, top=1)
    assert [k['name'] for k in out['top_kernels']] == ['gemm']
    # Every own kernel, largest first, however few of them the top list holds.
    assert out['own_kernels'] == [
        {'name': 'void mmo1d::cuda::win_gather_nhwc_kernel<float>(int)', 'total_ms': 0.9, 'count': 4},
        {'name': 'void mmo1d::cuda::vec_wgrad_nhwc_kernel<float, 7, 1, true>(int)', 'total_ms': 0.2, 'count': 2},
        {'name': 'void mmo1d::layer_norm_kernel<float>(int)', 'total_ms': 0.1, 'count': 2}]
    assert out['own_kernel_ms'] == pytest.approx(0.6)


@pytest.mark.parametrize('name, short', [
    ('void mmo1d::cuda::vec_wgrad_nhwc_kernel<c10::BFloat16, 7, 1, true>(mmo1d::cuda::VecWgradParams<c10::BFloat16>)',
     'vec_wgrad_nhwc_kernel<BFloat16, 7, 1, true>'),
    ('void mmo1d::(anonymous namespace)::gelu_bias_rows_kernel<c10::Half, 8>(c10::Half const*, float)',
     'gelu_bias_rows_kernel<Half, 8>'),
    ('void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float)',
     'at::native::vectorized_layer_norm_kernel<float, float>'),
    ('Memset (Device)', 'Memset (Device)'),
    ('dgrad2d_c1_k1_nhwc_specialized', 'dgrad2d_c1_k1_nhwc_specialized'),
])
def test_short_kernel_names(name, short):
    assert short_kernel_name(name) == short


def test_old_attribute_name_is_read():
    old = event('k', 2500.0, 1, attr='self_cuda_time_total')
    assert device_self_us(old) == 2500.0
    assert device_self_us(event('k', 7.0, 1)) == 7.0
    assert kernel_summary([old], steps=1)['kernel_ms'] == pytest.approx(2.5)


def test_no_kernel_and_bad_steps_are_errors():
    with pytest.raises(RuntimeError, match='recorded no CUDA kernels'):
        kernel_summary([event('aten::add', 10.0, 1, device_type=CPU)], steps=1)
    with pytest.raises(ValueError, match='steps must be >= 1'):
        kernel_summary([event('k', 1.0, 1)], steps=0)


def test_events_of_the_installed_profiler_have_the_fields_read():
    """The attributes read exist on this torch's averaged events: a CPU-only profile has no device
    events (so no kernel time), and is read without an AttributeError."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.ones(8).add_(1)
    events = prof.key_averages()
    assert len(events) > 0
    assert all(isinstance(device_self_us(evt), float) and evt.device_type == CPU for evt in events)
    with pytest.raises(RuntimeError, match='recorded no CUDA kernels'):
        kernel_summary(events, steps=1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')
def test_profile_kernels_on_the_gpu():
    a = torch.randn(512, 512, device='cuda')
    out = profile_kernels(lambda: a @ a, steps=3)
    assert out['kernel_ms'] > 0 and out['kernel_steps'] == 3
    top = out['top_kernels'][0]
    assert top['count'] == 3 and top['total_ms'] > 0
    assert out['own_kernels'] == []  # a matrix product launches none of this project's kernels
