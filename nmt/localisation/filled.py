"""What the formats share: how a string's lines reach the translator, what filling a file
reports, and the form of the checks a format applies."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice

from nmt.data.languages import same_language
from nmt.data.spans import SpanRules, parse
from nmt.localisation.placeholders import Check

_SPANS = SpanRules(parse("default"))

# lines as written -> their translations, in order, each laid out as its source line: its
# leading and trailing whitespace kept, a blank line given back unchanged. That rule is the
# translation's, in one place (nmt/translation/layout.py); nmt.api.translate_file gives the
# translator's translate_stream, which follows it.
Translate = Callable[[list[str]], list[str]]


def translate_texts(translate: Translate, texts: Sequence[str]) -> list[str]:
    """Translations of ``texts``: each is cut into its lines, every line of every text goes to
    ``translate`` in one call, and each text's translated lines are joined again, so its line
    breaks come back where they were (but for those inside a tag or an ICU block written over
    lines: :func:`_unbroken`) (``msgfmt -c`` wants a translation to begin and end with
    ``\\n`` as its source does) and each line keeps its ends (:data:`Translate`)."""
    lines = [_unbroken(text).split("\n") for text in texts]
    every = [line for text in lines for line in text]
    translated = translate(every) if every else []
    if len(translated) != len(every):
        raise ValueError(f"{len(translated)} translations for {len(every)} lines")
    out = iter(translated)
    return ["\n".join(islice(out, len(text))) for text in lines]


def _unbroken(text: str) -> str:
    """``text`` with each run of whitespace that holds a line break inside a protected span
    (the default kinds: ``<a\\nhref="...">``, an ICU ``{n, plural, ...}`` block written over
    lines) one space: cut at the break, neither half would be the span, and the translation
    would lose it. HTML and ICU read the space as they read the break."""
    if "\n" not in text:
        return text
    out, at = [], 0
    for span in _SPANS.find(text):
        if "\n" in span.text:
            out += [text[at:span.start], re.sub(r"\s*\n\s*", " ", span.text)]
            at = span.end
    return "".join(out) + text[at:]


def other_language(name: str, said: str, tag: str, model: str | None) -> list[str]:
    """The warning, if any, that the language a file names (``tag``, read from what ``said``
    names) is another than the model's target language ``model``: a form of either is not
    another (``de_AT`` for a model into ``de``, ``de`` for one into ``de-AT``, ``sr@latin``
    for ``sr``: :func:`~nmt.data.languages.same_language`). The file is filled all the same:
    the translator may mean it."""
    if not tag or not model or same_language(tag, model) or same_language(model, tag):
        return []
    return [f"warning: {name}: {said} is {tag}, the model translates into {model}"]


@dataclass
class Filled:
    """What filling a file did: how many strings nmt translated and left untranslated (that
    it would have filled), and a line for each of those and every warning."""

    format: str
    filled: int = 0
    left: int = 0
    messages: list[str] = field(default_factory=list)


# (reason a translation is refused, check); the format's own checks come first
NamedCheck = tuple[str, Check]
