"""The Transformer (Vaswani et al. 2017) with a real key/value cache for incremental decoding.

Post-norm as in the paper and the recipe (``LayerNorm(x + dropout(sublayer(x)))``), pre-norm as
an option (``norm_first``: ``x + dropout(sublayer(LayerNorm(x)))`` with a final LayerNorm on
each stack). Differences from the recipe, on purpose: the causal mask is applied in every mode
(the recipe drops it in eval mode, so a full eval pass sees the future), the cache holds the
*projected* keys and values of each decoder self-attention layer (the recipe re-projects the
whole prefix at every step), and cross-attention keys/values are projected once per batch.

Memory: ``enc_out`` ``(B, S, d_model)``, ``src_mask`` ``(B, S)`` bool (True at real tokens),
``src_lengths`` ``(B,)``, and ``attn_enc`` ``(B, layers, heads, S, S)`` when asked for.
State (all batch-first, heads head-major as :class:`MultiHeadAttention` splits them):
``self_k{i}``, ``self_v{i}`` ``(B, n_heads, t, d_head)``, the keys and values of decoder layer
``i``'s self-attention, growing by one position per step; ``cross_k{i}``, ``cross_v{i}``
``(B, n_heads, S, d_head)``, its cross-attention keys and values.
"""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import Tensor, nn

