"""Timing loops of the benchmarks and the environment record of their results.

GPU times come from CUDA events around each call after a warm-up (:func:`time_samples`), CPU times
from the wall clock (:func:`cpu_samples`); the cases of one group run in interleaved rounds
(:func:`measure_cases`) so that a slow spell of a shared machine does not fall on one case. A step
can also be captured in a CUDA graph (:func:`capture_cuda_graph`) and its replays timed, without the
host's launch overhead; :func:`host_us_per_call` times the host's side of a call alone.
"""
import datetime
import math
import os
import os.path as osp
import platform
import shlex
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

import torch


def time_samples(fn: Callable[[int], None], repeats: int, warmup: int) -> List[float]:
    """Times of ``repeats`` calls of ``fn(i)`` in milliseconds, measured with CUDA events."""
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    times = []
    for i in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(i)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def cpu_samples(fn: Callable[[int], None], repeats: int, warmup: int) -> List[float]:
    """Times of ``repeats`` calls of ``fn(i)`` in milliseconds, measured with the wall clock."""
    for i in range(warmup):
        fn(i)
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def host_us_per_call(fn: Callable[[], None], calls: int, rounds: int, warmup: int = 20,
                     sync: Callable[[], None] = lambda: None) -> List[float]:
    """Host microseconds per call of ``fn`` in each of ``rounds`` rounds.

    A round issues ``calls`` calls back to back without waiting for the device, then ``sync()``
    (e.g. ``torch.cuda.synchronize``) outside the timed span: on a GPU whose kernels keep up, the
    time is what the CPU takes to issue a call, the bound of host-limited training steps.
    """
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - start) / calls * 1e6)
        sync()
    return out


def time_ms(fn: Callable[[int], None], repeats: int, warmup: int) -> float:
    """Median time of ``fn(i)`` in milliseconds."""
    return statistics.median(time_samples(fn, repeats, warmup))


