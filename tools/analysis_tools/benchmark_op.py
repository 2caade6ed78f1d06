"""Benchmark the oriented depthwise 1D convolution: against PyTorch, per rounding, per pass, host time,
and two builds against each other.

What is measured follows from the options (each in one process, CUDA events or the wall clock around
each call after a warm-up, the cases of a group in interleaved rounds, median reported):

* default: the op at every angle 0, 22.5, ..., 157.5 degrees and in the models' 8-direction layout
  against PyTorch's depthwise 1xK, 7x7 and masked KxK ``conv2d``, fp32 NCHW, bf16 and fp16
  channels_last, forward and forward+backward, with peak memory and the copy bandwidth (roofline).
  Writes ``<out-dir>/op_<tag>.json``, ``.md`` and the figure ``.png`` (:mod:`mmo1d.benchmark.op_baselines`).
* ``--device cpu``: the CPU kernels against PyTorch's depthwise 1xK ``conv2d``, NCHW and
  channels_last; each run is kept under ``--label`` in ``<out-dir>/op_cpu.json`` and ``.md``.
* ``--rounding bilinear gaussian`` (or ``floor``): each rounding against truncation on the same
  tensors and angles (learnable angles for the interpolations), with the ratios and their targets;
  ``<out-dir>/interp_speed_<tag>.json`` and ``.md``, ``interp_speed_jitter0_<tag>`` with
  ``--angle-jitter 0`` (:mod:`mmo1d.benchmark.op_interp`).
* ``--passes`` naming ``bwd_input`` or ``bwd_weight``, or ``--kernel-times``: each pass of the op alone
  per rounding, with its kernel path; ``<out-dir>/op_passes_<tag>.json`` and ``.md``,
  ``interp_passes_<tag>`` with an interpolated rounding (:mod:`mmo1d.benchmark.op_passes`).
  ``--kernel-times`` adds the kernels' own device time per call (torch.profiler), free of the host's
  launch latency that the event times hold (``--passes fwd --kernel-times``: the forward alone).
* ``--host-time``: host microseconds per call against ``torch.conv2d`` on a small tensor;
  ``<out-dir>/op_host_time_<tag>.json`` and ``.md`` (:mod:`mmo1d.benchmark.op_host`).
* ``--ab OLD_TREE`` with any of the above: the same measurement of an earlier source tree's build
  (built in place) and of this one, alternated ``--ab-rounds`` times in separate processes; the
  measurement's name with ``_ab`` before the tag, e.g. ``<out-dir>/op_passes_ab_<tag>.json`` and ``.md``
  (:mod:`mmo1d.benchmark.op_builds`).

``<tag>`` is the device's (:func:`mmo1d.benchmark.names.machine_tag`: ``h100``, ``h200``, ``cpu``);
``--config-name NAME`` puts a configuration into the names, before ``_ab`` and the tag (``--config-name
pp_conv``: ``op_pp_conv_h100.json``), so that a run of other cases does not replace the default run's files.

Examples::

    python tools/analysis_tools/benchmark_op.py --out-dir benchmarks/results
    python tools/analysis_tools/benchmark_op.py --batch 64 --channels 384 --sizes 56 --dtypes bfloat16 float16 \\
        --kernel-sizes 31 --config-name pp_conv
    python tools/analysis_tools/benchmark_op.py --device cpu --label after
    python tools/analysis_tools/benchmark_op.py --rounding bilinear gaussian --angle-jitter 0
    python tools/analysis_tools/benchmark_op.py --passes fwd bwd_input bwd_weight --rounding trunc bilinear gaussian
    python tools/analysis_tools/benchmark_op.py --host-time --dtypes float32
    python tools/analysis_tools/benchmark_op.py --passes fwd bwd_input --dtypes float32 --layouts channels_last \\
        --strides 2 3 --config-name strided
    python tools/analysis_tools/benchmark_op.py --passes fwd bwd_input bwd_weight --channels 384 --dtypes bfloat16 \\
        --ab .old --out-dir OUT
    python tools/analysis_tools/benchmark_op.py --passes fwd bwd_input bwd_weight --channels 512 --dtypes float32 \\
        --layouts nchw --kernel-times --ab .old --config-name c512 --out-dir OUT
"""
import argparse
import json
import os
import os.path as osp
import sys
import tempfile
from typing import Dict, List, Optional

