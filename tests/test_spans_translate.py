"""Translation keeps protected spans (nmt/translation/structure.py): each output gets exactly
its source's spans back in repair mode, strict refuses a line it would have to guess, off leaves
the model's text; the same through nmt translate, the API, CTranslate2 and nmt bleu."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import invoke
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decode import make_run

from nmt.api import open_translator, translate_lines
from nmt.config import DecodeConfig
from nmt.data.spans import (
    KINDS,
    Span,
    SpanRules,
    argument_order,
    holds_exactly,
    misplaced_tags,
    parse,
)
from nmt.errors import DataError
from nmt.evaluate import _spans_tag, span_integrity
from nmt.localisation.placeholders import printf_kept
from nmt.translation.structure import (
    SpanGuard,
    UnplacedSpan,
    guarded,
    in_argument_order,
    repair_line,
    without_remnants,
    without_tags,
)
from nmt.translation.translator import StreamTranslator, TruncateHook

RULES = SpanRules(parse("default"))


def spans_of(text: str) -> Counter[str]:
    return Counter(s.text for s in RULES.find(text))


@pytest.mark.parametrize(("source", "output", "expected", "guessed"), [
    # garbled copies, replaced in place
    ("Cannot open %s: %s", "Impossible %s : %⁇s", "Impossible %s : %s", 0),  # with what is
    ("Hello {name}!", "Bonjour {na⁇e} !", "Bonjour {name} !", 0),  # left of the copy around
    ("Hello {name}!", "Bonjour {⁇name} !", "Bonjour {name} !", 0),  # the mark, where that
    ("Open (%s)", "Ouvrir (%⁇s)", "Ouvrir (%s)", 0),  # holds a sign of the span
    ("Tell %s", "Dis à les⁇", "Dis à les%s", 0),  # letters alone: the word's own
    ("Tell %s to call me.", "Dis à % s de m'appeler.", "Dis à %s de m'appeler.", 0),
    ("Hello {name}!", "Bonjour { name } !", "Bonjour {name} !", 0),
    # an invented option in a lost one's place, apart from what its copy was not glued to
    ("--build-id[=STYLE]  Generate a note", "--idid-id=STLE] Génère une note",
     "--build-id STLE] Génère une note", 0),
    ("Tell %s to call me.", "Dis à ⁇ s de m'appeler.", "Dis à %s de m'appeler.", 0),
    ("Click <b>Save</b>", "Cliquez ⁇ b ⁇ Enregistrer < / b >", "Cliquez <b> Enregistrer </b>",
     0),
    # an invented span of a lost one's kind takes its place
    ("%d files", "%i fichiers", "%d fichiers", 0),
    ("Use --force now", "Utilisez --for⁇ce", "Utilisez --force", 0),  # with what is left of
    ("Use --dry-run now", "Utilisez --dry⁇run", "Utilisez --dry-run", 0),  # the copy beside
    ("Use --force now", "Utilisez --for⁇ ici", "Utilisez --force ici", 0),  # it
    ("Copy %s now", "Copier %dfichiers", "Copier %sfichiers", 0),  # (a word, not the copy)
    # unknown marks take the lost spans in order
    ("Run %s with --force now", "Lancez ⁇ avec ⁇ maintenant",
     "Lancez %s avec --force maintenant", 0),
    # by position: the end, before the closing punctuation the source has after it
    ("Cannot open %s.", "Impossible d'ouvrir.", "Impossible d'ouvrir %s.", 1),
    ("<b>Save</b>", "<b>Enregistrer", "<b>Enregistrer</b>", 1),
    ("%s not found", "introuvable", "%s introuvable", 1),
    ("%s", "", "%s", 1),
    # by position, spans bound for one place go there together in the source's order, joined
    # as the source joins them (never ``</b> <b>``); kept spans are no words and stay put
    ("Click <b>%s</b> now.", "Cliquez maintenant.", "Cliquez <b>%s</b> maintenant.", 3),
    ("Save <i>all</i> files.", "Enregistrer tous les fichiers.",
     "Enregistrer <i>tous les</i> fichiers.", 2),
    ("a b c d <b>e</b> %s %s %s %s", "a b c d e</b> %s %s %s %s",
     "a b c d <b>e</b> %s %s %s %s", 1),
    # never inside a run of non-space: cutting ``--force/st/s`` after ``--force`` makes a path
    ("Run %s --force at https://example.org/x or /usr/lib/x.so", "Lancez %s --force/st/s",
     "Lancez %s https://example.org/x --force/st/s /usr/lib/x.so", 2),
    # beside the kept span the source glues them to
    ("Click <b>%s</b> now.", "Cliquez %s maintenant.", "Cliquez <b>%s</b> maintenant.", 2),
    ("Use <b>%d</b> files.", "Utiliser fichiers %d.", "Utiliser fichiers <b>%d</b>.", 2),
    ("%s%s: %d", "%s : %d", "%s%s : %d", 1),
    ("<b><i>%s</i></b>", "%s", "<b><i>%s</i></b>", 4),
    # around a kept span the source has inside them, glued to it as the source glues them to
    # the words the output lost (never ``<b> %s`` or ``%d </i>``)
    ("<b>Save %s</b>", "%s", "<b>%s</b>", 2),
    ("Take a <em>look at</em> <i>these</i>.", "Prends un coup !",
     "Prends <em>un</em> <i>coup</i> !", 4),  # ``</em>`` ends the word before: ``un</em>``
    ("<b>%s open</b> %d open open", "<b>%s %d open", "<b>%s</b> %d open", 1),
    ("<i>%d files</i> were deleted.", "fichiers %d supprimés.",
     "fichiers <i>%d</i> supprimés.", 2),  # <i> beside the %d it is glued to
    # tags the output has out of order are put again, as lost ones
    ("Click <b>%s</b> now.", "Cliquez</b> <b>%s maintenant.", "Cliquez <b>%s</b> maintenant.", 2),
    ("Click <b>here</b> now.", "Cliquez </b>ici<b> maintenant.", "Cliquez <b>ici</b> maintenant.",
     2),
    ("<b>Bold</b> and <i>it</i>.", "<b>Gras et <i>it</b></i>.", "<b>Gras</b> et <i>it</i>.", 2),
    ("Save <b>all</b>", "Tout </b>enregistrer<b>", "Tout <b>enregistrer</b>", 2),
    ("<b> </b> a", "a <b>", "<b> </b> a", 2),  # a guess out of order with a kept tag: both again
    ("Open <b>%s", "Ouvrir <b>%s", "Ouvrir <b>%s", 0),  # left open as the source leaves it
    ("<i>a</i> <b>b</b>", "<b>b</b> <i>a</i>", "<b>b</b> <i>a</i>", 0),  # pairs reordered: kept
    # an invented span is removed, with the quotes it leaves empty
    ("File not found.", "Datei »%s« gefunden.", "Datei gefunden.", 0),
    ("Done.", "Fait %d.", "Fait.", 0),
    # nothing to do
    ("Cannot open %s: %s", "Impossible d'ouvrir %s : %s", "Impossible d'ouvrir %s : %s", 0),
    ("%2$s of %1$s", "%1$s de %2$s", "%1$s de %2$s", 0),  # reordered is kept
    ("No spans here.", "Pas de ⁇ ici.", "Pas de ⁇ ici.", 0),
])
def test_repair_golden(source: str, output: str, expected: str, guessed: int) -> None:
    repair = repair_line(source, output, RULES)
    assert repair.text == expected
    assert repair.guessed == guessed
    assert spans_of(repair.text) == spans_of(source)


SPAN_TEXTS = [t for kind, k in KINDS.items() if kind != "terms" for t in k.examples]
WORDS = st.text("abcdefghij", min_size=1, max_size=6)
PIECE = st.one_of(WORDS, st.sampled_from(SPAN_TEXTS))
GARBLE = st.sampled_from(["⁇", "% s", "{ name }", "< b >", "<unk>", "--", "%"])


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECE, max_size=8), st.lists(st.one_of(PIECE, GARBLE), max_size=8))
def test_repair_gives_exactly_the_sources_spans(source: list[str], output: list[str]) -> None:
    """Whatever the engine wrote, the repaired output holds the source's spans, each as often,
    and no other; without guesses, it does or it names the spans it could not place."""
    src, out = " ".join(source), " ".join(output)
    repair = repair_line(src, out, RULES)
    assert spans_of(repair.text) == spans_of(src)
    assert not misplaced_tags(RULES.find(src), RULES.find(repair.text))
    assert repair.removed >= 0 and repair.guessed <= repair.restored
    strict = repair_line(src, out, RULES, guess=False)
    if strict.unplaced:
        assert strict.guessed == 0
    else:
        assert holds_exactly(RULES.find(src), RULES.find(strict.text))
    if holds_exactly(RULES.find(src), RULES.find(out)) and not any(
            g in out for g in ("⁇", "<unk>")):
        assert repair.text == out  # nothing lost, nothing invented: the output as it is


PLAIN_WORDS = st.sampled_from(["open", "the", "file", "now", "save", "all"])
TAGS = ("b", "i", "em", "code")


@st.composite
def marked_up(draw: st.DrawFn) -> str:
    """A sentence of words, placeholders and tags around words and placeholders, each span
    once (which copy of a repeated span a model lost is not known)."""
    parts: list[str] = []
    placeholders = iter(draw(st.permutations(["%s", "%d", "{name}", "%1$s", "--force"])))
    tags = iter(draw(st.permutations(TAGS)))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["word", "word", "placeholder", "tag"]))
        if kind == "word":
            parts.append(draw(PLAIN_WORDS))
        elif kind == "placeholder":
            parts.append(next(placeholders, "now"))
        else:
            tag = next(tags, None)
            inside = draw(st.lists(st.one_of(PLAIN_WORDS, st.just("")), min_size=1,
                                   max_size=3))
            inside = [w or next(placeholders, "all") for w in inside]
            parts.append(f"<{tag}>{' '.join(inside)}</{tag}>" if tag else inside[0])
    return " ".join(parts) + draw(st.sampled_from(["", ".", "!"]))


def nested(text: str) -> bool:
    """Whether each closing tag of ``text`` closes the last tag opened, and all are closed."""
    open_tags: list[str] = []
    for s in RULES.find(text):
        if s.kind == "tags" and s.text.startswith("</"):
            if not open_tags or open_tags.pop() != s.text[2:-1]:
                return False
        elif s.kind == "tags":
            open_tags.append(s.text[1:-1])
    return not open_tags


@settings(max_examples=400, deadline=None)
@given(marked_up(), st.data())
def test_lost_tags_come_back_nested_as_in_the_source(source: str, data: st.DataObject) -> None:
    """An output with the source's words in their order that lost any of its spans gets them
    back with every tag where it closes what it closed in the source: a lost ``<b>`` and
    ``</b>`` never come back as ``</b> <b>``, a lost ``<b>`` never after its kept ``</b>``."""
    spans = RULES.find(source)
    assert nested(source)
    dropped = data.draw(st.sets(st.sampled_from(range(len(spans))))) if spans else set()
    output = source
    for i in sorted(dropped, reverse=True):
        output = output[:spans[i].start] + " " + output[spans[i].end:]
    output = " ".join(output.split())
    repaired = repair_line(source, output, RULES).text
    assert spans_of(repaired) == spans_of(source)
    assert nested(repaired), (output, repaired)


@pytest.mark.parametrize(("source", "output", "garbled"), [
    ("<code>open</code> <i>%s %d</i> <em>open</em>",
     "</i>open</ em>%s %d<i> </em>open<code>", "</ em>"),
    ("<code>open</code> <i>--force</i> <em>open</em>",
     "<i>open</c ode>--force<em> </i>open</em>", "</c ode>"),
    ("<code>open</code> <i>--force</i> <em>open</em>",  # (a space where it parted words)
     "</i>open</ i>--force<code> <em>open</em>", "</ i>"),
])
def test_a_garbled_tag_copy_where_no_nesting_holds_goes_in_the_last_pass(
        source: str, output: str, garbled: str) -> None:
    """Tags shuffled, one lost, and a garbled copy of one where the tag cannot nest: the last
    pass puts every tag by position, from the output as written, the garbled copy removed
    (put right in its place, nothing nested and the line came back with tags unplaced)."""
    repair = repair_line(source, output, RULES)
    assert not repair.unplaced
    assert spans_of(repair.text) == spans_of(source) and nested(repair.text)
    assert garbled not in repair.text


@settings(max_examples=300, deadline=None)
@given(marked_up(), st.data())
def test_tags_out_of_order_are_put_again_nested(source: str, data: st.DataObject) -> None:
    """An output whose tags stand in any order (``</b> x <b>``, ``<b><i></b></i>``) and that
    lost any spans comes back with the source's spans, its tags nested; one whose tags are
    nested already keeps them where they are."""
    spans = RULES.find(source)
    marks = [s for s in spans if s.kind == "tags"]
    order = data.draw(st.permutations([s.text for s in marks]))
    moved = dict(zip([s.start for s in marks], order, strict=True))
    # the spans lost, by their place in the output (the tags moved there are of other lengths)
    dropped = data.draw(st.sets(st.sampled_from(range(len(spans))))) if spans else set()
    output, end = "", 0
    for i, s in enumerate(spans):
        output += source[end:s.start] + (" " if i in dropped else moved.get(s.start, s.text))
        end = s.end
    output += source[end:]
    output = " ".join(output.split())
    repair = repair_line(source, output, RULES)
    assert spans_of(repair.text) == spans_of(source)
    assert nested(repair.text), (output, repair.text)
    assert repair.restored <= len(spans) and repair.guessed <= repair.restored
    if nested(output):
        assert [s.text for s in RULES.find(repair.text) if s.kind == "tags"] == [
            s.text for s in RULES.find(output) if s.kind == "tags"] or dropped
    strict = repair_line(source, output, RULES, guess=False)
    assert bool(strict.unplaced) == (not nested(output) or bool(dropped))


def test_strict_names_tags_out_of_order() -> None:
    engine = fake_engine({"Click <b>%s</b> now.": "Cliquez</b> <b>%s maintenant.",
                          "Open <b>%s</b>.": "Ouvrir</b> maintenant."})
    guard = SpanGuard(RULES, "strict", "model")
    with pytest.raises(UnplacedSpan) as e:
        guarded(engine, ["Click <b>%s</b> now."], guard)
    assert str(e.value).startswith(
        "line 1: the translation put '</b>', '<b>' out of order and no place for them is known")
    with pytest.raises(UnplacedSpan) as e:
        guarded(engine, ["a", "Open <b>%s</b>."], guard)
    assert str(e.value).startswith("line 2: the translation lost '<b>', '%s' and no place")
    assert guarded(engine, ["Click <b>%s</b> now."], SpanGuard(RULES, markup="model")) == [
        "Cliquez <b>%s</b> maintenant."]


@pytest.mark.parametrize(("source", "bare"), [
    ("I <b>give up</b>.", "I give up."),
    ("Click <b> here </b> now", "Click here now"),
    ("un<b>real</b>", "unreal"),  # inside a word: nothing in its place
    ("one<br/>two", "one two"),  # a line break stands between words
    ("a</b><br/>b", "a b"),
    ("<b>Save</b>", "Save"),
    ("  <i>x</i>  ", "  x  "),  # the line's own spacing kept
    ('Here <a href="https://example.org/"><b>it</b></a> is.', "Here it is."),
    ("Save %s to <b>%s</b>", "Save %s to %s"),  # only tags go
    ("a < b", "a < b"),
])
def test_without_tags(source: str, bare: str) -> None:
    assert without_tags(source, RULES) == bare


def echo_engine(seen: list[str]) -> Callable[[list[str]], list[str]]:
    """An engine that writes its input back in capitals (spans too: ``%S`` is no ``%s``) and
    records what it was given."""
    def translate(sources: list[str]) -> list[str]:
        seen.extend(sources)
        return [s.upper() for s in sources]
    return translate


def test_markup_place_translates_without_tags_and_places_them() -> None:
    sources = ["Can <code>we</code> talk?", "I <b>give up</b>.", "Save <b>%s</b> now", "plain"]
    seen: list[str] = []
    guard = SpanGuard(RULES)  # the default: place
    got = guarded(echo_engine(seen), sources, guard)
    assert seen == ["Can we talk?", "I give up.", "Save %s now", "plain"]
    assert got == ["CAN <code>WE</code> TALK?", "I <b>GIVE UP</b>.", "SAVE <b>%s</b> NOW",
                   "PLAIN"]
    # what the counts say is the check of the other spans: %S for %s, in place
    assert (guard.counts.repaired, guard.counts.restored, guard.counts.guessed) == (1, 1, 0)
    seen.clear()
    model = guarded(echo_engine(seen), sources, SpanGuard(RULES, markup="model"))
    assert seen == sources  # the model's own <CODE> taken for the source's <code>, in place
    assert model[0] == "CAN <code>WE</code> TALK?"
    seen.clear()
    assert guarded(echo_engine(seen), sources, SpanGuard(RULES, "off")) == [
        s.upper() for s in sources] and seen == sources  # off: the engine sees the tags


def test_markup_place_in_strict_mode_refuses_only_the_other_spans() -> None:
    engine = fake_engine({"Save %s now": "Enregistrer maintenant", "I give up.": "J'abandonne."})
    guard = SpanGuard(RULES, "strict")
    assert guarded(engine, ["I <b>give up</b>."], guard) == ["<b>J'abandonne</b>."]
    with pytest.raises(UnplacedSpan) as e:
        guarded(engine, ["I <b>give up</b>.", "Save <b>%s</b> now"], guard)
    assert e.value.index == 1 and e.value.spans == ["%s"]


REWRITES: dict[str, Callable[[str], str]] = {  # what an engine may do to a sentence's words
    "as is": lambda s: s,
    "reversed": lambda s: " ".join(reversed(s.split())),
    "half dropped": lambda s: " ".join(s.split()[::2]),
    "one word": lambda s: "mot",
}


@settings(max_examples=300, deadline=None)
@given(marked_up(), st.sampled_from(["repair", "strict"]), st.sampled_from(sorted(REWRITES)))
def test_markup_place_gives_back_the_tags_nested(source: str, mode: str, rewrite: str) -> None:
    """Whatever the tags of a sentence and whatever the engine does to its words, the engine
    never sees a tag, and the output holds the source's spans, its tags nested as the
    source's (``strict`` may refuse a line whose other spans the engine lost)."""
    seen: list[str] = []

    def engine(sources: list[str]) -> list[str]:
        seen.extend(sources)
        return [REWRITES[rewrite](x) for x in sources]

    try:
        got = guarded(engine, [source], SpanGuard(RULES, mode))[0]
    except UnplacedSpan as e:  # strict: a placeholder the engine dropped
        assert mode == "strict" and not any(x.startswith("<") for x in e.spans)
        return
    assert not any(s.kind == "tags" for x in seen for s in RULES.find(x))
    assert spans_of(got) == spans_of(source) and nested(got), (source, got)
    assert argument_order(RULES.find(got)) == argument_order(RULES.find(source)), (source, got)


