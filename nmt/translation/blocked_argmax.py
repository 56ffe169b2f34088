"""A speed trick, fenced here: each row's best token on the CPU, found block by block instead of
by ``torch.argmax``.

Greedy search picks the best of the vocabulary's scores for every sentence of the batch at every
step. On the CPU, ``torch.argmax`` along the rows of a ``(sentences, vocabulary)`` matrix is
far slower than a maximum alone: 3.6 ms against 0.28 ms for 512 x 4,000 floats at one thread on
an Intel Xeon, 12% of an fp32 greedy search of the demo's test split. Here each row is cut into
blocks of :data:`BLOCK` scores: the blocks' maxima (a fast reduction) say which block holds the
row's first maximum, and the index is looked for inside that block alone. Columns that must
never win (``<pad>``, ``<bos>``) are set to -inf in a copy of the first blocks only, where the
readable path copied the whole matrix.

It gives ``torch.argmax``'s answer (the first of equal maxima, never a column of ``never``) for
every row without NaN. Greedy fp32 on the demo's test split: 1.13x, every line identical
(docs/BENCHMARKS.md, "Decoding the test split"). ``tests/test_blocked_argmax.py`` compares it
with ``torch.argmax`` on random, tied and infinite scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from nmt.data.fixed_shapes import padded_width

BLOCK = 32  # scores a block: 0.89 ms for the 512 x 4,000 above (16: 2.6 ms)


def applies(scores: Tensor) -> bool:
    """Whether this path is taken: ``(rows, vocabulary)`` scores on the CPU, two blocks wide or
    more."""
    return scores.device.type == "cpu" and scores.dim() == 2 and scores.shape[1] >= 2 * BLOCK


def argmax_rows(scores: Tensor, never: Sequence[int] = ()) -> Tensor:
    """Each row's index of its largest score, the first of equal ones, never one of ``never``:
    ``torch.argmax`` of ``scores`` with those columns at -inf. ``scores`` is not changed.

    bf16 scores (a bf16 search's) are widened to fp32 first, exactly: torch's reductions over
    bf16 blocks take a slow path on the CPU (512 x 4,000 scores: 6.2 ms by blocks in bf16,
    2.0 ms widened and by blocks, on an AMD EPYC Zen 4)."""
    if scores.dtype == torch.bfloat16:
        scores = scores.float()
    rows, width = scores.shape
    # the blocks holding `never` (at most the whole row)
    head = min(padded_width(max(never, default=-1) + 1, BLOCK), width)
    whole = head + (width - head) // BLOCK * BLOCK  # where the last whole block ends
    parts: list[tuple[Tensor, Tensor]] = []  # each part's best score and its index, in order
    if head:
        first = scores[:, :head].clone()
        first[:, list(never)] = -math.inf
        parts.append(first.max(dim=1))
    row = torch.arange(rows, device=scores.device)
    if whole > head:
        blocks = scores[:, head:whole].unflatten(1, (-1, BLOCK))
        block = blocks.amax(dim=2).argmax(dim=1)  # the first block holding the row's maximum
        best, inside = blocks[row, block].max(dim=1)
        parts.append((best, head + block * BLOCK + inside))
    if width > whole:
        best, at = scores[:, whole:].max(dim=1)
        parts.append((best, whole + at))
    best = torch.stack([b for b, _ in parts], dim=1)
    index = torch.stack([i for _, i in parts], dim=1)
    first_part = (best == best.amax(dim=1, keepdim=True)).to(torch.uint8).argmax(dim=1)
    return index[row, first_part]
