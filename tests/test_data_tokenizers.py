"""Tokenizers: fixed special ids, SentencePiece round trip, the recipe's word vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import tiny_corpus_sides
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.data.tokenizers import (
    BOS_ID,
    EOS_ID,
    MIN_FALLBACK_VOCAB,
    PAD_ID,
    SPAN_PIECES,
    UNK_ID,
    LineFiles,
    SentencePieceTokenizer,
    Tokenizer,
    WordTokenizer,
    build_vocab,
    load_tokenizer,
    training_sample,
)
from nmt.errors import ConfigError, DataError

SRC, TGT = tiny_corpus_sides()


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
@pytest.mark.parametrize("joint", [True, False])
def test_sentencepiece_round_trip_and_special_ids(model_type: str, joint: bool,
                                                  tmp_path: Path) -> None:
    size = 80 if joint else 40  # the English side alone has few characters and words
    tok = SentencePieceTokenizer.train(SRC, TGT, vocab_size=size, model_type=model_type,
                                       joint=joint)
    assert tok.joint is joint and tok.src_vocab_size == tok.tgt_vocab_size == size
    assert tok.tgt_tokens([UNK_ID, PAD_ID, BOS_ID, EOS_ID]) == ["<unk>", "<pad>", "<bos>", "<eos>"]
    for text in TGT:
        ids = tok.encode_tgt(text)
        assert min(ids) > EOS_ID  # no specials inside a sentence: batching adds them
        assert tok.decode_tgt(ids) == text
    for text in SRC[:50]:
        assert "".join(tok.src_tokens(text)).replace("\u2581", " ").strip() == text
    assert tok.encode_src_batch(SRC[:20]) == [tok.encode_src(s) for s in SRC[:20]]
    tok.save(tmp_path)
    again = load_tokenizer(tmp_path)
    assert isinstance(again, SentencePieceTokenizer) and again.joint is joint
    assert [again.encode_tgt(t) for t in TGT[:50]] == [tok.encode_tgt(t) for t in TGT[:50]]


def test_decode_stops_at_eos_and_skips_pad_and_bos() -> None:
    tok = SentencePieceTokenizer.train(SRC, TGT, vocab_size=80, model_type="unigram", joint=True)
    ids = tok.encode_tgt("il a la pomme .")
    assert tok.decode_tgt([BOS_ID, *ids, EOS_ID, *ids]) == "il a la pomme ."
    assert tok.decode_tgt([BOS_ID, ids[0], PAD_ID, *ids[1:], PAD_ID]) == "il a la pomme ."
    word = WordTokenizer.train(SRC, TGT, min_freq=1, joint=False)
    wids = word.encode_tgt("il a la pomme .")
    assert word.decode_tgt([BOS_ID, *wids, EOS_ID, *wids]) == "il a la pomme ."


def test_word_vocabulary_is_the_recipes() -> None:
    lines = ["b a c", "a b d", "e a", "d z z"]
    # a:3, then b, d, z with 2 each in first-seen order (stable sort), c and e (1) left out
    assert build_vocab(lines, 2) == ["<unk>", "<pad>", "<bos>", "<eos>", "a", "b", "d", "z"]
    tok = WordTokenizer(build_vocab(lines, 2), build_vocab(["x y", "x"], 1))
    assert tok.encode_src("a c d") == [4, UNK_ID, 6]
    assert tok.encode_tgt("y x") == [5, 4] and tok.encode_tgt("") == []
    assert tok.src_tokens("a c d") == ["a", "c", "d"]
    assert (tok.src_vocab_size, tok.tgt_vocab_size, tok.joint) == (8, 6, False)


def test_word_tokenizer_saves_and_loads(tmp_path: Path) -> None:
    for joint in (True, False):
        tok = WordTokenizer.train(SRC, TGT, min_freq=2, joint=joint)
        tok.save(tmp_path / str(joint))
        again = load_tokenizer(tmp_path / str(joint))
        assert isinstance(again, WordTokenizer)
        assert (again.src_itos, again.tgt_itos, again.joint) == (tok.src_itos, tok.tgt_itos, joint)


def test_vocab_size_too_large_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"data.vocab_size=5000: too large .* at most \d+"):
        SentencePieceTokenizer.train(SRC, TGT, vocab_size=5000, model_type="unigram", joint=True)


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="tokenizer.json: tokenizer file missing"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(DataError, match="not a tokenizer description"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text(json.dumps({"kind": "bytes"}))
    with pytest.raises(DataError, match="unknown tokenizer kind 'bytes'"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text(json.dumps({"kind": "sentencepiece", "joint": True}))
    for content in (b"garbage", b""):
        (tmp_path / "spm.model").write_bytes(content)
        with pytest.raises(DataError) as e:
            load_tokenizer(tmp_path)
        assert str(e.value).startswith(f"{tmp_path / 'spm.model'}: damaged SentencePiece model")


def test_is_a_tokenizer() -> None:
    assert isinstance(WordTokenizer(["<unk>", "<pad>", "<bos>", "<eos>"]), Tokenizer)


# --- SentencePiece's sample: at most data.sp_sentences sentences and about data.sp_characters
# characters (nmt.data.tokenizers.training_sample) -----------------------------------------------

lengths_st = st.lists(st.integers(0, 60), min_size=0, max_size=120)


@settings(max_examples=150, deadline=None)
@given(lengths=lengths_st, sentences=st.integers(0, 150), characters=st.integers(0, 3000),
       seed=st.integers(0, 3))
def test_the_sample_fits_its_limits_and_keeps_the_order(lengths: list[int], sentences: int,
                                                        characters: int, seed: int) -> None:
    lines = [f"{i:03d}" + "x" * n for i, n in enumerate(lengths)]  # distinct, of known lengths
    given_, size = training_sample(lines, sentences, characters, seed)
    total = sum(map(len, lines))
    taken = len(lines) if sentences <= 0 else min(len(lines), sentences)
    if characters <= 0 or not lines or total * taken <= characters * len(lines):
        # within the limits: SentencePiece is given everything and samples `sentences` itself
        assert given_ is lines and size == sentences
        return
    picked = list(given_)
    k = len(picked)
    assert size == 0 and k >= 1  # SentencePiece takes all it is given: this sample
    assert sentences <= 0 or k <= sentences
    assert k * total <= max(characters * len(lines), total)  # expected characters fit
    assert k == max(1, characters * len(lines) // total)  # and no fewer than fit
    assert picked == sorted(picked) and set(picked) <= set(lines)  # distinct lines, in order
    again, _ = training_sample(lines, sentences, characters, seed)
    assert list(again) == picked  # seeded


def test_the_sample_reads_files_and_differs_by_seed(tmp_path: Path) -> None:
    path = tmp_path / "train.txt"
    path.write_text("".join(f"sentence number {i}\n" for i in range(2000)), encoding="utf-8")
    files = LineFiles((path,))
    first, size = training_sample(files, 0, 10_000, seed=1)
    chosen = list(first)
    assert size == 0 and len(chosen) == 10_000 * 2000 // sum(len(x) for x in files)
    assert chosen != list(training_sample(files, 0, 10_000, seed=2)[0])
    assert list(training_sample(files, 0, 10_000, seed=1)[0]) == chosen  # the files read again


def test_sentencepiece_trains_within_a_character_limit() -> None:
    """Trained on a sample of about 10,000 of the corpus' 44,000 characters, SentencePiece
    gives a model of the size asked; without the limit, the same settings give another model
    (it saw more text), and with a limit the corpus is within, the same one."""
    kw = dict(vocab_size=60, model_type="unigram", joint=True, seed=3)
    small = SentencePieceTokenizer.train(SRC, TGT, characters=10_000, **kw)  # type: ignore[arg-type]
    whole = SentencePieceTokenizer.train(SRC, TGT, characters=0, **kw)  # type: ignore[arg-type]
    within = SentencePieceTokenizer.train(SRC, TGT, characters=10**6, **kw)  # type: ignore[arg-type]
    assert small.src_vocab_size == 60
    assert small.pieces("src") != whole.pieces("src") == within.pieces("src")


def prose(n: int = 3000, seed: int = 5) -> list[str]:
    """Sentences of made-up words, lower-case letters only: enough text for a vocabulary of
    :data:`MIN_FALLBACK_VOCAB` pieces, and none of the characters of spans."""
    import random

    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnoprstuvwy") for _ in range(rng.randint(2, 9)))
             for _ in range(2000)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))).capitalize() + "."
            for _ in range(n)]


@pytest.fixture(scope="module")
def carried() -> SentencePieceTokenizer:
    text = prose()
    return SentencePieceTokenizer.train(text, text, vocab_size=MIN_FALLBACK_VOCAB,
                                        model_type="unigram", joint=True, byte_fallback=True,
                                        span_pieces=True)


UNSEEN = ["Tell %s to call me.", "Open {0} in <b>%1$s</b>: ${HOME}/x.txt --force",
          "Ça coûte 5 € 🙂", "Ωμέγα 東京 #tag @user a=b|c~d^e`f\\g"]


@pytest.mark.parametrize("text", UNSEEN)
def test_characters_never_seen_round_trip_as_bytes_never_unk(
        carried: SentencePieceTokenizer, text: str) -> None:
    ids = carried.encode_src(text)
    assert UNK_ID not in ids
    assert carried.decode_tgt(ids) == text
    # the pieces CTranslate2 and Argos get back decode the same through the model file
    assert carried.tgt_sp.decode_pieces(carried.tgt_tokens(ids)) == text


def test_without_byte_fallback_an_unseen_character_is_unk() -> None:
    text = prose()
    plain = SentencePieceTokenizer.train(text, text, vocab_size=MIN_FALLBACK_VOCAB,
                                         model_type="unigram", joint=True)
    ids = plain.encode_src("Tell %s to call me.")
    assert UNK_ID in ids and plain.decode_tgt(ids) != "Tell %s to call me."


def test_frequent_placeholders_and_tags_are_pieces_of_their_own(
        carried: SentencePieceTokenizer) -> None:
    for span in SPAN_PIECES:
        pieces = [p for p in carried.src_tokens(f"Open {span} now") if p != "▁"]
        assert span in pieces, (span, pieces)
    assert carried.src_tokens("Open %s") != ["▁", "<unk>"]
    pieces = carried.pieces("src")
    assert sum(p.startswith("<0x") for p in pieces) == 256  # a piece per byte
    assert len(pieces) == MIN_FALLBACK_VOCAB


def test_a_toy_vocabulary_is_trained_without_byte_or_span_pieces() -> None:
    """Under MIN_FALLBACK_VOCAB pieces there is no room for 256 byte pieces: the settings are
    moot there, not an error (every test corpus of a few hundred sentences is such a toy)."""
    tok = SentencePieceTokenizer.train(SRC, TGT, vocab_size=80, model_type="unigram", joint=True,
                                       byte_fallback=True, span_pieces=True)
    pieces = tok.pieces("src")
    assert len(pieces) == 80 and not any(p.startswith("<0x") for p in pieces)
    assert "%1$s" not in pieces


def test_new_runs_carry_spans_and_saved_runs_keep_their_tokenizer() -> None:
    from nmt.config import DataConfig, from_dict, load_config

    root = Path(__file__).resolve().parents[1]
    assert DataConfig().byte_fallback and DataConfig().span_pieces
    saved = from_dict({"data": {}}, saved=True).data  # a run saved before the settings
    assert not saved.byte_fallback and not saved.span_pieces
    demo = load_config(root / "configs" / "demo.toml").data
    assert demo.byte_fallback and demo.span_pieces
