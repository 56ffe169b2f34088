"""Model families by name (``model.arch``), each with the ``[model]`` settings only it has.

This registry is the one list of families: ``nmt.config`` validates ``[model]`` against it and
``nmt.models.build_model`` builds from it. It imports no torch, so a config is checked (and the
CTranslate2 path runs) without it; the network itself is imported only when a model is built.

A family is one :class:`Family`, registered with :func:`register` by a module of this package
(``transformer.py``, ``gru.py``: copy one) or by a user's own code before a config is read:

- ``settings``: a frozen dataclass of the settings only this family has, each with a default
  and a one-line reason (typed ``int``, ``float``, ``bool`` or ``str``, as in :mod:`nmt.config`);
  they are read as ``cfg.model.NAME`` like the shared ones;
- ``network``: the :class:`~nmt.models.base.EncoderDecoder` subclass, or ``"module:Class"`` to
  import it when a model is built;
- ``check(cfg)``: the config checks only it needs (raises :class:`~nmt.errors.ConfigError`
  naming ``model.KEY``);
- ``describe(table)``: a ``[model]`` table as stored in a run -> one line for ``nmt runs``;
- ``forward_flops``: its FLOP count for ``nmt train``'s final line (:mod:`nmt.training.cost`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nmt.config import ModelConfig
    from nmt.models.base import EncoderDecoder


@dataclass(frozen=True)
class Family:
    name: str
    settings: type[Any]
    network: str | type[EncoderDecoder]
    check: Callable[[ModelConfig], None]
    describe: Callable[[dict[str, Any]], str]
    # matrix-product FLOPs of one forward pass (cfg, tgt_vocab, src_len, tgt_len), as
    # nmt.training.cost.forward_flops counts them (the built-in families' counts are written there)
    forward_flops: Callable[[ModelConfig, int, float, float], float] | None = None

    def network_class(self) -> type[EncoderDecoder]:
        """The network class, imported on first use when given as ``"module:Class"``."""
        if isinstance(self.network, str):
            module, name = self.network.split(":")
            cls: type[EncoderDecoder] = getattr(importlib.import_module(module), name)
            return cls
        return self.network


# model.arch -> its family, in the order listed in messages (the first is the default)
ARCHITECTURES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Make ``family`` a value of ``model.arch``."""
    ARCHITECTURES[family.name] = family
    return family


for _module in ("transformer", "gru"):  # the built-in families, the default first
    importlib.import_module(f"nmt.models.{_module}_settings")  # each registers itself
