"""Names of the results files: ``<benchmark>[_<configuration>]_<machine tag>``, as ``benchmarks/README.md``
indexes them, so that a new run replaces the file of the same benchmark, configuration and machine; and
the size in a model name of the model benchmark and the key of its cases."""
import re
from typing import Dict, List, Optional, Tuple

#: Words of a device name that name the maker or the product line, not the model.
_BRAND_WORDS = {'nvidia', 'geforce', 'tesla', 'quadro', 'amd', 'instinct', 'radeon'}
#: Words that follow the model in a device name: memory size and type, form factor, a MIG slice.
_DETAIL_WORD = re.compile(r'\d+gb|hbm\d*e?|pcie|sxm\d*|nvl|mig')
#: A part of a file name: lowercase letters, digits, ``_`` and ``.``.
_PART = re.compile(r'[a-z0-9][a-z0-9_.]*')


def machine_tag(device: str, gpus: int = 1) -> str:
    """The short tag of the device a benchmark ran on.

    ``'cpu'`` stays ``'cpu'``; a GPU's name gives its model, lowercase, without the maker, memory and
    form factor: ``'NVIDIA H100 80GB HBM3'`` -> ``'h100'``, ``'NVIDIA H200'`` -> ``'h200'``,
    ``'NVIDIA A100-SXM4-80GB'`` -> ``'a100'``, ``'NVIDIA GeForce RTX 4090'`` -> ``'rtx4090'``.

    Args:
        device: ``torch.cuda.get_device_name()``, or ``'cpu'``.
        gpus: GPUs the benchmark used; above 1, ``x<gpus>`` follows the model (``'h200x4'``).

    Raises:
        ValueError: for a name without a model, a count below 1, or several GPUs with ``'cpu'``.
    """
    if gpus < 1:
        raise ValueError(f'a benchmark uses at least one GPU, got gpus={gpus}')
    if device.strip().lower() == 'cpu':
        if gpus != 1:
            raise ValueError(f"the CPU tag takes no GPU count, got gpus={gpus}")
        return 'cpu'
    model = []
    for word in re.split(r'[\s_/-]+', device.lower()):
        if _DETAIL_WORD.fullmatch(word):
            break
        if word and word not in _BRAND_WORDS:
            model.append(word)
    tag = re.sub(r'[^a-z0-9]', '', ''.join(model))
    if not tag:
        raise ValueError(f'no GPU model in the device name {device!r}')
    return tag + (f'x{gpus}' if gpus > 1 else '')


def check_part(text: str) -> str:
    """``text`` if it can be a part of a results file's name (lowercase letters, digits, ``_`` and ``.``,
    starting with a letter or digit).

    Raises:
        ValueError: naming the text and what a part may hold.
    """
    if not _PART.fullmatch(text):
        raise ValueError(f'{text!r} cannot be part of a results file name: use lowercase letters, digits, '
                         "'_' and '.', starting with a letter or digit")
    return text


def results_stem(benchmark: str, *config: Optional[str], tag: str) -> str:
    """``<benchmark>_<config>..._<tag>``, the parts of ``config`` that are None or empty left out
    (``results_stem('models', 'tiny', None, tag='h100')`` -> ``'models_tiny_h100'``).

    Raises:
        ValueError: for a part that :func:`check_part` refuses.
    """
    parts = [check_part(benchmark)] + [check_part(part) for part in config if part] + [check_part(tag)]
    return '_'.join(parts)


#: A case of the model benchmark: (model, mode, pass).
Key = Tuple[str, str, str]


def by_case(records: List[Dict]) -> Dict[Key, Dict]:
    """The model benchmark's records by case, (model, mode, pass)."""
    return {(r['model'], r['mode'], r['pass']): r for r in records}


def model_size(name: str) -> str:
    """'T' or 'B' (any size letter) of a model of the model benchmark."""
    match = re.match(r'timm convnext_(\w+)', name)
    if match:
        return match.group(1)[0].upper()
    match = re.match(r'ConvNeXt-(\w)', name)
    if not match:
        raise ValueError(f'unknown model name in the model benchmark: {name!r}')
    return match.group(1)
