"""Training batches in a few shapes that repeat step after step (``train.pad_to_multiple``).

Length-grouped batches come in a new shape almost every step: ``(pairs, source length, target
length)`` follows the lengths of whichever sentences were grouped. What is built once per shape
is then built again and again: a ``torch.compile`` graph (``train.compile``), a CUDA graph, a
library's plan for a kernel. With a multiple ``m``:

- every batch's source and target width is its longest sequence rounded up to a multiple of
  ``m`` (padding: the masks and the loss skip it, so the loss and the gradients are unchanged);
- batched by target tokens, the pairs of a sorted chunk are grouped by that rounded target
  width first, and each group is cut by the token budget measured at the rounded width, so a
  full batch of width ``L`` holds ``budget // L`` pairs, whatever the sentences.

A batch's shape is then one of a few: one row count per target width (and the smaller last batch
of each width in each chunk), source widths in steps of ``m``. :func:`distinct_shapes` counts
them (``bench/gpu.py``'s check and ``python -m bench.shapes`` print the count). The price is the
padding: tokens computed for nothing, which the same bench reports beside the count.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

import numpy as np

from nmt.data.token_budget import token_batches

Width = TypeVar("Width", int, np.ndarray)  # one width, or an array of them


def padded_width(width: Width, multiple: int) -> Width:
    """``width`` rounded up to a multiple of ``multiple`` (as it is when ``multiple`` <= 1);
    an array of widths, each."""
    return -(-width // multiple) * multiple if multiple > 1 else width


def fixed_shape_token_batches(order: np.ndarray, lengths: np.ndarray, budget: int,
                              multiple: int) -> list[np.ndarray]:
    """Cut ``order`` (sorted ascending by ``lengths``, each a pair's target length with its
    ``<eos>``) into batches of at most ``budget`` padded target tokens, each holding pairs of
    one padded width (:func:`padded_width`), measured at that width: every full batch of a
    width has the same number of pairs."""
    widths = padded_width(np.asarray(lengths, dtype=np.int64), multiple)
    bounds = np.flatnonzero(np.diff(widths)) + 1  # where the padded width changes
    batches: list[np.ndarray] = []
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(order)], strict=True):
        if hi > lo:
            batches.extend(token_batches(order[lo:hi], [int(widths[lo])] * int(hi - lo),
                                         budget))
    return batches


def batch_shapes(src_lengths: np.ndarray, tgt_lengths: np.ndarray,
                 batches: Iterable[np.ndarray], multiple: int = 0,
                 truncate: int = 0) -> list[tuple[int, int, int]]:
    """The ``(pairs, source width, target width)`` of each batch as the collator pads it, from
    the split's token counts (``<eos>`` and ``<bos>`` added here), without building a batch."""
    def width(lengths: np.ndarray) -> int:
        longest = int(lengths.max()) + 1
        return padded_width(min(longest, truncate) if truncate > 0 else longest, multiple)

    return [(len(b), width(src_lengths[b]), width(tgt_lengths[b])) for b in batches]


def padding_share(src_lengths: np.ndarray, tgt_lengths: np.ndarray,
                  batches: Iterable[np.ndarray], multiple: int = 0, truncate: int = 0) -> float:
    """The share of the batches' positions, source and target together, that are padding."""
    batches = list(batches)
    shapes = batch_shapes(src_lengths, tgt_lengths, batches, multiple, truncate)
    cap = truncate if truncate > 0 else np.iinfo(np.int64).max
    real = sum(int(np.minimum(src_lengths[b] + 1, cap).sum() + np.minimum(tgt_lengths[b] + 1,
                                                                         cap).sum())
               for b in batches)
    total = sum(n * (s + t) for n, s, t in shapes)
    return 1 - real / total if total else 0.0


def distinct_shapes(shapes: Iterable[tuple[int, ...]]) -> int:
    """How many different shapes ``shapes`` (one ``(pairs, source width, target width)`` per
    batch) holds: the graphs a compiler or CUDA graphs would build for them."""
    return len(set(shapes))
