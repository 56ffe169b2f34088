"""GRU encoder-decoder with Bahdanau (additive) attention (Bahdanau et al. 2015), as in the recipe.

Differences from the recipe, on purpose: the encoder runs over packed sequences, so padding
never reaches the outputs or the final state; the attention keys are projected once per batch
(in :meth:`GRUSeq2Seq.init_state`) instead of at every target step; and the teacher-forced pass
computes the embedding half of the first GRU layer's input projection, and the output
projection, once for all steps rather than inside the step loop.

The decoder's GRU keeps the parameters of an ``nn.GRU`` (so checkpoints and initialisation are
the standard ones) but runs its own cell per step: at each step the input is
``concat(context, embedding)`` and only the context half depends on the previous step.

Memory: ``enc_out`` ``(B, S, H)``, ``enc_hidden`` ``(B, L, H)``, ``src_mask`` ``(B, S)`` bool,
``src_lengths`` ``(B,)``. State: ``hidden`` ``(B, L, H)`` and ``keys`` ``(B, S, H)`` (projected).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.config import ModelConfig
from nmt.errors import ConfigError
from nmt.models.attention import AdditiveAttention
from nmt.models.base import DecodeOutput, EncoderDecoder, Memory, State, lengths_to_mask


def gru_cell(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    """One GRU step given the input projection ``gi = W_ih x + b_ih`` ``(B, 3H)``; h ``(B, H)``.

    Same gate order (r, z, n) and equations as ``torch.nn.GRU``.
    """
    gh = F.linear(h, w_hh, b_hh)
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (h - n)  # = (1 - z) * n + z * h


def _layer_params(rnn: nn.GRU, i: int) -> tuple[Tensor, Tensor | None, Tensor, Tensor | None]:
    """``(W_ih, b_ih, W_hh, b_hh)`` of layer ``i`` of an ``nn.GRU`` (biases None if absent)."""
    bias = rnn.bias
    return (
        getattr(rnn, f"weight_ih_l{i}"),
        getattr(rnn, f"bias_ih_l{i}") if bias else None,
        getattr(rnn, f"weight_hh_l{i}"),
        getattr(rnn, f"bias_hh_l{i}") if bias else None,
    )


class GRUSeq2Seq(EncoderDecoder):
    """GRU encoder and Bahdanau-attention GRU decoder implementing :class:`EncoderDecoder`."""

    def __init__(
        self,
        cfg: ModelConfig,
        src_vocab_size: int,
        tgt_vocab_size: int,
        *,
        joint_vocab: bool = False,
        pad_id: int = 1,
        bos_id: int = 2,
        eos_id: int = 3,
    ) -> None:
        super().__init__(pad_id, bos_id, eos_id)
        e, h, n_layers = cfg.d_model, cfg.hidden, cfg.n_layers
        if cfg.tie_embeddings and e != h:
            raise ConfigError(
                f"model.tie_embeddings: the GRU needs hidden == d_model to tie, got "
                f"hidden={h}, d_model={e}"
            )
        self.hidden, self.n_layers, self.bidirectional = h, n_layers, cfg.bidirectional
        self.src_embed = nn.Embedding(src_vocab_size, e)
        share_src = cfg.tie_embeddings and joint_vocab
        self.tgt_embed = self.src_embed if share_src else nn.Embedding(tgt_vocab_size, e)
        self.encoder = nn.GRU(e, h, n_layers, batch_first=True, dropout=cfg.dropout,
                              bidirectional=cfg.bidirectional)
        self.attention = AdditiveAttention(h, h, h, cfg.dropout)
        # input = concat(context, embedding), as in the recipe
        self.decoder = nn.GRU(h + e, h, n_layers, batch_first=True, dropout=cfg.dropout)
        self.out = nn.Linear(h, tgt_vocab_size)
        if cfg.tie_embeddings:
            self.out.weight = self.tgt_embed.weight
        self.dropout = nn.Dropout(cfg.dropout)
        self.p_layer = cfg.dropout  # between stacked decoder layers, like nn.GRU's dropout

    def encode(self, src: Tensor, src_lengths: Tensor, need_weights: bool = False) -> Memory:
        """src ``(B, S)``, src_lengths ``(B,)`` (all >= 1) -> memory (see module docstring).

        The GRU encoder has no attention, so ``need_weights`` adds nothing.
        """
        b, s = src.shape
        x = self.dropout(self.src_embed(src))
        packed = pack_padded_sequence(x, src_lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        packed_out, h_n = self.encoder(packed)
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
        """Decoder hidden = encoder final state ``(B, L, H)``; attention keys projected once."""
        return {
            "hidden": memory["enc_hidden"],
            "keys": self.attention.project_keys(memory["enc_out"]),
        }

    def decode(
        self, tgt: Tensor, memory: Memory, state: State | None = None, need_weights: bool = False
    ) -> DecodeOutput:
        """tgt ``(B, T)`` -> logits ``(B, T, V)``; weights ``{"cross": (B, 1, 1, T, S)}``.

        ``state is None``: a teacher-forced pass from the encoder's final state. Otherwise ``tgt``
        holds the new positions only and the returned state continues from them.
        """
        st = self.init_state(memory) if state is None else state
        values, keys = memory["enc_out"], st["keys"]
        mask = memory["src_mask"]  # (B, S)
        h = self.hidden
        layers = [_layer_params(self.decoder, i) for i in range(self.n_layers)]
        w_ih0, b_ih0 = layers[0][0], layers[0][1]
        # input projection of layer 0 splits as W_c context + W_e embedding: the embedding half
        # for all T steps is one matmul, outside the loop
        emb = self.dropout(self.tgt_embed(tgt))  # (B, T, E)
        gi_emb = F.linear(emb, w_ih0[:, h:], b_ih0)  # (B, T, 3H)
        w_ctx = w_ih0[:, :h]
        hidden = list(st["hidden"].unbind(1))  # L x (B, H)
        p = self.p_layer if self.training else 0.0
        mask_q = mask.unsqueeze(1)  # (B, 1, S)
        tops, weights = [], []
        for t in range(tgt.shape[1]):
            query = hidden[-1].unsqueeze(1)  # (B, 1, H): top layer's previous hidden state
            context, w = self.attention.attend(query, keys, values, mask_q)
            x = torch.addmm(gi_emb[:, t], context.squeeze(1), w_ctx.t())
            for i, (w_ih, b_ih, w_hh, b_hh) in enumerate(layers):
                if i > 0:
                    x = F.linear(F.dropout(hidden[i - 1], p, self.training), w_ih, b_ih)
                hidden[i] = gru_cell(x, hidden[i], w_hh, b_hh)
            tops.append(hidden[-1])
            if need_weights:
                weights.append(w)
        logits = self.out(torch.stack(tops, dim=1))  # one projection over all T steps
        out_weights = {}
        if need_weights:
            out_weights["cross"] = torch.cat(weights, dim=1)[:, None, None]  # (B, 1, 1, T, S)
        new_state = None
        if state is not None:
            new_state = {"hidden": torch.stack(hidden, dim=1), "keys": keys}
        return DecodeOutput(logits, new_state, out_weights)

