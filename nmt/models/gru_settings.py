"""The GRU's own ``[model]`` settings and checks; the network is nmt/models/gru.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nmt.config import Family, ModelConfig, register_family
from nmt.errors import ConfigError


@dataclass(frozen=True)
class GRUSettings:
    hidden: int = 256  # GRU hidden size
    bidirectional: bool = False  # the encoder reads both directions (outputs are summed)


def check(cfg: ModelConfig) -> None:
    if cfg.hidden < 1:
        raise ConfigError(f"model.hidden: expected a value >= 1, got {cfg.hidden}")
    if cfg.tie_embeddings and cfg.d_model != cfg.hidden:
        raise ConfigError(
            f"model.tie_embeddings: the GRU needs model.hidden == model.d_model to tie, got "
            f"model.hidden = {cfg.hidden}, model.d_model = {cfg.d_model}"
        )


def describe(model: dict[str, Any]) -> str:
    """``"gru 2x512 bi"``: layers x hidden size, and whether the encoder is bidirectional."""
    bi = " bi" if model.get("bidirectional") else ""
    return f"gru {model.get('n_layers', '?')}x{model.get('hidden', '?')}{bi}"


register_family(Family("gru", GRUSettings, "nmt.models.gru:GRUSeq2Seq", check, describe))
