"""The Transformer (Vaswani et al. 2017) with a real key/value cache for incremental decoding.

Post-norm as in the paper and the recipe (``LayerNorm(x + dropout(sublayer(x)))``), pre-norm as
an option (``norm_first``: ``x + dropout(sublayer(LayerNorm(x)))`` with a final LayerNorm on
each stack). Differences from the recipe, on purpose: the causal mask is applied in every mode
(the recipe drops it in eval mode, so a full eval pass sees the future), the cache holds the
*projected* keys and values of each decoder self-attention layer (the recipe re-projects the
whole prefix at every step), and cross-attention keys/values are projected once per batch.

Inside the stacks activations are ``(B T, d_model)`` rows, so every linear layer is one matrix
product with no reshapes (forward or backward); attention views them per batch row.

Memory: ``enc_out`` ``(B, S, d_model)``, ``src_mask`` ``(B, S)`` bool (True at real tokens),
``src_lengths`` ``(B,)``, and ``attn_enc`` ``(B, layers, heads, S, S)`` when asked for.
State (all batch-first, heads token-major as :class:`MultiHeadAttention` lays them out):
``self_k{i}``, ``self_v{i}`` ``(B, t, n_heads, d_head)`` growing by one position per step;
``cross_k{i}``, ``cross_v{i}`` ``(B, S, n_heads, d_head)``.
"""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import Tensor, nn

from nmt.config import ModelConfig
from nmt.errors import ConfigError
from nmt.models.attention import Dropout, Mask, MultiHeadAttention, causal_mask
from nmt.models.base import DecodeOutput, EncoderDecoder, Memory, State, lengths_to_mask


