"""Where the host's time of a training step goes: each phase by the wall clock, then its ops and
autograd nodes from ``torch.profiler``'s CPU events.

A detection or segmentation step with 2 images per GPU can be bound by the host: the GPU waits for
the CPU to issue the next kernel. Then what decides the step's time is the CPU time of each phase,
not the kernels. :func:`profile_host` runs steps with the phases of mmengine's ``train_step`` labelled
(``torch.profiler.record_function`` around the bound methods, restored afterwards):

* ``preprocess``: the data preprocessor;
* ``forward:<child>``: the ``forward`` of each direct child module of the model (``backbone``,
  ``neck``, ``decode_head``, ...), loss computation outside those forwards going to ``forward:other``;
* ``backward``: ``optim_wrapper.backward`` (the autograd engine's work, on its own thread, inside it);
* ``step`` and ``zero_grad``: the optimizer wrapper's.

For each phase it reports the milliseconds of host time per step, by the wall clock; then, from more
steps under the profiler (which adds its own time to every op), for the backbone's forward the ops
called directly from Python (their CPU time, counted with what they call) and the Python between
them, and for the backward the autograd nodes (``autograd::engine::evaluate_function: <node>``); on a
GPU, from more steps with the device's activity, where the GPU waits for the host (gpu_waits).
"""
import contextlib
import statistics
import time
from collections import defaultdict
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import torch
from torch import nn

from mmo1d.benchmark.gpu_waits import gpu_waits

#: Entries kept in each list of largest items.
TOP = 12
#: The prefix of the autograd engine's events, one per node evaluated in backward.
NODE_PREFIX = 'autograd::engine::evaluate_function: '
#: Label of a phase: ``record_function`` names begin with it.
LABEL = 'host:'
#: The profiler's kinds of device events that are work (not its annotations on the device's timeline).
DEVICE_WORK = ('kernel', 'gpu_memcpy', 'gpu_memset')


def _wrap(label: str, fn: Callable, clocks: Optional[Dict[str, float]]) -> Callable:
    def wrapped(*args, **kwargs):
        start = time.perf_counter()
        try:
            with torch.profiler.record_function(LABEL + label):
                return fn(*args, **kwargs)
        finally:
            if clocks is not None:
                clocks[label] = clocks.get(label, 0.0) + (time.perf_counter() - start) * 1e6
    return wrapped


@contextlib.contextmanager
def labelled_phases(model: nn.Module, optim_wrapper: Any,
                    clocks: Optional[Dict[str, float]] = None) -> Iterator[None]:
    """Label the phases of ``model.train_step(data, optim_wrapper)`` (module docstring) while inside;
    with ``clocks``, also add each call's wall-clock microseconds to ``clocks[label]``.

    The wrappers are instance attributes over the bound methods; they are removed on exit, whatever
    happens inside.
    """
    patched: List[Tuple[Any, str]] = []

    def patch(obj: Any, attr: str, label: str) -> None:
        if obj is None or attr in vars(obj):
            return  # absent, or already an instance attribute: not ours to replace
        setattr(obj, attr, _wrap(label, getattr(obj, attr), clocks))
        patched.append((obj, attr))

    try:
        for name, child in model.named_children():
            patch(child, 'forward', 'preprocess' if name == 'data_preprocessor' else f'forward:{name}')
        patch(model, 'loss', 'forward')
        for attr in ('backward', 'step', 'zero_grad'):
            patch(optim_wrapper, attr, attr)
        yield
    finally:
        for obj, attr in patched:
            delattr(obj, attr)


def short_name(name: str) -> str:
    """An event's name without C++ namespaces and template wrapping:
    ``torch::autograd::CppNode<ns::(anonymous namespace)::Fn>`` -> ``Fn``."""
    if name.endswith('>') and '<' in name:
        return name[name.index('<') + 1:-1].rsplit('::', 1)[-1]
    return name[len('torch::autograd::'):] if name.startswith('torch::autograd::') else name


def _ms(us: float, steps: int) -> float:
    return round(us / 1e3 / steps, 3)


def _top(table: Dict[str, List[float]], steps: int, top: int) -> List[Dict[str, Any]]:
    rows = sorted(table.items(), key=lambda kv: -kv[1][0])[:top]
    return [{'name': name, 'ms': _ms(us, steps), 'calls': round(count / steps, 1)} for name, (us, count) in rows]


