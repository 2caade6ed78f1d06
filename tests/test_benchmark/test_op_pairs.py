"""mmo1d.benchmark.op_pairs: the calls of a pair benchmark and its files, on the CPU."""
import json

import torch

from mmo1d.benchmark.op_pairs import pair_cases, parse_pair_args, write_pair_results


def test_cases_call_forward_or_take_the_inputs_gradients():
    x = torch.randn(3, 4, requires_grad=True)
    calls = []

    def ours():
        calls.append(torch.is_grad_enabled())
        return x * 2

    def aten():
        return x + x

    grad = torch.ones(3, 4)
    (rec_ours, fwd_ours), (rec_aten, _) = pair_cases(ours, aten, (x, ), grad, backward=False)
    assert rec_ours == {'impl': 'mmo1d'} and rec_aten == {'impl': 'aten'}
    fwd_ours(0)
    assert calls == [False]  # forward alone runs without gradients
    (_, bwd_ours), _ = pair_cases(ours, aten, (x, ), grad, backward=True)
    bwd_ours(0)
    assert calls == [False, True] and x.grad is None  # torch.autograd.grad: no .grad accumulated


def test_files_are_named_by_benchmark_and_machine(tmp_path, capsys):
    args = parse_pair_args('test', ['--out-dir', str(tmp_path), '--rounds', '2'])
    assert args.rounds == 2 and args.repeats == 51 and args.warmup == 10
    result = {'env': {'gpu': 'NVIDIA H200'}, 'records': [{'impl': 'mmo1d', 'ms': 1.0}]}
    write_pair_results('residual', result, lambda r: f"# {len(r['records'])} record", args.out_dir)
    assert json.loads((tmp_path / 'residual_h200.json').read_text()) == result
    assert (tmp_path / 'residual_h200.md').read_text() == '# 1 record\n'
    assert capsys.readouterr().out == '# 1 record\n'


def test_run_tags_every_record_with_its_site_and_pass(monkeypatch):
    from mmo1d.benchmark import op_pairs
    monkeypatch.setattr(op_pairs.torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(op_pairs, 'gpu_env', lambda: {'gpu': 'NVIDIA H200'})
    monkeypatch.setattr(op_pairs, 'copy_bandwidth_gbps', lambda repeats: 4200.04)
    monkeypatch.setattr(op_pairs, 'measure_cases',
                        lambda cases, repeats, rounds, warmup: [dict(rec, ms=1.0) for rec, _ in cases])
    monkeypatch.setattr(op_pairs.torch.cuda, 'empty_cache', lambda: None)
    made = []

    def make_cases(fields, backward):
        made.append((fields['site'], backward))
        return [({'impl': 'mmo1d'}, None), ({'impl': 'aten'}, None)]

    args = parse_pair_args('test', ['--repeats', '50', '--rounds', '3'])
    result = op_pairs.run_pairs('tool', [{'site': 'a', 'shape': [1]}, {'site': 'b', 'shape': [2]}], make_cases, args)
    assert made == [('a', False), ('a', True), ('b', False), ('b', True)]
    assert [(r['site'], r['pass'], r['impl']) for r in result['records']][:4] == [
        ('a', 'fwd', 'mmo1d'), ('a', 'fwd', 'aten'), ('a', 'fwdbwd', 'mmo1d'), ('a', 'fwdbwd', 'aten')]
    assert result['env'] == {'gpu': 'NVIDIA H200', 'batch': 64, 'repeats': 51, 'rounds': 3,
                             'copy_bandwidth_GBps': 4200.0}
