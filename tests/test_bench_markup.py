"""bench/markup.py: the tags it puts into sentences leave their words as they were and nest, and
its table counts what `nmt bleu` counts (a line with its tags out of order is not exact)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.markup import marked, on_kept_word, on_word, score
from nmt.data.spans import find_spans, misplaced_tags, rules
from nmt.translation.structure import without_tags

WORD = st.text("abcdefghij", min_size=1, max_size=6)
PUNCT = st.sampled_from(["", ".", "!", ",", "?"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(WORD, PUNCT), min_size=1, max_size=12), st.integers(0, 2**16))
def test_marked_sentences_keep_their_words_and_nest(words: list[tuple[str, str]],
                                                     seed: int) -> None:
    sentence = " ".join(w + p for w, p in words)
    out = marked(sentence, random.Random(seed))
    spans = find_spans(out)
    assert spans and all(s.kind == "tags" for s in spans)
    assert not misplaced_tags([], spans)  # every tag paired, nested
    assert without_tags(out, rules("default")) == sentence


def test_score_counts_lines_with_tags_out_of_order_as_not_exact(tmp_path: Path) -> None:
    (tmp_path / "markup.en").write_text("I <b>give up</b>.\nA <i>b</i> c.\n", encoding="utf-8")
    (tmp_path / "markup.ref").write_text("J'abandonne.\nA b c.\n", encoding="utf-8")
    (tmp_path / "markup.json").write_text(json.dumps({"run": "x", "target": "fr",
                                                      "spans": "default"}), encoding="utf-8")
    hyp = tmp_path / "hyp.txt"
    hyp.write_text("</b>J'abandonne<b>.\nA <i>b</i> c.\n", encoding="utf-8")
    row = score(tmp_path, hyp)
    assert (row["kept"], row["same_spans"], row["out_of_order"], row["exact"]) == (
        100.0, 100.0, 1, 50.0)
    assert row["bleu"] == 100.0  # the tags taken out before scoring


def test_a_tag_goes_around_a_word_the_reference_keeps() -> None:
    rng = random.Random(1)
    got = on_kept_word("I told Tom about it.", "J'en ai parlé à Tom.", rng)
    assert got is not None and without_tags(got, rules("default")) == "I told Tom about it."
    assert re.search(r"<(\w+)[^>]*>Tom</\1>", got), got
    assert on_kept_word("Call me at 5.", "Appelle-moi à 5 heures.", rng) is not None
    assert on_kept_word("Tom is here.", "Tom est là.", rng) is None  # the first word: any capital
    assert on_kept_word("Ask Tom.", "Demande-lui.", rng) is None  # not in the reference
    assert on_kept_word("Tom and Tom.", "Tom et Tom.", rng) is None


def test_on_word_counts_the_tag_pair_around_its_word(tmp_path: Path) -> None:
    link = '<a href="https://example.org/">'
    (tmp_path / "words.en").write_text(
        f"I told <b>Tom</b>.\nCall me at <i>5</i>.\nAsk {link}Mary</a> now.\nSee <b>Ann</b>.\n",
        encoding="utf-8")
    (tmp_path / "markup.json").write_text(json.dumps({"run": "x", "target": "fr",
                                                      "spans": "default"}), encoding="utf-8")
    hyp = tmp_path / "hyp.words.nmt.repair.place.txt"
    hyp.write_text(f"Je l'ai dit à <b>Tom</b>.\nAppelle-moi <i>à</i> 5.\nDemande à {link}Mary"
                   "</a> maintenant.\nVois <b>-la</b>.\n", encoding="utf-8")
    row = on_word(tmp_path, hyp)
    assert (row["lines"], row["with_word"], row["on_word"]) == (4, 3, 66.67)  # no Ann: not counted
