"""Natural text: case and punctuation kept, references as the corpus writes them, scores as
sacrebleu computes them by default, case augmentation, the weights' moving average."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from conftest import invoke, tiny_corpus_lines
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.config import DataConfig, load_config
from nmt.data.augment import case_picks, in_case_form, title_case
from nmt.data.normalize import normalize, textbook_form
from nmt.data.prepare import prepare
from nmt.errors import ConfigError
from nmt.evaluate import corpus_scores
from nmt.training.ema import ExponentialMovingAverage
from nmt.translation.translator import StreamTranslator, TruncateHook

NATURAL = DataConfig(vocab_size=80, valid_frac=0.1, test_frac=0.1)


def test_natural_policy_keeps_case_and_punctuation() -> None:
    assert normalize("I'm  home.", False, "natural") == "I'm home."
    assert normalize("Cours\u202f!", False, "natural") == "Cours !"
    assert normalize("J’ai\u200b vu « Tom ».", False, "natural") == "J'ai vu « Tom »."
    assert normalize("Attendez…", False, "natural") == "Attendez..."
    assert textbook_form("I'm home.") == "i'm home ."
    assert textbook_form("He's calm.") == "he's calm ."


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_natural_policy_is_idempotent_and_one_line(text: str) -> None:
    once = normalize(text, False, "natural")
    assert normalize(once, False, "natural") == once
    assert "\n" not in once and once == once.strip()
    once.encode("utf-8")
    # its textbook form is what the full policy makes of the original
    assert textbook_form(once) == normalize(text, True, "full")


def test_defaults_are_natural_and_the_d2l_presets_are_not() -> None:
    assert DataConfig().normalization == "natural" and not DataConfig().lowercase
    for preset in ("d2l-gru", "d2l-transformer"):
        data = load_config(f"configs/{preset}.toml").data
        assert (data.normalization, data.lowercase) == ("recipe", True)
    for shipped in ("demo", "transformer", "gru"):
        data = load_config(f"configs/{shipped}.toml").data
        assert (data.normalization, data.lowercase) == ("natural", False)
        assert data.case_augment > 0


def test_case_augmentation_only_on_natural_text() -> None:
    with pytest.raises(ConfigError, match="data.case_augment"):
        load_config(None, ["data.case_augment=0.1", "data.lowercase=true"])
    with pytest.raises(ConfigError, match="data.case_augment"):
        load_config(None, ["data.case_augment=1.5"])


def case_augmented(src: list[str], tgt: list[str], ref: list[str], share: float, seed: int,
                   forms: tuple[str, ...] = ("textbook",), lang: str | None = None,
                   ) -> tuple[list[str], list[str], list[str]]:
    """The pairs case augmentation adds to a train split of these pairs, as build_cache adds
    them (case_picks, then in_case_form of each pick in turn)."""
    out: tuple[list[str], list[str], list[str]] = ([], [], [])
    for nth, i in enumerate(case_picks(len(src), share, seed).tolist()):
        noisy = in_case_form(src[i], nth, forms, lang)
        if noisy is not None:
            for side, text in zip(out, (noisy, tgt[i], ref[i]), strict=True):
                side.append(text)
    return out


def test_case_augmented_pairs() -> None:
    src = [f"I see dog number {i}." for i in range(200)] + ["ok"]
    tgt = [f"Je vois le chien numéro {i}." for i in range(200)] + ["d'accord"]
    ref = [t + " (ref)" for t in tgt]
    forms = ("textbook", "upper", "textbook", "title")
    a_src, a_tgt, a_ref = case_augmented(src, tgt, ref, 0.25, 3, forms)
    assert (a_src, a_tgt, a_ref) == case_augmented(src, tgt, ref, 0.25, 3, forms)  # seeded
    assert a_src != case_augmented(src, tgt, ref, 0.25, 4, forms)[0]
    assert 49 <= len(a_src) <= 50  # round(0.25 * 201); "ok" is already lower-case and spaced
    for s, t, r in zip(a_src, a_tgt, a_ref, strict=True):
        i = tgt.index(t)
        assert s in (textbook_form(src[i]), src[i].upper(), title_case(src[i])) and r == ref[i]
        assert s != src[i]
    assert case_augmented(src, tgt, ref, 0.0, seed=3) == ([], [], [])
    all_src = case_augmented(src, tgt, ref, 1.0, 3, forms)[0]
    # every form in turn: "i see dog number 3 .", "I SEE DOG NUMBER 4.", "I See Dog Number 5."
    assert len(all_src) == 200
    assert sum(s == textbook_form(s) for s in all_src) == 100
    assert sum(s.isupper() for s in all_src) == 50
    assert sum(s == title_case(s) and not s.isupper() for s in all_src) == 50
    # the default (and what runs made before data.case_forms trained with): the textbook form
    assert all(s == textbook_form(s) for s in case_augmented(src, tgt, ref, 1.0, seed=3)[0])
    with pytest.raises(ConfigError, match="data.case_forms"):
        load_config(None, ["data.case_forms=textbook,lower"])


def test_title_case_keeps_apostrophes() -> None:
    assert title_case("I'm home.") == "I'm Home."
    assert title_case("the cat is black.") == "The Cat Is Black."


def test_natural_cache_keeps_text_and_references_as_written(tiny_data_dir: Path) -> None:
    p = prepare(NATURAL, tiny_data_dir, log=lambda s: None)
    raw = {}
    for line in tiny_corpus_lines():
        en, fr = line.split("\t")
        raw.setdefault(normalize(en, False, "natural"), set()).add(fr)
    for split in p.splits.values():
        for s, t, r in zip(split.src_text, split.tgt_text, split.ref_text, strict=True):
            assert r in raw[s]  # the reference is the corpus' French, verbatim
            assert t == normalize(r, False, "natural", apostrophes=False)  # as written
    texts = [t for sp in p.splits.values() for t in sp.tgt_text]
    assert any(t[0].isupper() and t.endswith(".") and not t.endswith(" .") for t in texts)
    refs = [r for sp in p.splits.values() for r in sp.ref_text]
    assert any("\u202f" in r for r in refs) and any("’" in r for r in refs)
    # the cache reads back the same, references included
    again = prepare(NATURAL, tiny_data_dir, log=lambda s: None)
    for k, split in p.splits.items():
        assert again.splits[k].ref_text == split.ref_text


def test_case_augmentation_adds_training_pairs_only(tiny_data_dir: Path) -> None:
    from dataclasses import replace

    plain = prepare(NATURAL, tiny_data_dir, log=lambda s: None)
    augmented = prepare(replace(NATURAL, case_augment=0.5, case_forms="textbook,upper,title"),
                        tiny_data_dir, log=lambda s: None)
    n = len(plain.splits["train"])
    extra = augmented.splits["train"]
    assert extra.src_text[:n] == plain.splits["train"].src_text  # the corpus pairs come first
    added = extra.src_text[n:]
    assert 0.4 * n <= len(added) <= round(0.5 * n)
    assert all(a == textbook_form(a) or a.isupper() or a == title_case(a) for a in added)
    assert any(a.isupper() for a in added)  # THE CAT IS BLACK. is learnt too
    for k in ("valid", "test"):  # held-out data is never augmented
        assert augmented.splits[k].src_text == plain.splits[k].src_text
    assert augmented.meta["counts"]["case_augmented"] == len(added)


def test_textbook_runs_keep_normalised_references(tiny_data_dir: Path) -> None:
    p = prepare(DataConfig(vocab_size=64, valid_frac=0.1, test_frac=0.1, lowercase=True,
                           normalization="full"), tiny_data_dir, log=lambda s: None)
    assert p.splits["test"].ref_text == p.splits["test"].tgt_text


def test_scores_are_cased_with_a_case_insensitive_figure_beside() -> None:
    hyps = ["Je suis chez moi.", "il est calme."]
    refs = [["Je suis chez moi."], ["Il est calme."]]
    s = corpus_scores(hyps, refs)
    assert s.bleu < s.bleu_ci == pytest.approx(100.0)
    assert "case:mixed" in s.bleu_signature and "tok:13a" in s.bleu_signature
    assert "nrefs:1" in s.bleu_signature


def test_natural_text_scores_without_the_detokenize_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    natural = [f"Je vois le chien {i}." for i in range(120)]
    with caplog.at_level(logging.WARNING, logger="sacrebleu"):
        corpus_scores(natural, [[h] for h in natural])
    assert "detokenize" not in caplog.text
    spaced = [h[:-1] + " ." for h in natural]
    with caplog.at_level(logging.WARNING, logger="sacrebleu"):
        corpus_scores(spaced, [[h] for h in spaced], tokenized=True)
    assert "detokenize" not in caplog.text
    with caplog.at_level(logging.WARNING, logger="sacrebleu"):
        corpus_scores(spaced, [[h] for h in spaced])  # the check is live: it would warn
    assert "detokenize" in caplog.text


def test_moving_average_equals_a_hand_computation() -> None:
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema = ExponentialMovingAverage(model, decay=0.5)
    expected = 1.0
    for n, w in enumerate([3.0, -1.0, 5.0, 2.0], start=1):
        with torch.no_grad():
            model.weight.fill_(w)
        d = min(0.5, (1 + n) / (10 + n))  # the warm-up caps the decay early on
        ema.update(model)
        expected = d * expected + (1 - d) * w
        assert ema.model.weight.item() == pytest.approx(expected)
        assert model.weight.item() == w  # the trained weights are untouched
    assert ema.updates == 4 and not ema.model.weight.requires_grad


def test_moving_average_of_many_parameters_is_each_ones_lerp() -> None:
    """The update moves all parameters at once (one kernel on a GPU); each must be exactly
    what ``avg.lerp_(w, 1 - d)`` of that parameter alone gives."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.GRU(7, 3), torch.nn.Embedding(4, 2))
    ema = ExponentialMovingAverage(model, decay=0.9)
    by_hand = [p.detach().clone() for p in model.parameters()]
    for _ in range(3):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        d = ema.rate()
        for avg, p in zip(by_hand, model.parameters(), strict=True):
            avg.lerp_(p.detach(), 1.0 - d)
        ema.update(model)
        for avg, mine in zip(by_hand, ema.model.parameters(), strict=True):
            assert torch.equal(avg, mine)