@settings(max_examples=300, deadline=None)
@given(marked_up())
def test_an_engine_that_gives_back_its_words_gets_back_the_source(source: str) -> None:
    """Tags taken out and placed again by position are where the source had them, joined to
    the same words and spans (``word</b> <i>next``, ``%s</b>``), when the engine changes
    nothing: the placement's spacing rule, round trip."""
    assert guarded(lambda sources: sources, [source], SpanGuard(RULES, "repair"))[0] == source


def test_a_guess_that_would_make_another_span_is_spaced_apart() -> None:
    """The result is checked: ``$A`` joined to the next word as in the source would read
    ``$Ax``, another variable; it is put apart from it instead."""
    repair = repair_line("$A-b", "x", RULES)
    assert repair.text == "$A x" and repair.guessed == 1
    assert repair_line("%s-b", "x", RULES).text == "%s x"  # the source joins it to a hyphen
    assert repair_line("%sb", "x", RULES).text == "%sx"  # to a letter: joined, as there


@pytest.mark.parametrize(("source", "output", "expected"), [
    # joined in the source to punctuation, not to the output's word beside it
    ('cannot alter type "%s" because column "%s.%s" uses it',
     "ne peut pas modifier le type « %s » parce que la colonne « %s ».",
     "ne peut pas modifier le type « %s » parce %s que la colonne « %s »."),
    ("a format specification for argument {%u} doesn't exist in '%s'",
     "la spécification de format pour l'argument {} n'existe pas dans '%s'",
     "la spécification de format pour l'argument %u n'existe pas dans '%s'"),
    ("%s not allowed: %s:%d", "%s n'est pas autorisé : %d", "%s n'est pas autorisé : %s %d"),
    ("pack %s-%s", "paquet « %s »", "paquet « %s %s »"),
    # joined as the source joins them: the same character, letters, unspaced scripts
    ("Open %s.", "Ouvrir.", "Ouvrir %s."),
    ("file%d done", "fichier fini", "fichier%d fini"),
    ('cannot open "%s"', "開けません", "開けません%s"),
])
def test_a_span_put_back_joins_only_what_the_source_joins_it_to(source: str, output: str,
                                                                 expected: str) -> None:
    """A span placed by position is glued to the output's character beside it only where the
    source glues it to the same character, or a letter or digit to a letter or digit: a
    placeholder glued to a word (``%sque``) reads as part of it."""
    assert repair_line(source, output, RULES).text == expected


