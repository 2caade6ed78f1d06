"""Where the GPU waits for the host in a training step: the gaps of the device's timeline, each charged
to the phase of the step that the host was in when the device went on.

A step with 2 images per GPU can leave the GPU idle while the host issues work, and then which phase
keeps it waiting decides the step's time: a phase whose kernels are short against the host's time to
issue them. The device's work (kernels, memcpy, memset) over profiled steps is merged into busy
intervals; each gap between two of them ends when the next work starts, which the host had issued
just before: the gap goes to the innermost phase whose host range holds that moment (``forward``
outside its children's labels: ``forward:other``; no phase: :data:`OUTSIDE`).
"""
from typing import Dict, Iterable, List, Tuple

#: The label of gaps that end outside every phase (between steps: the loop, the data).
OUTSIDE = '(between phases)'


def busy_intervals(spans: Iterable[Tuple[float, float]]) -> List[Tuple[float, float]]:
    """``(start, end)`` spans merged where they overlap or touch, in order."""
    merged: List[Tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _phase_at(t: float, phases: List[Tuple[str, float, float]]) -> str:
    """The innermost phase (the latest start) whose range ``[start, end)`` holds ``t``."""
    label, latest = OUTSIDE, None
    for name, start, end in phases:
        if start <= t < end and (latest is None or start > latest):
            label, latest = name, start
    return 'forward:other' if label == 'forward' else label


def gpu_waits(device: Iterable[Tuple[float, float]], phases: Iterable[Tuple[str, float, float]],
              steps: int) -> Dict:
    """The device's idle time by the phase that ended it, per step.

    Args:
        device: ``(start, end)`` of every device activity (microseconds, the host ranges' clock).
        phases: ``(label, start, end)`` of every labelled host range of the steps.
        steps: how many steps they cover.

    Returns:
        ``idle_ms`` (label -> milliseconds per step, largest first), ``busy_ms`` and ``span_ms`` (from
        the first device work to the last, per step) and ``wait_steps``.

    Raises:
        ValueError: if ``steps`` < 1 or there is no device work.
    """
    if steps < 1:
        raise ValueError(f'steps must be >= 1, got {steps}')
    busy = busy_intervals(device)
    if not busy:
        raise ValueError('no device work among the events: profile the steps with CUDA activity')
    ranges = list(phases)
    idle: Dict[str, float] = {}
    for (_, prev_end), (start, _) in zip(busy, busy[1:]):
        label = _phase_at(start, ranges)
        idle[label] = idle.get(label, 0.0) + start - prev_end
    per_step = lambda us: round(us / 1e3 / steps, 3)  # noqa: E731
    return {
        'idle_ms': {label: per_step(us) for label, us in sorted(idle.items(), key=lambda kv: -kv[1])},
        'busy_ms': per_step(sum(end - start for start, end in busy)),
        'span_ms': per_step(busy[-1][1] - busy[0][0]),
        'wait_steps': steps,
    }
