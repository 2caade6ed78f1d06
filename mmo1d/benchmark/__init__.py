"""What the benchmark and profiling scripts of ``tools/analysis_tools`` share.

:mod:`mmo1d.benchmark.timing` (torch only): CUDA-event timing in interleaved rounds, peak memory,
copy bandwidth, a step captured in a CUDA graph, and the environment record of a results file.
:mod:`mmo1d.benchmark.kernels` (torch only): the GPU kernel time of a step from ``torch.profiler``.
:mod:`mmo1d.benchmark.classifiers` (mmengine): the classifiers of ``configs/mmpretrain`` built from
their configs.
:mod:`mmo1d.benchmark.downstream_configs` (mmengine): the stock and our downstream configs, resolved
and pointed at the demo data; :mod:`mmo1d.benchmark.downstream`: their training iterations timed
with mmengine's Runner. Import the submodules by name.
"""
