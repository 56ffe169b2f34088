"""Tags put on the words they marked, through the model's attention
(:mod:`nmt.translation.alignment`): the rule on made-up weights, the placement it drives, that
any alignment still gives back the source's spans nested, and that both engines align alike
(CTranslate2 = nmt; forced = the search's own weights: tests/test_decode.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_spans_translate import REWRITES, RULES, marked_up, nested, spans_of

from nmt.data.spans import holds_exactly
from nmt.translation.alignment import WordAlignment, piece_words, word_alignment
from nmt.translation.structure import SpanGuard, guarded, repair_line, without_tags


def test_piece_words_follow_the_word_start_mark() -> None:
    assert piece_words(["▁J", "'", "adore", "▁Tom", "."]) == [0, 0, 0, 1, 1]
    assert piece_words(["'", "▁a"]) == [0, 1]  # a first piece without the mark starts a word
    assert piece_words(["hello", ".", "world"]) == [0, 1, 2]  # a word tokenizer: each a word
    assert piece_words([]) == []


def test_word_alignment_takes_the_piece_that_attends_most_to_each_word() -> None:
    # source "red car" (▁red ▁ca r), target "voiture rouge" (▁voiture ▁rou ge); rows: target
    # pieces, columns: source pieces and <eos>
    weights = [[0.1, 0.5, 0.3, 0.1],
               [0.8, 0.1, 0.0, 0.1],
               [0.6, 0.1, 0.2, 0.1]]
    got = word_alignment(weights, ["▁red", "▁ca", "r"], ["▁voiture", "▁rou", "ge"],
                         "red car", "voiture rouge")
    # red: rouge; car (0.8): voiture
    assert got == WordAlignment("red car", "voiture rouge", (1, 0))


@pytest.mark.parametrize(("source_pieces", "target_pieces", "source", "target", "rows"), [
    (["▁red", "▁car"], ["▁voiture"], "red car", "voiture rouge", 1),  # pieces != words
    (["▁red", "▁car"], ["▁voiture"], "red  car.", "voiture", 1),  # fine: spaces, not words
    (["▁red"], ["▁voiture", "▁rouge"], "red", "voiture rouge", 1),  # a row missing
    ([], ["▁voiture"], "", "voiture", 1),
])
def test_word_alignment_is_none_where_the_pieces_are_not_the_words(
        source_pieces: list[str], target_pieces: list[str], source: str, target: str,
        rows: int) -> None:
    weights = [[1.0] * (len(source_pieces) + 1)] * rows
    got = word_alignment(weights, source_pieces, target_pieces, source, target)
    assert (got is not None) == (source == "red  car." and target == "voiture")


def aligned(source: str, target: str, *words: int) -> WordAlignment:
    """An alignment of ``source`` without its tags and ``target``."""
    return WordAlignment(without_tags(source, RULES), target, words)


@pytest.mark.parametrize(("source", "target", "words", "expected"), [
    ("the <b>red</b> car", "la voiture rouge", (0, 2, 1), "la voiture <b>rouge</b>"),
    ("a <b>red car</b>", "une voiture rouge", (0, 2, 1), "une <b>voiture rouge</b>"),
    ("I <b>give up</b> now.", "J'abandonne maintenant.", (0, 0, 0, 1),
     "<b>J'abandonne</b> maintenant."),
    ("I'd love to see <b>Tom</b> win.", "J'adore voir Tom.", (0, 0, 0, 1, 2, 2),
     "J'adore voir <b>Tom</b>."),  # before the sentence's full stop, glued as in the source
    ("<b>Tom</b>, come here.", "Tom, viens ici.", (0, 1, 2), "<b>Tom</b>, viens ici."),
    ("Read <a href=\"x\">the <i>manual</i></a> first.", "Lisez d'abord le manuel.",
     (0, 2, 3, 1), "Lisez d'abord <a href=\"x\">le <i>manuel</i></a>."),
    ("one<br/>two three", "un deux trois", (0, 1, 2), "un <br/>deux trois"),
    ("Guess <em>that <b>cost</b></em> me.", "Devine ce prix.", (0, 2, 2, 1),
     "Devine ce <em><b>prix</b></em>."),  # the words between <em> and <b> went into one
    ("<i>%d files</i> were deleted.", "les fichiers %d étaient supprimés.", (2, 1, 3, 4),
     "les <i>fichiers %d</i> étaient supprimés."),  # after the kept %d it holds, glued
    ("<b>Save %s</b>", "%s", (0, 0), "<b>%s</b>"),  # its word lost: around the kept %s
    ("<b>Warning:</b> the file %s could not be saved.",
     "Attention : le fichier %s n'a pas pu être sauvé.", (1, 2, 3, 4, 5, 6, 8, 9),
     "<b>Attention</b> : le fichier %s n'a pas pu être sauvé."),  # rendered by ``:`` alone,
    # around no word: by position (not ``Attention : <b> </b> le``)
    ("<em>Give her a</em> <code>doll</code>.", "Donne-le-le !", (0, 0, 0, 1),
     "<em>Donne-le-le</em> <code></code> !"),  # tags that would cross: by position
    ("<code>save %1$s</code> <b>%s --force the</b> the", "the the --force %s %1$s save",
     (0, 3, 5, 5, 4, 5), "<code>the</code> <b>the --force %s %1$s</b> save"),  # all joined as
    # the source joins them before any spaced apart (``<code> the the </code> <b> --force``)
])
def test_tags_go_on_the_words_the_alignment_names(source: str, target: str,
                                                  words: tuple[int, ...], expected: str) -> None:
    assert without_tags(source, RULES).split().__len__() == len(words)
    alignment = aligned(source, target, *words)
    assert repair_line(source, target, RULES, alignment=alignment).text == expected


def test_an_alignment_of_another_text_or_one_that_would_cross_tags_is_not_used() -> None:
    source, target = "the <b>red</b> car", "la voiture rouge"
    by_position = repair_line(source, target, RULES).text
    other = aligned(source, "la belle voiture rouge", 0, 3, 2)  # another translation's words
    assert repair_line(source, target, RULES, alignment=other).text == by_position
    beyond = aligned(source, target, 0, 9, 1)  # a word the translation does not have
    assert repair_line(source, target, RULES, alignment=beyond).text == by_position
    # <b> over words 0-2, <i> over words 1-3 of the output: crossed; placed by position
    source, target = "<b>a b</b> <i>c d</i>", "w x y z"
    crossed = repair_line(source, target, RULES, alignment=aligned(source, target, 0, 2, 1, 3))
    assert crossed.text == repair_line(source, target, RULES).text
    assert holds_exactly(RULES.find(source), RULES.find(crossed.text))
    # siblings the translation turns around stay nested, each on its words
    swapped = repair_line(source, target, RULES, alignment=aligned(source, target, 2, 3, 0, 1))
    assert swapped.text == "<i>w x</i> <b>y z</b>"


def test_guarded_aligns_only_the_lines_whose_tags_it_took_out() -> None:
    asked: list[tuple[str, str]] = []

    def align(sources: list[str], targets: list[str]) -> list[WordAlignment | None]:
        asked.extend(zip(sources, targets, strict=True))
        return [WordAlignment(s, t, tuple(reversed(range(len(t.split())))))
                for s, t in zip(sources, targets, strict=True)]

    def engine(sources: list[str]) -> list[str]:
        return [" ".join(reversed(s.split())) for s in sources]

    got = guarded(engine, ["a <b>b</b> c", "d %s e", "plain words"], SpanGuard(RULES), align)
    assert asked == [("a b c", "c b a")]
    assert got == ["c <b>b</b> a", "e %s d", "words plain"]
    guarded(engine, ["a <b>b</b> c"], SpanGuard(RULES, markup="model"), align)
    assert len(asked) == 1  # markup model: the engine saw the tags, nothing to align


@settings(max_examples=300, deadline=None)
@given(marked_up(), st.sampled_from(sorted(REWRITES)), st.data())
def test_any_alignment_gives_back_the_tags_nested(source: str, rewrite: str,
                                                  data: st.DataObject) -> None:
    """Whatever words an alignment names (a model's attention can be anything), the output
    holds the source's spans, its tags nested as the source's."""
    def engine(sources: list[str]) -> list[str]:
        return [REWRITES[rewrite](x) for x in sources]

    def align(sources: list[str], targets: list[str]) -> list[WordAlignment | None]:
        out: list[WordAlignment | None] = []
        for s, t in zip(sources, targets, strict=True):
            n = len(t.split())
            words = data.draw(st.lists(st.integers(0, max(n - 1, 0)), min_size=len(s.split()),
                                       max_size=len(s.split())))
            out.append(WordAlignment(s, t, tuple(words)) if n else None)
        return out

    got = guarded(engine, [source], SpanGuard(RULES), align)[0]
    assert spans_of(got) == spans_of(source) and nested(got), (source, got)


# --- the engines -----------------------------------------------------------------------------


@pytest.fixture()
def sp_run(sentencepiece_run_dir: Path) -> Path:
    return sentencepiece_run_dir


SOURCES = ["The big dog eats.", "We want the small cake.", "He likes the red house."]


def test_ctranslate2_aligns_and_places_tags_as_nmt_does(sp_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    from nmt.export.ct2_convert import export_run
    from nmt.export.ct2_translate import CT2Translator
    from nmt.runs.loading import load_run
    from nmt.translation.translator import Translator

    run = load_run(sp_run, "best", "cpu")
    native = Translator.from_run(run)
    export = export_run(run, tmp_path / "export")
    ct2 = CT2Translator.from_export(export)
    outputs = native.translate(SOURCES)
    got, want = ct2.align(SOURCES, outputs), native.align(SOURCES, outputs)
    assert want == got and any(a is not None for a in want)
    tagged = ["The <b>big</b> dog eats.", "We want <i>the small</i> cake.",
              "He <em>likes</em> the <b>red</b> house."]
    assert ct2.translate(tagged) == native.translate(tagged)
    # an export made before it averaged the heads aligns nothing: tags by position
    meta_path = export / "nmt-export.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    del meta["attention"]
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    assert CT2Translator.from_export(export).align(SOURCES, outputs) == [None] * len(SOURCES)


def test_a_sentence_typed_in_capitals_is_aligned_as_the_model_read_it(sp_run: Path) -> None:
    from nmt.runs.loading import load_run
    from nmt.translation.translator import Translator

    native = Translator.from_run(load_run(sp_run, "best", "cpu"))
    shouted = [s.upper() for s in SOURCES]
    outputs = native.translate(shouted)
    assert outputs == [o.upper() for o in native.translate(SOURCES)]
    got = native.align(shouted, outputs)
    want = native.align(SOURCES, native.translate(SOURCES))
    assert [a.target if a else None for a in got] == [o if w else None
                                                      for o, w in zip(outputs, want, strict=True)]
    assert any(a is not None for a in got)  # (the words: those of the model's own casing)
    assert all(a.source == s for a, s in zip(got, shouted, strict=True) if a is not None)


def test_a_tag_glued_to_a_kept_span_stays_beside_it_and_one_around_a_span_alone_goes_with_it(
        ) -> None:
    """Beside a kept span first (the source glues them), the alignment only for the tags
    left; a tag pair around a span alone marks no word the attention could name."""
    source, target = "Use <code>/tmp/x</code> or stop.", "Utilise /tmp/x ou arrête."
    alignment = aligned(source, target, 0, 3, 2, 3)  # /tmp/x said to render "arrête."
    assert repair_line(source, target, RULES, alignment=alignment).text == (
        "Utilise <code>/tmp/x</code> ou arrête.")
    source, target = "Click <b>%s</b> to open.", "Cliquez pour ouvrir."
    alignment = aligned(source, target, 0, 1, 1, 2)
    assert repair_line(source, target, RULES, alignment=alignment).text == (
        repair_line(source, target, RULES).text)
