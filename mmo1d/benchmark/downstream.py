"""Training iterations of one downstream config, timed with the toolbox's own machinery.

mmengine's ``Runner`` builds the model (SyncBN reverted on one process, as ``tools/train.py``
does), the train dataloader and the config's optim wrapper (``AmpOptimWrapper``: float16 autocast
unless the config names another dtype, dynamic loss scale). Each iteration is what mmengine's
train loop runs, ``model.train_step(data, optim_wrapper)`` (data preprocessing, forward, losses,
backward, optimizer step), timed with ``perf_counter`` between two ``torch.cuda.synchronize()``;
fetching the batch from the loader is timed apart. The parameter schedulers are not run: the
learning rate stays at its base value, which does not change the work of an iteration. Optionally a
few more iterations run under ``torch.profiler`` (:mod:`mmo1d.benchmark.kernels`): the GPU kernel
time of an iteration against its wall clock tells whether the step waits on the GPU or on the host.
"""
import math
import statistics
import time
from typing import Any, Dict, Iterable, List, Optional

import torch
from mmengine.config import Config
from torch import nn

from mmo1d.benchmark.downstream_configs import DownstreamRun, load_config, prepare_config
from mmo1d.benchmark.host_profile import profile_host
from mmo1d.benchmark.kernels import profile_kernels
from mmo1d.utils.tool_utils import build_runner


def backbone_info(backbone: nn.Module, cfg: Config) -> Dict[str, Any]:
    """The config's backbone type, the built class, its stage depths and widths, and its size."""
    cls = type(backbone)
    return dict(
        type=cfg.model.backbone.type,
        cls=f'{cls.__module__}.{cls.__qualname__}',
        depths=[int(d) for d in getattr(backbone, 'depths', [])],
        channels=[int(c) for c in getattr(backbone, 'channels', [])],
        variant=getattr(backbone, 'variant', None),
        params=sum(p.numel() for p in backbone.parameters()),
    )


def _image_sizes(data: Dict) -> List[List[int]]:
    return [list(x.shape[-2:]) for x in data['inputs']]


def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def time_training(model: nn.Module, batches: Iterable[Dict], optim_wrapper: Any, warmup: int, iters: int,
                  max_time: Optional[float] = None, kernel_steps: int = 0, host_steps: int = 0) -> Dict[str, Any]:
    """Run ``warmup`` untimed and up to ``iters`` timed training iterations.

    Args:
        model: the runner's model, in training mode.
        batches: the train dataloader (an infinite sampler).
        optim_wrapper: the config's optim wrapper.
        warmup: untimed iterations first.
        iters: timed iterations.
        max_time: stop the timed iterations once they took this many seconds in all (None: no limit).
        kernel_steps: iterations run under ``torch.profiler`` after the timed ones (CUDA only; 0: none).
        host_steps: iterations run after those with their phases' host time profiled
            (:func:`~mmo1d.benchmark.host_profile.profile_host`; 0: none), and on CUDA as many more
            with the device's activity (where the GPU waits for the host).

    Returns:
        Step times (seconds), their median, the loader's times, the images' sizes, the peak memory of
        the timed iterations and of the whole run (CUDA), the last loss and the loss scale; with
        ``kernel_steps``, the :func:`~mmo1d.benchmark.kernels.kernel_summary` of the profiled iterations,
        with ``host_steps`` the :func:`~mmo1d.benchmark.host_profile.profile_host` result as ``host``.
    """
    cuda = next(model.parameters()).is_cuda
    scaler = getattr(optim_wrapper, 'loss_scaler', None)
    steps: List[float] = []
    loads: List[float] = []
    sizes: List[List[List[int]]] = []
    skipped = 0
    peak_warmup = 0
    batches = iter(batches)
    log_vars: Dict = {}
    _sync(cuda)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    for i in range(warmup + iters):
        if i == warmup and cuda:
            _sync(cuda)
            peak_warmup = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        data = next(batches)
        loaded = time.perf_counter()
        scale = scaler.get_scale() if scaler is not None else None
        _sync(cuda)
        begin = time.perf_counter()
        log_vars = model.train_step(data, optim_wrapper=optim_wrapper)
        _sync(cuda)
        end = time.perf_counter()
        if i < warmup:
            continue
        steps.append(end - begin)
        loads.append(loaded - start)
        sizes.append(_image_sizes(data))
        # A dynamic loss scale that went down skipped the optimizer step (an overflow).
        skipped += scale is not None and scaler.get_scale() < scale
        if max_time is not None and sum(steps) >= max_time:
            break
    loss = float(log_vars['loss']) if 'loss' in log_vars else None
    peak = torch.cuda.max_memory_allocated() if cuda else None
    profiled: Dict[str, Any] = {}

    def step() -> None:
        model.train_step(next(batches), optim_wrapper=optim_wrapper)

    if cuda and kernel_steps > 0:
        profiled = profile_kernels(step, kernel_steps)
    if host_steps > 0:
        profiled['host'] = profile_host(step, model, optim_wrapper, host_steps, sync=lambda: _sync(cuda), waits=cuda)
    return dict(
        iters_timed=len(steps),
        s_per_iter_median=statistics.median(steps) if steps else None,
        s_per_iter_mean=statistics.mean(steps) if steps else None,
        s_per_iter=[round(t, 6) for t in steps],
        data_s_median=statistics.median(loads) if loads else None,
        image_sizes=sizes,
        peak_mem_bytes=peak,
        peak_mem_bytes_with_warmup=max(peak_warmup, peak) if cuda else None,
        loss_final=loss,
        loss_finite=loss is not None and math.isfinite(loss),
        overflow_skipped_steps=int(skipped) if scaler is not None else None,
        loss_scale_final=scaler.get_scale() if scaler is not None else None,
        **profiled,
    )


