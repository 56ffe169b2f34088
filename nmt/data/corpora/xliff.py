"""Bilingual XLIFF files, 1.2 and 2.x, as CAT tools and localisation platforms exchange them
(Trados' ``.sdlxliff``, memoQ, Crowdin, Xcode's ``.xliff``, Okapi): ``data.corpus =
"project.xlf"`` (``.xliff``, ``.sdlxliff``; compressed too, :mod:`nmt.data.compressed`).

Each translated segment gives one pair. XLIFF 1.2: a ``<trans-unit>``'s ``<source>`` and
``<target>`` (those of its ``<alt-trans>`` proposals, its ``<seg-source>`` and its notes are not
read), in the languages of its ``<file>`` (``source-language``, ``target-language``; a file
may hold several ``<file>``s). XLIFF 2: each ``<segment>``'s ``<source>`` and ``<target>``, in
the document's ``srcLang`` and ``trgLang``. A file of the other direction gives its pairs the
other way round; a ``<file>`` of another pair is skipped.

What is not a translation a model should learn from is skipped, counted in one warning: a unit
(1.2) or segment (2) without a target or with an empty one, one marked ``translate="no"``
(itself or a group or file around it), a 1.2 target in state ``new`` or ``needs-translation``
or qualified as machine translation (``state-qualifier="mt-suggestion"`` or
``"leveraged-mt"``, what nmt marks its own output), a 2 segment in state ``initial`` (said so:
one that says no state and has a target is read as translated, as the files of Angular and
other tools come) or marked by nmt (``subState="nmt:mt"``).

A segment's text is what the application shows, as in :mod:`.tmx`: its characters, and the
native code that ``<ph>``, ``<bpt>``, ``<ept>`` and ``<it>`` hold (``<ph id="1">%s</ph>`` reads
``%s``); ``<g>``, ``<mrk>``, ``<pc>`` give their text; the empty codes (``<x/>``, ``<bx/>``,
``<ex/>``, XLIFF 2's ``<ph/>``, ``<sc/>``, ``<ec/>``) stand for code the file does not hold and
give nothing; XLIFF 2's ``<cp hex="..."/>`` gives its character. Bounds and safety are those of
every XML form (:mod:`.xml_units`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from nmt.data.corpora.base import Opener, read_as_empty
from nmt.data.corpora.xml_units import UnitReader, XmlForm, read_units
from nmt.data.languages import same_language
from nmt.errors import DataError
from nmt.files import MAX_LINE_BYTES

SUFFIXES = (".xlf", ".xliff", ".sdlxliff")
UNTRANSLATED = {"new", "needs-translation", "initial"}  # 1.2's states, and 2's
MACHINE = {"mt-suggestion", "leveraged-mt", "nmt:mt"}  # 1.2's qualifiers, and nmt's 2 subState
# by version: the element of one pair, and the element that says its languages
_ELEMENTS = {"1": ("trans-unit", "file"), "2": ("segment", "xliff")}


@dataclass
class Segment:
    """One unit (1.2) or segment (2) as read: its texts, languages, and whether it is a
    translation to learn from."""

    source: str | None = None
    target: str | None = None
    languages: tuple[str, str] = ("", "")
    usable: bool = True
    cut: bool = False  # a text longer than the bound, read as empty (its pair is dropped later)


def _local(name: str) -> str:
    return name.rpartition(":")[2]  # a prefixed namespace (xliff:trans-unit) read as unprefixed


class _Reader(UnitReader):
    def __init__(self, where: str) -> None:
        super().__init__(where, "an XLIFF file")
        self.version: str | None = None  # "1" or "2", from the root
        self.languages = ("", "")
        self.kept: list[bool] = []  # translate="yes"/"no" of the elements open, inherited
        self.segment: Segment | None = None
        self.path: list[str] = []  # the elements open, by local name
        self.side = ""  # "source" or "target" while reading one

    def start(self, qname: str, attributes: dict[str, str]) -> None:
        name = _local(qname)
        parent = self.path[-1] if self.path else None
        self.path.append(name)
        if self.version is None:
            if name != "xliff":
                raise DataError(f"{self.where}: not an XLIFF document (its root is <{qname}>)")
            self.version = "2" if attributes.get("version", "").startswith("2") else "1"
        pair, header = _ELEMENTS[self.version]
        kept = attributes.get("translate", "yes") != "no" and (not self.kept or self.kept[-1])
        self.kept.append(kept)
        if name == header:
            source = "srcLang" if self.version == "2" else "source-language"
            target = "trgLang" if self.version == "2" else "target-language"
            self.languages = (attributes.get(source, ""), attributes.get(target, ""))
        if name == pair:
            self.segment = Segment(languages=self.languages, usable=kept)
            if self.version == "2":
                # no state: a target with text is taken as a translation (XLIFF 2's default is
                # "initial", but Angular's and other tools' translated files say none)
                self._judge(attributes.get("state"), attributes.get("subState"))
        elif name in ("source", "target") and parent == pair and self.segment is not None:
            self.side = name
            self.begin_text()
            if name == "target" and self.version == "1":
                self._judge(attributes.get("state"), attributes.get("state-qualifier"))
        elif name == "cp" and self.side:
            self.add_text(_code_point(attributes.get("hex", "")))

    def _judge(self, state: str | None, qualifier: str | None) -> None:
        if self.segment is not None and (state in UNTRANSLATED or qualifier in MACHINE):
            self.segment.usable = False

    def end(self, qname: str) -> None:
        name = self.path.pop()
        self.kept.pop()
        if self.version is None:
            return
        pair = _ELEMENTS[self.version][0]
        if name in ("source", "target") and self.side == name and self.path[-1:] == [pair]:
            text = self.end_text()
            if self.segment is not None:
                setattr(self.segment, name, text)
                self.segment.cut |= self.was_cut
            self.side = ""
        elif name == pair and self.segment is not None:
            self.units.append(self.segment)
            self.segment = None


def _code_point(hex_: str) -> str:
    """XLIFF 2's ``<cp hex="0009"/>``: the character XML cannot hold as text (a space for one
    that is not a character at all)."""
    try:
        return chr(int(hex_, 16))
    except (ValueError, OverflowError):
        return " "


def read_pairs(open_: Opener, where: str, source: str, target: str,
               log: Callable[[str], None] = print) -> Iterator[tuple[str, str]]:
    """The (source, target) pairs of an XLIFF file, in file order (the module's rules)."""
    segments = paired = skipped = other = 0
    held: dict[tuple[str, str], None] = {}  # the pairs of languages of the segments of no use
    reader = _Reader(where)
    for segment in read_units(open_, reader):
        segments += 1
        if not segment.usable or not (segment.cut or (segment.target or "").strip()):
            skipped += 1
            continue
        src_lang, tgt_lang = segment.languages
        if _matches(src_lang, source) and _matches(tgt_lang, target):
            pair = (segment.source or "", segment.target or "")
        elif _matches(src_lang, target) and _matches(tgt_lang, source):
            pair = (segment.target or "", segment.source or "")
        else:
            other += 1
            held[segment.languages] = None
            continue
        paired += 1
        yield pair
    if other and not paired:
        found = ", ".join(f"{s or '?'} -> {t or '?'}" for s, t in list(held)[:8])
        raise DataError(f"{where}: no translated segment in {source!r} and {target!r} (its "
                        f"languages: {found})")
    if segments and not paired and not other:
        raise DataError(f"{where}: none of its {segments:,} segments is translated (no target, "
                        "or an untranslated or machine-translated one); nothing to learn from")
    if skipped:
        log(f"warning: {where}: {skipped:,} of {segments:,} segments untranslated, not to be "
            "translated, or machine-translated: skipped")
    if other:
        log(f"warning: {where}: {other:,} of {segments:,} segments in another pair of "
            "languages: skipped")
    if reader.long[0]:
        log(read_as_empty(where, "segment", reader.long[0], reader.long[1], MAX_LINE_BYTES))


def _matches(tag: str, language: str) -> bool:
    """A segment's language tag is ``language``, or not said (1.2's ``target-language`` is
    optional)."""
    return not tag or same_language(tag, language)


FORM = XmlForm("xliff", SUFFIXES, read_pairs)
