"""Span augmentation (nmt/data/span_augment.py): shared numbers and names become the same
placeholders or tags on both sides, found by the span registry exactly; nothing shared, or a
pair that already holds spans, is left alone; data.span_augment's range, defaults and presets."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.config import DataConfig, from_dict, load_config
from nmt.data.span_augment import (
    DEFAULT_RULES,
    LONE_TAGS,
    NAMES,
    OPTIONS,
    STYLES,
    TAG_PAIRS,
    VARIABLES,
    augment_pair,
    augment_spans,
    shared_units,
)
from nmt.data.spans import SpanRules, find_spans, parse
from nmt.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def span_texts(text: str, rules: SpanRules = DEFAULT_RULES) -> list[str]:
    return [s.text for s in rules.find(text)]


def augmented(src: str, tgt: str, seeds: range = range(40)) -> list[tuple[str, str]]:
    """What the pair becomes under each seed (None left out)."""
    out = [augment_spans(src, tgt, random.Random(seed)) for seed in seeds]
    return [pair for pair in out if pair is not None]


# --- golden cases ----------------------------------------------------------------------------

PAIRS = [  # English to French, German, Russian, Chinese and Japanese, and what each shares
    ("Tom has 3 cats.", "Tom a 3 chats.", ["Tom", "3"]),
    ("I live in New York.", "J'habite à New York.", ["New York"]),
    ("I saw Tom in Boston in 2013.", "Ich habe Tom 2013 in Boston gesehen.",
     ["Tom", "Boston", "2013"]),
    ("Tom gave Mary 5 dollars.", "Mary hat von Tom 5 Dollar bekommen.", ["Tom", "Mary", "5"]),
    ("Tom has 3 cats.", "У Тома 3 кошки.", ["3"]),
    ("I have 3 apples.", "我有3个苹果。", ["3"]),
    ("It costs 3.50 euros.", "Es kostet 3.50 Euro.", ["3.50"]),
    # a name written in its own script inside text without spaces is a word of its own
    ("PAM authentication failed for Tom", "TomのPAM認証に失敗しました", ["PAM", "Tom"]),
    ("Press Win to open it.", "按Win键打开它。", ["Win"]),
]


@pytest.mark.parametrize(("src", "tgt", "units"), PAIRS)
def test_what_both_sides_share(src: str, tgt: str, units: list[str]) -> None:
    assert [u.text for u in shared_units(src, tgt)] == units


@pytest.mark.parametrize(("src", "tgt"), [
    ("Hello.", "Bonjour."),
    ("I live in a house.", "Ich wohne in einem Haus."),  # lower-case words shared by chance
    ("Tom saw Tom.", "Tom a vu Tom."),  # twice: which is which is unknown
    ("I bought an MP3 player.", "J'ai acheté un lecteur MP4."),
    ("Buy 3D glasses.", "Kaufe 3D-Brillen."),  # part of a word
    ("", ""),
])
def test_nothing_shared_is_none(src: str, tgt: str) -> None:
    assert augment_spans(src, tgt, random.Random(0)) is None


@pytest.mark.parametrize(("src", "tgt"), [
    ("Tom has %d cats.", "Tom a %d chats."),
    ("Click <b>Save</b>, Tom.", "Tom, klicke auf <b>Speichern</b>."),
    ("Tom paid $5 for {item}.", "Tom a payé 5 $ pour {item}."),
    ("Tom left at 10.", "Tom est parti à 10 %H."),  # a span on one side only
])
def test_a_pair_with_spans_is_left_alone(src: str, tgt: str) -> None:
    assert all(augment_spans(src, tgt, random.Random(seed)) is None for seed in range(20))


def test_golden_rewrites() -> None:
    out = augmented("Tom gave Mary 5 dollars.", "Mary hat von Tom 5 Dollar bekommen.")
    # reordered on the target side: numbered printf, or ICU numbers, never bare %s in turn
    assert ("%1$s gave %2$s %3$d dollars.", "%2$s hat von %1$s %3$d Dollar bekommen.") in out
    assert ("{0} gave {1} {2} dollars.", "{1} hat von {0} {2} Dollar bekommen.") in out
    assert not any(re.search(r"%s.*%s", tgt) for _, tgt in out)
    # a tag pair around a shared phrase, kept on both sides
    out = augmented("I live in New York.", "J'habite à New York.")
    assert any(src.endswith("in <b>New York</b>.") and tgt.endswith("à <b>New York</b>.")
               for src, tgt in out)
    assert ("I live in %s.", "J'habite à %s.") in out
    # scripts without spaces, and other scripts
    assert ("I have %d apples.", "我有%d个苹果。") in augmented("I have 3 apples.", "我有3个苹果。")
    assert ("Tom has {0} cats.", "У Тома {0} кошки.") in augmented("Tom has 3 cats.",
                                                                    "У Тома 3 кошки.")


def test_every_style_is_drawn_and_stays_in_the_inventory() -> None:
    inventory = {*NAMES, *VARIABLES, *OPTIONS, *LONE_TAGS, *(t for p in TAG_PAIRS for t in p)}
    seen: Counter[str] = Counter()
    for src, tgt, _ in PAIRS:
        for a, _ in augmented(src, tgt, range(200)):
            for span in span_texts(a):
                style = ("printf" if span.startswith("%") else
                         "tags" if span.startswith("<") else
                         "shell" if span.startswith("$") else
                         "options" if span.startswith("-") else
                         "icu" if re.fullmatch(r"\{\d+\}", span) else "python")
                seen[style] += 1
                assert (style in ("printf", "icu") or span in inventory
                        or span.strip("{}") in inventory), span
    assert set(seen) == set(STYLES)


def test_only_the_kinds_a_run_keeps() -> None:
    printf_only = SpanRules(parse("printf"))
    for seed in range(30):
        out = augment_spans("Tom has 3 cats.", "Tom a 3 chats.", random.Random(seed),
                            rules=printf_only)
        assert out is not None and all(s.kind == "printf" for s in find_spans(out[0]))
    assert augment_spans("Tom has 3 cats.", "Tom a 3 chats.", random.Random(0),
                         rules=SpanRules(parse("urls"))) is None


# --- properties ------------------------------------------------------------------------------

NAMES_AND_NUMBERS = st.one_of(
    st.sampled_from(["Tom", "Mary", "Boston", "NASA", "Jérôme", "Zoë", "Москва", "Paris"]),
    st.integers(0, 10**6).map(str),
    st.sampled_from(["3.5", "10:30", "1,000"]),
)
WORDS = st.one_of(
    st.text("abcdefghijklmnopqrstuvwxyzéàüß", min_size=1, max_size=8),
    st.sampled_from(["кошка", "дом", "苹果", "我有", "%", "50%", "$", "-", "'s", "-", "/", "<",
                     "{", "}", "&", "#", ",", "."]),
    NAMES_AND_NUMBERS,
)
SIDE = st.lists(WORDS, max_size=10)
SEPARATORS = st.sampled_from([" ", " ", " ", "", ", "])


@st.composite
def pairs(draw: st.DrawFn) -> tuple[str, str]:
    """Two sides of words, numbers and names, some of them shared, in any order."""
    shared = draw(st.lists(NAMES_AND_NUMBERS, max_size=4))
    src, tgt = draw(SIDE) + shared, draw(SIDE) + shared
    src = draw(st.permutations(src))
    tgt = draw(st.permutations(tgt))
    return (draw(SEPARATORS).join(src) + draw(st.sampled_from(["", ".", "?"])),
            draw(SEPARATORS).join(tgt))


@settings(max_examples=400, deadline=None)
@given(pairs(), st.integers(0, 2**32))
def test_both_sides_hold_the_same_spans_and_only_those_put_in(pair: tuple[str, str],
                                                              seed: int) -> None:
    src, tgt = pair
    out = augment_spans(src, tgt, random.Random(seed))
    if out is None:
        return
    new_src, new_tgt = out
    assert Counter(span_texts(new_src)) == Counter(span_texts(new_tgt)) != Counter()
    assert not span_texts(src) and not span_texts(tgt)  # a pair with spans is left alone
    assert augment_spans(src, tgt, random.Random(seed)) == out  # deterministic


@settings(max_examples=200, deadline=None)
@given(st.lists(WORDS, max_size=10), st.integers(0, 2**32))
def test_nothing_shared_worth_copying_is_none(words: list[str], seed: int) -> None:
    src = " ".join(w for w in words if not w[:1].isupper() and not w[:1].isdigit())
    assert augment_spans(src, "Rien.", random.Random(seed)) is None


# --- the share, data.span_augment -------------------------------------------------------------


def test_augment_pair_draws_a_share_of_pairs_per_pair() -> None:
    src, tgt = "Tom has 3 cats.", "Tom a 3 chats."
    outs = [augment_pair(src, tgt, i, 0.25, seed=1) for i in range(400)]
    assert 60 < sum(o is not None for o in outs) < 140
    assert outs == [augment_pair(src, tgt, i, 0.25, seed=1) for i in range(400)]  # per pair
    assert outs != [augment_pair(src, tgt, i, 0.25, seed=2) for i in range(400)]
    assert all(augment_pair(src, tgt, i, 0.0, seed=1) is None for i in range(50))
    assert all(augment_pair(src, tgt, i, 1.0, seed=1) is not None for i in range(50))


def test_config_range_defaults_and_presets() -> None:
    assert DataConfig().span_augment == 0.05
    assert load_config(None, ["data.span_augment=0.2"]).data.span_augment == 0.2
    for bad in ("1.5", "-0.1"):
        with pytest.raises(ConfigError, match="data.span_augment"):
            load_config(None, [f"data.span_augment={bad}"])
    # the textbook's pairs as they are; the demo's prose, where it cost BLEU
    for preset in ("d2l-gru", "d2l-transformer", "demo"):
        assert load_config(ROOT / "configs" / f"{preset}.toml").data.span_augment == 0
    for shipped in ("transformer", "gru", "cpu-hour"):
        assert load_config(ROOT / "configs" / f"{shipped}.toml").data.span_augment > 0
    # a run saved before the setting rewrote no pair
    assert from_dict({"data": {}}, saved=True).data.span_augment == 0



def test_the_build_adds_span_augmented_copies_of_training_pairs(tmp_path: Path) -> None:
    """data.span_augment adds rewritten copies of real training pairs after the split's own,
    each with the same spans on both sides, counted in meta.json; at 0 nothing is added and
    meta.json has no such count (a cache built without it is as before)."""
    from nmt.data.prepare import prepare
    from nmt.data.spans import find_spans

    names = ["Tom", "Mary", "John", "Alice", "Paris", "Boston"]
    pairs = [(f"{n} has {k} cats.", f"{n} a {k} chats.") for n in names for k in range(2, 30)]
    (tmp_path / "mix.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (tmp_path / "mix.fr").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    base = dict(corpus=str(tmp_path / "mix"), tokenizer="word", min_freq=1, valid_frac=0.1,
                test_frac=0.1, filters="none", langid=False, case_augment=0.0)
    plain = prepare(DataConfig(**base, span_augment=0.0), tmp_path / "d0", log=lambda s: None)
    assert "span_augmented" not in plain.meta["counts"]
    augmented = prepare(DataConfig(**base, span_augment=0.5), tmp_path / "d1",
                        log=lambda s: None)
    added = augmented.meta["counts"]["span_augmented"]
    train, own = augmented.splits["train"], len(plain.splits["train"])
    assert 0 < added and len(train) == own + added
    assert list(train.src_text[:own]) == list(plain.splits["train"].src_text)
    for src, tgt in zip(train.src_text[own:], train.tgt_text[own:], strict=True):
        spans = sorted(s.text for s in find_spans(src))
        assert spans and spans == sorted(s.text for s in find_spans(tgt)), (src, tgt)
    for split in ("valid", "test"):  # held-out pairs are never rewritten
        assert list(augmented.splits[split].src_text) == list(plain.splits[split].src_text)
