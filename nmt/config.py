"""Typed configuration: TOML files in ``configs/`` loaded into frozen dataclasses.

Every field has a default and a one-line reason. Unknown sections or keys, wrong types and values
outside their allowed choices are rejected at load time with a :class:`ConfigError` naming the
file, the key and what was expected. ``--set section.key=value`` overrides are parsed as TOML
values (``--set train.lr=3e-4``, ``--set model.arch=gru``), falling back to a plain string.

Long for a reason: every setting is declared here once, with its default, its reason and its
check, so that a config file is validated in one place.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from nmt.data.filters import parse as parse_filters
from nmt.data.normalize import POLICIES, is_natural_text
from nmt.data.spans import parse as parse_spans
from nmt.data.tokenizers import (
    MIN_SENTENCEPIECE_VOCAB,
    SENTENCEPIECE_CHARACTERS,
    SENTENCEPIECE_SAMPLE,
    SPECIALS,
)
from nmt.errors import ConfigError, shown
from nmt.setting_ranges import int_limit, range_of
from nmt.toml_files import dump_toml, read_toml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _choice(*values: str) -> Any:
    return {"choices": values}


@dataclass(frozen=True)
class SourceConfig:
    """One corpus of several (a ``[[data.sources]]`` table; docs/DATA.md, "Cleaning and
    mixing")."""

    corpus: str = ""  # the parallel data, in any form data.corpus takes
    weight: float = 1.0  # how often its training pairs are seen relative to their count: 2
    # twice each, 0.5 a seeded half of them (up- and down-sampling)
    filters: str = ""  # its own data.filters ("": those of [data])
    licence: str = ""  # its licence and attribution, as an export states it ("": not stated)
    name: str = ""  # how reports name it ("": its corpus)
    back_translated: bool = False  # its source side is synthetic (nmt backtranslate): marked
    # with a tag in training (tagged back-translation), never in valid or test

    @property
    def label(self) -> str:
        return self.name or self.corpus




@dataclass(frozen=True)
class DataConfig:
    """What to read from the corpus, how to clean, split and tokenize it (docs/DATA.md)."""

    corpus: str = "fra-eng"  # the parallel data: the built-in "fra-eng", a Tatoeba pair name
    # ("deu-eng", downloaded), a Tatoeba .zip/.txt file, aligned files by prefix ("mydata/train"
    # reads mydata/train.<source> and .<target>) or a TSV file with `columns`
    source: str = "en"  # language translated from (ISO 639-1 code)
    target: str = "fr"  # language translated into
    columns: str = ""  # a TSV corpus: the language of each column, "en,fr" (or a TOML list)
    sources: tuple[SourceConfig, ...] = ()  # several corpora instead of `corpus`, each with a
    # weight ([[data.sources]] tables: corpus, weight, filters, licence, name)
    valid: str = ""  # validation data of the same kinds as `corpus`, used as it is ("": split)
    test: str = ""  # test data, used as it is by `nmt bleu` ("": held out from the corpus)
    max_pairs: int = 0  # read only the first N pairs of the corpus (0: all); the d2l recipe
    # reads 601 (it means 600, but `if i > num_examples: break` keeps line 600 too)
    lowercase: bool = False  # lower-case both sides (the recipe does; the d2l presets set it)
    normalization: str = field(default="natural", metadata=_choice(*POLICIES))
    # natural: text as written, only a Unicode clean-up (NFC, whitespace, invisible characters,
    # one apostrophe); full: that plus the textbook's space before , . ! ? (runs made before
    # natural text); recipe: only the recipe's rules (docs/DATA.md)
    target_apostrophes: str = field(default="kept", metadata=_choice("kept", "straight"))
    # kept: the target side keeps ’ and ‘ as the corpus writes them, so the model answers in
    # its references' style (a corpus written with typographic apostrophes); straight: they
    # become ' as on the source side (runs made before this setting)
    case_augment: float = 0.0  # natural text: share of training pairs added again with the
    # source lower-cased and its punctuation split off ("i'm home ."), so a cased model also
    # translates input typed the textbook's way (as Marian's case augmentation); 0: off
    case_forms: str = "textbook"  # the forms the augmented sources are written in, in turn:
    # textbook ("i'm home ."), upper ("I'M HOME."), title ("I'm Home."); a comma list or a
    # TOML list, e.g. ["textbook", "upper", "textbook", "title"]
    span_augment: float = 0.05  # share of training pairs whose shared numbers and names
    # become the same random placeholders or tags on both sides (%s, {0}, <b>...</b>), so the
    # model learns to copy them (nmt/data/span_augment.py); 0: off (the d2l presets)
    dedup: bool = True  # drop exact duplicate (source, target) pairs
    filters: str = "default"  # cleaning filters on the corpus' pairs (nmt/data/filters.py):
    # "default" (all at their defaults), "none", or a list: ["default", "ratio=2.5", "-digits"]
    spans: str = "default"  # protected spans that translation keeps as written
    # (nmt/data/spans/): "default" (every kind, terms when given), "none", or a list:
    # ["default", "-options"]; docs/DATA.md lists the kinds
    glossary: str = ""  # a UTF-8 file of terms kept as written, one a line (the kind "terms")
    terms: str = ""  # terms kept as written, a TOML list: ["Firefox", "GNOME Shell"]
    langid: bool = True  # remove pairs with a side confidently in another language (an offline
    # model, nmt/data/langid.py); a file mostly in another language is an error
    max_words: int = 50  # drop pairs with a side longer than this many words (0: keep all);
    # in a script written without spaces (Chinese, Japanese, Thai) each character counts
    valid_frac: float = 0.02  # share of distinct source sentences held out for validation
    test_frac: float = 0.02  # share of distinct source sentences held out for testing
    valid_size: int = 3000  # at most this many source sentences held out for validation (0:
    # no cap): the field validates on a few thousand, however large the corpus
    test_size: int = 3000  # at most this many held out for testing (0: no cap)
    split_seed: int = 1  # seed of the grouped train/valid/test split
    tokenizer: str = field(default="sentencepiece", metadata=_choice("sentencepiece", "word"))
    sp_model_type: str = field(default="unigram", metadata=_choice("unigram", "bpe"))
    vocab_size: int = 8000  # SentencePiece vocabulary size (per side unless joint)
    joint_vocab: bool = True  # one SentencePiece model and vocabulary for both languages
    character_coverage: float = 1.0  # SentencePiece: share of characters covered by pieces
    # of their own, the rarest mapped to <unk>; below 1.0 (0.9995) for Chinese or Japanese
    sp_sentences: int = SENTENCEPIECE_SAMPLE  # SentencePiece trains on a random sample of this
    # many sentences (its input_sentence_size; 0: all): its time and memory stay bounded
    sp_characters: int = SENTENCEPIECE_CHARACTERS  # ... and of about this many characters at
    # most (0: no limit): its memory grows by about 20 bytes a character of the sample
    byte_fallback: bool = True  # SentencePiece: a character the vocabulary lacks is written
    # as the pieces of its bytes, which decoding turns back into it, never <unk> (256 pieces;
    # vocabularies of 1,000 pieces or more, smaller ones are trained without)
    span_pieces: bool = True  # SentencePiece: the most frequent placeholders and tags (%s, %d,
    # %1$s, {0}, <b>, </b>, <br/>...) are pieces of their own, never cut apart (docs/DATA.md)
    min_freq: int = 2  # word-level tokenizer: minimum count to enter the vocabulary
    truncate: int = 0  # cut encoded sentences (with <eos>) to N tokens (0: never); d2l uses 10


    def to_dict(self) -> dict[str, Any]:
        """Every field, as JSON and TOML hold it (the sources as a list of tables)."""
        return {**dataclasses.asdict(self), "sources": [dataclasses.asdict(s)
                                                        for s in self.sources]}

    @property
    def natural_text(self) -> bool:
        """Text as written (not the textbook's lower-cased, spaced text): scored against the
        corpus' references with sacrebleu's defaults."""
        return is_natural_text(self.lowercase, self.normalization)


# --- model families --------------------------------------------------------------------------
#
# ``model.arch`` names a family: one :class:`Family`, registered with :func:`register_family`
# by its module (the built-in ones are nmt/models/transformer_settings.py and gru_settings.py,
# each beside its network: copy one) or by a user's own code before a config is read. The
# registry lives here, beside ModelConfig, which validates ``[model]`` against it; it names the
# built-in families' modules and imports them when it is first read, as it imports a family's
# network by name when a model is built, so this module imports neither (nor torch).


@dataclass(frozen=True)
class Family:
    """A model family: ``settings`` is a frozen dataclass of the settings only it has, each with
    a default and a one-line reason (typed ``int``, ``float``, ``bool`` or ``str``), read as
    ``cfg.model.NAME`` like the shared ones; ``network`` the
    :class:`~nmt.models.base.EncoderDecoder` subclass, or ``"module:Class"`` to import it when a
    model is built; ``check(cfg)`` the config checks only it needs (a :class:`ConfigError`
    naming ``model.KEY``); ``describe(table)`` a ``[model]`` table as a run stores it -> one line
    for ``nmt runs``; ``forward_flops`` its FLOP count for ``nmt train``'s final line."""

    name: str
    settings: type[Any]
    network: str | type[Any]
    check: Callable[[ModelConfig], None]
    describe: Callable[[dict[str, Any]], str]
    # matrix-product FLOPs of one forward pass (cfg, tgt_vocab, src_len, tgt_len), as
    # nmt.training.cost.forward_flops counts them (the built-in families' counts are there)
    forward_flops: Callable[[ModelConfig, int, float, float], float] | None = None

    def network_class(self) -> type[Any]:
        """The network class, imported on first use when given as ``"module:Class"``."""
        if isinstance(self.network, str):
            module, name = self.network.split(":")
            cls: type[Any] = getattr(importlib.import_module(module), name)
            return cls
        return self.network


# the built-in families' modules, the default family first
BUILT_IN_FAMILIES = ("nmt.models.transformer_settings", "nmt.models.gru_settings")
_FAMILIES: dict[str, Family] = {}
_built_in_loaded = False


def families() -> dict[str, Family]:
    """``model.arch`` -> its family, in the order messages list them (the first is the
    default): the built-in families, then those registered from outside."""
    global _built_in_loaded
    if not _built_in_loaded:
        _built_in_loaded = True
        for module in BUILT_IN_FAMILIES:
            importlib.import_module(module)  # each registers itself
    return _FAMILIES


def register_family(family: Family) -> Family:
    """Make ``family`` a value of ``model.arch``."""
    families()[family.name] = family
    return family


@dataclass(frozen=True, init=False)
class ModelConfig:
    """The network. Names follow the papers: d_model, n_heads, d_ff.

    ``arch`` picks the family (:func:`families`); the settings below are shared
    by all families, and ``family`` holds the chosen family's own (its ``settings`` dataclass), read
    as ``cfg.model.NAME`` like these. ``ModelConfig(arch=..., **settings)`` takes both kinds.
    """

    arch: str = "transformer"  # the family: transformer or gru (nmt/models/families.py)
    d_model: int = 256  # embedding size (and Transformer width)
    n_layers: int = 2  # layers in the encoder and in the decoder
    dropout: float = 0.1  # dropout on embeddings, attention weights and sublayer outputs (GRU:
    # also between stacked layers)
    tie_embeddings: bool = False  # share target embedding and output projection (and source,
    # when the vocabulary is joint); the GRU needs hidden == d_model
    init: str = field(default="xavier", metadata=_choice("xavier", "default"))  # weight init
    family: Any = field(default=None, compare=True)  # the family's own settings

    def __init__(self, arch: str = "transformer", **settings: Any) -> None:
        given: Any = settings.pop("family", None)  # dataclasses.replace passes it
        if isinstance(given, family_of(arch, "ModelConfig").settings):
            settings = {**dataclasses.asdict(given), **settings}
        shared, own = _split_model_settings(arch, settings, "ModelConfig")
        for f in fields(ModelConfig)[1:-1]:
            object.__setattr__(self, f.name, shared.get(f.name, f.default))
        object.__setattr__(self, "arch", arch)
        object.__setattr__(self, "family", family_of(arch).settings(**own))

    def __getattr__(self, name: str) -> Any:
        # called only for names that are not shared settings: the family's own
        own = self.__dict__.get("family")
        if own is None or name.startswith("__") or name not in _names(type(own)):
            raise AttributeError(f"model.{name}: not a setting of model.arch = "
                                 f"{self.__dict__.get('arch')!r}")
        return getattr(own, name)

    def to_dict(self) -> dict[str, Any]:
        """The ``[model]`` table: ``arch``, the shared settings, then the family's own."""
        table = {f.name: getattr(self, f.name) for f in fields(ModelConfig)[:-1]}
        return {**table, **dataclasses.asdict(self.family)}


def _names(settings: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in fields(settings)}


SHARED_MODEL_KEYS = tuple(f.name for f in fields(ModelConfig)[1:-1])


def family_of(arch: str, where: str = "config") -> Family:
    """The registered family ``model.arch = arch`` names."""
    family = families().get(arch)
    if family is None:
        raise ConfigError(f"{where}: model.arch: expected one of {', '.join(families())}, "
                          f"got {shown(arch)}")
    return family


def _split_model_settings(
    arch: str, table: dict[str, Any], where: str, saved: bool = False
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A flat ``[model]`` table (without ``arch``) -> (shared settings, the family's own).

    Runs made before families had sections of their own hold every family's settings: another
    family's setting at its default is dropped; at another value it is an error naming it
    (unless ``saved``: a run's checkpoint, trained while such settings were ignored)."""
    own_fields = _names(family_of(arch, where).settings)
    shared: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for key, value in table.items():
        if key in SHARED_MODEL_KEYS:
            shared[key] = value
        elif key in own_fields:
            own[key] = value
        else:
            other = next((f for f in families().values() if key in _names(f.settings)), None)
            if other is None or key == "family":
                raise ConfigError(f"{where}: unknown key model.{_q(key)}")
            if not saved and value != _names(other.settings)[key].default:
                raise ConfigError(f"{where}: model.{key}: a setting of model.arch = "
                                  f"{other.name!r}, not of {arch!r}")
    return shared, own


@dataclass(frozen=True)
class TrainConfig:
    """The optimisation loop."""

    epochs: int = 10  # passes over the training split (when max_steps is 0)
    max_steps: int = 0  # optimizer steps, whatever the epochs (0: train for `epochs`)
    batch_size: int = 64  # sentences per batch, or target tokens when batch_by = "tokens"
    batch_by: str = field(default="sentences", metadata=_choice("sentences", "tokens"))
    pad_to_multiple: int = 0  # pad each batch's source and target width up to a multiple of
    # N, and by tokens batch pairs of one padded target width, so batch shapes repeat step to
    # step and compiled or CUDA graphs are reused (nmt/data/fixed_shapes.py); 0: off
    optimizer: str = field(default="adam", metadata=_choice("adam", "adamw"))
    lr: float = 0.005  # peak learning rate
    beta1: float = 0.9  # Adam beta1
    beta2: float = 0.999  # Adam beta2 (0.98 is common for Transformers)
    weight_decay: float = 0.0  # AdamW decoupled weight decay
    schedule: str = field(default="constant", metadata=_choice("constant", "inverse_sqrt"))
    warmup_steps: int = 0  # linear warm-up steps for the inverse_sqrt schedule
    clip_norm: float = 1.0  # global gradient-norm clipping (0: off)
    label_smoothing: float = 0.0  # label smoothing of the cross-entropy
    accum_steps: int = 1  # batches accumulated per optimizer step
    eval_every: int = 0  # validate every N optimizer steps (0: at the end of each epoch)
    eval_sentences: int = 500  # valid sentences decoded for greedy BLEU (0: all, -1: no BLEU)
    patience: int = 0  # stop after N validations without a better valid BLEU (0: never)
    ema_decay: float = 0.0  # exponential moving average of the weights (Marian's exponential
    # smoothing), used for validation, best.pt and translation; e.g. 0.999; 0: off
    max_minutes: float = 0.0  # wall-clock budget for training (0: none)
    device: str = "auto"  # auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps
    precision: str = field(default="auto", metadata=_choice("auto", "fp32", "bf16", "fp16"))
    # auto: bf16 autocast on CUDA and on CPUs with bf16 units (AMX, AVX-512 BF16), fp32
    # elsewhere (nmt.device.autocast_dtype; the training log says which and why); fp32 and
    # bf16 force either; fp16 loads (runs made with it) but does not train (loss scaling)
    compile: bool = False  # torch.compile the model for the training steps (validation and
    # decoding run it as it is; checkpoints hold its plain weights); compiling costs the first
    # steps a minute or more (`make gpu-check STEP=speed` measures what it gains on a GPU)
    compile_mode: str = field(default="default", metadata=_choice(
        "default", "reduce-overhead", "max-autotune-no-cudagraphs"))  # torch.compile's mode:
    # reduce-overhead also replays each batch shape's kernels as a CUDA graph (pad_to_multiple
    # keeps the shapes few)
    threads: int = 0  # CPU threads for torch (0: torch's default)
    seed: int = 1  # seeds random, numpy and torch
    log_every: int = 50  # steps between metric lines
    keep_from: str = ""  # nmt train --from: what the child keeps of its parent's training
    # besides the weights, a list of optimizer (Adam's moments), schedule (the learning rate's
    # place in it), step (the step count, so max_steps counts on from the parent's); "": none,
    # all three start afresh (as OpenNMT-py's reset_optim = all)


@dataclass(frozen=True)
class DecodeConfig:
    """Search settings used by validation, ``nmt translate`` and ``nmt bleu``."""

    beam: int = 1  # beam size (1: greedy)
    length_penalty: float = 1.0  # GNMT-style alpha; scores are divided by ((5+len)/6)^alpha
    max_len_a: float = 1.5  # output limit: a * source length + b
    max_len_b: int = 10
    max_len_cap: int = 256  # hard cap on output length
    batch_size: int = 128  # sentences per decoding batch
    max_tokens: int = 8192  # and at most this many source tokens per batch, padding included,
    # times the beam: a long line or a big beam gets a smaller batch, so memory stays bounded
    precision: str = field(default="auto", metadata=_choice("auto", "fp32", "bf16"))
    # auto: bf16 weights on CPUs with bf16 units (docs/BENCHMARKS.md, "bf16 on the CPU"),
    # fp32 elsewhere, CUDA included (nmt.device.decode_dtype); NMT_CPU_BF16=0 keeps fp32
    # everywhere


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        data = self.data.to_dict()
        data.pop("corpus" if self.data.sources else "sources")  # one or the other is the data
        return {"data": data, "model": self.model.to_dict(),
                "train": dataclasses.asdict(self.train), "decode": dataclasses.asdict(self.decode)}

    def to_toml(self) -> str:
        return dump_toml(self.to_dict())


SECTIONS: dict[str, type] = {
    "data": DataConfig,
    "model": ModelConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
}


CASE_FORM_NAMES = ("textbook", "upper", "title")  # data.case_forms: nmt.data.augment.CASE_FORMS
# string settings also written as a TOML list of strings
LIST_KEYS = {"data.columns", "data.case_forms", "data.filters", "data.spans", "data.terms",
             "train.keep_from"}
KEEP_FROM = ("optimizer", "schedule", "step")  # train.keep_from


def _q(name: object) -> str:
    """A key as it may be printed on one line: plain when it is a simple name, else quoted."""
    text = str(name)
    return text if text.replace("_", "a").isalnum() and text.isascii() else repr(text)


def _type_name(tp: Any) -> str:
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}[tp]


def _check_value(where: str, key: str, f: dataclasses.Field, value: Any) -> Any:
    tp = {"int": int, "float": float, "bool": bool, "str": str}[str(f.type)]
    listed = key in LIST_KEYS or key.endswith("].filters")
    if listed and isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = ",".join(value)  # columns = ["en", "fr"] is held as "en,fr"
    ok = isinstance(value, tp) and not (tp is int and isinstance(value, bool))
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if tp is float and ok and not math.isfinite(value):
        raise ConfigError(f"{where}: {key}: expected a finite number, got {value!r}")
    if not ok:
        raise ConfigError(f"{where}: {key}: expected {_type_name(tp)}, got {shown(value)}")
    if tp is str and not value.isprintable():  # config.toml must be able to hold it on one line
        raise ConfigError(f"{where}: {key}: expected printable text, got {shown(value)}")
    choices = f.metadata.get("choices")
    if choices and value not in choices:
        raise ConfigError(
            f"{where}: {key}: expected one of {', '.join(choices)}, got {shown(value)}"
        )
    if tp in (int, float) and not range_of(key).admits(value):
        raise ConfigError(f"{where}: {key}: expected {range_of(key).expected()}, "
                          f"got {shown(value, 30)}")
    if tp is int and value > int_limit(key):
        raise ConfigError(f"{where}: {key}: expected at most {int_limit(key)}, "
                          f"got {shown(value, 30)}")
    return value


def from_dict(raw: dict[str, Any], where: str = "config", *, saved: bool = False) -> Config:
    """Build a :class:`Config` from nested dicts, rejecting unknown keys and wrong types.

    ``saved``: the config stored in a checkpoint; another model family's settings in its
    ``[model]`` (runs made before each family had its own) are dropped whatever their value."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table of sections")
    sections: dict[str, Any] = {}
    for name, table in raw.items():
        if name not in SECTIONS:
            raise ConfigError(
                f"{where}: unknown section [{_q(name)}]; expected one of {', '.join(SECTIONS)}"
            )
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: {name}: expected a table [{name}], got {shown(table)}")
        if name == "model":
            sections[name] = _model_from_table(table, where, saved)
            continue
        if name == "data" and saved:  # saved before these existed: none ran, nothing capped,
            # apostrophes straightened on both sides
            # SentencePiece without byte pieces or span pieces, no pair rewritten with spans
            table = {"filters": "none", "langid": False, "valid_size": 0, "test_size": 0,
                     "target_apostrophes": "straight", "byte_fallback": False,
                     "span_pieces": False, "span_augment": 0.0, **table}
        cls = SECTIONS[name]
        known = {f.name: f for f in fields(cls)}
        values = {}
        for key, value in table.items():
            if key not in known:
                raise ConfigError(f"{where}: unknown key {name}.{_q(key)}")
            if name == "data" and key == "sources":
                values[key] = _sources(where, value, "corpus" in table)
                continue
            values[key] = _check_value(where, f"{name}.{key}", known[key], value)
        sections[name] = cls(**values)
    cfg = Config(**sections)
    _check_consistency(cfg, where)
    return cfg


def _sources(where: str, value: Any, with_corpus: bool) -> tuple[SourceConfig, ...]:
    """``[[data.sources]]``: a list of tables, each type-checked like a section."""
    if not (isinstance(value, list) and value and all(isinstance(t, dict) for t in value)):
        raise ConfigError(f"{where}: data.sources: expected [[data.sources]] tables (corpus, "
                          f"weight, filters, licence, name, back_translated), got "
                          f"{shown(value)}")
    if with_corpus:
        raise ConfigError(f"{where}: data.corpus and data.sources: expected one of them (a "
                          "source's corpus goes in its [[data.sources]] table)")
    known = {f.name: f for f in fields(SourceConfig)}
    out = []
    for i, table in enumerate(value, 1):
        values = {}
        for key, v in table.items():
            if key not in known:
                raise ConfigError(f"{where}: unknown key data.sources[{i}].{_q(key)}")
            values[key] = _check_value(where, f"data.sources[{i}].{key}", known[key], v)
        source = SourceConfig(**values)
        if not source.corpus:
            raise ConfigError(f"{where}: data.sources[{i}].corpus: expected the source's corpus")
        if source.filters:
            try:
                parse_filters(source.filters)
            except ValueError as e:
                raise ConfigError(f"{where}: data.sources[{i}].filters: {e}") from None
        out.append(source)
    labels = [s.label for s in out]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"{where}: data.sources: two sources named "
                          f"{shown(next(x for x in labels if labels.count(x) > 1))}; give each a "
                          "name")
    return tuple(out)


def _model_from_table(table: dict[str, Any], where: str, saved: bool) -> ModelConfig:
    """``[model]``: ``arch``, the shared settings and that family's own, each type-checked."""
    arch_field = _names(ModelConfig)["arch"]
    arch = _check_value(where, "model.arch", arch_field, table.get("arch", arch_field.default))
    rest = {k: v for k, v in table.items() if k != "arch"}
    shared, own = _split_model_settings(arch, rest, where, saved)
    known = {**_names(ModelConfig), **_names(family_of(arch).settings)}
    checked = {key: _check_value(where, f"model.{key}", known[key], value)
               for key, value in {**shared, **own}.items()}
    return ModelConfig(arch, **checked)


def _check_consistency(cfg: Config, where: str) -> None:
    d, m, t = cfg.data, cfg.model, cfg.train
    if d.valid_frac + d.test_frac >= 0.5:
        raise ConfigError(f"{where}: data.valid_frac + data.test_frac: expected < 0.5")
    if d.tokenizer == "sentencepiece" and d.vocab_size < MIN_SENTENCEPIECE_VOCAB:
        raise ConfigError(f"{where}: data.vocab_size: expected at least {MIN_SENTENCEPIECE_VOCAB} "
                          f"for SentencePiece (its {len(SPECIALS)} special tokens and a "
                          f"character), got {d.vocab_size}")
    try:
        family_of(m.arch).check(m)  # the family's own checks (its *_settings.py)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    if d.case_augment and not d.natural_text:
        raise ConfigError(f"{where}: data.case_augment: expected 0 unless the text is natural "
                          "(data.normalization = \"natural\", data.lowercase = false)")
    try:
        parse_filters(d.filters)
    except ValueError as e:
        raise ConfigError(f"{where}: data.filters: {e}") from None
    try:
        parse_spans(d.spans, have_terms=bool(d.glossary or d.terms))
    except ValueError as e:
        raise ConfigError(f"{where}: data.spans: {e}") from None
    kept = t.keep_from.split(",") if t.keep_from else []
    if not set(kept) <= set(KEEP_FROM):
        raise ConfigError(f"{where}: train.keep_from: expected a list of "
                          f"{', '.join(KEEP_FROM)} (or empty), got {shown(t.keep_from)}")
    forms = d.case_forms.split(",")
    if not set(forms) <= set(CASE_FORM_NAMES) or "" in forms:
        raise ConfigError(f"{where}: data.case_forms: expected a list of "
                          f"{', '.join(CASE_FORM_NAMES)}, got {shown(d.case_forms)}")
    _check_languages(d, where)
    if not _DEVICE.fullmatch(t.device):
        raise ConfigError(f"{where}: train.device: expected auto, cpu, cuda, cuda:N or mps, "
                          f"got {shown(t.device)}")


_DEVICE = re.compile(r"auto|(cpu|cuda|mps)(:\d+)?")


def _check_languages(d: DataConfig, where: str) -> None:
    """The pair's language codes, the TSV's columns, and a tokenizer that suits the scripts.
    (Paths are checked when the data is prepared: loading a config reads no other file.)"""
    from nmt.data.languages import known_language, language

    for key, code in (("data.source", d.source), ("data.target", d.target)):
        if not known_language(code):
            raise ConfigError(f"{where}: {key}: unknown language code {shown(code, 30)}; "
                              "expected an ISO 639-1 code such as en, fr, de, ru, zh, or one "
                              "with the script it is written in, such as sr-Latn (docs/DATA.md)")
    if d.source == d.target:
        raise ConfigError(f"{where}: data.source and data.target: expected two languages, got "
                          f"{d.source!r} on both sides")
    if d.columns:
        names = d.columns.split(",")
        if len(set(names)) != len(names) or not all(names):
            raise ConfigError(f"{where}: data.columns: expected distinct column names, got "
                              f"{shown(d.columns)}")
        for key, code in (("data.source", d.source), ("data.target", d.target)):
            if code not in names:
                raise ConfigError(f"{where}: data.columns: no column {code!r} for {key} "
                                  f"(columns {shown(d.columns)})")
    if d.tokenizer == "word":
        for code in (d.source, d.target):
            if not language(code).spaced:
                raise ConfigError(f"{where}: data.tokenizer: the word tokenizer splits at spaces "
                                  f"and {language(code).name} is written without them; use "
                                  "\"sentencepiece\"")


def parse_override(text: str) -> tuple[str, str, Any]:
    """``"train.lr=3e-4"`` -> ``("train", "lr", 0.0003)``."""
    shown = text if text.isprintable() else repr(text)  # the message stays one line
    if "=" not in text:
        raise ConfigError(f"--set {shown}: expected section.key=value")
    key, raw = text.split("=", 1)
    if key.count(".") != 1:
        raise ConfigError(f"--set {shown}: expected section.key=value, e.g. train.lr=0.001")
    section, name = key.strip().split(".")
    try:
        parsed = tomllib.loads(f"v = {raw.strip()}")
        # "1\n[data]..." parses, but is not one value: keep the text, the type check reports it
        value = parsed["v"] if parsed.keys() == {"v"} else raw.strip()
    except (tomllib.TOMLDecodeError, RecursionError):
        value = raw.strip()
    return section, name, value


def load_config(
    path: str | Path | None, overrides: list[str] | tuple[str, ...] = (), *, saved: bool = False,
    base: dict[str, dict[str, Any]] | None = None, base_name: str = "defaults",
) -> Config:
    """Load a TOML config (or the defaults when ``path`` is None) and apply ``--set`` overrides.

    ``saved``: a run's own ``config.toml``, read as :func:`from_dict` reads a checkpoint's.
    ``base``: the tables the file and the overrides apply to, key by key, instead of the
    defaults (a parent run's config, for ``nmt train --from``), which messages name
    ``base_name`` when no file is given."""
    raw = read_toml(path, Path(path).parent if saved and path is not None else None)
    where = base_name if path is None else str(path)
    if base is not None:
        bottom = {k: dict(v) for k, v in base.items()}
        given: dict[str, Any] = raw["data"] if isinstance(raw.get("data"), dict) else {}
        for one, other in (("corpus", "sources"), ("sources", "corpus")):
            if one in given:  # the file's choice of data replaces the base's
                bottom.get("data", {}).pop(other, None)
        raw = {**bottom, **{k: {**bottom.get(k, {}), **v} if isinstance(v, dict) else v
                            for k, v in raw.items()}}
    from_dict(raw, where, saved=saved)  # report file errors before override errors
    return from_dict(_with_overrides(raw, overrides),
                     where if not overrides else f"{where} (with --set)", saved=saved)


def _with_overrides(raw: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    for text in overrides:
        section, name, value = parse_override(text)
        table = raw.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"--set {text}: [{section}] is not a table")
        table[name] = value
    return raw
