"""How long an output may grow: nmt's one definition of the output-length limit.

Every engine uses it: :mod:`nmt.translation.search` (per batch), :mod:`nmt.translation.translator`,
the CTranslate2 engine, and the Python lines of an export's README, which carry
:func:`output_length`'s source as it is here. Plain Python, so engines without PyTorch use it too.
"""

from __future__ import annotations

import math

from nmt.config import DecodeConfig


def output_length(n_src: int, a: float, b: int, cap: int) -> int:
    """Most output tokens (``<eos>`` included) for a source of ``n_src`` ids (``<eos>``
    included): ``floor(a * n_src) + b``, at least 1 and at most ``cap``."""
    return min(max(math.floor(a * n_src) + b, 1), max(cap, 1))


def output_cap(cfg: DecodeConfig, max_positions: int | None) -> int:
    """The most output tokens of any sentence: ``cfg.max_len_cap``, and for a model with a
    position table of ``max_positions`` rows what still fits in it (``<bos>`` takes the first)."""
    cap = cfg.max_len_cap
    if max_positions is not None:
        cap = min(cap, max_positions - 1)
    return max(cap, 1)


def output_limit(n_src: int, cfg: DecodeConfig, max_positions: int | None) -> int:
    """:func:`output_length` with the decode settings ``cfg`` (``max_len_a``, ``max_len_b``)
    and :func:`output_cap`."""
    return output_length(n_src, cfg.max_len_a, cfg.max_len_b, output_cap(cfg, max_positions))