import torch

import mmo1d
from mmo1d.analysis.plots import plot_op_benchmark
from mmo1d.benchmark import cpu_tables, names, op_baselines, op_builds, op_host, op_interp, op_passes, op_tables
from mmo1d.benchmark.op_inputs import DEFAULT_LAYOUT, DTYPES, LAYOUTS, MIXED, parse_angle
from mmo1d.benchmark.timing import command_line, cpu_model
from mmo1d.utils.quiet import quiet_upstream

ROUNDINGS = ('trunc', 'floor', 'bilinear', 'gaussian')
PASSES = ('fwd', 'fwdbwd', 'bwd_input', 'bwd_weight')
HALF_FIRST = ['bfloat16', 'float16', 'float32']
#: Angle jitter of an interpolated rounding where ``--angle-jitter`` is not given (rad).
INTERP_JITTER = 0.05
#: Defaults of each measurement, where the option is not given.
DEFAULTS = {
    'gpu': dict(batch=64, channels=512, sizes=[14, 28, 56], kernel_sizes=[7, 15, 31],
                dtypes=['float32', 'bfloat16', 'float16'], angles=op_baselines.GPU_ANGLES, repeats=51, rounds=3,
                warmup=10, out_dir='benchmarks/results'),
    'cpu': dict(batch=8, channels=96, sizes=[56], kernel_sizes=[7, 15, 31], dtypes=['float32'],
                layouts=list(LAYOUTS), angles=op_baselines.CPU_ANGLES, repeats=21, rounds=3, warmup=3,
                out_dir='benchmarks/results'),
    'interp': dict(batch=64, channels=None, sizes=[56], kernel_sizes=[31], dtypes=['float32', 'bfloat16', 'float16'],
                   angles=[MIXED], repeats=30, rounds=6, warmup=10, out_dir='benchmarks/results'),
    'passes': dict(batch=64, channels=None, sizes=[56], kernel_sizes=[31], dtypes=HALF_FIRST, angles=[MIXED],
                   repeats=40, rounds=4, warmup=3, out_dir='benchmarks/results'),
    'host': dict(batch=2, channels=96, sizes=[56], kernel_sizes=[31], dtypes=['bfloat16'], angles=[MIXED],
                 repeats=300, rounds=7, warmup=20, out_dir='benchmarks/results'),
}