def glued_sides(text: str, span: Span) -> tuple[bool, bool]:
    """Whether ``span`` of ``text`` touches a letter or digit before it, after it."""
    return (text[span.start - 1:span.start].isalnum(), text[span.end:span.end + 1].isalnum())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["open", "file", "now", "%s", "%d", "{name}", "--force", '"', "'",
                                 ":", ".", "(", ")", "-", " ", " ", " "]), min_size=1,
                max_size=14).map("".join),
       st.data())
def test_a_placeholder_put_back_touches_a_word_only_where_the_source_has_it_touch_one(
        source: str, data: st.DataObject) -> None:
    spans = [s for s in RULES.find(source) if s.kind != "tags"]
    dropped = data.draw(st.lists(st.booleans(), min_size=len(spans), max_size=len(spans)))
    output = source
    for span, drop in sorted(zip(spans, dropped, strict=True), key=lambda p: -p[0].start):
        if drop:
            output = output[:span.start] + " " + output[span.end:]
    inside = [False] * len(output)
    for span in RULES.find(output):
        inside[span.start:span.end] = [True] * (span.end - span.start)
    output = " ".join("".join(c if inside[i] else c.upper() for i, c in enumerate(output))
                      .split())  # other words (no span touched), single spaces
    repair = repair_line(source, output, RULES)
    touching: dict[str, tuple[bool, bool]] = {}  # a copy of the span touches one, either side
    found = RULES.find(source)
    beside_a_span = {s.text for s in found  # (put back joined to that span, as the source has
                     if any(t.end == s.start or s.end == t.start for t in found)}  # it)
    for span in found:
        a, b = touching.get(span.text, (False, False))
        c, d = glued_sides(source, span)
        touching[span.text] = (a or c, b or d)
    for span in RULES.find(repair.text):
        before, after = glued_sides(repair.text, span)
        if (span.text in touching and span.text not in output  # put back, the only copy
                and span.text not in beside_a_span):
            assert (before <= touching[span.text][0] and after <= touching[span.text][1]), (
                source, output, repair.text)


