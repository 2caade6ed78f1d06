"""ONNX Runtime CPU speed of the two exact lowerings of the oriented op: dense KxK vs shifted slices.

- ``dense``: what ``torch.onnx.export`` emits for ``mmo1d::oriented_dwconv1d`` (exported here with
  the TorchScript exporter): one depthwise ``Conv`` whose KxK kernel holds the taps at their
  offsets (ONNX Runtime folds the kernel's construction into a constant when the session starts).
- ``slices``: the sum of shifted slices, which needs the angles' values when the graph is built:
  per group of channels with equal offsets, one ``Slice`` of the zero-padded input per distinct
  offset (coinciding taps' weights added), times the weights, summed, then ``Concat``.

Both are checked against the compiled op before timing. Timing: interleaved rounds of ``--repeats``
runs each, median per round, median over rounds. Writes a JSON and a markdown table.

Example::

    python tools/deployment/benchmark_onnx_lowering.py --threads 2 \\
        --out benchmarks/results/onnx_lowering_cpu
"""
import argparse
import json
import statistics
import time
from typing import Dict, List, Optional, Sequence

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

from mmo1d.benchmark.timing import cpu_model
from mmo1d.deployment import export_onnx
from mmo1d.ops import OrientedDWConv1d, tap_offsets
from mmo1d.utils.quiet import quiet_upstream

# (name, channels, K, plane, stride, residual): the oriented layers of the T models at 224x224
# (stems, the blocks of each stage, the 1D++ 4C convolution) and the downstream stage-3/4 lengths.
SHAPES = [
    ('stem-1d conv 1', 64, 31, 224, 2, False),
    ('stem-1d++ conv 1', 64, 15, 224, 2, False),
    ('stem-1d conv 2', 64, 31, 112, 2, False),
    ('stage 1, 1D', 96, 31, 56, 1, False),
    ('stage 1, 1D++ first', 96, 15, 56, 1, False),
    ('stage 1, ++ 4C', 384, 31, 56, 1, True),
    ('stage 2, 1D', 192, 31, 28, 1, False),
    ('stage 3, 1D', 384, 31, 14, 1, False),
    ('stage 3, downstream', 384, 27, 14, 1, False),
    ('stage 4, 1D', 768, 31, 7, 1, False),
    ('stage 4, downstream ++ 4C', 3072, 13, 7, 1, True),
]


def slices_model(conv: OrientedDWConv1d, plane: int) -> onnx.ModelProto:
    """The sum-of-shifted-slices graph of ``conv`` on a (1, C, plane, plane) input."""
    c, k, s = conv.channels, conv.kernel_size, conv.stride
    pad, out = k // 2, -(-plane // s)
    dh, dw = tap_offsets(conv.theta, k, conv.rounding)
    weight = conv.weight.detach().reshape(c, k)
    bias = conv.bias.detach() if conv.bias is not None else torch.zeros(c)
    init = [numpy_helper.from_array(np.array([0, 0, pad, pad] * 2, np.int64), 'pads')]
    nodes = [helper.make_node('Pad', ['x', 'pads'], ['xp'])]
    groups: Dict[tuple, List[int]] = {}
    for ch in range(c):
        groups.setdefault((tuple(dh[ch].tolist()), tuple(dw[ch].tolist())), []).append(ch)
    outputs = []
    for g, ((rows, cols), chans) in enumerate(groups.items()):
        index = torch.tensor(chans)
        taps: Dict[tuple, List[int]] = {}
        for t in range(k):
            taps.setdefault((rows[t], cols[t]), []).append(t)
        if conv.residual:
            taps.setdefault((0, 0), [])
        acc = f'g{g}_b'
        init.append(numpy_helper.from_array(bias[index].numpy().reshape(1, -1, 1, 1), acc))
        init.append(numpy_helper.from_array(index.numpy().astype(np.int64), f'g{g}_c'))
        nodes.append(helper.make_node('Gather', ['xp', f'g{g}_c'], [f'g{g}_x'], axis=1))
        for j, ((a, b), ts) in enumerate(taps.items()):
            name = f'g{g}_{j}'
            w = weight[index][:, ts].sum(1) + (1.0 if conv.residual and (a, b) == (0, 0) else 0.0)
            init += [numpy_helper.from_array(np.array([a + pad, b + pad], np.int64), name + 's'),
                     numpy_helper.from_array(np.array([a + pad + (out - 1) * s + 1, b + pad + (out - 1) * s + 1],
                                                      np.int64), name + 'e'),
                     numpy_helper.from_array(np.array([2, 3], np.int64), name + 'a'),
                     numpy_helper.from_array(np.array([s, s], np.int64), name + 'p'),
                     numpy_helper.from_array(w.numpy().reshape(1, -1, 1, 1), name + 'w')]
            slice_inputs = [f'g{g}_x', name + 's', name + 'e', name + 'a', name + 'p']
            nodes += [helper.make_node('Slice', slice_inputs, [name + 'x']),
                      helper.make_node('Mul', [name + 'x', name + 'w'], [name + 'm']),
                      helper.make_node('Add', [acc, name + 'm'], [name + 'o'])]
            acc = name + 'o'
        outputs.append(acc)
    nodes.append(helper.make_node('Concat', outputs, ['y'], axis=1))
    graph = helper.make_graph(nodes, 'slices',
                              [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, c, plane, plane])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid('', 18)])


