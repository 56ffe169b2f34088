"""Config loading: typed sections, overrides, and one-line errors naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.config import SECTIONS, Config, dump_toml, from_dict, load_config, parse_override
from nmt.errors import ConfigError

CONFIGS = sorted(Path(__file__).resolve().parent.parent.joinpath("configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_load(path: Path) -> None:
    cfg = load_config(path)
    assert isinstance(cfg, Config)
    # The resolved TOML a run saves loads back to the same config.
    assert from_dict(__import__("tomllib").loads(cfg.to_toml())) == cfg


def test_d2l_presets_are_the_recipe() -> None:
    root = Path(__file__).resolve().parent.parent / "configs"
    gru, tf = load_config(root / "d2l-gru.toml"), load_config(root / "d2l-transformer.toml")
    assert (gru.model.arch, gru.model.d_model, gru.model.hidden, gru.model.n_layers) == (
        "gru", 32, 32, 2)
    assert (tf.model.arch, tf.model.d_model, tf.model.d_ff, tf.model.n_heads) == (
        "transformer", 32, 64, 4)
    for cfg, epochs in ((gru, 250), (tf, 200)):
        assert (cfg.train.batch_size, cfg.train.lr, cfg.train.epochs) == (64, 0.005, epochs)
        assert (cfg.data.tokenizer, cfg.data.truncate, cfg.data.min_freq) == ("word", 10, 2)


def test_overrides_are_typed() -> None:
    cfg = load_config(None, ["train.lr=3e-4", "model.arch=gru", "train.compile=true",
                             "train.device=cpu"])
    assert cfg.train.lr == pytest.approx(3e-4)
    assert cfg.model.arch == "gru"
    assert cfg.train.compile is True
    assert cfg.train.device == "cpu"
    # An integer is accepted where a float is expected, and stored as a float.
    assert isinstance(load_config(None, ["train.lr=1"]).train.lr, float)


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("train.lrr=1", "unknown key train.lrr"),
        ("model.arch=lstm", "model.arch: expected one of transformer, gru"),
        ("train.epochs=ten", "train.epochs: expected an integer"),
        ("train.epochs=1.5", "train.epochs: expected an integer"),
        ("train.compile=1", "train.compile: expected true or false"),
        ("nosuch.key=1", "unknown section [nosuch]"),
        ("lr=1", "expected section.key=value"),
        ("train.lr", "expected section.key=value"),
        ("model.n_heads=3", "model.n_heads: expected a divisor of model.d_model"),
        ("train.lr=-1", "train.lr: expected a value >= 0"),
        ("train.lr=nan", "train.lr: expected a finite number"),
        ("model.dropout=1.5", "model.dropout"),
        ("train.log_every=0", "train.log_every: expected a value >= 1"),
        ("data.sp_sentences=-5", "data.sp_sentences: expected a value >= 0, got -5"),
        ("data.sp_characters=-1", "data.sp_characters: expected a value >= 0, got -1"),
        ("train.beta1=1.5", "train.beta1: expected 0 <= value < 1, got 1.5"),
        ("train.beta2=1", "train.beta2: expected 0 <= value < 1, got 1.0"),
        ("train.eval_sentences=-2", "train.eval_sentences: expected -1 (no BLEU), 0 (all)"),
        ("train.device=tpu", "defaults (with --set): train.device: expected auto, cpu, cuda"),
        ("train.device=cuda:x", "train.device: expected auto, cpu, cuda, cuda:N or mps"),
    ],
)
def test_bad_overrides_name_the_key(override: str, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing.toml: config file not found"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[train\nlr = 1\n")
    with pytest.raises(ConfigError, match="bad.toml: not valid TOML"):
        load_config(bad)
    typo = tmp_path / "typo.toml"
    typo.write_text("[train]\nlearning_rate = 0.1\n")
    with pytest.raises(ConfigError, match=r"typo.toml: unknown key train.learning_rate"):
        load_config(typo)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('[model]\nd_model = "big"\n')
    with pytest.raises(ConfigError, match=r"wrong.toml: model.d_model: expected an integer"):
        load_config(wrong)


def test_devices_that_parse() -> None:
    for name in ("auto", "cpu", "cuda", "cuda:1", "mps", "cpu:0"):
        assert load_config(None, [f"train.device={name}"]).train.device == name


def test_parse_override_falls_back_to_string() -> None:
    assert parse_override("train.device=cuda:1") == ("train", "device", "cuda:1")
    assert parse_override("data.vocab_size=4000") == ("data", "vocab_size", 4000)


_scalars = st.one_of(
    st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.text(max_size=12), st.lists(st.integers(), max_size=3),
)
_known_keys = [(s, f) for s, cls in SECTIONS.items() for f in cls.__dataclass_fields__]


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.one_of(st.sampled_from(list(SECTIONS)), st.text(max_size=8)),
        st.one_of(
            st.dictionaries(
                st.one_of(st.sampled_from([k for _, k in _known_keys]), st.text(max_size=8)),
                _scalars, max_size=6),
            _scalars,
        ),
        max_size=4,
    )
)
def test_random_configs_are_valid_or_one_line_errors(raw: dict) -> None:
    try:
        cfg = from_dict(raw, "random.toml")
    except ConfigError as e:
        msg = str(e)
        assert msg.startswith("random.toml: ") and "\n" not in msg
    else:
        assert isinstance(cfg, Config)


def test_old_flat_model_tables_still_load(tmp_path: Path) -> None:
    """Runs made before each family had its own settings hold both families' keys: another
    family's key at its default is dropped, at another value an error naming it, except in a
    checkpoint's or run's saved config (trained while such keys were ignored)."""
    flat = {"arch": "transformer", "d_model": 16, "n_heads": 2, "d_ff": 32, "hidden": 256,
            "bidirectional": False, "n_layers": 1, "dropout": 0.1, "tie_embeddings": False,
            "init": "xavier", "norm_first": False, "attn_bias": False, "max_positions": 1024}
    cfg = from_dict({"model": flat})
    assert (cfg.model.n_heads, cfg.model.d_ff) == (2, 32) and "hidden" not in cfg.to_dict()["model"]
    with pytest.raises(ConfigError, match="^old: model.hidden: a setting of model.arch = 'gru', "
                                          "not of 'transformer'$"):
        from_dict({"model": {**flat, "hidden": 16}}, "old")
    assert from_dict({"model": {**flat, "hidden": 16}}, saved=True) == cfg
    path = tmp_path / "config.toml"
    path.write_text(dump_toml({"model": {**flat, "hidden": 16}}), encoding="utf-8")
    assert load_config(path, saved=True) == cfg
    assert load_config(path, ["model.arch=transformer"], saved=True) == cfg