def fake_engine(outputs: dict[str, str]) -> Callable[[list[str]], list[str]]:
    """An engine that writes ``outputs[source]`` (``"x y"`` for any other source)."""
    def translate(sources: list[str]) -> list[str]:
        return [outputs.get(s, "x y") for s in sources]
    return translate


def test_guarded_modes_with_a_fake_engine() -> None:
    engine = fake_engine({"a %s b": "x ⁇ y", "c {n} d": "z w", "e": "f %d"})
    sources = ["e", "a %s b", "c {n} d", ""]
    guard = SpanGuard(RULES)
    assert guarded(engine, sources, guard) == ["f", "x %s y", "z {n} w", "x y"]
    counts = guard.counts
    assert (counts.sentences, counts.with_spans, counts.repaired, counts.restored, counts.guessed,
            counts.removed) == (4, 2, 3, 2, 1, 1)
    assert "spans repaired in 3 of 4 sentences" in counts.summary()
    assert guarded(engine, sources, SpanGuard(RULES, "off")) == ["f %d", "x ⁇ y", "z w", "x y"]
    assert guarded(engine, sources, None) == ["f %d", "x ⁇ y", "z w", "x y"]
    with pytest.raises(UnplacedSpan) as e:
        guarded(engine, sources, SpanGuard(RULES, "strict"))
    assert e.value.index == 2 and e.value.spans == ["{n}"]
    assert str(e.value).startswith("line 3: the translation lost '{n}'")
    assert guarded(engine, sources[:2], SpanGuard(RULES, "strict")) == ["f", "x %s y"]
    with pytest.raises(ValueError, match="mode: expected one of repair, strict, off"):
        SpanGuard(RULES, "fix")