def test_moving_average_warm_up_follows_the_weights_early() -> None:
    model = torch.nn.Linear(2, 2)
    ema = ExponentialMovingAverage(model, decay=0.999)
    assert ema.rate() == pytest.approx(2 / 11)
    ema.updates = 100_000
    assert ema.rate() == 0.999


def test_tiny_natural_model_translates_cased_punctuated_text(
        tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trained on natural text, the model writes it: capital first, the final full stop
    attached, as the corpus writes French; `nmt translate` and `nmt bleu` take it end to end."""
    runs = tmp_path / "runs"
    config = tmp_path / "natural.toml"
    config.write_text('[model]\narch = "transformer"\n')
    code, out, err = invoke(
        "train", "--config", str(config), "--runs-dir", str(runs), "--run-name", "nat",
        "--set", "data.vocab_size=80",
        "--set", "data.valid_frac=0.1", "--set", "data.test_frac=0.1",
        "--set", "data.case_augment=0.3", "--set", "model.d_model=32",
        "--set", "model.d_ff=64", "--set", "model.n_layers=1", "--set", "train.epochs=25",
        "--set", "train.batch_size=32", "--set", "train.lr=0.005", "--set", "train.device=cpu",
        "--set", "train.ema_decay=0.9", "--set", "train.eval_sentences=0",
        "--set", "model.dropout=0")
    assert code == 0, err
    code, out, err = invoke("translate", "--run", str(runs / "nat"), "I see the dog.",
                            "They like the small car.")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line[0].isupper() and line.endswith(".") and not line.endswith(" ."), line
    import nmt.evaluate

    fed: list[object] = []
    score = nmt.evaluate.score_multi_and_single

    def spy(hyps: list[str], refs: list[list[str]], tokenized: bool = False,
            lang: str | None = None) -> object:
        fed.append((refs, tokenized))
        return score(hyps, refs, tokenized, lang)

    monkeypatch.setattr(nmt.evaluate, "score_multi_and_single", spy)
    code, out, err = invoke("bleu", "--run", str(runs / "nat"))
    assert code == 0, err
    assert "case-insensitive" in out and "tok:13a" in out
    from nmt.runs.loading import load_run

    data = load_run(runs / "nat").config.data
    split = prepare(data, tiny_data_dir, log=lambda s: None).splits["test"]
    assert fed == [(split.grouped()[1], False)]  # the references as written, not forced
    assert split.ref_text != split.tgt_text or all(r == t for r, t in zip(
        split.ref_text, split.tgt_text, strict=True))
    # the trained weights are there too, and their scores go beside the average's, as do the
    # scores of the sources typed the textbook's way
    code, raw_out, err = invoke("bleu", "--run", str(runs / "nat"), "--no-ema")
    assert code == 0, err
    code, textbook_out, err = invoke("bleu", "--run", str(runs / "nat"), "--textbook-input")
    assert code == 0, err
    scores = {name: json.loads((runs / "nat" / f"scores.{name}.json").read_text())
              for name in ("test", "test.raw", "test.textbook")}
    assert scores["test.raw"]["data"].endswith("(--no-ema)")
    assert scores["test.textbook"]["data"].endswith("lower-cased and spaced")
    hyps = {name: (runs / "nat" / f"hyp.{name}.txt").read_text() for name in scores}
    assert hyps["test"] != hyps["test.raw"]  # 25 epochs at decay 0.9: not the same weights


def test_turkish_and_azerbaijani_capitals_keep_the_dot_on_the_i() -> None:
    """Case rules that hold for one language apply to it only: Turkish capitals of ``i`` and
    ``ı`` are ``İ`` and ``I`` (Python's defaults, English's, give ``I`` for both)."""
    from nmt.data.normalize import lower, upper

    assert upper("istanbul ılık", "tr") == "İSTANBUL ILIK"
    assert upper("istanbul ılık", "en") == "ISTANBUL ILIK"
    assert lower("İSTANBUL ILIK", "az") == "istanbul ılık"
    assert lower("ILIK", "en") == "ilik"
    assert normalize("IŞIK İÇİN", True, "natural", lang="tr") == "ışık için"
    assert normalize("IŞIK", True, "natural", lang="en") == "işik"
    assert textbook_form("Işık var.", "tr") == "ışık var ."
    assert title_case("istanbul ılık", "tr") == "İstanbul Ilık"
    assert title_case("istanbul", "en") == "Istanbul"
    src = ["istanbul ılık.", "bir iki."]
    added = case_augmented(src, ["a", "b"], ["a", "b"], 1.0, 0, ("upper",), lang="tr")[0]
    assert sorted(added) == ["BİR İKİ.", "İSTANBUL ILIK."]


def test_a_turkish_pairs_cache_is_not_one_built_with_englishs_capitals(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The capitals rule changed what a Turkish (or Azerbaijani) pair's data holds, so its cache
    key says so; other pairs keep their keys."""
    import nmt.data.cache as cache

    tr = DataConfig(source="tr", target="en", case_augment=0.1)
    fr = DataConfig(source="fr", target="en", case_augment=0.1)
    keys = cache.cache_key(tr, "d"), cache.cache_key(fr, "d")
    monkeypatch.setattr(cache, "special_casing", lambda lang: False)
    assert cache.cache_key(tr, "d") != keys[0]
    assert cache.cache_key(fr, "d") == keys[1]


def test_a_sentence_in_capitals_has_two_words_or_more_all_in_capitals() -> None:
    from nmt.translation.input_case import in_capitals, sentence_case

    assert in_capitals("THE CAT IS BLACK.") and in_capitals("I'M HOME!")
    assert in_capitals("ПРИВЕТ, МИР!") and in_capitals("ΚΑΛΗΜΕΡΑ ΚΟΣΜΕ")
    for natural in ("OK.", "NATO", "I.", "I'm Tom.", "The Cat Is Black.", "Happy New Year!",
                    "THE CAT is black.", "日本語です。", "", "42 !", "FBI"):
        assert not in_capitals(natural), natural
    assert sentence_case("THE CAT IS BLACK.", "en") == "The cat is black."
    assert sentence_case("« IL FAIT BEAU »", "fr") == "« Il fait beau »"
    assert sentence_case("ISTANBUL'DA IŞIK", "tr") == "Istanbul'da ışık"
    assert sentence_case("İSTANBUL'DA", "tr") == "İstanbul'da"


class _Echo(StreamTranslator):
    """An engine that shows what it was given: its translation is its input, marked."""

    def __init__(self, lowercase: bool = False, normalization: str = "natural") -> None:
        self.lowercase, self.normalization = lowercase, normalization
        self.source_lang, self.target_lang = "en", "fr"
        self.seen: list[str] = []

    def translate_as_written(self, texts: Sequence[str],
                             on_truncate: TruncateHook | None = None) -> list[str]:
        self.seen += texts
        return [f"<{t.lower()}>" for t in texts]


def test_translators_read_a_sentence_in_capitals_in_sentence_case() -> None:
    """Every engine's translate(): a sentence typed in capitals reaches the model in sentence
    case and comes back in capitals (the target language's); other sentences, and every
    sentence of a run that lower-cases its input, as written."""
    echo = _Echo()
    out = echo.translate(["THE CAT IS BLACK.", "The Cat Is Black.", "I'm Tom.", "OK."])
    assert echo.seen == ["The cat is black.", "The Cat Is Black.", "I'm Tom.", "OK."]
    assert out == ["<THE CAT IS BLACK.>", "<the cat is black.>", "<i'm tom.>", "<ok.>"]
    echo.target_lang = "tr"
    assert echo.translate(["I SEE IT"]) == ["<İ SEE İT>"]
    textbook = _Echo(lowercase=True, normalization="full")
    textbook.translate(["THE CAT IS BLACK."])
    assert textbook.seen == ["THE CAT IS BLACK."]
