"""demo/image_demo.py paints each toolbox's prediction of demo/demo.jpg into a PNG, on the CPU."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import cv2
import numpy as np
import pytest
import torch

from .utils import IMAGE, REPO

DEMO_SCRIPT = REPO / 'demo' / 'image_demo.py'


@pytest.fixture(scope='module')
def demo() -> ModuleType:
    """The script as a module: the painting tests call its ``main(argv)`` in this process (the
    command line itself runs in the test without a display)."""
    spec = importlib.util.spec_from_file_location('image_demo', DEMO_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('task, extra', [
    ('seg', ['--opacity', '1.0']),
    # The 1-iteration detector's scores are low: draw every box.
    ('det', ['--score-thr', '0']),
    ('cls', []),
])
def test_demo_writes_the_painted_prediction(task: str, extra: list, trained: dict, tmp_path: Path, demo: ModuleType,
                                            capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    run = trained[task]
    out = tmp_path / f'{task}.png'
    monkeypatch.chdir(run['cwd'])
    demo.main([str(IMAGE), str(run['config']), str(run['checkpoint']), '--out-file', str(out), '--device', 'cpu',
               *extra])
    assert f'painted prediction written to {out}' in capsys.readouterr().out
    painted, image = cv2.imread(str(out)), cv2.imread(str(IMAGE))
    assert painted is not None and painted.shape == image.shape
    if task == 'seg':
        # Opaque masks: every pixel has the colour of a class in the checkpoint's dataset_meta.
        palette = torch.load(run['checkpoint'], weights_only=False)['meta']['dataset_meta']['palette']
        assert {tuple(c) for c in painted[..., ::-1].reshape(-1, 3).tolist()} <= {tuple(c) for c in palette}
    # Something was painted over the image (masks, boxes, or the class label).
    changed = np.abs(painted.astype(np.int16) - image.astype(np.int16)).max(axis=2) > 40
    assert changed.mean() > (0.5 if task == 'seg' else 0.001)


def test_demo_without_a_display_or_options_says_where_the_result_went(trained: dict, tmp_path: Path) -> None:
    """No --out-file, no --device, no DISPLAY: the device that exists, the default file, both said."""
    run = trained['cls']
    env = {k: v for k, v in os.environ.items() if k not in ('DISPLAY', 'WAYLAND_DISPLAY')}
    proc = subprocess.run([sys.executable, str(DEMO_SCRIPT), str(IMAGE), str(run['config']), str(run['checkpoint'])],
                          cwd=tmp_path, env={**env, 'OMP_NUM_THREADS': '1', 'PYTHONWARNINGS': 'ignore'},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    out = Path('outputs') / 'vis' / 'demo.png'
    device = 'cuda:0' if torch.cuda.is_available() else 'cpu'
    assert f'no display (DISPLAY is not set): the painted prediction goes to {out}' in proc.stdout
    assert f'running mmpretrain on {device}' in proc.stdout
    assert f'painted prediction written to {out}' in proc.stdout
    painted = cv2.imread(str(tmp_path / out))
    assert painted is not None and painted.shape == cv2.imread(str(IMAGE)).shape


def test_device_is_the_one_that_exists(demo: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    assert demo.pick_device(None) == 'cpu'
    assert demo.pick_device('cpu') == 'cpu'
    with pytest.raises(RuntimeError, match='--device cuda:0: no GPU is visible'):
        demo.pick_device('cuda:0')
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    assert demo.pick_device(None) == 'cuda:0'
    assert demo.pick_device('cuda:1') == 'cuda:1'


def test_demo_names_bad_inputs(demo: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match='config file not found'):
        demo.main([str(IMAGE), str(tmp_path / 'missing.py'), str(IMAGE)])
    with pytest.raises(FileNotFoundError, match='image file not found'):
        demo.main([str(tmp_path / 'missing.jpg'), str(tmp_path / 'missing.py'), str(IMAGE)])
    config = tmp_path / 'mmengine_only.py'
    config.write_text("default_scope = 'mmengine'\n")
    with pytest.raises(ValueError, match="default_scope is 'mmengine'"):
        demo.main([str(IMAGE), str(config), str(IMAGE)])
