"""Redraw the figures of committed benchmark results from their JSON.

Each op benchmark (``op_h100.json``, ``op_pp_conv_h100.json``, from ``benchmark_op.py``) and model
benchmark (``models_tiny_h100.json``, ``models_tiny_la_h200.json``, from ``benchmark_model.py``) gets its
figure next to it, same name, ``.png`` (:mod:`mmo1d.analysis.plots`): time per angle against the PyTorch
baselines, and classifier throughput against timm's ConvNeXt. The files are recognised by their content,
not their names. The benchmark tools draw them too after each run; this script redraws them without a
GPU. JSON files of other formats are skipped.

Example::

    python tools/analysis_tools/plot_benchmarks.py                      # every JSON in benchmarks/results
    python tools/analysis_tools/plot_benchmarks.py benchmarks/results/models_tiny_h100.json
"""
import argparse
import glob
import os.path as osp
from typing import List, Optional

from mmo1d.analysis.plots import plot_benchmark_file
from mmo1d.utils.quiet import quiet_upstream

DEFAULT_DIR = 'benchmarks/results'


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('results', nargs='*', help=f'result JSON files (default: every *.json in {DEFAULT_DIR})')
    parser.add_argument('--dpi', type=int, default=100)
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> List[str]:
    args = parse_args(argv)
    paths = args.results or sorted(glob.glob(osp.join(DEFAULT_DIR, '*.json')))
    if not paths:
        raise FileNotFoundError(f'no result JSON given and none in {DEFAULT_DIR}')
    written = []
    for path in paths:
        png = plot_benchmark_file(path, args.dpi)
        print(f'{path}: ' + (f'wrote {png}' if png else 'not an op or model benchmark, skipped'))
        if png:
            written.append(png)
    return written


if __name__ == '__main__':
    quiet_upstream()
    main()