def angle(text: str):
    """:func:`mmo1d.benchmark.op_inputs.parse_angle`, its error shown by argparse."""
    try:
        return parse_angle(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def name_part(text: str) -> str:
    """:func:`mmo1d.benchmark.names.check_part`, its error shown by argparse."""
    try:
        return names.check_part(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The options, with the defaults of the measurement they select filled in (:data:`DEFAULTS`)."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_argument_group('what to measure')
    what.add_argument('--device', default='cuda', choices=('cuda', 'cpu'))
    what.add_argument('--rounding', nargs='+', default=['trunc'], choices=ROUNDINGS,
                      help='roundings of the op; any but trunc alone compares each with truncation (default: trunc)')
    what.add_argument('--passes', nargs='+', choices=PASSES,
                      help='fwd and fwdbwd (forward + input and weight gradients) through autograd; bwd_input and '
                      'bwd_weight time the compiled gradient ops alone (default: fwd fwdbwd)')
    what.add_argument('--host-time', action='store_true', help='host microseconds per call instead of device time')
    what.add_argument('--kernel-times', action='store_true',
                      help='per pass (selects that measurement): after the rounds, profile --kernel-steps calls '
                      'of every case (torch.profiler) and record the device time of the kernels they launch '
                      '(kernel_ms), without the host\'s launch latency; with --ab, compared as a measure of its own')
    what.add_argument('--kernel-steps', type=int, default=20, help='profiled calls per case (default: 20)')
    what.add_argument('--ab', metavar='OLD_TREE', help='also time the build of this source tree (extension built in '
                      'place), alternating with this one in separate processes')
    what.add_argument('--ab-rounds', type=int, default=3, help='alternations of the two builds (default: 3)')
    cases = parser.add_argument_group('cases (defaults depend on what is measured)')
    cases.add_argument('--batch', type=int)
    cases.add_argument('--channels', type=int, help='default: 512, or 96 on the CPU and for host time; 512 for '
                       'float32 and 384 for half precision per rounding and per pass')
    cases.add_argument('--sizes', '--size', type=int, nargs='+', help='heights (= widths) of the input')
    cases.add_argument('--kernel-sizes', '--kernel-size', type=int, nargs='+')
    cases.add_argument('--strides', '--stride', type=int, nargs='+', default=[1],
                       help='strides of the op, per pass only (default: 1)')
    cases.add_argument('--dtypes', '--dtype', nargs='+', choices=list(DTYPES))
    cases.add_argument('--layouts', nargs='+', choices=list(LAYOUTS),
                       help='default: NCHW for float32 and float64, channels_last for half precision (both on the CPU)')
    cases.add_argument('--angles', nargs='+', type=angle,
                       help=f"degrees, or '{MIXED}' (the models' 8 directions)")
    cases.add_argument('--angle-jitter', type=float, help="the 8 directions move by uniform(-jitter, jitter) rad "
                       f"(default: {INTERP_JITTER} with an interpolated rounding, else 0)")
    cases.add_argument('--seed', type=int, default=0)
    cases.add_argument('--no-masked', action='store_true', help='skip the KxK masked baseline')
    timing = parser.add_argument_group('timing and output')
    timing.add_argument('--repeats', type=int, help='timed calls per case over all rounds (host time: per round)')
    timing.add_argument('--rounds', type=int, help='interleaved rounds per group of cases')
    timing.add_argument('--warmup', type=int, help='untimed calls before a case first runs')
    timing.add_argument('--threads', type=int, default=os.cpu_count(), help='torch threads on the CPU (default: all)')
    timing.add_argument('--label', default='after', help='name of a CPU run in its results file')
    timing.add_argument('--out-dir')
    timing.add_argument('--config-name', type=name_part, metavar='NAME',
                        help='configuration in the results files\' names, e.g. pp_conv: op_pp_conv_<tag>.json')
    timing.add_argument('--readme-table', metavar='JSON', help='print the README speed table of a GPU results file')
    timing.add_argument('--records-out', metavar='FILE', help='write only the environment and records to FILE (the '
                        'runs of --ab)')
    args = parser.parse_args(argv)
    args.measurement = measurement(args)
    for key, value in DEFAULTS[args.measurement].items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    args.passes = args.passes or ['fwd', 'fwdbwd']
    if args.angle_jitter is None:
        args.angle_jitter = INTERP_JITTER if set(args.rounding) & set(op_interp.INTERPOLATED) else 0.0
    layouts = args.layouts
    args.configs = [(d, layout) for d in args.dtypes for layout in (layouts or [DEFAULT_LAYOUT[d]])]
    check(parser, args)
    return args


def measurement(args: argparse.Namespace) -> str:
    """What the options ask for: ``host``, ``passes``, ``interp``, ``cpu`` or ``gpu``."""
    if args.host_time:
        return 'host'
    if set(args.passes or ()) & {'bwd_input', 'bwd_weight'} or args.kernel_times:
        return 'passes'
    if set(args.rounding) - {'trunc'}:
        return 'interp'
    return 'cpu' if args.device == 'cpu' else 'gpu'


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Errors (exit status 2) for options that do not fit the measurement."""
    kind = args.measurement
    if kind == 'cpu' and (len(args.sizes) != 1 or len(args.dtypes) != 1):
        parser.error('the CPU benchmark against PyTorch takes one --sizes and one --dtypes value')
    if kind == 'interp' and (len(args.sizes) != 1 or len(args.kernel_sizes) != 1):
        parser.error('--rounding other than trunc compares roundings at one --sizes and one --kernel-sizes value')
    if kind in ('gpu', 'cpu', 'interp', 'host') and not set(args.passes) <= {'fwd', 'fwdbwd'}:
        parser.error(f'--passes {" ".join(args.passes)}: {kind} measurements take fwd and fwdbwd')
    if kind in ('gpu', 'cpu') and MIXED not in args.angles:
        parser.error(f"--angles must include '{MIXED}' (the tables compare with the models' layout)")
    if args.ab and (args.records_out or args.readme_table):
        parser.error('--ab runs the measurement itself: leave out --records-out and --readme-table')
    if args.kernel_times and kind != 'passes':
        parser.error(f'--kernel-times: {kind} measurements time whole calls; per-pass measurements (without '
                     '--host-time) take --kernel-times')
    if args.kernel_times and args.device != 'cuda':
        parser.error('--kernel-times profiles CUDA kernels: it needs --device cuda')
    if args.kernel_steps < 1:
        parser.error(f'--kernel-steps must be >= 1, got {args.kernel_steps}')
    if kind != 'passes' and args.strides != [1]:
        parser.error(f'--strides: {kind} measurements run at stride 1; per-pass measurements take other strides')
    if min(args.strides) < 1:
        parser.error(f'--strides must be >= 1, got {min(args.strides)}')
    if args.angle_jitter < 0:
        parser.error(f'--angle-jitter must be >= 0, got {args.angle_jitter}')
    if min(args.repeats, args.rounds, args.ab_rounds) < 1 or args.warmup < 0:
        parser.error('--repeats, --rounds and --ab-rounds must be >= 1 and --warmup >= 0')


def run(args: argparse.Namespace) -> Dict:
    """The measurement of ``args`` on ``args.device``: ``{'env', 'records', ...}``."""
    if args.device == 'cuda' and not torch.cuda.is_available():
        raise SystemExit('no CUDA device: this measurement needs a CUDA GPU (or --device cpu)')
    if args.device == 'cpu':
        torch.set_num_threads(args.threads)
    runner = {'gpu': op_baselines.run_gpu, 'cpu': op_baselines.run_cpu, 'interp': op_interp.run,
              'passes': op_passes.run, 'host': op_host.run}[args.measurement]
    return runner(args)


def results_stem(args: argparse.Namespace, env: Dict, ab: bool = False) -> str:
    """The results files' name, without the extension, of the measurement of ``args`` on the GPU of ``env``
    (on the CPU with ``--device cpu``): ``op``, ``op_passes`` (``interp_passes`` with an interpolated
    rounding), ``op_host_time`` or ``interp_speed`` (``interp_speed_jitter<j>`` with a jitter other than
    :data:`INTERP_JITTER`), then ``--config-name`` and ``ab`` where given, then the device's tag
    (:func:`mmo1d.benchmark.names.machine_tag`): ``op_h100``, ``op_pp_conv_h100``, ``op_cpu``,
    ``interp_speed_jitter0_h200``, ``op_passes_ab_h100``."""
    kind, jitter = args.measurement, None
    interpolated = bool(set(args.rounding) & set(op_interp.INTERPOLATED))
    if kind == 'interp':
        benchmark = 'interp_speed'
        if args.angle_jitter != INTERP_JITTER:
            jitter = 'jitter' + (f'{args.angle_jitter:.6f}'.rstrip('0').rstrip('.') or '0')
    elif kind == 'passes':
        benchmark = 'interp_passes' if interpolated else 'op_passes'
    else:
        benchmark = {'host': 'op_host_time', 'gpu': 'op', 'cpu': 'op'}[kind]
    return names.results_stem(benchmark, jitter, args.config_name, 'ab' if ab else None,
                              tag=names.machine_tag('cpu' if args.device == 'cpu' else env['gpu']))


def write(args: argparse.Namespace, result: Dict) -> str:
    """Write the results files of ``result`` to ``args.out_dir`` and return their markdown."""
    kind, env = args.measurement, result['env']
    stem = osp.join(args.out_dir, results_stem(args, env))
    if kind == 'cpu':
        md = cpu_tables.summarize(cpu_tables.add_run(stem, args.label, result))
        print(md)
        print(f'wrote {stem}.json and .md')
        return md
    if kind == 'interp':
        json_path, _ = op_interp.write_results(result, stem)
        md = op_interp.summarize(result)
        print(md)
        print(f'wrote {json_path} and .md')
        return md
    summarize = {'gpu': op_tables.summarize, 'passes': op_passes.summarize, 'host': op_host.summarize}[kind]
    with open(stem + '.json', 'w') as f:
        json.dump(result, f, indent=1)
    md = summarize(result)
    with open(stem + '.md', 'w') as f:
        f.write(md + '\n')
    if kind == 'gpu':
        plot_op_benchmark(result, stem + '.png')
    print(md)
    print(f'wrote {stem}.json and .md')
    return md


def run_ab(args: argparse.Namespace, argv: List[str]) -> str:
    """Alternate the build of ``args.ab`` and this one; write the measurement's files with ``_ab`` before the
    device's tag (:func:`results_stem`), ``.json`` and ``.md``."""
    if args.device == 'cuda' and not torch.cuda.is_available():
        raise SystemExit('no CUDA device: this measurement needs a CUDA GPU (or --device cpu)')
    worker_argv = op_builds.strip_options(argv, {'--ab': 1, '--ab-rounds': 1, '--out-dir': 1})
    new_root = osp.dirname(osp.dirname(osp.abspath(mmo1d.__file__)))
    with tempfile.TemporaryDirectory() as tmp:
        try:
            old_path = op_builds.overlay_package(args.ab, osp.join(new_root, 'mmo1d'), osp.join(tmp, 'old'))
        except FileNotFoundError as err:
            raise SystemExit(f'--ab {args.ab}: {err}') from None
        env, records = op_builds.alternate(osp.abspath(__file__), worker_argv, {'old': old_path, 'new': new_root},
                                           args.ab_rounds, tmp)
    builds = {'old': {'path': args.ab, 'sources': op_builds.sources_fingerprint(args.ab)},
              'new': {'path': osp.relpath(new_root), 'sources': op_builds.sources_fingerprint(new_root)}}
    result = {'env': env, 'command': command_line(), 'measurement': args.measurement,
              'alternations': args.ab_rounds, 'builds': builds, 'rows': op_builds.compare(records), 'records': records}
    stem = osp.join(args.out_dir, results_stem(args, env, ab=True))
    with open(stem + '.json', 'w') as f:
        json.dump(result, f, indent=1)
    md = op_builds.summarize(result)
    with open(stem + '.md', 'w') as f:
        f.write(md + '\n')
    print(md)
    print(f'wrote {stem}.json and .md')
    return md


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.readme_table:
        with open(args.readme_table) as f:
            print(op_tables.readme_table(json.load(f)))
        return
    if args.records_out:
        result = run(args)
        with open(args.records_out, 'w') as f:
            json.dump({'env': result['env'], 'records': result['records']}, f)
        return
    os.makedirs(args.out_dir, exist_ok=True)  # before the timed run, not after it
    if args.measurement == 'cpu' and not args.ab:
        try:  # before the timed run too
            cpu_tables.check_same_cpu(osp.join(args.out_dir, results_stem(args, {})), args.label, cpu_model())
        except ValueError as err:
            raise SystemExit(str(err)) from None
    if args.ab:
        run_ab(args, argv)
        return
    write(args, run(args))


if __name__ == '__main__':
    quiet_upstream()
    main()
