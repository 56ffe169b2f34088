"""The one rule for the text of a localisation entry: its lines are translated one by one and
each keeps its leading and trailing whitespace, so a string's line breaks (``msgfmt -c`` wants a
translation to begin and end with ``\\n`` as its source does) and indentation come back as
written. Lines that are blank are not translated."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

Translate = Callable[[list[str]], list[str]]  # sentences -> translations, in order

_CORE = re.compile(r"^(\s*)(.*?)(\s*)$", re.DOTALL)


def translate_texts(translate: Translate, texts: Sequence[str]) -> list[str]:
    """Translations of ``texts`` (each may hold several lines), all lines in one call to
    ``translate``."""
    pieces = [[_CORE.fullmatch(line) for line in text.split("\n")] for text in texts]
    cores = [m[2] for lines in pieces for m in lines if m is not None and m[2]]
    translated = iter(translate(cores) if cores else [])
    out = []
    for lines in pieces:
        out.append("\n".join(m[1] + next(translated) + m[3] if m[2] else m[0]
                             for m in lines if m is not None))
    return out
