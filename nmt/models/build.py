"""A model built from a config: the family ``model.arch`` names (:func:`nmt.config.families`),
initialised as ``model.init`` says."""

from __future__ import annotations

from torch import nn

from nmt.config import ModelConfig, families
from nmt.errors import ConfigError
from nmt.models.base import EncoderDecoder


def build_model(
    cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, *, joint_vocab: bool = False
) -> EncoderDecoder:
    """Build the model ``cfg.arch`` names, initialised as ``cfg.init`` says.

    ``joint_vocab``: source and target share one vocabulary, so with ``cfg.tie_embeddings`` the
    source embedding is shared too (their sizes must then be equal).
    """
    if src_vocab_size < 1 or tgt_vocab_size < 1:
        raise ConfigError(
            f"vocabulary sizes: expected >= 1, got src={src_vocab_size}, tgt={tgt_vocab_size}"
        )
    if joint_vocab and src_vocab_size != tgt_vocab_size:
        raise ConfigError(
            f"joint vocabulary: expected equal source and target sizes, got "
            f"{src_vocab_size} and {tgt_vocab_size}"
        )
    family = families().get(cfg.arch)
    if family is None:
        raise ConfigError(
            f"model.arch: expected one of {', '.join(families())}, got {cfg.arch!r}"
        )
    family.check(cfg)
    network = family.network_class()
    if not (isinstance(network, type) and issubclass(network, EncoderDecoder)):
        raise ConfigError(f"model.arch={cfg.arch!r}: the family's network {network!r} is not an "
                          f"nmt.models.base.EncoderDecoder")
    model = network(cfg, src_vocab_size, tgt_vocab_size, joint_vocab=joint_vocab)
    model.init_weights(cfg.init)
    return model


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