def phase_ms(phases: Dict[str, float], steps: int) -> Dict[str, float]:
    """Milliseconds per step of each phase from microseconds in all (``forward`` -> ``forward:other``,
    less its children's labels), in the order preprocess, forwards, the rest."""
    phases = dict(phases)
    if 'forward' in phases:
        phases['forward:other'] = phases.pop('forward') - sum(us for label, us in phases.items()
                                                              if label.startswith('forward:'))
    order = sorted(phases, key=lambda label: (label != 'preprocess', not label.startswith('forward'), label))
    return {label: _ms(phases[label], steps) for label in order}


def host_summary(events: Iterable, steps: int, top: int = TOP) -> Dict[str, Any]:
    """Host time per step by phase, and the largest items of the backbone's forward and of backward.

    Args:
        events: the profiler's ``FunctionEvent``s (``prof.events()``) of ``steps`` labelled steps.
        steps: how many steps they cover.
        top: how many of the largest items to keep per list.

    Returns:
        ``phases_ms`` (label -> ms per step; ``forward:other`` is ``forward`` less its children's
        labels), ``backbone_ops`` (the ops the backbone's forward calls from Python: ms and calls per
        step, ``(python)`` for the time between them), ``backward_nodes`` (autograd nodes: ms and calls
        per step) and ``host_steps``.

    Raises:
        ValueError: if ``steps`` < 1, or no labelled phase is among the events.
    """
    if steps < 1:
        raise ValueError(f'steps must be >= 1, got {steps}')
    phases: Dict[str, float] = defaultdict(float)
    backbone: Dict[str, List[float]] = defaultdict(lambda: [0.0, 0])
    nodes: Dict[str, List[float]] = defaultdict(lambda: [0.0, 0])
    for evt in events:
        if evt.device_type != torch.autograd.DeviceType.CPU:
            continue
        name = str(evt.name)
        us = float(evt.cpu_time_total)
        if name.startswith(LABEL):
            label = name[len(LABEL):]
            phases[label] += us
            if label == 'forward:backbone':
                inside = 0.0
                for child in evt.cpu_children:
                    backbone[str(child.name)][0] += child.cpu_time_total
                    backbone[str(child.name)][1] += 1
                    inside += child.cpu_time_total
                backbone['(python)'][0] += us - inside
                backbone['(python)'][1] += 1
        elif name.startswith(NODE_PREFIX):
            node = nodes[short_name(name[len(NODE_PREFIX):])]
            node[0] += us
            node[1] += 1
    if not phases:
        raise ValueError('no labelled phase among the events: profile the steps inside labelled_phases()')
    return {
        'phases_ms': phase_ms(phases, steps),
        'backbone_ops': _top(backbone, steps, top),
        'backward_nodes': _top(nodes, steps, top),
        'host_steps': steps,
    }


def _device_work(evt: Any, name: str) -> bool:
    """Whether a device event is work: by its activity type, or (older torch, without one) anything
    but the profiler's copies of the phase labels."""
    kind = getattr(evt, 'activity_type', None)
    return kind in DEVICE_WORK if kind is not None else not name.startswith(LABEL)


def device_waits(events: Iterable, steps: int) -> Dict[str, Any]:
    """:func:`~mmo1d.benchmark.gpu_waits.gpu_waits` of profiled steps: the labelled phases' host ranges
    and the device's kernels, memcpy and memset (not the profiler's annotations on the device)."""
    phases, device = [], []
    for evt in events:
        name = str(evt.name)
        if evt.device_type == torch.autograd.DeviceType.CPU:
            if name.startswith(LABEL):
                phases.append((name[len(LABEL):], evt.time_range.start, evt.time_range.end))
        elif _device_work(evt, name):
            device.append((evt.time_range.start, evt.time_range.end))
    return gpu_waits(device, phases, steps)


