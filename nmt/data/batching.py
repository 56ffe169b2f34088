"""Batches: which sentences go together (:func:`make_batches`) and their padded tensors
(:func:`collate`).

Batches are length-grouped ("bucketed") so that little compute goes to padding: the epoch's
indices are shuffled, cut into chunks of ``CHUNK_BATCHES`` batches, sorted by length inside each
chunk (:func:`length_order`), cut into batches, and the batch order is shuffled. For the d2l
preset (600 pairs, every sentence truncated to 10 tokens) this differs from the recipe's plain
random batches only in which sentences share a batch; each epoch still visits every sentence
exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from nmt.data.cache import Split
from nmt.data.fixed_shapes import fixed_shape_token_batches, padded_width
from nmt.data.token_budget import token_batches
from nmt.data.tokenizers import BOS_ID, EOS_ID, PAD_ID

CHUNK_BATCHES = 100  # batches per sorted chunk: big enough to group lengths, small enough to mix


@dataclass
class Batch:
    src: Tensor  # (B, S) long: source ids + <eos>, PAD after src_lengths
    src_lengths: Tensor  # (B,) long, <eos> included (when not truncated away)
    tgt_in: Tensor  # (B, T) long: <bos> + target, the decoder input (teacher forcing)
    tgt_out: Tensor  # (B, T) long: target + <eos>, what the decoder must predict
    tgt_lengths: Tensor  # (B,) long: real positions of tgt_in/tgt_out
    n_tokens: int  # tgt_lengths.sum(): the loss' denominator

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        def move(t: Tensor) -> Tensor:
            return t.to(device, non_blocking=non_blocking)

        return Batch(move(self.src), move(self.src_lengths), move(self.tgt_in),
                     move(self.tgt_out), move(self.tgt_lengths), self.n_tokens)

    def __len__(self) -> int:
        return int(self.src.shape[0])


def _pad(ids: np.ndarray, offsets: np.ndarray, indices: np.ndarray, *, prefix: int | None,
         suffix: int | None, truncate: int, multiple: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gather sequences ``indices`` of a flat ragged array into a PAD-filled ``(B, L)`` int64
    matrix with an optional ``prefix`` and ``suffix`` token, cut to ``truncate`` (if > 0), ``L``
    rounded up to a multiple of ``multiple`` (:mod:`nmt.data.fixed_shapes`). Returns the matrix
    and the ``(B,)`` lengths. Vectorised: no Python loop over tokens."""
    starts, lens = offsets[indices], offsets[indices + 1] - offsets[indices]
    extra = (prefix is not None) + (suffix is not None)
    lengths = lens + extra
    if truncate > 0:
        lengths = np.minimum(lengths, truncate)
    b, width = len(indices), padded_width(int(lengths.max()), multiple) if len(indices) else 0
    out = np.full((b, width), PAD_ID, dtype=np.int64)
    first = int(prefix is not None)
    if prefix is not None and width:
        out[:, 0] = prefix
    # copy the body tokens that fit: row r gets n_copy[r] tokens at columns first...
    n_copy = np.clip(lengths - first, 0, lens)
    rows = np.repeat(np.arange(b), n_copy)
    ends = np.cumsum(n_copy)
    cols = np.arange(int(ends[-1]) if b else 0) - np.repeat(ends - n_copy, n_copy)
    out[rows, cols + first] = ids[np.repeat(starts, n_copy) + cols]
    if suffix is not None:
        fits = lengths == lens + extra  # the suffix survived truncation
        out[np.flatnonzero(fits), (lengths - 1)[fits]] = suffix
    return out, lengths


def collate(split: Split, indices: np.ndarray, *, truncate: int = 0,
            pad_to_multiple: int = 0) -> Batch:
    """Padded tensors for the pairs ``indices`` of ``split``.

    Like the recipe, ``<eos>`` is appended before truncating to ``truncate`` tokens, so a long
    sentence loses its ``<eos>``. ``tgt_in`` is ``<bos>`` + target and ``tgt_out`` target +
    ``<eos>``: both have ``len(target) + 1`` real positions (cut to ``truncate``). With
    ``pad_to_multiple``, both widths are padded up to a multiple of it
    (:mod:`nmt.data.fixed_shapes`).
    """
    indices = np.asarray(indices, dtype=np.int64)
    m = pad_to_multiple
    src, src_len = _pad(split.src_ids, split.src_offsets, indices, prefix=None, suffix=EOS_ID,
                        truncate=truncate, multiple=m)
    tgt_out, tgt_len = _pad(split.tgt_ids, split.tgt_offsets, indices, prefix=None,
                            suffix=EOS_ID, truncate=truncate, multiple=m)
    tgt_in, _ = _pad(split.tgt_ids, split.tgt_offsets, indices, prefix=BOS_ID, suffix=None,
                     truncate=truncate, multiple=m)
    return Batch(torch.from_numpy(src), torch.from_numpy(src_len), torch.from_numpy(tgt_in),
                 torch.from_numpy(tgt_out), torch.from_numpy(tgt_len), int(tgt_len.sum()))