class FakeTranslator(StreamTranslator):
    """An engine that writes fixed outputs: what the guard does is then known exactly."""

    def __init__(self, outputs: dict[str, str], mode: str, markup: str = "model") -> None:
        self.outputs = outputs
        self.cfg = DecodeConfig()
        self.lowercase, self.normalization = False, "natural"
        self.source_lang = self.target_lang = None
        self.spans = SpanGuard(RULES, mode, markup)

    def translate_as_written(self, texts: Sequence[str],
                             on_truncate: TruncateHook | None = None) -> list[str]:
        return [self.outputs.get(t, "x y") for t in texts]


def test_translate_lines_warns_once_and_strict_names_the_line(tmp_path: Path) -> None:
    outputs = {"a %s b": "x y", "c <b>d</b>": "⁇ b ⁇ z ⁇ / b ⁇"}
    warnings: list[str] = []
    lines = ["plain", "a %s b", "c <b>d</b>"] * 3
    got = translate_lines(FakeTranslator(outputs, "repair"), lines, warn=warnings.append)
    assert got is not None and all(spans_of(o) == spans_of(s) for s, o in zip(lines, got,
                                                                              strict=True))
    assert warnings == ["warning: argument: spans repaired in 6 of 9 sentences: 9 restored, 3 of "
                        "them placed by position, 0 invented removed (spans strict refuses a "
                        "line that needs a guess; spans off keeps the model's text)"]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    with pytest.raises(DataError) as e:
        translate_lines(FakeTranslator(outputs, "strict"), input=source, output=out)
    assert str(e.value) == (f"input {source}: line 2: the translation lost '%s' and no place "
                            "for it is known (spans strict; spans repair guesses one from "
                            "its position in the source)")
    assert not out.exists()  # never a file with a broken line


def test_a_line_of_only_spans_is_kept_as_written_but_not_with_spans_off() -> None:
    """``%s`` alone, given to a model, comes back inside a sentence it invented."""
    lines = ["%s", "%s: %s", "--help", "{name}", "-f, --force  do it", "a %s b"]
    outputs = {s: f"Invented {s}" for s in lines} | {"do it": "fais-le", "a %s b": "x %s y"}
    for mode in ("repair", "strict"):
        assert FakeTranslator(outputs, mode).translate_lines(lines) == [
            "%s", "%s: %s", "--help", "{name}", "-f, --force  fais-le", "x %s y"]
    assert FakeTranslator(outputs, "off").translate_lines(lines)[:4] == [
        "Invented %s", "Invented %s: %s", "Invented --help", "Invented {name}"]