def profile_host(step: Callable[[], None], model: nn.Module, optim_wrapper: Any, steps: int,
                 sync: Optional[Callable[[], None]] = None, top: int = TOP, waits: bool = False) -> Dict[str, Any]:
    """The host time of ``step`` by phase: ``steps`` steps with the phases timed by the wall clock
    (``phases_ms``, ``wall_ms``: the median step, ``sync`` (e.g. ``torch.cuda.synchronize``) before and
    after each), then ``steps`` more under ``torch.profiler`` (CPU activity) for the rest of
    :func:`host_summary` (whose own ``phases_ms``, inflated by the profiler, becomes
    ``profiled_phases_ms``); with ``waits`` (a CUDA step), ``steps`` more with the device's activity
    too for :func:`device_waits` (``gpu_waits``). The caller warms ``step`` up first."""
    sync = sync or (lambda: None)
    clocks: Dict[str, float] = {}
    walls = []
    with labelled_phases(model, optim_wrapper, clocks):
        for _ in range(steps):
            sync()
            start = time.perf_counter()
            step()
            sync()
            walls.append(time.perf_counter() - start)
    with labelled_phases(model, optim_wrapper), \
            torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
        sync()
    out = host_summary(prof.events(), steps, top)
    out['profiled_phases_ms'] = out.pop('phases_ms')
    if waits:
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with labelled_phases(model, optim_wrapper), torch.profiler.profile(activities=activities) as prof:
            for _ in range(steps):
                step()
            sync()
        out['gpu_waits'] = device_waits(prof.events(), steps)
    return {'phases_ms': phase_ms(clocks, steps), 'wall_ms': round(1e3 * statistics.median(walls), 3), **out}


def host_tables(records: List[Dict[str, Any]]) -> List[str]:
    """Markdown lines: the host time per phase of each profiled record (its ``host``: :func:`profile_host`),
    then the largest items of its backbone's forward and of its backward."""
    recs = [r for r in records if r.get('host')]
    if not recs:
        return []
    steps = recs[0]['host']['host_steps']
    lines = [f'Host time of one iteration by phase, {steps} iterations with each phase timed '
             'by the wall clock: ms per iteration from entering to leaving the phase\'s call, where the host issues '
             'its work (*forward:other*: the loss functions and what the model runs outside its children\'s '
             'forwards; *backward*: until the autograd engine has issued every backward kernel; *step*: AMP\'s '
             'inf check waits for the GPU there), and the median iteration (*wall*).', '']
    lines += _label_table(recs, lambda h: h['phases_ms'], (('sum', lambda h: sum(h['phases_ms'].values())),
                                                           ('wall', lambda h: h['wall_ms'])))
    lines += waits_table(recs)
    for key, what in (('backbone_ops', "the backbone's forward: ops called from Python, and the Python between them"),
                      ('backward_nodes', 'backward: autograd nodes')):
        lines += ['', f'Largest host times in {what} (ms of CPU time and calls per iteration, {steps} more '
                  'iterations under torch.profiler, CPU activity; the profiler adds its own time to every op):', '']
        for rec in recs:
            items = ', '.join(f"{it['name']} {it['ms']:.2f} ({it['calls']:g})" for it in rec['host'][key])
            lines.append(f"- {rec['name']}: {items}")
    return lines + ['']


def waits_table(recs: List[Dict[str, Any]]) -> List[str]:
    """Markdown lines: where the GPU waits in each record that has ``host['gpu_waits']``."""
    recs = [r for r in recs if r['host'].get('gpu_waits')]
    if not recs:
        return []
    lines = ['', f"Where the GPU waits for the host, {recs[0]['host']['gpu_waits']['wait_steps']} more iterations "
             'under torch.profiler with the device\'s activity: ms per iteration of the gaps between the '
             'device\'s work, each charged to the phase the host was in when the GPU went on (gpu_waits), '
             'the device\'s busy time and its span from the first work to the last.', '']
    return lines + _label_table(recs, lambda h: h['gpu_waits']['idle_ms'],
                                (('idle', lambda h: sum(h['gpu_waits']['idle_ms'].values())),
                                 ('busy', lambda h: h['gpu_waits']['busy_ms']),
                                 ('span', lambda h: h['gpu_waits']['span_ms'])))


def _label_table(recs: List[Dict[str, Any]], ms_of: Callable[[Dict], Dict[str, float]],
                 totals: Iterable[Tuple[str, Callable[[Dict], float]]]) -> List[str]:
    """A markdown table of the records: a column per label of ``ms_of(rec['host'])`` (every label of
    any record, in order of appearance; '-' where a record lacks it), then one per named total."""
    labels = list(dict.fromkeys(label for r in recs for label in ms_of(r['host'])))
    totals = list(totals)
    lines = ['| config | ' + ' | '.join(labels + [name for name, _ in totals]) + ' |',
             '|---|' + '---|' * (len(labels) + len(totals))]
    for rec in recs:
        ms = ms_of(rec['host'])
        cells = [f'{ms[label]:.1f}' if label in ms else '-' for label in labels]
        cells += [f'{total(rec["host"]):.1f}' for _, total in totals]
        lines.append(f"| {rec['name']} | " + ' | '.join(cells) + ' |')
    return lines