from nmt.config import ModelConfig
from nmt.errors import ConfigError
from nmt.models.attention import MultiHeadAttention, causal_mask
from nmt.models.base import (
    DecodeOutput,
    EncoderDecoder,
    Memory,
    State,
    lengths_to_mask,
    xavier_requested,
)


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
        self.dropout = nn.Dropout(cfg.dropout)
        self.norm_first = cfg.norm_first

    def forward(
        self, x: Tensor, mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x ``(B, S, d_model)``, mask ``(B, 1, 1, S)`` -> ``(B, S, d_model)`` and, if asked,
        the weights ``(B, h, S, S)``."""
        h = self.norm1(x) if self.norm_first else x
        y, weights = self.self_attn.attend(*self.self_attn.project_qkv(h), mask,
                                           need_weights=need_weights)
        if self.norm_first:
            x = x + self.dropout(y)
            return x + self.dropout(self.ffn(self.norm2(x))), weights
        x = self.norm1(x + self.dropout(y))
        return self.norm2(x + self.dropout(self.ffn(x))), weights


class DecoderLayer(nn.Module):
    """Causal self-attention -> add & norm -> cross-attention -> add & norm -> FFN -> add & norm."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.self_attn = MultiHeadAttention(d, cfg.n_heads, cfg.dropout, cfg.attn_bias)
        self.cross_attn = MultiHeadAttention(d, cfg.n_heads, cfg.dropout, cfg.attn_bias)
        self.ffn = FeedForward(d, cfg.d_ff)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.dropout = nn.Dropout(cfg.dropout)
        self.norm_first = cfg.norm_first

    def forward(
        self,
        x: Tensor,
        cross_keys: Tensor,
        cross_values: Tensor,
        src_mask: Tensor,
        self_mask: Tensor | None,
        past_keys: Tensor | None = None,
        past_values: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor | None]:
        """One decoder layer over ``T`` new positions.

        x ``(B, T, d_model)``; cross_keys/cross_values ``(B, h, S, d_head)``; src_mask
        ``(B, 1, 1, S)``; self_mask the ``(T, t + T)`` causal mask (None when T is 1: the one
        new position may see every cached one); past_keys/past_values ``(B, h, t, d_head)``
        cached positions, or None. Returns x, the self-attention keys/values
        ``(B, h, t + T, d_head)`` (the new cache), and the self and cross weights
        ``(B, h, T, t + T)``, ``(B, h, T, S)`` if asked.
        """
        h = self.norm1(x) if self.norm_first else x
        q, keys, values = self.self_attn.project_qkv(h)
        if past_keys is not None and past_values is not None:
            keys = torch.cat((past_keys, keys), dim=2)
            values = torch.cat((past_values, values), dim=2)
        y, self_weights = self.self_attn.attend(q, keys, values, self_mask,
                                                need_weights=need_weights)
        x = x + self.dropout(y) if self.norm_first else self.norm1(x + self.dropout(y))

        h = self.norm2(x) if self.norm_first else x
        y, cross_weights = self.cross_attn.attend(self.cross_attn.project_q(h), cross_keys,
                                                  cross_values, src_mask,
                                                  need_weights=need_weights)
        x = x + self.dropout(y) if self.norm_first else self.norm2(x + self.dropout(y))

        if self.norm_first:
            x = x + self.dropout(self.ffn(self.norm3(x)))
        else:
            x = self.norm3(x + self.dropout(self.ffn(x)))
        return x, keys, values, self_weights, cross_weights


class Transformer(EncoderDecoder):
    """Encoder-decoder Transformer implementing the :class:`EncoderDecoder` contract."""

    pos: Tensor  # (max_positions, d_model) sinusoidal table, a non-persistent buffer
    max_positions: int  # the rows of that table: the longest sequence either stack takes
    separable_output = True  # decode(project=False): the final LayerNorm's output

    def __init__(
        self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, *,
        joint_vocab: bool = False,
    ) -> None:
        super().__init__()
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
        self.dropout = nn.Dropout(cfg.dropout)

    def init_weights(self, scheme: str) -> None:
        """``"xavier"``: Xavier-uniform weights of every linear layer, as the recipe does;
        biases, embeddings and LayerNorms keep PyTorch's defaults (a tied output projection is
        a linear layer, so a tied embedding gets Xavier weights too). The fused
        ``(3 d_model, d_model)`` query/key/value projection is initialised as three
        ``(d_model, d_model)`` blocks, so each gets the bound of the recipe's separate layers.
        """
        if not xavier_requested(scheme):
            return
        fused = {id(m.in_proj) for m in self.modules() if isinstance(m, MultiHeadAttention)}
        for module in self.modules():
            if isinstance(module, nn.Linear) and id(module) in fused:
                for block in module.weight.data.chunk(3, dim=0):
                    nn.init.xavier_uniform_(block)
            elif isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)

    def _embed(self, embed: nn.Embedding, tokens: Tensor, start: int) -> Tensor:
        """``(B, T)`` ids -> ``(B, T, d_model)``: scaled embedding + positions start..start+T-1."""
        end = start + tokens.shape[1]
        if end > self.max_positions:
            raise ConfigError(
                f"model.max_positions: expected at least {end} for a sequence this long, "
                f"got {self.max_positions}"
            )
        return self.dropout(embed(tokens) * self.scale + self.pos[start:end])

    def encode(self, src: Tensor, src_lengths: Tensor, need_weights: bool = False) -> Memory:
        """src ``(B, S)`` ids, src_lengths ``(B,)`` -> memory with ``enc_out`` ``(B, S, d)``,
        ``src_mask`` ``(B, S)`` bool, ``src_lengths`` and, if asked, ``attn_enc``
        ``(B, layers, heads, S, S)``."""
        src_mask = lengths_to_mask(src_lengths, src.shape[1])
        x = self._embed(self.src_embed, src, 0)
        weights = []
        for layer in self.enc_layers:
            x, layer_weights = layer(x, src_mask[:, None, None, :], need_weights)
            if layer_weights is not None:
                weights.append(layer_weights)
        memory = {"enc_out": self.enc_norm(x), "src_mask": src_mask, "src_lengths": src_lengths}
        if need_weights:
            memory["attn_enc"] = torch.stack(weights, dim=1)
        return memory

    def _cross_keys_values(self, memory: Memory) -> State:
        """Each decoder layer's cross-attention keys and values of the encoder output."""
        state = {}
        for i, layer in enumerate(self.dec_layers):
            attn = cast(DecoderLayer, layer).cross_attn
            state[f"cross_k{i}"], state[f"cross_v{i}"] = attn.project_kv(memory["enc_out"])
        return state

    def init_state(self, memory: Memory) -> State:
        """Empty self-attention caches ``(B, h, 0, d_head)`` and the cross keys/values, stored
        contiguous: every decoding step reads them whole, and a head-split view would be copied
        each time, at every step."""
        state = {name: kv.contiguous() for name, kv in self._cross_keys_values(memory).items()}
        cross_keys = state["cross_k0"]
        empty = cross_keys.new_zeros(cross_keys.shape[0], cross_keys.shape[1], 0,
                                     cross_keys.shape[3])
        for i in range(self.n_layers):
            state[f"self_k{i}"], state[f"self_v{i}"] = empty, empty
        return state

    def decode(
        self, tgt: Tensor, memory: Memory, state: State | None = None, need_weights: bool = False,
        project: bool = True,
    ) -> DecodeOutput:
        """tgt ``(B, T)`` -> logits ``(B, T, V)`` (``project=False``: the features ``out``
        takes, ``(B, T, d_model)``).

        ``state is None``: causal teacher-forced pass over all of ``tgt``. Otherwise ``tgt``
        holds the new positions only; their positions start at the cache length, and the
        returned state holds the caches grown by ``T``.
        """
        incremental = state is not None
        if state is None:
            state = self._cross_keys_values(memory)
        past = state["self_k0"].shape[2] if incremental else 0
        x = self._embed(self.tgt_embed, tgt, past)
        src_mask = memory["src_mask"][:, None, None, :]  # (B, 1, 1, S)
        n_new = tgt.shape[1]
        # causal in every mode, so an eval-mode pass never sees ahead
        self_mask = causal_mask(n_new, past + n_new, tgt.device) if n_new > 1 else None
        new_state: State = {}
        self_weights, cross_weights = [], []
        for i, layer in enumerate(self.dec_layers):
            cross_keys, cross_values = state[f"cross_k{i}"], state[f"cross_v{i}"]
            past_keys = state[f"self_k{i}"] if incremental else None
            past_values = state[f"self_v{i}"] if incremental else None
            x, keys, values, layer_self, layer_cross = layer(
                x, cross_keys, cross_values, src_mask, self_mask, past_keys, past_values,
                need_weights)
            new_state.update({f"self_k{i}": keys, f"self_v{i}": values,
                              f"cross_k{i}": cross_keys, f"cross_v{i}": cross_values})
            if layer_self is not None and layer_cross is not None:
                self_weights.append(layer_self)
                cross_weights.append(layer_cross)
        features = self.dec_norm(x)
        logits = self.out(features) if project else features
        weights = {}
        if need_weights:
            weights = {"self": torch.stack(self_weights, 1), "cross": torch.stack(cross_weights, 1)}
        return DecodeOutput(logits, new_state if incremental else None, weights)