ONLY_SPANS_PIECES = st.sampled_from(["%s", "%d", "%1$s", "{name}", "{0}", "--force", "-f",
                                     "$HOME", "<b>", "</b>", "<br/>", "https://example.org/x",
                                     ":", "(", ")", "...", "42", " ", "  ", ", "])


def letter_outside_spans(text: str) -> bool:
    """Whether ``text`` has a letter once its spans are blanked out (the rule, written again)."""
    chars = list(text)
    for span in RULES.find(text):
        chars[span.start:span.end] = " " * (span.end - span.start)
    return any(c.isalpha() for c in chars)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.lists(ONLY_SPANS_PIECES, max_size=6).map("".join),
                          st.builds(lambda a, w, b: a + w + b, st.lists(
                              ONLY_SPANS_PIECES, max_size=3).map("".join), PLAIN_WORDS,
                              st.lists(ONLY_SPANS_PIECES, max_size=3).map("".join))),
                max_size=6), st.sampled_from(["repair", "strict"]), st.sampled_from(
                    ["model", "place"]))
def test_the_engine_gets_exactly_the_sources_with_a_letter_outside_their_spans(
        sources: list[str], mode: str, markup: str) -> None:
    seen: list[str] = []

    def engine(batch: list[str]) -> list[str]:
        seen.extend(batch)
        return list(batch)

    out = guarded(engine, sources, SpanGuard(RULES, mode, markup))
    wanted = [s for s in sources if letter_outside_spans(s) or not RULES.find(s)]
    assert seen == ([without_tags(s, RULES) for s in wanted] if markup == "place" else wanted)
    assert [o for s, o in zip(sources, out, strict=True)
            if not letter_outside_spans(s) and RULES.find(s)] == [
        s for s in sources if not letter_outside_spans(s) and RULES.find(s)]


def test_a_strict_line_in_a_later_chunk_is_named_by_its_line_number() -> None:
    translator = FakeTranslator({"a %s b": "x y"}, "strict")
    with pytest.raises(UnplacedSpan) as e:
        translator.translate_stream(["ok"] * 5 + ["a %s b"], print, chunk_lines=2)
    assert e.value.index == 5


# --- end to end ----------------------------------------------------------------------------------

SOURCES = ["a b %s c", "d <b>e</b> f.", "g {name} h --force", "a b c", "%d e $HOME",
           "see https://example.org/x and bugs@example.org"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "toy")


def test_nmt_translate_gives_every_line_its_sources_spans(run_dir: Path) -> None:
    """A tiny word-level model turns every span into <unk> or drops it; the output has them."""
    code, out, err = invoke("translate", "--run", str(run_dir), "--device", "cpu", *SOURCES)
    assert code == 0
    outputs = out.split("\n")[:-1]
    assert len(outputs) == len(SOURCES)
    for source, output in zip(SOURCES, outputs, strict=True):
        assert spans_of(output) == spans_of(source), (source, output)
    assert err.count("warning: argument: spans repaired in ") == 1
    raw = open_translator(run_dir, device="cpu", spans="off").translate(SOURCES)
    assert any(spans_of(o) != spans_of(s) for s, o in zip(SOURCES, raw, strict=True))
    code, out, err = invoke("translate", "--run", str(run_dir), "--spans", "off", *SOURCES)
    assert code == 0 and out.split("\n")[:-1] == raw and "spans" not in err


