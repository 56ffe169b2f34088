"""The one encoder-decoder contract every model family implements.

A family's network (a subclass of :class:`EncoderDecoder`, named by its entry in
:func:`nmt.config.families`, which also holds its settings, checks and ``nmt runs`` line)
owns:

- ``__init__(cfg, src_vocab_size, tgt_vocab_size, joint_vocab=...)``: its modules;
- ``init_weights(scheme)``: its initialisation for ``model.init`` (``"xavier"``: the recipe's);
- ``max_positions``: the longest sequence it takes (None: no limit), which bounds search;
- and the three calls below.

Search (greedy, beam), training, validation and attention pictures are written once against it:

- ``encode(src, src_lengths)`` runs the encoder once and returns a :data:`Memory`.
- ``init_state(memory)`` returns the empty incremental :data:`State` for decoding (for the
  Transformer it already holds the cross-attention keys/values, computed once per batch).
- ``decode(tgt, memory, state)`` runs the decoder:
    * ``state is None``: a full teacher-forced pass over ``tgt`` (causal), for training;
    * otherwise ``tgt`` holds only the *new* positions (usually one) and the state is extended,
      so each step costs O(1) projections instead of re-running the prefix.

A family whose decoder ends with one ``nn.Linear``, ``self.out``, from its features to the
logits may say so (``separable_output = True``) and take ``decode(..., project=False)``: the
features ``out`` would be applied to, in place of the logits. Training in fp32 on the CPU then
applies the output layer itself, together with the loss (:mod:`nmt.training.chunked_output_loss`).

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
    logits: Tensor  # (B, T, V); decode(project=False): the output layer's input (B, T, D)
    state: State | None  # the extended state, None for a full pass
    weights: dict[str, Tensor]  # empty unless need_weights


class EncoderDecoder(nn.Module):
    """Base class: a family's network implements every method that raises
    ``NotImplementedError`` here (see the module docstring), so a new one cannot silently keep
    PyTorch's initialisation.

    Token ids are not stored here: ``<pad>``, ``<bos>`` and ``<eos>`` are the project-wide ids of
    :mod:`nmt.data.tokenizers` (every tokenizer is built with them), which search reads directly.
    """

    max_positions: int | None = None  # longest sequence the model takes; None: no limit
    separable_output = False  # True: ``out`` is an nn.Linear and decode takes project=False

    def init_weights(self, scheme: str) -> None:
        """Initialise the weights as ``model.init`` says: ``"default"`` keeps PyTorch's,
        ``"xavier"`` is the recipe's."""
        raise NotImplementedError

    def encode(self, src: Tensor, src_lengths: Tensor, need_weights: bool = False) -> Memory:
        raise NotImplementedError

    def init_state(self, memory: Memory) -> State:
        raise NotImplementedError

    def decode(
        self, tgt: Tensor, memory: Memory, state: State | None = None, need_weights: bool = False,
        project: bool = True,
    ) -> DecodeOutput:
        raise NotImplementedError

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor,
                project: bool = True) -> Tensor:
        """Teacher-forced logits ``(B, T, V)`` for ``tgt_in`` = ``<bos>`` + target[:-1];
        ``project=False`` (a family with ``separable_output``): the features ``(B, T, D)`` that
        ``self.out`` maps to them."""
        memory = self.encode(src, src_lengths)
        if project:
            return self.decode(tgt_in, memory).logits
        return self.decode(tgt_in, memory, project=False).logits


def select_rows(tensors: dict[str, Tensor], index: Tensor) -> dict[str, Tensor]:
    """Reorder/select/repeat batch rows of every tensor (beam search, finished-row pruning)."""
    return {k: v.index_select(0, index) for k, v in tensors.items()}


def lengths_to_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """``(B,)`` lengths -> ``(B, S)`` bool mask, True at real (non-pad) positions."""
    s = int(lengths.max()) if max_len is None else max_len
    return torch.arange(s, device=lengths.device)[None, :] < lengths[:, None]


def xavier_requested(scheme: str) -> bool:
    """Whether ``model.init`` asks for the recipe's Xavier initialisation (else PyTorch's)."""
    if scheme not in ("xavier", "default"):
        raise ValueError(f"model.init: expected xavier or default, got {scheme!r}")
    return scheme == "xavier"
