"""Model families behind one encoder-decoder contract (:mod:`nmt.models.base`) and the factory."""

from __future__ import annotations

from torch import nn

from nmt.config import ModelConfig
from nmt.errors import ConfigError
from nmt.models.attention import MultiHeadAttention
from nmt.models.base import DecodeOutput, EncoderDecoder, Memory, State, select_rows
from nmt.models.gru import GRUSeq2Seq
from nmt.models.transformer import Transformer

__all__ = [
    "DecodeOutput",
    "EncoderDecoder",
    "GRUSeq2Seq",
    "Memory",
    "State",
    "Transformer",
    "build_model",
    "count_parameters",
    "select_rows",
]


def build_model(
    cfg: ModelConfig,
    src_vocab_size: int,
    tgt_vocab_size: int,
    *,
    joint_vocab: bool = False,
    pad_id: int = 1,
    bos_id: int = 2,
    eos_id: int = 3,
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
    model: EncoderDecoder
    family: type[GRUSeq2Seq] | type[Transformer]
    if cfg.arch == "gru":
        family = GRUSeq2Seq
    elif cfg.arch == "transformer":
        if cfg.d_model % cfg.n_heads != 0:
            raise ConfigError(
                f"model.n_heads: expected a divisor of d_model={cfg.d_model}, got {cfg.n_heads}"
            )
        family = Transformer
    else:
        raise ConfigError(f"model.arch: expected one of transformer, gru, got {cfg.arch!r}")
    model = family(cfg, src_vocab_size, tgt_vocab_size, joint_vocab=joint_vocab,
                   pad_id=pad_id, bos_id=bos_id, eos_id=eos_id)
    if cfg.init == "xavier":
        xavier_init_(model)
    return model


def xavier_init_(model: nn.Module) -> None:
    """Xavier-uniform weights of every linear and GRU layer, as the recipe does; biases,
    embeddings and LayerNorms keep PyTorch's defaults (a tied output projection is a linear
    layer, so a tied embedding gets Xavier weights too).

    The fused ``(3 d_model, d_model)`` query/key/value projection is initialised as three
    ``(d_model, d_model)`` blocks, so each gets the bound of the recipe's separate layers.
    """
    fused = {id(m.in_proj) for m in model.modules() if isinstance(m, MultiHeadAttention)}
    for module in model.modules():
        if id(module) in fused:
            assert isinstance(module, nn.Linear)
            for block in module.weight.data.chunk(3, dim=0):
                nn.init.xavier_uniform_(block)
        elif type(module) is nn.Linear:
            nn.init.xavier_uniform_(module.weight)
        elif isinstance(module, nn.GRU):
            for name, param in module.named_parameters():
                if name.startswith("weight"):
                    nn.init.xavier_uniform_(param)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
