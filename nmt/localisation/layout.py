"""The one rule for the text of a localisation entry: its lines are translated one by one and
each keeps its leading and trailing whitespace, so a string's line breaks (``msgfmt -c`` wants a
translation to begin and end with ``\\n`` as its source does) and indentation come back as
written. Lines that are blank are not translated."""

from __future__ import annotations

from collections.abc import Callable, Sequence

Translate = Callable[[list[str]], list[str]]  # sentences -> translations, in order


def _parts(line: str) -> tuple[str, str, str]:
    """The whitespace ``line`` starts with, what it holds between, and the whitespace it ends
    with."""
    core = line.strip()
    start = len(line) - len(line.lstrip())
    return line[:start], core, line[start + len(core):]


def translate_texts(translate: Translate, texts: Sequence[str]) -> list[str]:
    """Translations of ``texts`` (each may hold several lines), all lines in one call to
    ``translate``."""
    pieces = [[_parts(line) for line in text.split("\n")] for text in texts]
    cores = [core for lines in pieces for _, core, _ in lines if core]
    translated = iter(translate(cores) if cores else [])
    out = []
    for lines in pieces:
        out.append("\n".join(before + next(translated) + after if core else before + after
                              for before, core, after in lines))
    return out