def merge_rounds(rounds: List[List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """One record per config from rounds of every config (each round a list of records in the same
    order): the first round's record (with its profiles), ``s_per_iter_median`` the median of the
    rounds' medians, ``s_per_iter_rounds`` those medians (None for a round that failed) and
    ``peak_mem_bytes`` the largest peak, ``rounds_failed`` how many of its runs failed. A config
    that failed in every round keeps its first error.
    """
    merged = []
    for runs in zip(*rounds):
        timed = [r for r in runs if r.get('s_per_iter_median')]
        rec = dict(timed[0] if timed else runs[0])
        if len(runs) > 1 and timed:
            rec['s_per_iter_rounds'] = [r.get('s_per_iter_median') for r in runs]
            rec['s_per_iter_median'] = statistics.median(r['s_per_iter_median'] for r in timed)
            peaks = [r['peak_mem_bytes'] for r in timed if r.get('peak_mem_bytes') is not None]
            rec['peak_mem_bytes'] = max(peaks) if peaks else None
            rec['rounds_failed'] = sum('error' in r for r in runs)
        merged.append(rec)
    return merged


def run_config(run: DownstreamRun, config_root: str, data_root: str, work_dir: str, warmup: int, iters: int,
               max_time: Optional[float] = None, workers: int = 2, dry_run: bool = False,
               init_loss_scale: Optional[float] = None, kernel_steps: int = 0,
               host_steps: int = 0) -> Dict[str, Any]:
    """Build one config with mmengine's ``Runner`` and time its training iterations.

    Args:
        run: the config.
        config_root: the repository's ``configs/``.
        data_root: the demo data (``make_demo_data.py --out``).
        work_dir: mmengine's work directory for this config.
        warmup: untimed iterations.
        iters: timed iterations.
        max_time: stop timing after this many seconds of timed iterations.
        workers: data loader processes.
        dry_run: resolve and build the model and the dataloader, load one batch, time nothing.
        init_loss_scale: the initial dynamic loss scale of AMP configs (``prepare_config``).
        kernel_steps: iterations profiled after the timed ones (:func:`time_training`).
        host_steps: iterations whose host time is profiled after those (:func:`time_training`).

    Returns:
        The record of the run: the config, what was changed, the backbone, the optim wrapper and AMP
        dtype, and (unless ``dry_run``) the timings of :func:`time_training`.

    Raises:
        RuntimeError: the config trains with AMP and no CUDA device is present (not in a dry run).
    """
    cfg, path = load_config(run, config_root)
    record: Dict[str, Any] = dict(name=run.name, task=run.task, baseline=run.baseline, config=run.config,
                                  config_path=path)
    record.update(prepare_config(cfg, run, data_root, work_dir, workers=workers, init_loss_scale=init_loss_scale))
    wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
    amp = wrapper.split('.')[-1] == 'AmpOptimWrapper'
    cuda = torch.cuda.is_available()
    if amp and not cuda and not dry_run:
        raise RuntimeError(f'{run.name}: {path} trains with {wrapper}, which needs a CUDA GPU; on a CPU, time the '
                           'small demo configs (the default with --device cpu) or resolve the configs with --dry-run')
    # torch's default: mmengine's Runner only ever turns cudnn.benchmark on, so that an earlier config
    # of the same process would decide it otherwise.
    torch.backends.cudnn.benchmark = False
    runner = build_runner(cfg)
    model = runner.model
    record.update(
        device=torch.cuda.get_device_name(0) if cuda else 'cpu',
        backbone=backbone_info(model.backbone, cfg),
        params=sum(p.numel() for p in model.parameters()),
        optim_wrapper=wrapper,
        amp_dtype=str(cfg.optim_wrapper.get('dtype') or 'float16') if amp else None,
        cudnn_benchmark=torch.backends.cudnn.benchmark,
        batch_size=cfg.train_dataloader.batch_size,
        warmup=warmup,
        iters=iters,
    )
    loader = runner.build_dataloader(cfg.train_dataloader, seed=runner.seed)
    if dry_run:
        record['image_sizes'] = [_image_sizes(next(iter(loader)))]
        return record
    optim_wrapper = runner.build_optim_wrapper(cfg.optim_wrapper)
    model.init_weights()
    model.train()
    record.update(time_training(model, loader, optim_wrapper, warmup, iters, max_time, kernel_steps, host_steps))
    return record
