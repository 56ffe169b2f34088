"""A model family plugged in from outside the package: registered, configured, trained, used."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_train import SHARED
from torch import Tensor, nn

from nmt.config import Family, ModelConfig, families, load_config
from nmt.errors import ConfigError
from nmt.models.base import DecodeOutput, EncoderDecoder, Memory, State, lengths_to_mask
from nmt.runs.loading import load_run
from nmt.runs.table import describe_model
from nmt.training.loop import train
from nmt.translation.translator import Translator


@dataclass(frozen=True)
class ToySettings:
    width: int = 8  # the output layer's inner size


def check(cfg: ModelConfig) -> None:
    if cfg.width < 2:
        raise ConfigError(f"model.width: expected at least 2, got {cfg.width}")


def describe(model: dict[str, Any]) -> str:
    return f"toy w{model.get('width', '?')}"


def forward_flops(cfg: ModelConfig, tgt_vocab: int, src_len: float, tgt_len: float) -> float:
    return tgt_len * 2 * cfg.width * (cfg.d_model + tgt_vocab)


class ToyNetwork(EncoderDecoder):
    """The mean of the source embeddings, added to each target embedding."""

    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, *,
                 joint_vocab: bool = False) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab_size, cfg.d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, cfg.d_model)
        self.out = nn.Sequential(nn.Linear(cfg.d_model, cfg.width), nn.Tanh(),
                                 nn.Linear(cfg.width, tgt_vocab_size))

    def init_weights(self, scheme: str) -> None:
        pass  # PyTorch's initialisation is this family's

    def encode(self, src: Tensor, src_lengths: Tensor, need_weights: bool = False) -> Memory:
        mask = lengths_to_mask(src_lengths, src.shape[1])
        total = (self.src_embed(src) * mask[..., None]).sum(1)
        return {"context": total / src_lengths[:, None], "src_mask": mask,
                "src_lengths": src_lengths}

    def init_state(self, memory: Memory) -> State:
        return {"context": memory["context"]}

    def decode(self, tgt: Tensor, memory: Memory, state: State | None = None,
               need_weights: bool = False) -> DecodeOutput:
        logits = self.out(self.tgt_embed(tgt) + memory["context"][:, None])
        return DecodeOutput(logits, None if state is None else dict(state), {})


@pytest.fixture()
def toy(monkeypatch: pytest.MonkeyPatch) -> Family:
    family = Family("toy", ToySettings, ToyNetwork, check, describe, forward_flops)
    monkeypatch.setitem(families(), "toy", family)
    return family


def test_a_family_from_outside_the_package_trains_and_translates(
    toy: Family, tiny_data_dir: Path, tmp_path: Path
) -> None:
    cfg = load_config(None, [*SHARED, "model.arch=toy", "model.width=12", "train.max_steps=1",
                             "train.eval_sentences=-1"])
    assert (cfg.model.arch, cfg.model.width, cfg.model.d_model) == ("toy", 12, 16)
    run = tmp_path / "toy"
    train(cfg, run, data_dir=tiny_data_dir, log=lambda s: None)
    saved = (run / "config.toml").read_text(encoding="utf-8")
    assert "width = 12" in saved and "n_heads" not in saved and "hidden" not in saved
    loaded = load_run(run, "last", device="cpu")
    assert isinstance(loaded.model, ToyNetwork) and loaded.config == cfg
    out = Translator.from_run(loaded).translate(["I am here.", "Go."])
    assert len(out) == 2 and all(isinstance(line, str) for line in out)
    assert describe_model(cfg.to_dict()["model"]) == "toy w12"


def test_a_toy_config_takes_only_its_own_settings(toy: Family, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="model.width: expected at least 2"):
        load_config(None, ["model.arch=toy", "model.width=1"])
    with pytest.raises(ConfigError, match="model.width: expected an integer"):
        load_config(None, ["model.arch=toy", "model.width=wide"])
    with pytest.raises(ConfigError, match="model.n_heads: a setting of model.arch = "
                                          "'transformer', not of 'toy'"):
        load_config(None, ["model.arch=toy", "model.n_heads=8"])
    path = tmp_path / "toy.toml"
    path.write_text('[model]\narch = "toy"\ndepth = 3\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^{path}: unknown key model.depth$"):
        load_config(path)
    with pytest.raises(AttributeError, match="model.width: not a setting of model.arch = 'gru'"):
        _ = load_config(None, ["model.arch=gru"]).model.width
