"""GRU encoder-decoder with Bahdanau (additive) attention (Bahdanau et al. 2015), as in the recipe.

Differences from the recipe, on purpose: the encoder runs over packed sequences, so padding
never reaches the outputs or the final state; the attention keys are projected once per batch
(in :meth:`GRUSeq2Seq.init_state`) instead of at every target step; and the teacher-forced pass
computes the embedding half of the first GRU layer's input projection, and the output
projection, once for all steps rather than inside the step loop. With ``bidirectional`` the
two directions are summed, outputs and final states alike, so the decoder is unchanged.

The decoder's GRU keeps the parameters of an ``nn.GRU`` (so checkpoints and initialisation are
the standard ones) but runs its own cell per step: at each step the input is
``concat(context, embedding)`` and only the context half depends on the previous step.

Memory: ``enc_out`` ``(B, S, H)``, ``enc_hidden`` ``(B, L, H)``, ``src_mask`` ``(B, S)`` bool,
``src_lengths`` ``(B,)``. State: ``hidden`` ``(B, L, H)``, the projected ``keys`` ``(B, S, H)``
and ``values`` ``(B, S, 3H)`` (see :meth:`GRUSeq2Seq.init_state`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.config import ModelConfig
from nmt.errors import ConfigError
from nmt.models.attention import LOOP_MACS, AdditiveAttention, Dropout, dropout_mask
from nmt.models.base import DecodeOutput, EncoderDecoder, Memory, State, lengths_to_mask


def gru_gates(gi: Tensor, gh: Tensor, h: Tensor) -> Tensor:
    """One GRU step from its projections: ``gi = W_ih x + b_ih``, ``gh = W_hh h + b_hh``, both
    ``(B, 3H)``; h ``(B, H)`` -> new h ``(B, H)``.

    Same gate order (r, z, n) and equations as ``torch.nn.GRU``, in five kernels. ``split``
    rather than slicing: one autograd node per tensor instead of one zero-filled buffer per slice.
    """
    n_h = h.shape[1]
    i_rz, i_n = gi.split((2 * n_h, n_h), dim=1)
    h_rz, h_n = gh.split((2 * n_h, n_h), dim=1)
    r, z = torch.sigmoid(i_rz + h_rz).chunk(2, 1)
    n = torch.tanh(torch.addcmul(i_n, r, h_n))
    # (1 - z) * n + z * h; under autocast h may still be float32 while n is half precision
    return torch.lerp(n, h.to(n.dtype), z)


def _add_weighted_sum(base: Tensor, weights: Tensor, values: Tensor) -> Tensor:
    """``base + weights @ values`` for base ``(B, D)``, weights ``(B, 1, K)``, values
    ``(B, K, D)``.

    A ``(1, K) x (K, D)`` product of fewer than 400 multiply-adds (K = 4 source positions with
    D = 96 in the d2l preset) runs in torch's unvectorised CPU loop; there a broadcast multiply
    and a sum over K are 2x faster forward and backward. Larger products go to ``baddbmm``.
    """
    if values.device.type == "cpu" and values.shape[1] * values.shape[2] < LOOP_MACS:
        return base + (weights.transpose(1, 2) * values).sum(1)
    return torch.baddbmm(base.unsqueeze(1), weights, values).squeeze(1)


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
        between = cfg.dropout if n_layers > 1 else 0.0  # nn.GRU warns about it otherwise
        self.encoder = nn.GRU(e, h, n_layers, batch_first=True, dropout=between,
                              bidirectional=cfg.bidirectional)
        self.attention = AdditiveAttention(h, h, h, cfg.dropout)
        # input = concat(context, embedding), as in the recipe
        self.decoder = nn.GRU(h + e, h, n_layers, batch_first=True, dropout=between)
        self.out = nn.Linear(h, tgt_vocab_size)
        if cfg.tie_embeddings:
            self.out.weight = self.tgt_embed.weight
        self.dropout = Dropout(cfg.dropout)
        self.p_step = cfg.dropout  # decoder loop: attention weights and between stacked layers

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
        """Decoder hidden = encoder final state; per-batch projections of the encoder outputs.

        ``keys`` ``(B, S, H)``: the attention's ``W_k`` keys. ``values`` ``(B, S, 3H)``: the
        encoder outputs through the context half of the first GRU layer's input weights; the
        context is only ever used through that projection, and a weighted sum commutes with it,
        so each step's ``W_c context`` is one ``(1, S) x (S, 3H)`` product per row.
        """
        enc_out = memory["enc_out"]
        w_ih0 = _layer_params(self.decoder, 0)[0]
        return {
            "hidden": memory["enc_hidden"],
            "keys": self.attention.project_keys(enc_out),
            "values": F.linear(enc_out, w_ih0[:, : self.hidden]),
        }

    def _dropout_masks(self, shape: tuple[int, ...], like: Tensor) -> Tensor | None:
        """Scaled keep-masks for all steps at once (one RNG call instead of one per step)."""
        if not self.training or self.p_step == 0.0:
            return None
        return dropout_mask(shape, self.p_step, like)

    def decode(
        self, tgt: Tensor, memory: Memory, state: State | None = None, need_weights: bool = False
    ) -> DecodeOutput:
        """tgt ``(B, T)`` -> logits ``(B, T, V)``; weights ``{"cross": (B, 1, 1, T, S)}``.

        ``state is None``: a teacher-forced pass from the encoder's final state. Otherwise ``tgt``
        holds the new positions only and the returned state continues from them.

        Each step is the recipe's: query = top layer's previous hidden state, additive attention
        over the encoder outputs, GRU input ``concat(context, embedding)``. It is computed in an
        equivalent form with fewer, cheaper kernels (a step costs ~20 small ops, not ~50):

        - the embedding half of layer 0's input projection is one matmul for all steps;
        - ``W_c context`` comes from the pre-projected ``values`` (see :meth:`init_state`);
        - the top layer's hidden state feeds both its own ``W_hh`` and the attention's ``W_q``:
          one matmul gives both;
        - ``w_v^T tanh(u) = 2 w_v^T sigmoid(2u) - sum(w_v)``, and the softmax ignores the
          constant, so scores use a sigmoid (several times cheaper than tanh on CPU);
        - dropout masks for all steps come from one RNG call.
        """
        st = self.init_state(memory) if state is None else state
        b, n_steps = tgt.shape
        h, n_layers = self.hidden, self.n_layers
        params = [_layer_params(self.decoder, i) for i in range(n_layers)]
        w_ih0, b_ih0 = params[0][0], params[0][1]
        emb = self.dropout(self.tgt_embed(tgt))  # (B, T, E)
        # (B, 3H) per step: the embedding half of layer 0's input projection, all steps at once
        gi_emb = F.linear(emb, w_ih0[:, h:], b_ih0).unbind(1)
        w_q, w_v = self.attention.W_q.weight, self.attention.w_v.weight  # (Ha, H), (1, Ha)
        w_hh_top, b_hh_top = params[-1][2], params[-1][3]
        w_top = torch.cat((w_hh_top, 2.0 * w_q))  # (3H + Ha, H)
        b_top = None if b_hh_top is None else F.pad(b_hh_top, (0, w_q.shape[0]))
        w_v2 = 2.0 * w_v.squeeze(0)  # (Ha,)
        keys2 = 2.0 * st["keys"]  # (B, S, Ha)
        values = st["values"]  # (B, S, 3H)
        pad = ~memory["src_mask"]  # (B, S)
        fill = torch.finfo(keys2.dtype).min
        attn_drop = self._dropout_masks((n_steps, b, 1, pad.shape[1]), keys2)
        layer_drop = None
        if n_layers > 1:
            layer_drop = self._dropout_masks((n_steps, n_layers - 1, b, h), keys2)
        hidden = list(st["hidden"].unbind(1))  # L x (B, H)
        tops, weights = [], []
        for t in range(n_steps):
            top = F.linear(hidden[-1], w_top, b_top)  # (B, 3H + Ha)
            gh_top, query2 = top.split((3 * h, top.shape[1] - 3 * h), dim=1)
            features = torch.sigmoid(query2.unsqueeze(1) + keys2)  # (B, S, Ha)
            scores = torch.matmul(features, w_v2).masked_fill(pad, fill)  # (B, S)
            w = torch.softmax(scores, dim=-1).unsqueeze(1)  # (B, 1, S)
            if need_weights:
                weights.append(w)
            if attn_drop is not None:
                w = w * attn_drop[t]
            gi = _add_weighted_sum(gi_emb[t], w, values)  # (B, 3H)
            for i, (w_ih, b_ih, w_hh, b_hh) in enumerate(params):
                if i > 0:
                    below = hidden[i - 1]
                    if layer_drop is not None:  # nn.GRU's dropout between stacked layers
                        below = below * layer_drop[t, i - 1]
                    gi = F.linear(below, w_ih, b_ih)
                gh = gh_top if i == n_layers - 1 else F.linear(hidden[i], w_hh, b_hh)
                hidden[i] = gru_gates(gi, gh, hidden[i])
            tops.append(hidden[-1])
        logits = self.out(torch.stack(tops, dim=1))  # one projection over all T steps
        out_weights = {}
        if need_weights:
            out_weights["cross"] = torch.cat(weights, dim=1)[:, None, None]  # (B, 1, 1, T, S)
        new_state = None
        if state is not None:
            new_state = {"hidden": torch.stack(hidden, dim=1), "keys": st["keys"],
                         "values": values}
        return DecodeOutput(logits, new_state, out_weights)