class Collator:
    """:func:`collate` for one split, from padded matrices built once when they are small.

    A batch is then a gather of rows and a cut to its longest sequence, cheaper than padding
    from the ragged arrays at every step, which shows in the d2l presets' steps (600 pairs of
    at most 10 tokens, a few milliseconds a step). Splits whose matrices would hold
    more than ``max_entries`` ids (the full corpus, with its long outliers) pad per batch as
    :func:`collate` does. Batches are identical either way.
    """

    def __init__(self, split: Split, *, truncate: int = 0, max_entries: int = 1 << 22,
                 pad_to_multiple: int = 0) -> None:
        self.split, self.truncate, self.multiple = split, truncate, pad_to_multiple
        self._matrices: tuple[np.ndarray, ...] | None = None
        n = len(split)
        if n == 0:
            return
        extra = 1  # <eos> on the source and target side, <bos> on the decoder input
        widths = [int(split.src_lengths().max()) + extra, int(split.tgt_lengths().max()) + extra]
        if truncate > 0:
            widths = [min(w, truncate) for w in widths]
        if n * (widths[0] + 2 * widths[1]) > max_entries:
            return
        # tensors viewing numpy arrays, as wide as the widest batch's padding
        whole = collate(split, np.arange(n), truncate=truncate, pad_to_multiple=pad_to_multiple)
        self._matrices = tuple(t.numpy() for t in (whole.src, whole.src_lengths, whole.tgt_in,
                                                   whole.tgt_out, whole.tgt_lengths))

    def __call__(self, indices: np.ndarray) -> Batch:
        indices = np.asarray(indices, dtype=np.int64)
        if self._matrices is None or len(indices) == 0:
            return collate(self.split, indices, truncate=self.truncate,
                           pad_to_multiple=self.multiple)
        src, src_len, tgt_in, tgt_out, tgt_len = self._matrices
        s_len, t_len = src_len[indices], tgt_len[indices]
        s_width = padded_width(int(s_len.max()), self.multiple)
        t_width = padded_width(int(t_len.max()), self.multiple)
        return Batch(torch.from_numpy(src[indices, :s_width]), torch.from_numpy(s_len),
                     torch.from_numpy(tgt_in[indices, :t_width]),
                     torch.from_numpy(tgt_out[indices, :t_width]), torch.from_numpy(t_len),
                     int(t_len.sum()))


def length_order(src_lengths: np.ndarray, tgt_lengths: np.ndarray,
                 pad_to_multiple: int = 0) -> np.ndarray:
    """The order in which pairs are cut into batches: by the longer of their two sides, then
    target, then source length (stable, so ties keep the shuffled order). A batch is as wide
    as its longest source and its longest target, so neighbours must be alike on both sides:
    sorted by target alone, a batch of equal targets held sources of every length, and 47% of
    the source positions of `configs/transformer.toml`'s batches were padding (8% of all
    positions are now, 30% then: ``python -m bench.shapes``). With ``pad_to_multiple`` the
    padded target width comes first, as :func:`fixed_shape_token_batches` cuts by it, then
    the source length."""
    if pad_to_multiple > 1:
        return np.lexsort((tgt_lengths, src_lengths,
                           padded_width(tgt_lengths + 1, pad_to_multiple)))
    return np.lexsort((src_lengths, tgt_lengths, np.maximum(src_lengths, tgt_lengths)))


def make_batches(
    src_lengths: np.ndarray,
    tgt_lengths: np.ndarray,
    *,
    batch_size: int,
    by: str = "sentences",
    shuffle: bool = True,
    seed: int = 1,
    epoch: int = 0,
    rank: int = 0,
    world_size: int = 1,
    pad_to_multiple: int = 0,
) -> list[np.ndarray]:
    """Length-grouped batches of pair indices for one epoch.

    ``by="sentences"``: ``batch_size`` pairs per batch (the last of each chunk may be smaller).
    ``by="tokens"``: as many pairs as fit ``batch_size`` padded target tokens, counting the
    ``<eos>`` (``n_pairs * (max tgt length + 1) <= batch_size``; a longer pair goes alone).
    ``shuffle=False`` sorts by length over the whole split (fast evaluation, fixed order).
    Deterministic for ``(seed, epoch)``. With ``world_size > 1`` every rank computes the same
    batch list and takes every ``world_size``-th batch; the remainder is dropped so all ranks
    run the same number of steps, and the ranks' batches are disjoint. ``pad_to_multiple``
    (``by="tokens"``): the budget counts each batch's target width rounded up to a multiple of
    it, and a batch holds pairs of one rounded width (:mod:`nmt.data.fixed_shapes`).
    """
    if by not in ("sentences", "tokens"):
        raise ValueError(f"by={by!r}: expected 'sentences' or 'tokens'")
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}: expected >= 1")
    src_lengths, tgt_lengths = np.asarray(src_lengths), np.asarray(tgt_lengths)
    n = len(tgt_lengths)
    rng = np.random.default_rng([seed, epoch])
    # 4 bytes a pair where the split allows: the batches are views of this order, held all
    # epoch (shuffling an int32 range draws what rng.permutation(n) does)
    order = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
    if shuffle:
        rng.shuffle(order)
    per_batch = batch_size if by == "sentences" else max(
        1, int(batch_size / (tgt_lengths.mean() + 1))) if n else 1  # pairs in a typical batch
    chunk = CHUNK_BATCHES * per_batch if shuffle else n
    batches: list[np.ndarray] = []
    for lo in range(0, n, max(chunk, 1)):
        part = order[lo:lo + chunk]
        part = part[length_order(src_lengths[part], tgt_lengths[part], pad_to_multiple
                                 if by == "tokens" else 0)]
        if by == "sentences":
            batches.extend(np.array_split(part, range(batch_size, len(part), batch_size)))
        elif pad_to_multiple > 1:
            batches.extend(fixed_shape_token_batches(part, tgt_lengths[part] + 1, batch_size,
                                                     pad_to_multiple))
        else:
            batches.extend(token_batches(part, (tgt_lengths[part] + 1).tolist(), batch_size))
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    if world_size > 1:
        per_rank = len(batches) // world_size
        batches = batches[rank::world_size][:per_rank]
    return batches
