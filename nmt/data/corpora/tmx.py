"""A translation memory in TMX, as CAT tools, localisation platforms and OPUS export it:
``data.corpus = "memory.tmx"``, or compressed as OPUS publishes them (``en-fr.tmx.gz``; ``.bz2``
and ``.xz`` too: :mod:`nmt.data.compressed`).

Each ``<tu>`` gives one pair: the ``<tuv>`` in ``data.source``'s language and the one in
``data.target``'s, matched by language tag (``xml:lang``, or TMX 1.1's ``lang``): ``en``
takes ``en-US`` and ``EN-GB``, a code with a region (``pt-BR``) only itself; the first where
several match. A unit without both is skipped, said once at the end with a count; a file none
of whose units holds both is an error naming the languages it holds.

A segment's text is what the application shows: its characters, and for the inline codes
``<bpt>``, ``<ept>``, ``<it>``, ``<ph>`` and ``<ut>`` the native code they hold
(``<bpt i="1">&lt;b&gt;</bpt>`` reads ``<b>``, ``<ph x="1">{0}</ph>`` reads ``{0}``), so
that a model learns markup and placeholders where the application has them; ``<hi>`` and
``<sub>`` give their text. A line break inside a segment is read as a space (a pair is one
line of the cache).

Bounds and safety are those of every XML form (:mod:`.xml_units`): read in pieces, a
segment over 1 MiB read as empty, no entity expanded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from nmt.data.corpora.base import Opener, read_as_empty
from nmt.data.corpora.xml_units import UnitReader, XmlForm, read_units
from nmt.data.languages import same_language
from nmt.errors import DataError
from nmt.files import MAX_LINE_BYTES

_LANGUAGES_SAID = 8  # languages named in the error of a file that lacks a side


class _Reader(UnitReader):
    """The units read so far, each as ``{language tag: text}``."""

    def __init__(self, where: str) -> None:
        super().__init__(where, "a translation memory (TMX)")
        self.root: str | None = None
        self.unit: dict[str, str] | None = None
        self.language = ""

    def start(self, name: str, attributes: dict[str, str]) -> None:
        if self.root is None:
            self.root = name
            if name != "tmx":
                raise DataError(f"{self.where}: not a TMX document (its root is <{name}>)")
        if name == "tu":
            self.unit = {}
        elif name == "tuv":
            self.language = attributes.get("xml:lang") or attributes.get("lang") or ""
        elif name == "seg" and self.unit is not None:
            self.begin_text()

    def end(self, name: str) -> None:
        if name == "seg" and self.reading_text() and self.unit is not None:
            self.unit.setdefault(self.language, self.end_text())
        elif name == "tu" and self.unit is not None:
            self.units.append(self.unit)
            self.unit = None


def read_pairs(open_: Opener, where: str, source: str, target: str,
               log: Callable[[str], None] = print) -> Iterator[tuple[str, str]]:
    """The (source, target) pairs of a TMX file, in file order (the module's rules)."""
    units = paired = 0
    languages: dict[str, None] = {}  # those seen, in order, a few
    reader = _Reader(where)
    for unit in read_units(open_, reader):
        units += 1
        src = next((text for tag, text in unit.items() if same_language(tag, source)), None)
        tgt = next((text for tag, text in unit.items() if same_language(tag, target)), None)
        if src is not None and tgt is not None:
            paired += 1
            yield src, tgt
        elif len(languages) < _LANGUAGES_SAID:
            languages.update(dict.fromkeys(unit))
    if units and not paired:
        held = ", ".join(tag or "(none)" for tag in languages)
        raise DataError(f"{where}: no translation unit holds both {source!r} and {target!r} "
                        f"(its languages: {held})")
    if paired < units:
        log(f"warning: {where}: {units - paired:,} of {units:,} translation units lack "
            f"{source!r} or {target!r}: skipped")
    if reader.long[0]:
        log(read_as_empty(where, "segment", reader.long[0], reader.long[1], MAX_LINE_BYTES))


FORM = XmlForm("tmx", (".tmx",), read_pairs)
