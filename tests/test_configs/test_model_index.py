"""model-index.yml and configs/*/metafile.yml: complete, readable, and with the paper's numbers.

The expected numbers are parsed from the spec (``../shared/spec/oriented1d.md``: its ImageNet table
and the "Reported:" line of its downstream section), never copied here, so these tests check the
metafiles (and the tables of the configs' READMEs) against an independent source.
"""
import re
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import torch
import yaml

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO.parent / 'shared' / 'spec' / 'oriented1d.md'
FOLDERS = ('mmpretrain', 'mmseg', 'mmdet')
# How the spec writes a variant, and mmo1d's name for it.
VARIANTS = {'1D': '1d', '1D++': '1dpp', '2D++': '2dpp', '2D': '2d'}
SPEC_VARIANT = r'(1D\+\+|2D\+\+|1D)'
# Where a folder's results live: (task, dataset) per metric name, as the toolboxes' metafiles say.
TASKS = {
    'mmpretrain': {'Top 1 Accuracy': ('Image Classification', 'ImageNet-1k')},
    'mmseg': {'mIoU(ms+flip)': ('Semantic Segmentation', 'ADE20K')},
    'mmdet': {'box AP': ('Object Detection', 'COCO'), 'mask AP': ('Instance Segmentation', 'COCO')},
}
Key = Tuple[str, str]  # ('T' or 'B', variant), e.g. ('T', '1dpp')


def _load_yaml(path: Path) -> dict:
    assert path.is_file(), f'{path.relative_to(REPO)} is missing'
    with open(path, encoding='utf-8') as f:
        return yaml.safe_load(f)


def _metafile(folder: str) -> dict:
    return _load_yaml(REPO / 'configs' / folder / 'metafile.yml')


def _config_key(config: str) -> Key:
    """(size, variant) from a config's file name; the config tests tie names to backbones."""
    match = re.search(r'oriented-convnext-(tiny|base|t|b)-(1dpp|2dpp|1d|2d)(?:-la)?_', config)
    assert match, f'no size and variant in the config name {config}'
    return match.group(1)[0].upper(), match.group(2)


def _learnable_angles(config: str) -> bool:
    """The "-la" configs: oriented kernels that learn their angles, not in the paper."""
    return '-la_' in config


def _spec_text() -> str:
    if not SPEC.is_file():
        pytest.skip('the paper\'s reference tables are not part of the checkout: the metafiles\' '
                    'metrics are checked against them in the project\'s CI')
    return SPEC.read_text(encoding='utf-8')


def _tables(text: str) -> List[List[Dict[str, str]]]:
    """Every markdown table of ``text``: a list of rows, each a dict from column header to cell."""
    tables, block = [], []
    for line in text.splitlines() + ['']:
        if line.startswith('|'):
            block.append([cell.strip() for cell in line.strip().strip('|').split('|')])
        elif block:
            header, _separator, *rows = block
            tables.append([dict(zip(header, row)) for row in rows])
            block = []
    return tables


def _spec_imagenet(text: str) -> Dict[Key, Dict[str, object]]:
    """The spec's table of params, FLOPs (224) and ImageNet top-1 (EMA) per classifier."""
    tables = [t for t in _tables(text) if t and 'ImageNet top-1 (EMA)' in t[0]]
    assert len(tables) == 1, 'the spec should have one table with an "ImageNet top-1 (EMA)" column'
    out = {}
    for row in tables[0]:
        match = re.fullmatch(r'ConvNeXt-([TB])(?: \((2D)\)|-' + SPEC_VARIANT + ')', row['model'])
        assert match, f"unexpected model name in the spec's ImageNet table: {row['model']!r}"
        key = match.group(1), VARIANTS[match.group(2) or match.group(3)]
        out[key] = {'Parameters': row['params'], 'FLOPs': row['FLOPs (224)'],
                    'Top 1 Accuracy': float(row['ImageNet top-1 (EMA)'])}
    return out


