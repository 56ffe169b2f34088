"""The Transformer's own ``[model]`` settings and checks (network: nmt/models/transformer.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nmt.config import Family, ModelConfig, register_family
from nmt.errors import ConfigError


@dataclass(frozen=True)
class TransformerSettings:
    n_heads: int = 4  # attention heads (a divisor of d_model)
    d_ff: int = 1024  # feed-forward inner size
    norm_first: bool = False  # pre-norm; the recipe (and the paper) is post-norm
    attn_bias: bool = False  # biases in attention projections (the recipe has none)
    max_positions: int = 1024  # longest sequence the sinusoidal table covers


def check(cfg: ModelConfig) -> None:
    if cfg.n_heads < 1:
        raise ConfigError(f"model.n_heads: expected a value >= 1, got {cfg.n_heads}")
    if cfg.d_model % cfg.n_heads != 0:
        raise ConfigError(
            f"model.n_heads: expected a divisor of model.d_model = {cfg.d_model}, got "
            f"{cfg.n_heads}"
        )


def describe(model: dict[str, Any]) -> str:
    """``"transformer 2x256 h4"``: layers x d_model, heads."""
    return (f"transformer {model.get('n_layers', '?')}x{model.get('d_model', '?')} "
            f"h{model.get('n_heads', '?')}")


register_family(Family("transformer", TransformerSettings, "nmt.models.transformer:Transformer",
                check, describe))