def test_nmt_translate_strict_is_one_error_line_naming_the_line(
        run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nmt.translation.translator import Translator

    monkeypatch.setattr(Translator, "translate_as_written",
                        lambda self, texts, on_truncate=None: ["x y" for _ in texts])
    code, out, err = invoke("translate", "--run", str(run_dir), "--spans", "strict",
                            "a b c", "a b %s c")
    assert code != 0
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert err.startswith("error: argument: line 2: the translation lost '%s'")
    code, _, err = invoke("translate", "--run", str(run_dir), "--spans", "fix", "a")
    assert code != 0 and "spans: expected one of repair, strict, off" in err
    assert err.strip().count("\n") == 0
    code, _, err = invoke("translate", "--run", str(run_dir), "--markup", "html", "a")
    assert code != 0 and "markup: expected one of place, model" in err
    assert err.strip().count("\n") == 0


def test_a_glossary_the_run_names_is_read_when_it_translates(tmp_path: Path) -> None:
    from nmt.config import load_config
    from nmt.files import atomic_write_text

    run = make_run(tmp_path / "toy")
    terms = tmp_path / "terms.txt"
    terms.write_text("Firefox\n", encoding="utf-8")
    cfg = (run / "config.toml").read_text(encoding="utf-8").replace(
        'glossary = ""', f"glossary = {json.dumps(str(terms))}", 1)
    atomic_write_text(run / "config.toml", cfg)
    assert load_config(run / "config.toml").data.glossary == str(terms)
    code, out, _ = invoke("translate", "--run", str(run), "a Firefox b")
    assert code == 0 and "Firefox" in out
    terms.write_bytes(b"\0\1")
    code, _, err = invoke("translate", "--run", str(run), "a Firefox b")
    assert code != 0 and err.strip().count("\n") == 0
    assert f"config.toml: data.glossary {terms}: binary" in err


def test_span_integrity_counts_tags_out_of_order_as_not_exact() -> None:
    sources = ["Click <b>%s</b> now.", "Open <b>%s", "<i>a</i> <b>b</b>", "Plain."]
    hyps = ["Cliquez</b> <b>%s maintenant.", "Ouvrir <b>%s", "<b>b</b> <i>a</i>", "Simple."]
    got = span_integrity(sources, hyps, [[h] for h in hyps], RULES, "off")
    assert (got.lines, got.spans, got.kept, got.exact, got.invented) == (3, 9, 9, 2, 0)
    assert "9/9 kept (100.0%), 2/3 lines exact" in got.summary()


def test_span_integrity_counts_directives_out_of_order_as_not_exact() -> None:
    sources = ["%s is %d", "%1$s is %2$d", "%s and %s"]
    hyps = ["%d est %s", "%2$d est %1$s", "%s et %s"]
    got = span_integrity(sources, hyps, [[h] for h in hyps], RULES, "off")
    assert (got.lines, got.spans, got.kept, got.exact) == (3, 6, 6, 2)


@pytest.mark.parametrize(("source", "output", "expected"), [
    ("%s is %d", "%d est %s", "%s est %d"),
    ("process %d waiting for %s after %ld.%03d ms", "processus %d attend %s %03d après %ld.",
     "processus %d attend %s %ld après %03d."),
    ("%1$s is %2$d", "%2$d est %1$s", "%2$d est %1$s"),  # numbered: any order
    ("%s of %1$s", "%1$s de %s", "%1$s de %s"),
    ("%s: %d%%", "%d%% : %s", "%s%% : %d"),  # %% takes no argument
    ("%s is %d", "%d est", "%d est"),  # not the same directives: the repair's work, not this
])
def test_directives_come_back_in_the_sources_order(source: str, output: str,
                                                   expected: str) -> None:
    assert in_argument_order(source, output, RULES) == expected


@pytest.mark.parametrize(("source", "output", "expected"), [
    ("%3u %3u", "%33 %3u %3u", "%3u %3u"),
    ("Files scanned: %lld", "Fichiers lus : %ll %lld", "Fichiers lus : %lld"),
    ("%13lu writes", "%13lu %133 écrit", "%13lu écrit"),
    ("%d%% of %s", "%d%% de %s %", "%d%% de %s"),  # a % alone: a garbled %% or directive
    ("50% of %s", "50 % de %s", "50 % de %s"),  # as many as the source has
    ("%s at 3%-5%", "%s à 3%-5%", "%s à 3%-5%"),  # as many as the source has
    ("no directive, 5%", "pas de directive %33", "pas de directive %33"),  # no format string
    ("see %s", "voir https://a.org/a%20b %s", "voir https://a.org/a%20b %s"),  # in a span
])
def test_what_is_left_of_a_garbled_directive_is_removed(source: str, output: str,
                                                        expected: str) -> None:
    assert without_remnants(source, output, RULES)[0] == expected


FORMAT_STRINGS = ["Cannot open %s: %s", "%d of %d files in %s", "%3u %3u", "%-10s|%5.2f|",
                  "Files scanned: %lld", "%s is %d%% done", "%2$s then %1$s, %%"]
MESSES = ["", "%33 ", "%ll", "%.*", "%", "50 % ", "%s", "%d ", "% s", "⁇"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FORMAT_STRINGS), st.sampled_from(sorted(REWRITES)),
       st.lists(st.tuples(st.integers(0, 40), st.sampled_from(MESSES)), max_size=3))
def test_a_repaired_format_string_formats_as_its_source(source: str, rewrite: str,
                                                        messes: list[tuple[int, str]]) -> None:
    """Whatever an engine makes of a format string (words moved or dropped, directives lost,
    garbled, added, swapped, the start of one left), the repaired line passes the check a
    PO entry's translation must pass (nmt.localisation.placeholders): the same directives,
    those that take the next argument in the source's order, no stray ``%`` more; or it says
    that not every span could be placed."""
    def engine(sources: list[str]) -> list[str]:
        out = REWRITES[rewrite](sources[0])
        for at, mess in messes:
            at = min(at, len(out))
            out = out[:at] + mess + out[at:]
        return [out]

    guard = SpanGuard(RULES, "repair")
    got = guarded(engine, [source], guard)[0]
    assert printf_kept(source, got) or guard.counts.unplaced, (source, got)  # (or it says so)


def test_strict_and_repair_put_directives_in_order_and_count_it() -> None:
    for mode in ("repair", "strict"):
        guard = SpanGuard(RULES, mode)
        got = guarded(lambda sources: ["%d fichiers dans %s" for _ in sources],
                      ["%s holds %d files"], guard)
        assert got == ["%s fichiers dans %d"]
        assert guard.counts.reordered == 1 and guard.counts.repaired == 1
        assert "1 put in the source's order" in guard.counts.summary()
    off = guarded(lambda sources: ["%d fichiers dans %s"], ["%s holds %d files"],
                  SpanGuard(RULES, "off"))
    assert off == ["%d fichiers dans %s"]