def session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), options, providers=['CPUExecutionProvider'])


def run(threads: int, rounds: int, repeats: int) -> List[dict]:
    torch.manual_seed(0)
    rows = []
    for name, c, k, plane, stride, residual in SHAPES:
        conv = OrientedDWConv1d(c, k, stride=stride, residual=residual, angle_offset=0.5).eval()
        x = torch.randn(1, c, plane, plane)
        with torch.no_grad():
            expected = conv(x).numpy()
        sessions = {'dense': session(export_onnx(conv, (x, ), dynamo=False), threads),
                    'slices': session(slices_model(conv, plane), threads)}
        times: Dict[str, List[float]] = {key: [] for key in sessions}
        errors = {}
        for key, sess in sessions.items():
            feed = {sess.get_inputs()[0].name: x.numpy()}
            errors[key] = float(np.abs(sess.run(None, feed)[0] - expected).max())
        for _ in range(rounds):
            for key, sess in sessions.items():
                feed = {sess.get_inputs()[0].name: x.numpy()}
                sess.run(None, feed)
                samples = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    sess.run(None, feed)
                    samples.append(time.perf_counter() - start)
                times[key].append(statistics.median(samples))
        row = dict(name=name, channels=c, kernel_size=k, plane=plane, stride=stride, residual=residual,
                   **{f'{key}_ms': 1e3 * statistics.median(v) for key, v in times.items()},
                   **{f'{key}_max_abs_err': e for key, e in errors.items()})
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def markdown(rows: List[dict], meta: dict) -> str:
    lines = ["# ONNX Runtime CPU: dense KxK vs shifted slices for the oriented op\n",
             f"CPU: {meta['cpu']}; {meta['threads']} intra-op thread(s); onnxruntime {meta['onnxruntime']}, "
             f"torch {meta['torch']}; batch 1, fp32; median of {meta['rounds']} interleaved rounds of "
             f"{meta['repeats']} runs.\n",
             f"Command: `{meta['command']}`\n",
             '| layer | C | K | plane | stride | residual | dense ms | slices ms | slices / dense |',
             '|---|---|---|---|---|---|---|---|---|']
    for r in rows:
        lines.append(f"| {r['name']} | {r['channels']} | {r['kernel_size']} | {r['plane']} | {r['stride']} | "
                     f"{'yes' if r['residual'] else 'no'} | {r['dense_ms']:.2f} | {r['slices_ms']:.2f} | "
                     f"{r['slices_ms'] / r['dense_ms']:.2f} |")
    return '\n'.join(lines) + '\n'


def main(argv: Optional[Sequence[str]] = None) -> List[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--threads', type=int, default=1, help='ONNX Runtime intra-op threads (default: 1)')
    parser.add_argument('--rounds', type=int, default=5, help='interleaved rounds (default: 5)')
    parser.add_argument('--repeats', type=int, default=5, help='runs per round (default: 5)')
    parser.add_argument('--out', default=None, help='write OUT.json and OUT.md')
    args = parser.parse_args(argv)
    rows = run(args.threads, args.rounds, args.repeats)
    if args.out:
        meta = dict(cpu=cpu_model('unknown CPU'), threads=args.threads, rounds=args.rounds, repeats=args.repeats,
                    onnxruntime=ort.__version__, torch=torch.__version__,
                    command='python tools/deployment/benchmark_onnx_lowering.py ' + ' '.join(argv or []))
        with open(args.out + '.json', 'w') as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=1)
        with open(args.out + '.md', 'w') as f:
            f.write(markdown(rows, meta))
    return rows


if __name__ == '__main__':
    import sys
    quiet_upstream()
    main(sys.argv[1:])
