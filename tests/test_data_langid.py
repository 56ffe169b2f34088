"""Language identification of each side (data.langid): pairs with a side in another language go,
in a Latin pair and in a Cyrillic one; swapped files and a file in a third language are a
one-line error naming the file; a language the model does not know is said once."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.config import DataConfig, load_config
from nmt.data.langid import CONFIDENCE, MIN_CHARS, _identifier, candidates_for
from nmt.data.prepare import prepare
from nmt.errors import DataError

EN = ["I don't know where he lives now.", "We will go to the park tomorrow morning.",
      "She bought a new dress for the holiday.", "Why didn't you come to the party yesterday?",
      "My brother works as a teacher at the school.", "Please close the window, it is cold."]
FR = ["Je ne sais pas où il habite maintenant.", "Nous irons au parc demain matin.",
      "Elle a acheté une nouvelle robe pour la fête.", "Pourquoi n'es-tu pas venu à la fête hier ?",
      "Mon frère travaille comme professeur à l'école.",
      "Fermez la fenêtre, s'il vous plaît, il fait froid."]
DE = ["Ich weiß nicht, wo er jetzt wohnt.", "Wir gehen morgen früh in den Park.",
      "Sie hat ein neues Kleid für das Fest gekauft.",
      "Warum bist du gestern nicht zur Party gekommen?",
      "Mein Bruder arbeitet als Lehrer in der Schule.",
      "Bitte schließen Sie das Fenster, es ist kalt."]
RU = ["Я не знаю, где он живёт сейчас.", "Мы пойдём в парк завтра утром.",
      "Она купила новое платье на праздник.", "Почему ты не пришёл на вечеринку вчера?",
      "Мой брат работает учителем в школе.", "Пожалуйста, закройте окно, потому что холодно."]
UK = ["Я не знаю, де він живе зараз.", "Ми підемо до парку завтра вранці.",
      "Вона купила нову сукню на свято.", "Чому ти не прийшов на вечірку вчора?",
      "Мій брат працює вчителем у школі.", "Будь ласка, зачиніть вікно, бо холодно."]


def write(prefix: Path, pairs: list[tuple[str, str]], src: str, tgt: str) -> str:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{prefix}.{src}").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    Path(f"{prefix}.{tgt}").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return str(prefix)


def config(corpus: str, src: str, tgt: str, **kw: object) -> DataConfig:
    return DataConfig(corpus=corpus, source=src, target=tgt, vocab_size=80, valid_frac=0.0,
                      test_frac=0.0, dedup=False, **kw)  # type: ignore[arg-type]


def confidently_other(text: str, lang: str, pair: tuple[str, str]) -> bool:
    found, probability = _identifier(candidates_for(*pair)).classify(text)
    return len(text) >= MIN_CHARS and found != lang and probability >= CONFIDENCE


@pytest.mark.parametrize(("pair", "clean", "stray"), [
    (("en", "fr"), list(zip(EN * 4, FR * 4, strict=True)), list(zip(EN, DE, strict=True))),
    (("en", "ru"), list(zip(EN * 4, RU * 4, strict=True)), list(zip(EN, UK, strict=True))),
], ids=["latin-german-in-french", "cyrillic-ukrainian-in-russian"])
def test_pairs_with_a_side_in_another_language_go(pair: tuple[str, str], clean: list,
                                                  stray: list, tmp_path: Path) -> None:
    src, tgt = pair
    corpus = write(tmp_path / "c" / "train", clean + stray, src, tgt)
    p = prepare(config(corpus, src, tgt), tmp_path / "data", log=lambda m: None)
    expected = [t for _, t in stray if confidently_other(t, tgt, pair)]
    assert len(expected) >= 4  # the model is sure of most of them (golden: 6/6 de, 5/6 uk)
    assert p.meta["filtered"]["langid_target"] == len(expected)
    assert p.meta["filtered"]["langid_source"] == 0
    kept = set(p.splits["train"].tgt_text)
    assert not kept & set(expected) and {t for _, t in clean} <= kept
    rejected = (p.cache_dir / "rejected.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert sorted(r.split("\t")[2] for r in rejected) == sorted(expected)
    # off by one key: every pair stays
    off = prepare(config(corpus, src, tgt, langid=False), tmp_path / "data", log=lambda m: None)
    assert len(off.splits["train"]) == len(clean) + len(stray)


def test_swapped_files_are_an_error_naming_the_file(tmp_path: Path) -> None:
    corpus = write(tmp_path / "c" / "train", list(zip(FR * 4, EN * 4, strict=True)), "en", "fr")
    with pytest.raises(DataError, match=r"train\.en: 100% of the 24 lines judged are French, "
                                        r"not English \(data\.source = en\): are the two sides "
                                        r"swapped\?"):
        prepare(config(corpus, "en", "fr"), tmp_path / "data", log=lambda m: None)


def test_a_file_in_a_third_language_is_an_error_naming_it(tmp_path: Path) -> None:
    corpus = write(tmp_path / "c" / "train", list(zip(EN * 4, DE * 4, strict=True)), "en", "fr")
    with pytest.raises(DataError, match=r"train\.fr: 100% of the 24 lines judged are German "
                                        r"\(de\), not French \(data\.target = fr\): is it the "
                                        r"right file\?"):
        prepare(config(corpus, "en", "fr"), tmp_path / "data", log=lambda m: None)


def test_a_language_the_model_does_not_know_is_said_once(tmp_path: Path) -> None:
    toki = ["mi wile moku e kili ni lon tenpo ni.", "sina kama tan ma seme, jan pona mi?"]
    corpus = write(tmp_path / "c" / "train", list(zip(toki * 12, EN[:2] * 12, strict=True)),
                   "tok", "en")
    messages: list[str] = []
    p = prepare(config(corpus, "tok", "en", tokenizer="word", min_freq=1), tmp_path / "data",
                log=messages.append)
    said = [m for m in messages if "does not know" in m]
    assert said == ["data.langid: the language model does not know Toki Pona (tok); its side "
                    "is not checked"]
    assert len(p.splits["train"]) == 24


def test_runs_saved_before_the_check_keep_it_off(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[data]\nsource = "en"\n')
    assert load_config(path, saved=True).data.langid is False
    assert load_config(path).data.langid is True


# --- many sides at once (nmt/data/langid_batch.py) = py3langid one by one ---------------------


def assert_same_as_py3langid(texts: list[str], candidates: tuple[str, ...]) -> None:
    from nmt.data.langid import _batched

    one_by_one = [_identifier(candidates).classify(t) for t in texts]
    batched = _batched(candidates).classify_many(texts)
    assert len(batched) == len(texts)
    for text, (lang, p), (want, q) in zip(texts, batched, one_by_one, strict=True):
        assert abs(p - q) < 1e-5, (text, p, q)
        if lang != want:  # only a tie within rounding may come out the other way
            ranked = [s for _, s in _identifier(candidates).rank(text)]
            assert ranked[0] - ranked[1] < 1e-5, (text, lang, want, ranked[:2])


@pytest.mark.parametrize(("source", "target"), [("en", "fr"), ("ru", "uk"), ("de", "ja")])
def test_many_sides_at_once_are_classified_as_one_by_one(source: str, target: str) -> None:
    from conftest import tiny_corpus_sides

    src, tgt = tiny_corpus_sides()
    texts = [*EN, *FR, *DE, *RU, *UK, *src[:300], *tgt[:300], "", "a", "OK.", "ÇA VA ?",
             "WHERE IS THE STATION?", "1234 5678", "https://example.org/a?b=c", "日本語の文です。",
             " ".join(EN + FR), "x" * 500]
    assert_same_as_py3langid(texts, candidates_for(source, target))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=80), max_size=40))
def test_generated_text_is_classified_as_one_by_one(texts: list[str]) -> None:
    assert_same_as_py3langid(texts, candidates_for("en", "fr"))


def test_judging_many_pairs_is_judging_each(tmp_path: Path) -> None:
    """LanguageCheck.judge_many (what preparing a corpus calls on each chunk) = py3langid on each
    side long enough to judge, with the check's rule for "confidently another language"."""
    from nmt.data.langid import LanguageCheck

    check = LanguageCheck("en", "fr", ("a.en", "a.fr"), log=lambda s: None)
    pairs = [(e, f) for e in EN[:3] for f in FR[:3]]
    pairs += [(f, e) for e, f in zip(EN, FR, strict=True)]  # swapped
    pairs += [(d, f) for d, f in zip(DE, FR, strict=True)]  # a third language
    pairs += [("short", "court"), (EN[0], RU[0])]
    ident = _identifier(check.candidates)
    expected = []
    for pair in pairs:
        found: list[str | None] = [None, None]
        other = None
        for side, (text, code) in enumerate(zip(pair, ("en", "fr"), strict=True)):
            if len(text) >= MIN_CHARS:
                lang, p = ident.classify(text)
                found[side] = lang
                if other is None and lang != code and p >= CONFIDENCE:
                    other = side
        expected.append(((found[0], found[1]), other))
    assert check.judge_many(pairs) == expected
    assert [check.judge_many([pair])[0] for pair in pairs] == expected  # batched = one by one
    assert check.judge_many([]) == []