def test_bleu_prints_and_records_span_integrity(run_dir: Path, tmp_path: Path) -> None:
    src, ref = tmp_path / "t.en", tmp_path / "r.fr"
    src.write_text("a b %s c\nd e\nf {name}\n", encoding="utf-8")
    ref.write_text("c %s b a\ne d\n{name} f\n", encoding="utf-8")
    code, out, _ = invoke("bleu", "--run", str(run_dir), "--src", str(src), "--ref", str(ref))
    assert code == 0
    assert ("spans           2/2 kept (100.0%), 2/2 lines exact, 0 with an invented span "
            "(--spans repair, --markup place)") in out
    code, out, _ = invoke("bleu", "--run", str(run_dir), "--src", str(src), "--ref", str(ref),
                          "--spans", "off", "--json")
    report = json.loads(out)
    spans = report["spans"]
    assert spans["mode"] == "off" and spans["lines"] == 2 and spans["spans"] == 2
    hyps = Path(report["hypotheses"]).read_text(encoding="utf-8").split("\n")[:-1]
    sources = ["a b %s c", "d e", "f {name}"]
    kept = sum(sum((spans_of(h) & spans_of(s)).values())
               for h, s in zip(hyps, sources, strict=True))
    assert spans["kept"] == kept
    assert json.loads(Path(report["scores"]).read_text(encoding="utf-8"))["spans"] == spans
    code, out, _ = invoke("bleu", "--run", str(run_dir), "--src", str(src), "--ref", str(ref),
                          "--markup", "model")
    assert code == 0 and "2/2 kept (100.0%), 2/2 lines exact" in out
    assert "(--spans repair, --markup model)" in out
    src.write_text("a b c\nd e\n", encoding="utf-8")
    ref.write_text("c b a\ne d\n", encoding="utf-8")
    code, out, _ = invoke("bleu", "--run", str(run_dir), "--src", str(src), "--ref", str(ref))
    assert code == 0 and "spans           no spans in this test set" in out


def test_bleu_keeps_each_span_modes_translations_apart(run_dir: Path, tmp_path: Path) -> None:
    src, ref = tmp_path / "t.en", tmp_path / "r.fr"
    src.write_text("a <b>b</b> %s c\n", encoding="utf-8")
    ref.write_text("c %s <b>b</b> a\n", encoding="utf-8")
    written = {}
    for extra in ((), ("--spans", "off"), ("--markup", "model"),
                  ("--spans", "off", "--markup", "model")):
        code, out, _ = invoke("bleu", "--run", str(run_dir), "--src", str(src), "--ref",
                              str(ref), "--json", *extra)
        assert code == 0
        report = json.loads(out)
        written[extra] = (Path(report["hypotheses"]).name, Path(report["scores"]).name)
    assert [h for h, _ in written.values()] == [
        "hyp.file-t.en.txt", "hyp.file-t.en.spans-off.txt", "hyp.file-t.en.markup-model.txt",
        "hyp.file-t.en.spans-off.txt"]  # off: the model sees the tags, whatever --markup says
    assert written[()][1] == "scores.file-t.en.json"
    assert json.loads((run_dir / "scores.file-t.en.json").read_text())["spans"]["mode"] == (
        "repair")
    assert _spans_tag(SpanGuard(RULES, "strict", "model")) == ".spans-strict.markup-model"


# --- CTranslate2 ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory, sentencepiece_run_dir: Path) -> Path:
    pytest.importorskip("ctranslate2")
    from nmt.export.ct2_convert import export_run
    from nmt.runs.loading import load_run

    root = tmp_path_factory.mktemp("sp")
    return export_run(load_run(sentencepiece_run_dir, "best"), root / "export")


CT2_SOURCES = ["He likes %s.", "The <b>big</b> dog eats.", "Tell {name} to run --fast.",
               "We want the small cake.", "Send it to bugs@example.org or ~/inbox/x."]


def test_ctranslate2_gives_the_same_guarantee(export: Path) -> None:
    """The SentencePiece model has never seen %, { or <: it writes ⁇ or drops them; the
    CTranslate2 engine's outputs still hold exactly their sources' spans."""
    from nmt.export.ct2_translate import CT2Translator

    meta = json.loads((export / "nmt-export.json").read_text(encoding="utf-8"))
    assert meta["data"]["spans"] == ",".join(parse("default")) and meta["data"]["terms"] == []
    translator = CT2Translator.from_export(export)
    outputs = translator.translate(CT2_SOURCES)
    for source, output in zip(CT2_SOURCES, outputs, strict=True):
        assert spans_of(output) == spans_of(source), (source, output)
    raw = CT2Translator.from_export(export, spans="off").translate(CT2_SOURCES)
    assert raw != outputs
    model = CT2Translator.from_export(export, markup="model").translate(CT2_SOURCES)
    for source, output in zip(CT2_SOURCES, model, strict=True):
        assert spans_of(output) == spans_of(source), (source, output)
    code, out, err = invoke("translate", "--model", str(export), *CT2_SOURCES)
    assert code == 0 and out.split("\n")[:-1] == outputs
    assert err.count("spans repaired") == 1


def test_repair_mode_never_stops_a_file_on_a_line_it_cannot_place(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A line whose spans not even a guess could place: ``strict`` refuses it naming it,
    ``repair`` keeps it as far as it got, counts it and says so, and goes on with the rest."""
    import nmt.translation.structure as structure

    real = structure.repair_line

    def stuck(source: str, output: str, rules: Any, guess: bool = True) -> Any:
        done = real(source, output, rules, guess=guess)
        return dataclasses.replace(done, unplaced=("%s",)) if source == "b %s" else done

    monkeypatch.setattr(structure, "repair_line", stuck)
    engine = dict([("a %s", "x %s"), ("b %s", "y"), ("c", "z")]).__getitem__
    sources = ["a %s", "b %s", "c"]
    with pytest.raises(UnplacedSpan) as caught:
        guarded(lambda xs: [engine(x) for x in xs], sources, SpanGuard(RULES, "strict"))
    assert caught.value.index == 1
    guard = SpanGuard(RULES, "repair")
    got = guarded(lambda xs: [engine(x) for x in xs], sources, guard)
    assert got[0] == "x %s" and got[2] == "z" and guard.counts.unplaced == 1
    assert "in 1 sentence not every span could be placed" in guard.counts.summary()
