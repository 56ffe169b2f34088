"""The one encoder-decoder contract both model families implement.

Search (greedy, beam), training, validation and attention pictures are written once against it:

- ``encode(src, src_lengths)`` runs the encoder once and returns a :data:`Memory`.
- ``init_state(memory)`` returns the empty incremental :data:`State` for decoding (for the
  Transformer it already holds the cross-attention keys/values, computed once per batch).
- ``decode(tgt, memory, state)`` runs the decoder:
    * ``state is None``: a full teacher-forced pass over ``tgt`` (causal), for training;
    * otherwise ``tgt`` holds only the *new* positions (usually one) and the state is extended,
      so each step costs O(1) projections instead of re-running the prefix.

Memory and State are flat ``dict[str, Tensor]`` whose tensors all have the batch on dim 0, so
beam search and batch pruning can reorder or select rows generically (:func:`select_rows`).

Attention weights (for pictures and tests) are returned when ``need_weights=True`` as a dict of
tensors shaped ``(B, layers, heads, queries, keys)``: ``"enc"`` from ``encode`` (stored in the
memory under ``"attn_enc"``), ``"self"`` and ``"cross"`` from ``decode``. The GRU reports its
Bahdanau weights as ``"cross"`` with one layer and one head.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

Memory = dict[str, Tensor]
State = dict[str, Tensor]


class DecodeOutput(NamedTuple):
    logits: Tensor  # (B, T, V)
    state: State | None  # the extended state, None for a full pass
    weights: dict[str, Tensor]  # empty unless need_weights


class EncoderDecoder(nn.Module):
    """Base class: subclasses implement ``encode``, ``init_state`` and ``decode``."""

    def __init__(self, pad_id: int, bos_id: int, eos_id: int) -> None:
        super().__init__()
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id

    def encode(self, src: Tensor, src_lengths: Tensor, need_weights: bool = False) -> Memory:
        raise NotImplementedError

    def init_state(self, memory: Memory) -> State:
        raise NotImplementedError

    def decode(
        self, tgt: Tensor, memory: Memory, state: State | None = None, need_weights: bool = False
    ) -> DecodeOutput:
        raise NotImplementedError

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits ``(B, T, V)`` for ``tgt_in`` = ``<bos>`` + target[:-1]."""
        return self.decode(tgt_in, self.encode(src, src_lengths)).logits


def select_rows(tensors: dict[str, Tensor], index: Tensor) -> dict[str, Tensor]:
    """Reorder/select/repeat batch rows of every tensor (beam search, finished-row pruning)."""
    return {k: v.index_select(0, index) for k, v in tensors.items()}


def lengths_to_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """``(B,)`` lengths -> ``(B, S)`` bool mask, True at real (non-pad) positions."""
    s = int(lengths.max()) if max_len is None else max_len
    return torch.arange(s, device=lengths.device)[None, :] < lengths[:, None]
