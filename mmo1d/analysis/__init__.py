"""Analysis of the oriented 1D kernel models (Kirchmeyer & Deng, ICCV 2023) and of their benchmarks.

- :mod:`.erf`: effective receptive fields, computed as RepLKNet does, and their heatmaps;
- :mod:`.sparsity`: density of the depthwise kernels of checkpoints, per block and stage;
- :mod:`.footprint`: where the taps of an oriented kernel land, with truncation and floor;
- :mod:`.plots`: figures of the op and model benchmark results;
- :mod:`.angles`: learned angles of the oriented kernels, their change per layer and histogram.

The submodules import matplotlib (and :mod:`.erf` mmengine); import them by name
(``mmo1d.analysis.erf``) so that ``import mmo1d.analysis`` itself needs nothing more.
"""
