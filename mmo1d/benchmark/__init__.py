"""What the benchmark and profiling tools of ``tools/analysis_tools`` share. Import the submodules by name.

Timing (torch only): :mod:`~mmo1d.benchmark.timing` (every timing loop: CUDA events, wall clock, host time
per call, interleaved rounds, peak memory, copy bandwidth, CUDA graphs; the environment record of a results
file), :mod:`~mmo1d.benchmark.kernels` (GPU kernel time of a step from ``torch.profiler``). Names of the results
files: :mod:`~mmo1d.benchmark.names` (``<benchmark>[_<configuration>]_<machine tag>``, e.g. ``op_h100``).

The op benchmark (``benchmark_op.py``, torch only): :mod:`~mmo1d.benchmark.op_inputs` (tensors, angles,
timed steps), :mod:`~mmo1d.benchmark.op_baselines` with :mod:`~mmo1d.benchmark.op_tables` and
:mod:`~mmo1d.benchmark.cpu_tables` (against PyTorch's convolutions, GPU and CPU),
:mod:`~mmo1d.benchmark.op_interp` (roundings against truncation), :mod:`~mmo1d.benchmark.op_passes` (each
pass alone), :mod:`~mmo1d.benchmark.op_host` (host time per call), :mod:`~mmo1d.benchmark.op_builds` (two
builds alternated).

The model benchmark (``benchmark_model.py``): :mod:`~mmo1d.benchmark.model_tables` (its markdown and the
README's speed table), :mod:`~mmo1d.benchmark.model_builds` (two builds' runs side by side).

Profiling (``profile_model.py``): :mod:`~mmo1d.benchmark.backbones` (the T backbones at detection sizes),
:mod:`~mmo1d.benchmark.sass_regions` (an ncu SASS page by region).

Models (mmengine): :mod:`~mmo1d.benchmark.classifiers` (the classifiers of ``configs/mmpretrain``), and the
modules of the downstream and scaling runs (:mod:`~mmo1d.benchmark.downstream_configs` and the others named
``downstream*``).
"""
