"""Normalisation: the recipe's rules, the documented Unicode policy, idempotence, totality."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.data.normalize import normalize

# every code point, surrogates and unassigned ones included
ANY_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()))
# text dense in the characters the rules are about
TRICKY = st.text(st.sampled_from(list(
    "aZ .,!?'\t\n\u202f\u00a0\u2009\u200b\u200d\u00ad\ufeff’‘…«»İÉe\u0301ß\u2028")))


@pytest.mark.parametrize(("raw", "expected"), [
    ("Go.", "go ."),  # the recipe's rules
    ("Va\u202f!", "va !"),
    ("Qui\u00a0?", "qui ?"),
    ("Hi.?", "hi . ?"),
    ("Wait...", "wait . . ."),
    ("Oh, no!", "oh , no !"),
    ("J’ai gagné.", "j'ai gagné ."),  # the policy
    ("J‘aime celui-ci.", "j'aime celui-ci ."),
    ("Je vais rentrer me coucher…", "je vais rentrer me coucher . . ."),
    ("sur \u200b\u200bla musique", "sur la musique"),
    ("in the sink\u00ad.", "in the sink ."),
    ("Recule\u2009!", "recule !"),
    ("Dites «ouistiti».", "dites « ouistiti » ."),
    ("Elle a dit\u00a0: «\u00a0 Regarde.\u00a0 »", "elle a dit : « regarde . »"),
    ("Cafe\u0301", "café"),  # NFC: one code point
    ("  two\t\tspaces \n", "two spaces"),
    ("", ""),
])
def test_golden_cases(raw: str, expected: str) -> None:
    assert normalize(raw, True, "full") == expected


def test_lowercase_is_optional() -> None:
    assert normalize("Tom’s CAR.", lowercase=False, policy="full") == "Tom's CAR ."


def test_recipe_policy_is_the_recipe() -> None:
    # only U+202F/U+00A0 -> space, lower-case and the punctuation rule: the rest is kept
    assert normalize("J’ai\u2009vu  Tom\u202f!", True, "recipe") == "j’ai\u2009vu  tom !"
    assert normalize("Go.", True, "recipe") == "go ."
    with pytest.raises(ValueError, match="policy"):
        normalize("x", True, "nfkc")


@settings(max_examples=300, deadline=None)
@given(st.one_of(ANY_TEXT, TRICKY), st.booleans(), st.sampled_from(["full", "recipe"]))
def test_idempotent_and_total(text: str, lowercase: bool, policy: str) -> None:
    once = normalize(text, lowercase, policy)
    assert normalize(once, lowercase, policy) == once


@settings(max_examples=300, deadline=None)
@given(st.one_of(ANY_TEXT, TRICKY))
def test_full_policy_output_is_clean(text: str) -> None:
    out = normalize(text, True, "full")
    out.encode("utf-8")  # no lone surrogates: the cache and BLEU files can always be written
    assert unicodedata.is_normalized("NFC", out)
    assert out == out.strip(" ") and "  " not in out
    assert not any(c.isspace() and c != " " for c in out)  # no newline: one sentence per line
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Cs") for c in out)
    assert "’" not in out and "…" not in out


@pytest.mark.parametrize("policy", ["natural", "full"])
def test_joiners_are_kept_where_they_are_spelling(policy: str) -> None:
    """U+200C/U+200D decide how Persian or Hindi letters join: kept for those languages (and
    stable), deleted as invisible junk elsewhere, as U+200B always is."""
    persian = "mi\u200cravam\u200b"
    assert normalize(persian, False, policy, "fa") == "mi\u200cravam"
    assert normalize("\u0915\u094d\u200d\u0937", False, policy, "hi") == "\u0915\u094d\u200d\u0937"
    for lang in ("en", "fr", None):
        assert normalize(persian, False, policy, lang) == "miravam"
    once = normalize(persian, False, policy, "fa")
    assert normalize(once, False, policy, "fa") == once
