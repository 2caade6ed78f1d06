"""mmo1d.benchmark.gpu_waits: the device's idle gaps charged to the phase that ended them, against
timelines whose answer is known; and host_profile's reading of profiler events into it."""
from types import SimpleNamespace

import pytest
import torch

from mmo1d.benchmark.gpu_waits import OUTSIDE, busy_intervals, gpu_waits
from mmo1d.benchmark.host_profile import LABEL, device_waits, profile_host, waits_table

CPU, CUDA = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA


def test_busy_intervals_merge_overlaps_and_touching_spans():
    assert busy_intervals([(5, 7), (0, 2), (1, 3), (3, 4), (9, 10)]) == [(0, 4), (5, 7), (9, 10)]
    assert busy_intervals([]) == []


def test_gaps_go_to_the_innermost_phase_holding_the_next_work():
    # Host: forward [0, 50) holding forward:backbone [5, 30); backward [50, 80); nothing after 80.
    phases = [('forward', 0, 50), ('forward:backbone', 5, 30), ('backward', 50, 80)]
    # Device: work at [0, 10), [12, 20) (gap 2 ending in the backbone), [35, 40) (gap 15 ending in the
    # forward outside its children), [41, 60) (gap 1, forward), [70, 75) (gap 10, backward), [90, 95)
    # (gap 15 outside every phase).
    device = [(12, 20), (0, 10), (35, 40), (41, 60), (70, 75), (90, 95), (1, 4)]
    out = gpu_waits(device, phases, steps=1)
    assert out['idle_ms'] == {'forward:other': 0.016, OUTSIDE: 0.015, 'backward': 0.01, 'forward:backbone': 0.002}
    assert out['busy_ms'] == pytest.approx((10 + 8 + 5 + 19 + 5 + 5) / 1e3)
    assert out['span_ms'] == 0.095 and out['wait_steps'] == 1
    # Per step: the same timeline as two steps halves every figure.
    assert gpu_waits(device, phases, steps=2)['idle_ms']['backward'] == 0.005


def test_no_device_work_and_bad_step_counts_are_refused():
    with pytest.raises(ValueError, match='no device work'):
        gpu_waits([], [('forward', 0, 1)], steps=1)
    with pytest.raises(ValueError, match='steps'):
        gpu_waits([(0, 1)], [], steps=0)


def _event(name, start, end, device_type=CUDA, activity_type='kernel'):
    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end), device_type=device_type,
                           activity_type=activity_type)


def test_device_waits_reads_labels_and_device_work_but_not_annotations():
    events = [_event(LABEL + 'backward', 0, 100, CPU, 'cpu_op'), _event('aten::mm', 10, 20, CPU, 'cpu_op'),
              _event('gemm', 0, 10), _event('memset', 30, 40, activity_type='gpu_memset'),
              # the profiler's copy of a label on the device's timeline would hide the gap
              _event(LABEL + 'backward', 0, 100, activity_type='gpu_user_annotation')]
    out = device_waits(events, steps=1)
    assert out['idle_ms'] == {'backward': 0.02} and out['busy_ms'] == 0.02


def test_waits_table():
    waits = dict(idle_ms={'backward': 2.0, 'forward:backbone': 1.5}, busy_ms=40.0, span_ms=45.0, wait_steps=5)
    lines = waits_table([dict(name='seg-t-1d', host=dict(gpu_waits=waits)), dict(name='seg-x', host={})])
    assert '| seg-t-1d | 2.0 | 1.5 | 3.5 | 40.0 | 45.0 |' in lines
    assert not any('seg-x' in line for line in lines)
    assert waits_table([dict(name='seg-x', host={})]) == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')
def test_waits_of_a_real_step_on_the_gpu():
    """profile_host's third pass on a CUDA step under mmengine's optim wrapper: its device work and gaps
    fill the span from the first work to the last."""
    mmengine_model = pytest.importorskip('mmengine.model')
    mmengine_optim = pytest.importorskip('mmengine.optim')

    class Net(mmengine_model.BaseModel):

        def __init__(self):
            super().__init__()
            self.backbone = torch.nn.Sequential(*(torch.nn.Linear(64, 64) for _ in range(4)))

        def forward(self, inputs, data_samples=None, mode='loss'):
            return self.loss(inputs)

        def loss(self, inputs):
            return dict(loss=self.backbone(inputs).square().mean())

    model = Net().cuda()
    wrapper = mmengine_optim.OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1))
    data = dict(inputs=torch.randn(32, 64, device='cuda'))

    def step():
        model.train_step(data, wrapper)

    step()
    out = profile_host(step, model, wrapper, 2, sync=torch.cuda.synchronize, waits=True)['gpu_waits']
    assert out['busy_ms'] > 0 and out['wait_steps'] == 2
    # Every figure is rounded to the microsecond on its own: the sum may miss the span by half a
    # microsecond per rounded term.
    terms = len(out['idle_ms']) + 2
    assert out['span_ms'] == pytest.approx(out['busy_ms'] + sum(out['idle_ms'].values()), abs=5e-4 * terms + 1e-9)
    assert set(out['idle_ms']) <= {'preprocess', 'forward:backbone', 'forward:other', 'backward', 'step',
                                    'zero_grad', OUTSIDE}