def _spec_downstream(text: str) -> Tuple[Dict[Key, float], Dict[Key, Tuple[float, float]]]:
    """ADE20K mIoU and COCO (box AP, mask AP) per backbone from the spec's "Reported:" line."""
    para = re.search(r'^Reported: (.*?)(?:\n\s*\n|\Z)', text, re.S | re.M)
    assert para, 'the spec has no "Reported:" paragraph with the downstream results'
    sentence = ' '.join(para.group(1).split())
    ade = re.search(r'ADE20K mIoU (.*?);', sentence)
    coco = re.search(r'COCO AP box/mask (.*)$', sentence)
    assert ade and coco, f'cannot read the ADE20K and COCO results from: {sentence}'
    miou, size = {}, None
    for letter, variant, value in re.findall(r'(?:([TB])-)?' + SPEC_VARIANT + r' (\d+\.\d+)', ade.group(1)):
        size = letter or size  # "T-1D 45.2 / 1D++ 47.4": the size carries over
        miou[size, VARIANTS[variant]] = float(value)
    ap = {(letter, VARIANTS[variant]): (float(box), float(mask)) for letter, variant, box, mask in
          re.findall(r'([TB])-' + SPEC_VARIANT + r' (\d+\.\d+)/(\d+\.\d+)', coco.group(1))}
    assert miou and ap, f'no results found in: {sentence}'
    return miou, ap


def _expected(folder: str, key: Key, text: str) -> Dict[str, object]:
    """The metrics (and, for classifiers, params and FLOPs) the spec gives for one config."""
    if folder == 'mmpretrain':
        return _spec_imagenet(text)[key]
    miou, ap = _spec_downstream(text)
    if folder == 'mmseg':
        return {'mIoU(ms+flip)': miou[key]} if key in miou else {}
    return {'box AP': ap[key][0], 'mask AP': ap[key][1]} if key in ap else {}


def _stated(folder: str, model: dict) -> Dict[str, object]:
    """The metrics a metafile entry states, each checked to sit under its task and dataset."""
    stated = {k: v for k, v in model.get('Metadata', {}).items() if k in ('Parameters', 'FLOPs')}
    for result in model.get('Results') or []:
        for metric, value in result['Metrics'].items():
            assert TASKS[folder].get(metric) == (result['Task'], result['Dataset']), (model['Name'], result)
            assert metric not in stated, f"{model['Name']}: {metric} given twice"
            stated[metric] = value
    return stated


def test_model_index_imports_every_metafile() -> None:
    index = _load_yaml(REPO / 'model-index.yml')
    assert sorted(index['Import']) == sorted(f'configs/{folder}/metafile.yml' for folder in FOLDERS)
    for path in index['Import']:
        assert (REPO / path).is_file(), f'model-index.yml imports {path}, which does not exist'


@pytest.mark.parametrize('folder', FOLDERS)
def test_metafile_lists_every_config_once(folder: str) -> None:
    meta = _metafile(folder)
    collections = {c['Name']: c for c in meta['Collections']}
    configs = [m['Config'] for m in meta['Models']]
    on_disk = sorted(f'configs/{folder}/{p.name}' for p in (REPO / 'configs' / folder).glob('*.py'))
    assert sorted(configs) == on_disk, 'the metafile must list each config of the folder exactly once'
    for model in meta['Models']:
        assert model['Name'] == Path(model['Config']).stem
        assert model['In Collection'] in collections, model['Name']
    for collection in collections.values():
        assert collection['README'] == f'configs/{folder}/README.md'
        assert (REPO / collection['README']).is_file()
        assert collection['Paper']['Title'] == 'Convolutional Networks with Oriented 1D Kernels'


@pytest.mark.parametrize('folder', FOLDERS)
def test_metrics_equal_the_spec(folder: str) -> None:
    text = _spec_text()
    for model in _metafile(folder)['Models']:
        size, variant = _config_key(model['Config'])
        learnable = _learnable_angles(model['Config'])
        # The paper has no model with learnable angles: their entries state no number at all.
        expected = {} if learnable else _expected(folder, (size, variant), text)
        assert _stated(folder, model) == expected, model['Name']
        suffix = {'1d': '-1D', '1dpp': '-1D++', '2dpp': '-2D++', '2d': ''}[variant]
        assert model['Metadata']['Architecture'][0] == f'ConvNeXt-{size}{suffix}', model['Name']
        assert ('Learnable Angles' in model['Metadata']['Architecture']) == learnable, model['Name']


