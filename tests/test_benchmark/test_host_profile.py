"""Host time of a training step by phase (``benchmark_downstream.py --host-profile``): the phases of a
real ``train_step`` under mmengine's optim wrapper, counted against the model's own structure."""
import pytest
import torch
from torch import nn

from mmo1d.benchmark.host_profile import host_summary, host_tables, labelled_phases, profile_host, short_name

mmengine_model = pytest.importorskip('mmengine.model')
mmengine_optim = pytest.importorskip('mmengine.optim')


class Backbone(nn.Module):

    def __init__(self, depth: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class Net(mmengine_model.BaseModel):
    """A model whose step mmengine runs as it runs a detector's: ``train_step`` -> ``loss``."""

    def __init__(self, depth: int) -> None:
        super().__init__()
        self.backbone = Backbone(depth)
        self.head = nn.Linear(8, 1)

    def forward(self, inputs, data_samples=None, mode='loss'):
        return self.loss(inputs)

    def loss(self, inputs):
        return dict(loss=self.head(self.backbone(inputs)).square().mean())


def _setup(depth=3):
    model = Net(depth)
    wrapper = mmengine_optim.OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1))
    data = dict(inputs=torch.randn(4, 8))
    return model, wrapper, lambda: model.train_step(data, wrapper)


def test_phases_and_per_step_counts_follow_the_model():
    depth, steps = 3, 2
    model, wrapper, step = _setup(depth)
    step()
    out = profile_host(step, model, wrapper, steps)
    phases = out['phases_ms']
    for label in ('preprocess', 'forward:backbone', 'forward:head', 'forward:other', 'backward', 'step',
                  'zero_grad'):
        assert label in phases and phases[label] >= 0.0, label
    assert list(phases)[0] == 'preprocess'
    assert set(out['profiled_phases_ms']) == set(phases)
    assert out['host_steps'] == steps and out['wall_ms'] > 0
    ops = {it['name']: it for it in out['backbone_ops']}
    # The backbone calls one linear and one relu per layer, per step.
    assert ops['aten::linear']['calls'] == depth and ops['aten::relu']['calls'] == depth
    assert ops['(python)']['calls'] == 1
    nodes = {it['name']: it for it in out['backward_nodes']}
    assert nodes['AddmmBackward0']['calls'] == depth + 1
    # Weight and bias of each of the depth + 1 Linear layers.
    assert nodes['AccumulateGrad']['calls'] == 2 * (depth + 1)


def test_labels_are_removed_on_exit_even_after_an_error():
    model, wrapper, _ = _setup()
    with pytest.raises(RuntimeError, match='inside'):
        with labelled_phases(model, wrapper):
            assert 'forward' in vars(model.backbone) and 'step' in vars(wrapper)
            raise RuntimeError('inside')
    assert 'forward' not in vars(model.backbone) and 'loss' not in vars(model)
    assert not {'backward', 'step', 'zero_grad'} & set(vars(wrapper))


def test_unlabelled_events_and_bad_step_counts_are_refused():
    with pytest.raises(ValueError, match='labelled'):
        host_summary([], steps=1)
    with pytest.raises(ValueError, match='steps'):
        host_summary([], steps=0)


def test_short_names_and_table():
    assert short_name('torch::autograd::CppNode<mmo1d::(anonymous namespace)::OrientedDWConv1dFunction>') == \
        'OrientedDWConv1dFunction'
    assert short_name('torch::autograd::AccumulateGrad') == 'AccumulateGrad'
    assert short_name('aten::linear') == 'aten::linear'
    host = dict(phases_ms={'preprocess': 1.0, 'backward': 2.5}, backbone_ops=[], backward_nodes=[], host_steps=3,
                wall_ms=4.0)
    lines = host_tables([dict(name='seg-t-1d', host=host), dict(name='seg-x')])
    assert '| seg-t-1d | 1.0 | 2.5 | 3.5 | 4.0 |' in lines
    assert not any('seg-x' in line for line in lines)
