"""Input typed in capitals: translated as the sentence it is, and given back in capitals.

A model trained on text as written reads ``THE CAT IS BLACK.`` as pieces it has rarely seen:
SentencePiece learns its vocabulary from the corpus, where whole sentences in capitals do not
occur (none of fra-eng's 167,130 pairs on either side), so such a sentence falls apart into
single letters, and case augmentation (``data.case_forms``) adds too few capital copies to teach
a small model to read them (the demo model garbles them: docs/BENCHMARKS.md). A translator of a
natural-text run therefore hands the model a sentence typed in capitals in sentence case
(``The cat is black.``) and gives its translation back in capitals (``LE CHAT EST NOIR.``), in
each language's own capitals (:func:`nmt.data.normalize.upper`).

A sentence is typed in capitals when it has two words or more and every letter is a capital:
``OK.`` and ``NATO`` are words as they are written. Title case (``The Cat Is Black.``) is left to
the model: the same test would take names for it (``Connais-tu Tom Jackson ?``, ``Happy New
Year!``), and lower-casing a name changes the sentence.
"""

from __future__ import annotations

from nmt.data.normalize import lower, upper


def _cased(text: str) -> list[str]:
    """The letters of ``text`` that have a capital and a small form."""
    return [c for c in text if c.lower() != c.upper()]


def in_capitals(text: str) -> bool:
    """Whether ``text`` is a sentence typed in capitals (see the module)."""
    words = [w for w in text.split() if _cased(w)]
    return len(words) >= 2 and all(c.isupper() for c in _cased(text))


def sentence_case(text: str, lang: str | None) -> str:
    """``text`` in small letters but its first letter (``THE CAT`` -> ``The cat``)."""
    text = lower(text, lang)
    for i, c in enumerate(text):
        if c.lower() != c.upper():
            return text[:i] + upper(c, lang) + text[i + 1:]
    return text
