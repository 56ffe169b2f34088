"""Configs written by hand: random TOML text and random ``--set`` overrides give a valid config
or a one-line ConfigError naming the file or key, never a traceback; a valid config survives
the round trip through the config.toml a run saves.

(test_config.py already feeds random nested dicts to ``from_dict``; these go through the text.)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import tomllib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.config import SECTIONS, Config, load_config
from nmt.errors import ConfigError

KEYS = {s: list(cls.__dataclass_fields__) for s, cls in SECTIONS.items()}
DOTTED = [f"{s}.{k}" for s, keys in KEYS.items() for k in keys]

NAMES = st.one_of(st.sampled_from([k for keys in KEYS.values() for k in keys]),
                  st.text(max_size=6))
SECTION_NAMES = st.one_of(st.sampled_from(list(SECTIONS)), st.text(max_size=6))


def _float_literal(x: float) -> str:
    return repr(x) if math.isfinite(x) else ("nan" if math.isnan(x) else
                                             ("inf" if x > 0 else "-inf"))


VALUES = st.one_of(  # TOML value text: mostly well-formed, some not
    st.integers(-2**70, 2**70).map(str),
    st.floats().map(_float_literal),
    st.sampled_from(["true", "false", "1979-05-27", "07:32:00", "1e400", "0x1F", "1_000", '""',
                     "[]", "{}", "[1, [2, 3]]", "{a = 1}", "'lit'", '"""multi\nline"""', "-0",
                     '"cpu"', '"gru"', '"transformer"', "0.5", "4", "1"]),
    st.text(max_size=12).map(lambda t: json.dumps(t, ensure_ascii=False)),
    st.text(max_size=12),
)


def _key(name: str) -> str:
    return name if name and name.replace("_", "a").isalnum() and name.isascii() else json.dumps(
        name)


@st.composite
def toml_documents(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["section", "pair", "pair", "dotted", "junk"]))
        if kind == "section":
            lines.append(f"[{_key(draw(SECTION_NAMES))}]")
        elif kind == "pair":
            lines.append(f"{_key(draw(NAMES))} = {draw(VALUES)}")
        elif kind == "dotted":
            lines.append(f"{_key(draw(SECTION_NAMES))}.{_key(draw(NAMES))} = {draw(VALUES)}")
        else:
            lines.append(draw(st.text(max_size=15)))
    return "\n".join(lines)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("configs")


def _is_one_line(message: str) -> bool:
    return "\n" not in message and "\r" not in message and message.strip() == message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=toml_documents())
def test_random_toml_text_loads_or_is_a_one_line_error(scratch: Path, text: str) -> None:
    path = scratch / "random.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        cfg = load_config(path)
    except ConfigError as e:
        msg = str(e)
        assert msg.startswith(f"{path}: ") and _is_one_line(msg), msg
    else:
        assert isinstance(cfg, Config)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=64))
def test_random_bytes_as_a_config_file(scratch: Path, data: bytes) -> None:
    path = scratch / "bytes.toml"
    path.write_bytes(data)
    try:
        load_config(path)
    except ConfigError as e:
        assert str(e).startswith(f"{path}: ") and _is_one_line(str(e))


OVERRIDES = st.one_of(
    st.builds(lambda s, k, v: f"{s}.{k}={v}", SECTION_NAMES, NAMES, VALUES),
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(DOTTED), VALUES),
    st.text(max_size=20),
)


@settings(max_examples=400, deadline=None)
@given(overrides=st.lists(OVERRIDES, min_size=1, max_size=3))
def test_random_set_overrides_give_a_config_or_name_the_key(overrides: list[str]) -> None:
    try:
        cfg = load_config(None, overrides)
    except ConfigError as e:
        msg = str(e)
        assert _is_one_line(msg), msg
        named = []
        for o in overrides:
            section, _, key = o.split("=", 1)[0].strip().partition(".")
            named += [f"{section}.{key}", f"{section}.{key!r}", f"[{section!r}]"]
        # the override's key (quoted when odd), the key a consistency rule is about, or the
        # --set text itself
        assert msg.startswith("--set ") or any(k in msg for k in [*named, *DOTTED]) or (
            "unknown section [" in msg), msg
    else:
        assert isinstance(cfg, Config)
        # what a run saves as config.toml loads back to the same config
        assert load_config_text(cfg.to_toml()) == cfg


def load_config_text(text: str) -> Config:
    from nmt.config import from_dict

    return from_dict(tomllib.loads(text))


@settings(max_examples=200, deadline=None)
@given(device=st.text(max_size=20), lr=st.floats(0, 10, exclude_min=True),
       beam=st.integers(1, 2**63),
       vocab=st.integers(1, 10**30))
def test_valid_values_survive_config_toml(device: str, lr: float, beam: int, vocab: int) -> None:
    """Big integers and floats written to config.toml read back unchanged; a device name that
    is not one is refused when set (unprintable text with its own message), and an integer
    beyond its range names the key and its limit."""
    from nmt.config import int_limit

    overrides = [f"train.device={json.dumps(device, ensure_ascii=False)}", f"train.lr={lr!r}",
                 f"decode.beam={beam}", f"data.vocab_size={vocab}"]
    try:
        cfg = load_config(None, overrides)
    except ConfigError as e:
        # values are checked in the order given, the device name (a consistency rule) last
        if not device.isprintable():
            expected = "train.device: expected printable text"
        elif beam > int_limit("decode.beam"):
            expected = f"decode.beam: expected at most {int_limit('decode.beam')}"
        elif vocab > int_limit("data.vocab_size"):
            expected = f"data.vocab_size: expected at most {int_limit('data.vocab_size')}"
        elif vocab < 5:  # SentencePiece's 4 special tokens and a character
            expected = "data.vocab_size: expected at least 5 for SentencePiece"
        else:
            expected = "train.device: expected auto, cpu, cuda, cuda:N or mps"
        assert expected in str(e) and _is_one_line(str(e)), str(e)
        return
    assert cfg.train.device == device and cfg.train.lr == lr and cfg.decode.beam == beam
    assert load_config_text(cfg.to_toml()) == cfg


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=20).filter(str.isprintable))
def test_free_text_survives_toml(text: str) -> None:
    """Quotes, backslashes and any script written as a config value read back unchanged."""
    from nmt.toml_files import dump_toml

    assert tomllib.loads(dump_toml({"train": {"device": text}})) == {"train": {"device": text}}


# --- cases found by the property tests, kept as examples ----------------------------------------


@pytest.mark.parametrize(("text", "needle"), [
    ("a = " + "[" * 3000 + "]" * 3000, "not valid TOML: nested too deeply"),
    ("[train]\nlr = " + "{a = " * 1000 + "1" + "}" * 1000, "not valid TOML: nested too deeply"),
    ("[train]\nlr = 0.1\nlr = 0.2", "not valid TOML: Cannot overwrite a value"),
    ("[train]\nlr = 1979-05-27", "train.lr: expected a number, got datetime.date(1979, 5, 27)"),
    ("[[train]]\nlr = 1", "train: expected a table [train]"),
    ("train.lr.x = 1", "train.lr: expected a number, got {'x': 1}"),
    ('[train]\ndevice = "cpu\\u0000"', "train.device: expected printable text"),
], ids=["deep-array", "deep-table", "duplicate-key", "date", "array-of-tables", "dotted-key",
        "nul-escape"])
def test_config_file_edge_cases(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "edge.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value).startswith(f"{path}: ") and needle in str(e.value)
    assert _is_one_line(str(e.value))


def test_byte_order_mark_and_empty_file_are_fine(tmp_path: Path) -> None:
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf[train]\nlr = 0.5\n")  # as Windows editors save
    assert load_config(bom).train.lr == 0.5
    empty = tmp_path / "empty.toml"
    empty.write_bytes(b"")
    assert load_config(empty) == Config()


def test_a_directory_or_binary_file_as_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory, not a config file; expected a TOML "
                       "config file"):
        load_config(tmp_path)
    binary = tmp_path / "model.pt"
    binary.write_bytes(b"PK\x03\x04\x00\xff\xfe")
    with pytest.raises(ConfigError, match=r"model\.pt: not valid TOML"):
        load_config(binary)


@pytest.mark.parametrize(("override", "needle"), [
    ("train.lr=1\n[data]\nvocab_size=3", "train.lr: expected a number, got '1\\n[data]"),
    ("train.lr=" + "[" * 3000, "train.lr: expected a number"),
    ("train.device=cu\x00da", "train.device: expected printable text"),
    ("train.device=\udcff", "train.device: expected printable text"),  # undecodable argv byte
    ("train.device=cu\u2028da", "train.device: expected printable text"),
], ids=["smuggled-toml", "deep-array", "nul", "undecodable-byte", "line-separator"])
def test_override_edge_cases(override: str, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert needle in str(e.value) and _is_one_line(str(e.value))


# --- every numeric setting at and beyond its bounds ---------------------------------------------


def numeric_settings() -> list[tuple[str, str, type]]:
    """(model.arch, dotted key, type) of every int and float setting of the config dataclasses,
    each model family's own included, a [[data.sources]] table's as ``data.sources[1].NAME``:
    a setting added to a dataclass is covered without a word here."""
    from dataclasses import fields

    from nmt.config import ModelConfig, SourceConfig, families

    types = {"int": int, "float": float}
    found: list[tuple[str, str, type]] = []
    for section, cls in SECTIONS.items():
        if cls is not ModelConfig:
            found += [("", f"{section}.{f.name}", types[str(f.type)]) for f in fields(cls)
                      if str(f.type) in types]
    found += [("", f"data.sources[1].{f.name}", types[str(f.type)])
              for f in fields(SourceConfig) if str(f.type) in types]
    for arch, family in families().items():
        own = [*fields(ModelConfig)[1:-1], *fields(family.settings)]
        found += [(arch, f"model.{f.name}", types[str(f.type)]) for f in own
                  if str(f.type) in types]
    return found


NUMERIC = numeric_settings()


def _edges(key: str) -> list[float]:
    """The bounds of ``key``'s declared range and the numbers just beyond them."""
    from nmt.config import int_limit, range_of

    allowed, edges = range_of(key), []
    for bound in (allowed.low, allowed.high, float(int_limit(key))):
        if math.isfinite(bound):
            edges += [bound, math.nextafter(bound, -math.inf), math.nextafter(bound, math.inf),
                      bound - 1, bound + 1]
    return edges


