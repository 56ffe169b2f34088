"""A line's spacing comes back as written and its sentences are translated one by one
(nmt/translation/layout.py), whatever engine translates them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import invoke
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.data.spans import KINDS, SpanRules, parse
from nmt.translation.layout import lay_out, sentence_splitter, translate_laid_out
from nmt.translation.structure import SpanGuard
from nmt.translation.translator import StreamTranslator, Translator, TruncateHook

SPLIT = sentence_splitter("en")


def identity(segments: list[str]) -> list[str]:
    return list(segments)


def reword(segments: list[str]) -> list[str]:
    """An engine that changes every word but none of the spacing inside a sentence."""
    return [re.sub(r"\w+", lambda m: m.group()[::-1].upper() + "x", s) for s in segments]


def spacing(text: str) -> list[str]:
    """Each run of whitespace or escaped \\n/\\t (not after another backslash), in order: the
    layout of a line."""
    return re.findall(r"(?:\s|(?<!\\)\\[nt])+", text)


# lines made of words, punctuation, numbers, escapes and whitespace of every kind
PIECES = st.sampled_from([
    "word", "Dr.", "3.50", "Hello.", "Why?", "«", "»", "!", "...", "—", "%s", "-f,", "--force",
    "日本語。", "Привет.", "مرحبا؟", "\\n", "\\t", "\\\\n", " ", "  ", "\t", "\u00a0", "\u202f",
    "    ", " \\n ", "42",
])
LINES = st.lists(PIECES, max_size=14).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=6), st.booleans())
def test_identity_engine_gives_every_line_back_exactly(lines: list[str], split: bool) -> None:
    assert translate_laid_out(lines, identity, SPLIT if split else None) == lines


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=6), st.booleans())
def test_the_spacing_of_each_line_survives_an_engine_that_changes_the_words(
        lines: list[str], split: bool) -> None:
    out = translate_laid_out(lines, reword, SPLIT if split else None)
    assert len(out) == len(lines)
    for source, translated in zip(lines, out, strict=True):
        assert spacing(translated) == spacing(source)
        assert translated.startswith(re.match(r"\s*", source).group())  # type: ignore[union-attr]
        assert translated.endswith(source[len(source.rstrip()):])


@settings(max_examples=100, deadline=None)
@given(st.lists(LINES, max_size=8))
def test_batched_equals_one_line_at_a_time(lines: list[str]) -> None:
    calls: list[list[str]] = []

    def engine(segments: list[str]) -> list[str]:
        calls.append(segments)
        return reword(segments)

    together = translate_laid_out(lines, engine, SPLIT)
    assert len(calls) <= 1  # one batch for every segment of every line
    assert together == [translate_laid_out([line], reword, SPLIT)[0] for line in lines]


def test_help_columns_and_escapes_come_back_as_written() -> None:
    lines = ["  -f, --force        do not prompt", "Usage:\\n  nmt [OPTIONS]\\tFILE", "",
             "   ", "\t", "Cannot open file.\\n"]
    layout = lay_out(lines, SPLIT)
    assert layout.segments == ["-f, --force", "do not prompt", "Usage:", "nmt [OPTIONS]", "FILE",
                               "Cannot open file."]
    assert layout.join([s.upper() for s in layout.segments]) == [
        "  -F, --FORCE        DO NOT PROMPT", "USAGE:\\n  NMT [OPTIONS]\\tFILE", "", "   ", "\t",
        "CANNOT OPEN FILE.\\n"]
    # an escaped backslash before n is text, not a line break
    assert lay_out(["C:\\\\new folder"], SPLIT).segments == ["C:\\\\new folder"]


def test_empty_and_blank_lines_never_reach_the_engine() -> None:
    def refuse(segments: list[str]) -> list[str]:
        raise AssertionError(f"translated {segments}")

    assert translate_laid_out(["", "   ", "\t \t", "42", "--", " ... "], refuse, SPLIT) == [
        "", "   ", "\t \t", "42", "--", " ... "]


RULES = SpanRules(parse("default"))


def protected(text: str) -> list[tuple[int, int]]:
    return [(s.start, s.end) for s in RULES.find(text)]


# spans with runs of spaces inside, which cut a line into segments anywhere else
SPACED_SPANS = ['<a  href="https://example.org/">', '<img   src="a.png"/>',
                "{n, plural,  one {# file}  other {# files}}", "</a>", "%s"]


def test_no_segment_ends_inside_a_span() -> None:
    line = 'Where is <a  href="https://example.org/">the station</a>?  Next column'
    assert lay_out([line], SPLIT, protected).segments == [
        'Where is <a  href="https://example.org/">the station</a>?', "Next column"]
    assert lay_out([line], SPLIT).segments[0] == "Where is <a"  # without the spans named


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(PIECES, st.sampled_from(SPACED_SPANS)), max_size=14).map("".join),
       st.booleans())
def test_every_span_reaches_the_engine_whole(line: str, split: bool) -> None:
    layout = lay_out([line], SPLIT if split else None, protected)
    pieces = [layout.segments[p] if isinstance(p, int) else p for p in layout.lines[0]]
    for a, b in protected(line):
        if line[a:b].strip() == line[a:b] and " " in line[a:b]:
            assert any(line[a:b] in piece for piece in pieces), (line, pieces)
    assert layout.join(layout.segments) == [line]


def test_a_paragraph_is_translated_a_sentence_at_a_time() -> None:
    sentences = ["Dr. Smith paid $3.50 for it.", "He said \"Stop.\"", "Wait...", "Why?"] * 25
    line = " ".join(sentences)
    layout = lay_out([line], SPLIT)
    assert layout.segments == sentences and layout.line_of == [0] * len(sentences)
    assert layout.join(layout.segments) == [line]
    # off: the line is one input, its inner spacing still kept
    assert lay_out([line + "  x"], None).segments == [line, "x"]


def test_non_latin_scripts() -> None:
    assert lay_out(["你好。今天天气很好！你去哪儿？"], sentence_splitter("zh")).lines == [[0, 1, 2]]
    layout = lay_out(["  Привет! Как дела?"], sentence_splitter("ru"))
    assert layout.segments == ["Привет!", "Как дела?"]
    assert layout.join(["Hi!", "How are you?"]) == ["  Hi! How are you?"]
    # a language without rules of its own, and none named, take the general rule
    for lang in ("tlh", None):
        assert lay_out(["Tak. Kah?"], sentence_splitter(lang)).segments == ["Tak.", "Kah?"]


CHINESE = ["你好。", "今天天气很好！", "你去哪儿？", "我们走吧。"]
ENGLISH = ["Hello.", "The weather is fine today!", "Where are you going?", "Let's go."]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=6))
def test_sentences_are_spaced_as_the_translations_script_writes(picks: list[int]) -> None:
    """Chinese writes no space between sentences, English one: a paragraph translated either
    way is spaced as its translation's script is, and given back as written when the engine
    changes nothing."""
    chinese = "".join(CHINESE[i] for i in picks)
    english = " ".join(ENGLISH[i] for i in picks)
    zh, en = dict(zip(CHINESE, ENGLISH, strict=True)), dict(zip(ENGLISH, CHINESE, strict=True))
    assert translate_laid_out([chinese], lambda b: [zh[x] for x in b],
                              sentence_splitter("zh")) == [english]
    assert translate_laid_out([english], lambda b: [en[x] for x in b], SPLIT) == [chinese]
    for line, lang in ((chinese, "zh"), (english, "en")):
        assert translate_laid_out([line], identity, sentence_splitter(lang)) == [line]


def test_only_a_space_between_sentences_is_respaced() -> None:
    """What else stands between two sentences (a dash a splitter left out) stays as written."""
    def split(text: str) -> list[str]:
        return ["Hi.", "Go."]

    zh = {"Hi.": "你好。", "Go.": "走。"}
    assert translate_laid_out(["Hi.-Go."], lambda b: [zh[x] for x in b], split) == ["你好。-走。"]
    assert translate_laid_out(["Hi. Go."], lambda b: [zh[x] for x in b], split) == ["你好。走。"]


def test_a_wrong_number_of_translations_is_refused() -> None:
    with pytest.raises(ValueError, match="1 translations for 2 segments"):
        lay_out(["One.  Two."], SPLIT).join(["Un."])


# --- through the engines -------------------------------------------------------------------------


class Recording(StreamTranslator):
    """An engine that writes each sentence in capitals and records the batches it is given."""

    def __init__(self, lowercase: bool = False, normalization: str = "natural") -> None:
        self.lowercase, self.normalization = lowercase, normalization
        self.source_lang, self.target_lang = "en", "fr"
        self.batches: list[list[str]] = []

    def translate_as_written(self, texts: Sequence[str],
                             on_truncate: TruncateHook | None = None) -> list[str]:
        self.batches.append(list(texts))
        for i, text in enumerate(texts):
            if "long" in text and on_truncate is not None:
                on_truncate(i, 99, 10)
        return [self.normalize_source(t).upper() for t in texts]


LINES = ["  One. Two?  ", "", "   ", "Usage:\\n  nmt [OPTIONS]", "  -f, --force        no prompt",
         "Dr. Smith paid $3.50. He left.", "你好。再见。"]


def test_a_translator_lays_out_each_chunk_of_a_stream_the_same() -> None:
    engine = Recording()
    whole = engine.translate_lines(LINES)
    assert whole == ["  ONE. TWO?  ", "", "   ", "USAGE:\\n  NMT [OPTIONS]",
                     "  -F, --FORCE        NO PROMPT", "DR. SMITH PAID $3.50. HE LEFT.",
                     "你好。再见。"]
    assert engine.batches[0][:2] == ["One.", "Two?"] and "Dr. Smith paid $3.50." in \
        engine.batches[0]
    streamed: list[str] = []
    chunked = Recording()
    assert chunked.translate_stream(iter(LINES), streamed.append, chunk_lines=1) == len(LINES)
    assert streamed == whole and len(chunked.batches) == 5  # blank lines never reach the model
    unsplit = Recording()
    assert unsplit.translate_lines(LINES, split=False)[0] == "  ONE. TWO?  "
    assert unsplit.batches[0][0] == "One. Two?"


def test_cut_sentences_are_reported_by_their_line_over_the_whole_stream() -> None:
    cut: list[int] = []
    lines = ["fine", "A long one. Fine.", "", "fine. Also long."] * 2
    Recording().translate_stream(iter(lines), write=lambda s: None, chunk_lines=3,
                                 on_truncate=lambda i, n, limit: cut.append(i))
    assert cut == [1, 3, 5, 7]


def test_sentences_typed_in_capitals_are_read_one_by_one() -> None:
    engine = Recording()
    engine.translate_lines(["HELLO THERE. how are you?"])
    assert engine.batches == [["Hello there.", "how are you?"]]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from test_decode import make_run

    return make_run(tmp_path_factory.mktemp("runs") / "toy")


def test_a_textbook_run_translates_a_paragraph_a_sentence_at_a_time(toy_run: Path) -> None:
    from nmt.runs.loading import load_run

    translator = Translator.from_run(load_run(toy_run, "best", "cpu"))
    assert not translator.natural_text  # the d2l way: lower-cased, spaced punctuation
    sentences = translator.translate(["A b c!", "d e f ?"])
    assert translator.translate_lines(["  A b c! d e f ?", ""]) == [
        "  " + " ".join(sentences), ""]
    assert translator.translate_lines(["A b c! d e f ?"], split=False) == translator.translate(
        ["A b c! d e f ?"])


def test_the_command_line_keeps_spacing_and_splits_unless_told_not_to(
        toy_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def capitals(self: Translator, texts: Sequence[str],
                 on_truncate: TruncateHook | None = None) -> list[str]:
        seen.append(list(texts))
        return [t.upper() for t in texts]

    monkeypatch.setattr(Translator, "translate_as_written", capitals)
    lines = "  Go now! Come here.  \n\n\tx\\ny\n"
    code, out, err = invoke("translate", "--run", str(toy_run), "--input", "-", input=lines)
    assert (code, out) == (0, "  GO NOW! COME HERE.  \n\n\tX\\nY\n"), err
    assert seen == [["Go now!", "Come here.", "x", "y"]]
    code, out, err = invoke("translate", "--run", str(toy_run), "--no-split", "Go now! Come here.")
    assert (code, out) == (0, "GO NOW! COME HERE.\n"), err
    assert seen[-1] == ["Go now! Come here."]


def test_the_api_takes_split_and_refuses_what_is_not_a_flag(toy_run: Path) -> None:
    from nmt.api import translate_lines

    engine = Recording()
    assert translate_lines(engine, ["One. Two.  Three"], split=False) == ["ONE. TWO.  THREE"]
    assert engine.batches == [["One. Two.", "Three"]]
    with pytest.raises(TypeError, match="split: expected True or False"):
        translate_lines(engine, ["One."], split="no")  # type: ignore[arg-type]


def test_the_ctranslate2_engine_lays_out_as_nmt_does(toy_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    from nmt.export.ct2_convert import export_run
    from nmt.export.ct2_translate import CT2Translator
    from nmt.runs.loading import load_run

    export = export_run(load_run(toy_run, "best"), tmp_path / "ct2")
    ct2 = CT2Translator.from_export(export, threads=1)
    lines = ["  a b c. d e  ", "", "   ", "h g\\nf e", "a b    c d"]
    layout = lay_out(lines, sentence_splitter(ct2.source_lang))
    out = ct2.translate_lines(lines)
    assert out == layout.join(ct2.translate(layout.segments))
    assert out[0].startswith("  ") and out[0].endswith("  ") and out[1:3] == ["", "   "]
    assert "\\n" in out[3] and "    " in out[4]
    code, cli, err = invoke("translate", "--model", str(export), "--input", "-",
                            input="\n".join(lines) + "\n")
    assert (code, cli) == (0, "\n".join(out) + "\n"), err
    code, cli, err = invoke("translate", "--model", str(export), "--no-split", "a b c. d e")
    assert (code, cli) == (0, ct2.translate(["a b c. d e"])[0] + "\n"), err


def test_the_paragraph_benchmark_scores_each_way(tiny_data_dir: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from test_train import tiny_config

    from bench.paragraphs import METHODS, main, paragraphs
    from nmt.training.loop import train

    groups = paragraphs(20, seed=3)
    assert all(3 <= len(g) <= 6 for g in groups)
    used = [i for g in groups for i in g]
    assert len(used) == len(set(used)) >= 18  # each sentence once; a tail under 3 left over
    run = tmp_path / "runs" / "t"
    train(tiny_config("transformer", "train.max_steps=3", "train.eval_sentences=-1"), run,
          data_dir=tiny_data_dir, log=lambda s: None)
    main(["--run", str(run), "--data-dir", str(tiny_data_dir), "--paragraphs", "8",
          "--json", str(tmp_path / "p.json")])
    rows = json.loads((tmp_path / "p.json").read_text())
    assert [r["method"] for r in rows] == list(METHODS)
    assert all(r["paragraphs"] == 8 and 24 <= r["sentences"] <= 48 for r in rows)
    assert "| split | 8 |" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="not a run directory"):
        main(["--run", str(tmp_path), "--data-dir", str(tiny_data_dir)])


RULES = SpanRules(parse("default"))
SPAN_TEXTS = [t for kind, k in KINDS.items() if kind != "terms" for t in k.examples]


def keep(text: str) -> list[tuple[int, int]]:
    return [(s.start, s.end) for s in RULES.find(text)]


def test_a_sentence_never_ends_inside_a_protected_span() -> None:
    split = sentence_splitter("en", keep)
    assert SPLIT("Print %.*s twice") == ["Print %.", "*s twice"]  # sentencex alone
    assert split("Print %.*s twice") == ["Print %.*s twice"]
    assert split("Open %s. Then close it.") == ["Open %s. ", "Then close it."]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(SPAN_TEXTS),
                          st.sampled_from(["Hello.", "Stop!", "Why?", "a", "b.", ". ", "*"])),
                min_size=1, max_size=8))
def test_sentences_are_cut_between_spans_only(parts: list[str]) -> None:
    """Whatever spans and sentence ends a line holds, its sentences join into it again and
    none ends inside a span of the line."""
    text = " ".join(parts)
    pieces = sentence_splitter("en", keep)(text)
    assert "".join(pieces) == text
    at = 0
    for piece in pieces[:-1]:
        at += len(piece)
        assert not any(a < at < b for a, b in keep(text)), (text, pieces)


def test_a_translator_with_spans_never_cuts_one_into_sentences() -> None:
    engine = Recording()
    engine.spans = SpanGuard(RULES, "off")
    assert engine.translate_lines(["Print %.*s twice. Then stop."]) == [
        "PRINT %.*S TWICE. THEN STOP."]
    assert engine.batches[0] == ["Print %.*s twice.", "Then stop."]