def peak_bytes(fn: Callable[[int], None]) -> int:
    """Peak memory allocated by one call beyond what was allocated before it."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn(0)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def measure_cases(cases: List[Tuple[Dict, Callable[[int], None]]], repeats: int, rounds: int, warmup: int,
                  timer: Callable = time_samples, peak: Callable = peak_bytes) -> List[Dict]:
    """Time the ``(record, fn)`` cases of one group in interleaved rounds.

    Each round calls every case ``ceil(repeats / rounds)`` times (after ``warmup`` calls before a
    case's first round, 2 before the others). The KxK masked baseline (``record['impl'] ==
    'masked_2d'``, hundreds of ms at K=31) runs its ``repeats`` calls once.

    Args:
        cases: ``(record, fn)`` pairs; ``fn(i)`` runs the i-th call of a case.
        repeats: timed calls per case over all rounds.
        rounds: number of interleaved rounds.
        warmup: untimed calls before a case's first round.
        timer: ``timer(fn, repeats, warmup) -> list of ms`` (default: CUDA events).
        peak: ``peak(fn) -> bytes`` (default: :func:`peak_bytes`).

    Returns:
        The records, each with ``ms`` (median of all its calls), ``round_ms`` (median of each round)
        and ``peak_mem_bytes`` filled in.
    """
    per_round = math.ceil(repeats / rounds)
    samples: List[List[List[float]]] = [[] for _ in cases]  # per case, the times of each round
    for r in range(rounds):
        for (rec, fn), case_rounds in zip(cases, samples):
            if rec['impl'] == 'masked_2d':
                if r == 0:
                    case_rounds.append(timer(fn, repeats, warmup))
                continue
            case_rounds.append(timer(fn, per_round, warmup if r == 0 else 2))
    for (rec, fn), case_rounds in zip(cases, samples):
        rec['ms'] = round(statistics.median([t for times in case_rounds for t in times]), 4)
        rec['round_ms'] = [round(statistics.median(times), 4) for times in case_rounds]
        rec['peak_mem_bytes'] = peak(fn)
    return [rec for rec, _ in cases]


def capture_cuda_graph(step: Callable[[], None], warmup: int = 3) -> 'torch.cuda.CUDAGraph':
    """``step`` captured in a CUDA graph, as the CUDA graphs notes of the PyTorch docs prescribe:
    ``warmup`` calls on a side stream first (lazy initialisation, cuDNN autotuning, caches), then the
    capture on ``torch.cuda.graph``'s stream.

    Every tensor that ``step`` reads must stay where it is (static inputs): ``graph.replay()`` reruns
    the captured kernels on the same addresses. Under autocast, ``step`` disables autocast's cast
    cache (``cache_enabled=False``), as ``torch.cuda.make_graphed_callables`` requires.

    Raises:
        RuntimeError: what the capture raised (e.g. an operation that synchronises with the host).
            The caller's current stream is restored either way, and after a failed capture the
            caching allocator is told that the capture is over (:func:`_end_failed_capture`).
    """
    caller = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step()
    caller.wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    pool = torch.cuda.graph_pool_handle()
    try:
        with torch.cuda.graph(graph, pool=pool):
            step()
    except BaseException:
        _end_failed_capture(pool)
        raise
    finally:
        # A capture that fails at its end leaves the capture stream current: later work must not run there.
        torch.cuda.set_stream(caller)
    return graph


def _end_failed_capture(pool) -> None:
    """The caching allocator's side of a capture that failed before its end, best effort.

    torch stops routing a capture's allocations to its memory pool only after a successful
    ``cudaStreamEndCapture``, and a graph releases its pool only if its capture ended: after a
    failed capture the allocator would go on as if a capture were under way, and the next
    ``torch.cuda.empty_cache()`` would fail an internal assert. The private bindings that torch's own
    ``torch.cuda.use_mem_pool`` ends a pool with do it here; where this torch lacks them, nothing is done.
    """
    end = getattr(torch._C, '_cuda_endAllocateToPool', None)
    release = getattr(torch._C, '_cuda_releasePool', None)
    if end is None or release is None:
        return
    device = torch.cuda.current_device()
    try:
        end(device, pool)
    except RuntimeError:  # not under way: the capture ended (and failed later), so the graph releases its pool
        return
    release(device, pool)


def round_spread(rec: Dict) -> Optional[float]:
    """Slowest / fastest round time of a record (None with fewer than two rounds or a missing one)."""
    times = rec.get('round_ms') or []
    if len(times) < 2 or None in times:
        return None
    return max(times) / min(times)


def copy_bandwidth_gbps(repeats: int) -> float:
    """Device-to-device copy bandwidth of the current GPU in GB/s (1 GiB read and written)."""
    n = 1 << 28  # 1 GiB of float32
    src = torch.randn(n, device='cuda')
    dst = torch.empty_like(src)
    ms = time_ms(lambda i: dst.copy_(src), repeats, 5)
    return 2 * n * 4 / (ms * 1e-3) / 1e9


def nvidia_driver() -> str:
    """The NVIDIA driver version reported by ``nvidia-smi``, or ``'unknown'``."""
    try:
        return subprocess.run(['nvidia-smi', '--query-gpu=driver_version', '--format=csv,noheader'],
                              capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return 'unknown'


def cpu_model(default: str = 'cpu') -> str:
    """The CPU model from /proc/cpuinfo (``platform.processor()`` elsewhere), or ``default``."""
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or default


def command_line() -> str:
    """The command that started this process, as ``python <script relative to cwd> <args>``, each
    argument quoted for the shell where it needs to be."""
    return 'python ' + shlex.join([osp.relpath(sys.argv[0])] + sys.argv[1:])


def git_commit(root: Optional[str] = None, full: bool = False) -> str:
    """The commit that was built: the environment variable ``SOURCE_COMMIT`` where set (a copy of the
    tree names the commit it was made from; a ``.git`` it carries may be older), else the commit of
    the source tree at ``root`` (default: the one holding this package; short, or all 40 digits with
    ``full``), with ``+dirty`` when tracked files under ``csrc/`` differ from it, else ``'unknown'``
    (no checkout)."""
    if os.environ.get('SOURCE_COMMIT'):
        return os.environ['SOURCE_COMMIT']
    root = root or osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
    try:
        sha = subprocess.run(['git', '-C', root, 'rev-parse'] + ([] if full else ['--short']) + ['HEAD'],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(['git', '-C', root, 'diff', '--quiet', 'HEAD', '--', 'csrc'], capture_output=True,
                               check=False).returncode
        return sha + ('+dirty' if dirty else '')
    except (OSError, subprocess.CalledProcessError):
        return 'unknown'


def utc_now() -> str:
    """The current time, ``YYYY-MM-DD HH:MM UTC``."""
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')


def env_line(env: Dict, *extra: str) -> str:
    """The software and the run of an environment record (:func:`gpu_env`), as the results' markdown
    heads them: ``torch ..., CUDA ..., cuDNN ..., driver ...``, then ``extra`` (e.g. ``timm 1.0``), the
    commit where the record has one and the date."""
    commit = [f"commit {env['commit']}"] if 'commit' in env else []
    return ', '.join([f"torch {env['torch']}", f"CUDA {env['cuda']}", f"cuDNN {env['cudnn']}",
                      f"driver {env['driver']}", *extra, *commit, env['date']])


def gpu_env() -> Dict:
    """GPU, driver, library versions, commit, date and command of a GPU benchmark (GPU 0)."""
    props = torch.cuda.get_device_properties(0)
    return {
        'gpu': props.name,
        'sm_count': props.multi_processor_count,
        'driver': nvidia_driver(),
        'torch': torch.__version__,
        'cuda': torch.version.cuda,
        'cudnn': torch.backends.cudnn.version(),
        'python': platform.python_version(),
        'commit': git_commit(),
        'date': utc_now(),
        'command': command_line(),
    }


def device_env(device: str) -> Dict:
    """:func:`gpu_env` on ``'cuda'``; on the CPU the same keys, with ``gpu`` ``'cpu'`` (as the model
    benchmark's CPU runs name it) and the CPU model and thread count."""
    if device == 'cuda':
        return gpu_env()
    return {'gpu': 'cpu', 'cpu': cpu_model(), 'threads': torch.get_num_threads(), 'driver': None,
            'torch': torch.__version__, 'cuda': torch.version.cuda, 'cudnn': None,
            'python': platform.python_version(), 'commit': git_commit(), 'date': utc_now(),
            'command': command_line()}