@settings(max_examples=600, deadline=None)
@given(setting=st.sampled_from(NUMERIC), data=st.data())
def test_every_numeric_setting_is_in_its_range_or_one_line(setting: tuple[str, str, type],
                                                           data: st.DataObject) -> None:
    """Every int and float setting, with values at and beyond the bounds of its declared range
    and the usual suspects (0, -1, a tiny and a huge number): either a config holding the
    value, which lies in the declared range (where it means something), or a one-line
    ConfigError naming the key that states the real range."""
    from nmt.config import from_dict, int_limit, range_of

    arch, key, tp = setting
    value = data.draw(st.one_of(
        st.sampled_from(_edges(key)),
        st.sampled_from([0, -1, 1, 2, 0.5, 1e-300, -1e-300, 1e300, 2**31, 2**63]),
        st.floats(allow_nan=False, allow_infinity=False), st.integers(-2**40, 2**40)))
    if tp is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    section, _, name = key.partition(".")
    if name.startswith("sources[1]."):
        raw: dict = {"data": {"sources": [{"corpus": "a", name.split(".", 1)[1]: value}]}}
    else:
        raw = {section: {name: value, **({"arch": arch} if arch else {})}}
    try:
        cfg = from_dict(raw)
    except ConfigError as e:
        message = str(e)
        assert _is_one_line(message) and key in message, message
        in_type = isinstance(value, tp) or (tp is float and isinstance(value, int))
        if in_type and not range_of(key).admits(value):
            assert f"{key}: expected {range_of(key).expected()}, got" in message, message
        return
    assert range_of(key).admits(value), f"{key} = {value!r} accepted outside its range"
    if tp is int:
        assert value <= int_limit(key)
    held = cfg.data.sources[0] if "sources" in key else getattr(cfg, section)
    assert getattr(held, key.rsplit(".", 1)[1]) == value


def test_a_weight_below_its_range_states_the_range() -> None:
    with pytest.raises(ConfigError, match=r"data\.sources\[1\]\.weight: expected 0 < value <= "
                                          r"1000, got -1"):
        from nmt.config import from_dict

        from_dict({"data": {"sources": [{"corpus": "a", "weight": -1}]}})
