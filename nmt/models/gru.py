"""GRU encoder-decoder with Bahdanau (additive) attention (Bahdanau et al. 2015), as in the recipe.

Each decoder step is the recipe's: the query is the top layer's previous hidden state, the
:class:`~nmt.models.attention.AdditiveAttention` module gives a context over the encoder outputs,
and the decoder GRU (an ``nn.GRU``) takes ``concat(context, embedding)`` for one step. The
teacher-forced pass is the same step in a loop.

Differences from the recipe, on purpose: the encoder runs over packed sequences, so padding
never reaches the outputs or the final state; and the attention keys are projected once per
batch (in :meth:`GRUSeq2Seq.init_state`) instead of at every target step. With
``bidirectional`` the two directions are summed, outputs and final states alike, so the decoder
is unchanged.

Memory: ``enc_out`` ``(B, S, H)``, ``enc_hidden`` ``(B, L, H)``, ``src_mask`` ``(B, S)`` bool,
``src_lengths`` ``(B,)``. State: ``hidden`` ``(B, L, H)`` and the projected attention ``keys``
``(B, S, H)``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.config import ModelConfig
from nmt.models.attention import AdditiveAttention
from nmt.models.base import (
    DecodeOutput,
    EncoderDecoder,
    Memory,
    State,
    lengths_to_mask,
    xavier_requested,
)


def outside_cuda_autocast(gru: nn.GRU, x: Any, hidden: Tensor | None = None) -> Any:
    """``gru(x, hidden)``, on CUDA with autocast off, so in the weights' own dtype: fp32 in
    training (the layers around it keep bf16), bf16 in a bf16 search's bf16 copy of the model.

    On CUDA, bf16 autocast ran cuDNN's GRU in its half-precision kernels on weights cast at
    every call, and the whole model in fp32 trained faster than in bf16 on an H100; with the
    GRU in fp32, ``configs/gru.toml``'s bf16 step went from 93,000 to 113,000 target tokens a
    second there (docs/BENCHMARKS.md, "The GPU check"). On a CPU the GRU is left to autocast,
    which computes its matrix products in bf16. The inputs are fp32 already: embeddings, and
    contexts concatenated with them.
    """
    args = (x,) if hidden is None else (x, hidden)
    if (hidden if hidden is not None else x.data).device.type != "cuda":
        return gru(*args)
    with torch.autocast("cuda", enabled=False):
        return gru(*args)


class GRUSeq2Seq(EncoderDecoder):
    """GRU encoder and Bahdanau-attention GRU decoder implementing :class:`EncoderDecoder`."""

    separable_output = True  # decode(project=False): each position's output before ``out``

    def __init__(
        self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, *,
        joint_vocab: bool = False,
    ) -> None:
        super().__init__()
        e, h, n_layers = cfg.d_model, cfg.hidden, cfg.n_layers
        self.hidden, self.n_layers, self.bidirectional = h, n_layers, cfg.bidirectional
        self.src_embed = nn.Embedding(src_vocab_size, e)
        share_src = cfg.tie_embeddings and joint_vocab
        self.tgt_embed = self.src_embed if share_src else nn.Embedding(tgt_vocab_size, e)
        between = cfg.dropout if n_layers > 1 else 0.0  # nn.GRU warns about it otherwise
        self.encoder = nn.GRU(e, h, n_layers, batch_first=True, dropout=between,
                              bidirectional=cfg.bidirectional)
        self.attention = AdditiveAttention(h, h, h, cfg.dropout)
        # input = concat(context, embedding), as in the recipe
        self.decoder = nn.GRU(h + e, h, n_layers, batch_first=True, dropout=between)
        self.out = nn.Linear(h, tgt_vocab_size)
        if cfg.tie_embeddings:
            self.out.weight = self.tgt_embed.weight
        self.dropout = nn.Dropout(cfg.dropout)

    def init_weights(self, scheme: str) -> None:
        """``"xavier"``: Xavier-uniform weights of every linear layer and of both GRUs, as the
        recipe does; biases and embeddings keep PyTorch's defaults (a tied output projection is
        a linear layer, so a tied embedding gets Xavier weights too)."""
        if not xavier_requested(scheme):
            return
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
            elif isinstance(module, nn.GRU):
                for name, param in module.named_parameters():
                    if name.startswith("weight"):
                        nn.init.xavier_uniform_(param)

    def encode(self, src: Tensor, src_lengths: Tensor, need_weights: bool = False) -> Memory:
        """src ``(B, S)``, src_lengths ``(B,)`` (all >= 1) -> memory (see module docstring).

        The GRU encoder has no attention, so ``need_weights`` adds nothing.
        """
        b, s = src.shape
        x = self.dropout(self.src_embed(src))
        packed = pack_padded_sequence(x, src_lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        packed_out, h_n = outside_cuda_autocast(self.encoder, packed)
        out, _ = pad_packed_sequence(packed_out, batch_first=True, total_length=s)
        if self.bidirectional:  # sum the two directions, outputs and final states alike
            out = out[..., : self.hidden] + out[..., self.hidden:]
            h_n = h_n.view(self.n_layers, 2, b, self.hidden).sum(1)
        return {
            "enc_out": out,
            "enc_hidden": h_n.transpose(0, 1),  # (B, L, H): batch first for select_rows
            "src_mask": lengths_to_mask(src_lengths, s),
            "src_lengths": src_lengths,
        }

    def init_state(self, memory: Memory) -> State:
        """Decoder hidden = encoder final state; the attention keys projected once per batch."""
        return {"hidden": memory["enc_hidden"],
                "keys": self.attention.project_keys(memory["enc_out"])}

    def step(
        self, embedding: Tensor, hidden: Tensor, keys: Tensor, memory: Memory
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One decoder step (Bahdanau et al. 2015): attend with the top layer's previous hidden
        state as the query, then run the GRU on ``concat(context, embedding)``.

        embedding ``(B, 1, E)``, hidden ``(L, B, H)`` (``nn.GRU``'s layout), keys ``(B, S, H)``
        from :meth:`init_state`. Returns the top layer's output ``(B, 1, H)``, the new hidden
        state ``(L, B, H)`` and the attention weights ``(B, 1, S)``.
        """
        query = hidden[-1].unsqueeze(1)  # (B, 1, H)
        context, weights = self.attention.attend(query, keys, memory["enc_out"],
                                                 memory["src_mask"].unsqueeze(1))
        inputs = torch.cat((context, embedding), dim=-1)
        output, hidden = outside_cuda_autocast(self.decoder, inputs, hidden)
        return output, hidden, weights

    def decode(
        self, tgt: Tensor, memory: Memory, state: State | None = None, need_weights: bool = False,
        project: bool = True,
    ) -> DecodeOutput:
        """tgt ``(B, T)`` -> logits ``(B, T, V)`` (``project=False``: the features ``out``
        takes); weights ``{"cross": (B, 1, 1, T, S)}``.

        ``state is None``: a teacher-forced pass from the encoder's final state. Otherwise ``tgt``
        holds the new positions only and the returned state continues from them.
        """
        incremental = state is not None
        if state is None:
            state = self.init_state(memory)
        hidden = state["hidden"].transpose(0, 1).contiguous()  # (L, B, H), as nn.GRU wants it
        embeddings = self.dropout(self.tgt_embed(tgt))  # (B, T, E)
        outputs, weights = [], []
        for t in range(tgt.shape[1]):
            output, hidden, step_weights = self.step(embeddings[:, t : t + 1], hidden,
                                                     state["keys"], memory)
            outputs.append(output)
            weights.append(step_weights)
        features = torch.cat(outputs, dim=1)
        logits = self.out(features) if project else features
        out_weights = {}
        if need_weights:
            out_weights["cross"] = torch.cat(weights, dim=1)[:, None, None]  # (B, 1, 1, T, S)
        new_state = None
        if incremental:
            new_state = {"hidden": hidden.transpose(0, 1), "keys": state["keys"]}
        return DecodeOutput(logits, new_state, out_weights)