def sinusoidal_positions(n_positions: int, d_model: int) -> Tensor:
    """``(n_positions, d_model)`` table: even columns ``sin(pos / 10000^(2j/d))``, odd ``cos``.

    Works for odd ``d_model`` too (one more sine column than cosine columns). Computed on the
    CPU whatever the default device (a model built on the meta device for its shapes alone
    would otherwise run these through torch's slow-to-import Python reference kernels). On
    the meta device itself (a model built for its shapes alone) only the shape is made, so a
    checkpoint's size can be checked before any table is computed.
    """
    if torch.empty(0).is_meta:
        return torch.empty(n_positions, d_model)
    cpu = torch.device("cpu")
    pos = torch.arange(n_positions, dtype=torch.float32, device=cpu)[:, None]
    steps = torch.arange(0, d_model, 2, dtype=torch.float32, device=cpu)
    freq = torch.pow(10000.0, steps / d_model)
    angles = pos / freq  # (n_positions, ceil(d/2))
    table = torch.zeros(n_positions, d_model, device=cpu)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)[:, : d_model // 2]
    return table


class FeedForward(nn.Module):
    """Position-wise ``Linear -> ReLU -> Linear`` (sec. 3.3)."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.l2(torch.relu(self.l1(x)))


class EncoderLayer(nn.Module):
    """Self-attention -> add & norm -> feed-forward -> add & norm."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.self_attn = MultiHeadAttention(d, cfg.n_heads, cfg.dropout, cfg.attn_bias)
        self.ffn = FeedForward(d, cfg.d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.dropout = Dropout(cfg.dropout)
        self.norm_first = cfg.norm_first

    def forward(
        self, x: Tensor, batch: int, mask: Mask, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x ``(B S, d_model)`` rows of ``batch`` sentences, mask of ``(B, 1, 1, S)`` ->
        ``(B S, d_model)``, weights."""
        h = self.norm1(x) if self.norm_first else x
        q, k, v = self.self_attn.project_qkv(h, batch)
        y, w = self.self_attn.attend(q, k, v, mask, need_weights=need_weights)
        if self.norm_first:
            x = x + self.dropout(y)
            return x + self.dropout(self.ffn(self.norm2(x))), w
        x = self.norm1(x + self.dropout(y))
        return self.norm2(x + self.dropout(self.ffn(x))), w


class DecoderLayer(nn.Module):
    """Causal self-attention -> add & norm -> cross-attention -> add & norm -> FFN -> add & norm."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.self_attn = MultiHeadAttention(d, cfg.n_heads, cfg.dropout, cfg.attn_bias)
        self.cross_attn = MultiHeadAttention(d, cfg.n_heads, cfg.dropout, cfg.attn_bias)
        self.ffn = FeedForward(d, cfg.d_ff)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.dropout = Dropout(cfg.dropout)
        self.norm_first = cfg.norm_first

    def forward(
        self,
        x: Tensor,
        batch: int,
        cross_k: Tensor,
        cross_v: Tensor,
        src_mask: Mask,
        self_mask: Mask,
        past_k: Tensor | None = None,
        past_v: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor | None]:
        """One decoder layer over ``T`` new positions.

        x ``(B T, d_model)`` rows of ``batch`` sentences; cross_k/cross_v ``(B, S, h, d_head)``;
        src_mask of ``(B, 1, 1, S)``; self_mask of the ``(T, t + T)`` causal mask (of None when T
        is 1); past_k/past_v ``(B, t, h, d_head)`` cached positions or None.
        Returns x, the self-attention keys/values ``(B, t + T, h, d_head)`` (the new cache),
        and the self and cross weights ``(B, h, T, t + T)``, ``(B, h, T, S)`` if asked.
        """
        h = self.norm1(x) if self.norm_first else x
        q, k, v = self.self_attn.project_qkv(h, batch)
        if past_k is not None and past_v is not None and past_k.shape[1] > 0:
            k, v = torch.cat((past_k, k), dim=1), torch.cat((past_v, v), dim=1)
        y, w_self = self.self_attn.attend(q, k, v, self_mask, need_weights=need_weights)
        x = x + self.dropout(y) if self.norm_first else self.norm1(x + self.dropout(y))

        h = self.norm2(x) if self.norm_first else x
        q = self.cross_attn.project_q(h, batch)
        y, w_cross = self.cross_attn.attend(q, cross_k, cross_v, src_mask,
                                            need_weights=need_weights)
        x = x + self.dropout(y) if self.norm_first else self.norm2(x + self.dropout(y))

        if self.norm_first:
            x = x + self.dropout(self.ffn(self.norm3(x)))
        else:
            x = self.norm3(x + self.dropout(self.ffn(x)))
        return x, k, v, w_self, w_cross


class Transformer(EncoderDecoder):
    """Encoder-decoder Transformer implementing the :class:`EncoderDecoder` contract."""

    pos: Tensor  # (max_positions, d_model) sinusoidal table, a non-persistent buffer

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
        d = cfg.d_model
        self.d_model, self.n_layers, self.max_positions = d, cfg.n_layers, cfg.max_positions
        self.scale = math.sqrt(d)  # sec. 3.4: embeddings are multiplied by sqrt(d_model)
        self.src_embed = nn.Embedding(src_vocab_size, d)
        share_src = cfg.tie_embeddings and joint_vocab
        self.tgt_embed = self.src_embed if share_src else nn.Embedding(tgt_vocab_size, d)
        self.register_buffer("pos", sinusoidal_positions(cfg.max_positions, d), persistent=False)
        self.enc_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_layers))
        self.dec_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_layers))
        # pre-norm leaves the residual stream un-normalised: a final LayerNorm per stack
        self.enc_norm: nn.Module = nn.LayerNorm(d) if cfg.norm_first else nn.Identity()
        self.dec_norm: nn.Module = nn.LayerNorm(d) if cfg.norm_first else nn.Identity()
        self.out = nn.Linear(d, tgt_vocab_size)
        if cfg.tie_embeddings:
            self.out.weight = self.tgt_embed.weight
        self.dropout = Dropout(cfg.dropout)

    def _embed(self, embed: nn.Embedding, tokens: Tensor, start: int) -> Tensor:
        """``(B, T)`` ids -> ``(B T, d_model)`` rows: scaled embedding + positions
        start..start+T-1."""
        end = start + tokens.shape[1]
        if end > self.max_positions:
            raise ConfigError(
                f"model.max_positions: expected at least {end} for a sequence this long, "
                f"got {self.max_positions}"
            )
        x = embed(tokens) * self.scale + self.pos[start:end]
        return self.dropout(x.view(-1, self.d_model))

    def encode(self, src: Tensor, src_lengths: Tensor, need_weights: bool = False) -> Memory:
        """src ``(B, S)`` ids, src_lengths ``(B,)`` -> memory with ``enc_out`` ``(B, S, d)``,
        ``src_mask`` ``(B, S)`` bool, ``src_lengths`` and, if asked, ``attn_enc``
        ``(B, layers, heads, S, S)``."""
        mask = lengths_to_mask(src_lengths, src.shape[1])
        attn_mask = Mask(mask[:, None, None, :])  # shared by all layers
        x = self._embed(self.src_embed, src, 0)
        weights = []
        for layer in self.enc_layers:
            x, w = layer(x, src.shape[0], attn_mask, need_weights)
            if w is not None:
                weights.append(w)
        enc_out = self.enc_norm(x).view(src.shape[0], src.shape[1], self.d_model)
        memory = {"enc_out": enc_out, "src_mask": mask, "src_lengths": src_lengths}
        if need_weights:
            memory["attn_enc"] = torch.stack(weights, dim=1)
        return memory

    def _cross_kv(self, memory: Memory) -> State:
        state = {}
        for i, layer in enumerate(self.dec_layers):
            attn = cast(DecoderLayer, layer).cross_attn
            state[f"cross_k{i}"], state[f"cross_v{i}"] = attn.project_kv(memory["enc_out"])
        return state

    def init_state(self, memory: Memory) -> State:
        """Empty self-attention caches ``(B, 0, h, d_head)`` and the cross keys/values."""
        state = self._cross_kv(memory)
        k0 = state["cross_k0"]
        empty = k0.new_zeros(k0.shape[0], 0, k0.shape[2], k0.shape[3])
        for i in range(self.n_layers):
            state[f"self_k{i}"], state[f"self_v{i}"] = empty, empty
        return state

    def decode(
        self, tgt: Tensor, memory: Memory, state: State | None = None, need_weights: bool = False
    ) -> DecodeOutput:
        """tgt ``(B, T)`` -> logits ``(B, T, V)``.

        ``state is None``: causal teacher-forced pass over all of ``tgt``. Otherwise ``tgt``
        holds the new positions only; their positions start at the cache length, and the
        returned state holds the caches grown by ``T``.
        """
        full = state is None
        st = self._cross_kv(memory) if state is None else state
        past = 0 if full else st["self_k0"].shape[1]
        x = self._embed(self.tgt_embed, tgt, past)
        src_mask = Mask(memory["src_mask"][:, None, None, :])
        t_new = tgt.shape[1]
        # built once for all layers; causal in every mode, so an eval-mode pass never sees ahead
        self_mask = Mask(causal_mask(t_new, past + t_new, tgt.device) if t_new > 1 else None)
        new_state: State = {}
        w_self, w_cross = [], []
        for i, layer in enumerate(self.dec_layers):
            ck, cv = st[f"cross_k{i}"], st[f"cross_v{i}"]
            pk = None if full else st[f"self_k{i}"]
            pv = None if full else st[f"self_v{i}"]
            x, k, v, ws, wc = layer(x, tgt.shape[0], ck, cv, src_mask, self_mask, pk, pv,
                                    need_weights)
            if not full:
                new_state.update({f"self_k{i}": k, f"self_v{i}": v,
                                  f"cross_k{i}": ck, f"cross_v{i}": cv})
            if ws is not None and wc is not None:
                w_self.append(ws)
                w_cross.append(wc)
        logits = self.out(self.dec_norm(x)).view(tgt.shape[0], t_new, -1)
        weights = {}
        if need_weights:
            weights = {"self": torch.stack(w_self, 1), "cross": torch.stack(w_cross, 1)}
        return DecodeOutput(logits, None if full else new_state, weights)
