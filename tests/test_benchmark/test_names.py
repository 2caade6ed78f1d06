"""mmo1d.benchmark.names: the machine tags of the device names torch reports, and the results files' names
as benchmarks/README.md indexes them."""
import pytest

from mmo1d.benchmark.classifiers import display_name
from mmo1d.benchmark.names import check_part, machine_tag, model_size, results_stem


@pytest.mark.parametrize('device, gpus, tag', [
    ('NVIDIA H100 80GB HBM3', 1, 'h100'),
    ('NVIDIA H200', 1, 'h200'),
    ('NVIDIA H200', 4, 'h200x4'),
    ('NVIDIA H100 80GB HBM3', 2, 'h100x2'),
    ('NVIDIA A100-SXM4-80GB', 1, 'a100'),
    ('NVIDIA A100-SXM4-40GB MIG 1g.5gb', 1, 'a100'),
    ('NVIDIA H100 PCIe', 1, 'h100'),
    ('NVIDIA GeForce RTX 4090', 1, 'rtx4090'),
    ('NVIDIA GeForce RTX 3090 Ti', 1, 'rtx3090ti'),
    ('NVIDIA RTX A6000', 1, 'rtxa6000'),
    ('Tesla V100-SXM2-16GB', 1, 'v100'),
    ('NVIDIA L40S', 1, 'l40s'),
    ('AMD Instinct MI300X', 1, 'mi300x'),
    ('cpu', 1, 'cpu'),
])
def test_machine_tag(device, gpus, tag):
    assert machine_tag(device, gpus) == tag


@pytest.mark.parametrize('device, gpus, message', [
    ('NVIDIA', 1, "no GPU model in the device name 'NVIDIA'"),
    ('', 1, 'no GPU model'),
    ('NVIDIA H200', 0, 'at least one GPU, got gpus=0'),
    ('cpu', 2, 'the CPU tag takes no GPU count'),
])
def test_machine_tag_refuses(device, gpus, message):
    with pytest.raises(ValueError, match=message):
        machine_tag(device, gpus)


def test_results_stem_matches_the_committed_names():
    assert results_stem('op', tag='h100') == 'op_h100'
    assert results_stem('op', 'pp_conv', tag='h100') == 'op_pp_conv_h100'
    assert results_stem('models', 'tiny', None, tag='h100') == 'models_tiny_h100'
    assert results_stem('models', 'tiny', 'la', tag='h200') == 'models_tiny_la_h200'
    assert results_stem('interp_speed', 'jitter0', '', tag='h200') == 'interp_speed_jitter0_h200'
    assert results_stem('scaling', 't1dpp', tag=machine_tag('NVIDIA H200', 4)) == 'scaling_t1dpp_h200x4'


@pytest.mark.parametrize('part', ['PP', 'pp-conv', 'a/b', '_x', ''])
def test_a_part_of_a_name_is_lowercase_letters_digits_underscores(part):
    with pytest.raises(ValueError, match='cannot be part of a results file name'):
        check_part(part)
    with pytest.raises(ValueError, match='cannot be part of a results file name'):
        results_stem('op', tag=part)
    with pytest.raises(ValueError, match='cannot be part of a results file name'):
        results_stem(part, tag='h100')


@pytest.mark.parametrize('arch,variant', [('tiny', '1dpp'), ('base', '2d'), ('tiny', '1dpp-la')])
def test_model_size_reads_the_classifiers_names(arch, variant):
    assert model_size(display_name(arch, variant)) == arch[0].upper()
    assert model_size(f'timm convnext_{arch}') == arch[0].upper()


def test_model_size_refuses_other_names():
    with pytest.raises(ValueError, match="unknown model name in the model benchmark: 'resnet50'"):
        model_size('resnet50')