@pytest.mark.parametrize('folder', FOLDERS)
def test_readme_rows_repeat_the_metafile(folder: str) -> None:
    """Each config has one row in its README's tables, holding every number of its metafile entry."""
    readme = (REPO / 'configs' / folder / 'README.md').read_text(encoding='utf-8')
    for model in _metafile(folder)['Models']:
        rows = [line for line in readme.splitlines()
                if line.startswith('|') and f"(./{Path(model['Config']).name})" in line]
        assert len(rows) == 1, f"{model['Name']}: {len(rows)} README table rows link its config"
        cells = [cell.strip() for cell in rows[0].strip('|').split('|')]
        for metric, value in _stated(folder, model).items():
            assert str(value) in cells, f"{model['Name']}: {metric} {value} not in its README row"


@pytest.mark.parametrize('folder', FOLDERS)
def test_readme_links_and_paths_exist(folder: str) -> None:
    """Relative links and the repository paths the README names (commands, tests, results)."""
    readme = REPO / 'configs' / folder / 'README.md'
    text = readme.read_text(encoding='utf-8')
    links = re.findall(r'\]\(([^)]+)\)', text) + re.findall(r'href="([^"]+)"', text)
    links = [link.split('#')[0] for link in links if '://' not in link]
    paths = re.findall(r'(?<![\w./-])((?:tools|tests|configs|docs|benchmarks|mmo1d|\.dev_scripts)/[\w./-]*\w)',
                       text)
    assert links and paths
    missing = [link for link in links if not (readme.parent / link).exists()]
    missing += [path for path in paths if not (REPO / path).exists()]
    assert not missing, f'{readme.relative_to(REPO)} names paths that do not exist: {missing}'


@pytest.mark.parametrize('folder', FOLDERS)
def test_collection_metadata_matches_the_configs(folder: str) -> None:
    """Batch size and epochs of the collection against a config (the config tests check the rest)."""
    from mmengine.config import Config

    meta = _metafile(folder)
    model = meta['Models'][0]
    cfg = Config.fromfile(str(REPO / model['Config']))
    match = re.search(r'_(\d+)xb\d+', model['Config'])
    gpus = int(match.group(1)) if match else 8  # mmdet's names leave out its default, 8 GPUs x 2
    metadata = next(c for c in meta['Collections'] if c['Name'] == model['In Collection'])['Metadata']
    assert metadata['Batch Size'] == gpus * cfg.train_dataloader.batch_size
    if 'Epochs' in metadata:
        assert metadata['Epochs'] == cfg.train_cfg.max_epochs


def test_mmpretrain_model_hub_reads_the_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """mmpretrain's ModelHub (modelindex) lists the classifiers and builds one by name."""
    from mmpretrain import get_model, list_models
    from mmpretrain.apis import ModelHub

    ModelHub._register_mmpretrain_models()  # its own models first: that flag outlives this test
    monkeypatch.setattr(ModelHub, '_models_dict', dict(ModelHub._models_dict))
    ModelHub.register_model_index(REPO / 'model-index.yml', config_prefix=REPO)
    names = {m['Name'] for folder in FOLDERS for m in _metafile(folder)['Models']}
    assert names <= set(list_models('*oriented*'))
    classifiers = sorted(m['Name'] for m in _metafile('mmpretrain')['Models'])
    assert list_models('*oriented*', task='Image Classification') == classifiers
    name = 'oriented-convnext-tiny-1d_32xb128_in1k'

    def small() -> dict:  # get_model's overrides of the config's model, narrower for speed
        return dict(backbone=dict(arch=dict(_delete_=True, depths=[1, 1, 1, 1], channels=[16] * 4)),
                    head=dict(in_channels=16))

    model = get_model(name, **small())
    assert type(model.backbone).__name__ == 'OrientedConvNeXt' and model.backbone.variant == '1d'
    assert model.backbone.kernel_sizes == [31] * 4  # the config's ImageNet kernels
    with torch.no_grad():
        model.head.fc.bias.copy_(torch.arange(1000.))
    torch.save({'state_dict': model.state_dict()}, tmp_path / 'ckpt.pth')
    loaded = get_model(name, pretrained=str(tmp_path / 'ckpt.pth'), **small())
    assert torch.equal(loaded.head.fc.bias, torch.arange(1000.))
