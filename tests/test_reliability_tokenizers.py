"""Arbitrary Unicode through the tokenizers and the translation pipeline: nothing raises, ids
stay in range, decoding gives one line, and SentencePiece round-trips normalised text.

Normalisation itself (idempotent, total, clean output on any code point) is property-tested in
test_data_normalize.py; the round trip on the corpus' own sentences in test_data_tokenizers.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import tiny_corpus_sides
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_decode import make_run

from nmt.data.normalize import normalize
from nmt.data.tokenizers import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    SentencePieceTokenizer,
    Tokenizer,
    WordTokenizer,
)
from nmt.runs.loading import load_run
from nmt.translation.translator import Translator

SRC, TGT = tiny_corpus_sides()
# every character each side's tokenizer was trained on (a joint one has both)
SRC_CHARS, TGT_CHARS = sorted(set("".join(SRC))), sorted(set("".join(TGT)))

# every code point, surrogates, controls and unassigned ones included
ANY_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF,
                                 exclude_categories=()), max_size=40)
SRC_TEXT = st.text(st.sampled_from(SRC_CHARS), max_size=60)
TGT_TEXT = st.text(st.sampled_from(TGT_CHARS), max_size=60)


@pytest.fixture(scope="module", params=["unigram-joint", "bpe-separate", "word"])
def tokenizer(request: pytest.FixtureRequest) -> Tokenizer:
    if request.param == "word":
        return WordTokenizer.train(SRC, TGT, min_freq=1, joint=False)
    model_type, layout = request.param.split("-")
    return SentencePieceTokenizer.train(SRC, TGT, vocab_size=80 if layout == "joint" else 48,
                                        model_type=model_type, joint=layout == "joint")


@settings(max_examples=150, deadline=None)
@given(text=ANY_TEXT)
@example(text="a <eos> b <pad> <bos> <unk>")  # special tokens spelled out in the input
@example(text="\u2581\u2581 \x00\ud800 \U0010ffff")
def test_any_text_encodes_in_range_and_decodes_to_one_line(tokenizer: Tokenizer,
                                                           text: str) -> None:
    normalized = normalize(text, True, "full")
    for ids, size in ((tokenizer.encode_src(normalized), tokenizer.src_vocab_size),
                      (tokenizer.encode_tgt(normalized), tokenizer.tgt_vocab_size)):
        assert all(isinstance(i, int) and 0 <= i < size for i in ids)
        assert not {PAD_ID, BOS_ID, EOS_ID} & set(ids)  # unknown is <unk>, never a control id
    assert len(tokenizer.src_tokens(normalized)) >= (1 if normalized else 0)
    decoded = tokenizer.decode_tgt(tokenizer.encode_tgt(normalized))
    assert isinstance(decoded, str) and "\n" not in decoded and "\r" not in decoded
    decoded.encode("utf-8")  # writable to the hypotheses file


@settings(max_examples=150, deadline=None)
@given(tgt=TGT_TEXT, src=SRC_TEXT)
def test_normalised_text_round_trips(tokenizer: Tokenizer, tgt: str, src: str) -> None:
    """Text made of characters the tokenizer was trained on comes back unchanged
    (SentencePiece on any such text; the word tokenizer on its own words)."""
    normalized = normalize(tgt, True, "full")
    if isinstance(tokenizer, WordTokenizer):
        words = [w for w in normalized.split(" ") if w in tokenizer.tgt_stoi]
        normalized = " ".join(w for w in words if w not in ("<unk>", "<pad>", "<bos>", "<eos>"))
    assert tokenizer.decode_tgt(tokenizer.encode_tgt(normalized)) == normalized
    if isinstance(tokenizer, SentencePieceTokenizer):
        normalized = normalize(src, True, "full")
        pieces = "".join(tokenizer.src_tokens(normalized))
        assert pieces.replace("\u2581", " ").strip() == normalized
        assert UNK_ID not in tokenizer.encode_src(normalized)


def test_known_limits_of_the_round_trip() -> None:
    """Documented exceptions: SentencePiece reads its meta symbol U+2581 as a space, and
    characters it never saw decode as ' ⁇ ' (its <unk> surface)."""
    tok = SentencePieceTokenizer.train(SRC, TGT, vocab_size=80, model_type="unigram", joint=True)
    assert tok.decode_tgt(tok.encode_tgt("le\u2581chat")) == "le chat"
    ids = tok.encode_tgt("le chat 😀")
    assert UNK_ID in ids and "⁇" in tok.decode_tgt(ids)


@pytest.fixture(scope="module")
def translator(tmp_path_factory: pytest.TempPathFactory) -> Translator:
    run = make_run(tmp_path_factory.mktemp("runs") / "toy")
    return Translator.from_run(load_run(Path(run), "last", "cpu"))


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.one_of(ANY_TEXT, st.sampled_from(["a b c", "", " \u200b "])),
                      max_size=4))
def test_translation_gives_one_clean_line_per_input(translator: Translator,
                                                    texts: list[str]) -> None:
    out = translator.translate(texts)
    assert len(out) == len(texts)
    for text, line in zip(texts, out, strict=True):
        assert "\n" not in line and "\r" not in line
        if normalize(text, True, "full") == "":
            assert line == ""  # nothing to translate gives an empty line (a model may also
            # choose <eos> first for a real input, so the converse does not hold)
