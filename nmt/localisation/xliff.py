"""XLIFF files, 1.2 and 2.x, read with the standard library's expat parser: the untranslated
units filled, every other byte of the file kept.

Rules (what CAT tools such as OmegaT, Okapi and Trados expect of machine output), for 1.2:

- A ``<trans-unit>`` is filled when it has no ``<target>`` or an empty one; a unit marked
  ``translate="no"`` (or in a ``<group>`` so marked) and one whose target has any text are
  left as they are. ``<note>``s, ``<alt-trans>`` and everything outside the filled targets
  stay byte for byte.
- A unit segmented by a ``<seg-source>`` (Okapi, Trados' SDLXLIFF: each segment an ``<mrk
  mtype="seg" mid="...">``) is filled a segment at a time, each segment with text a string of
  its own: the target's empty segments (of the same ``mid``) are filled and its others kept,
  or, when it has no target or an empty one, the target is written as the ``<seg-source>``
  is, each segment's content translated. Any segment refused leaves the unit as it was. In
  SDLXLIFF, Trados' record of each segment filled (``<sdl:seg id="MID">``) is marked
  ``conf="Draft" origin="mt"``, as Trados marks its own machine translations.
- A target nmt writes is ``state="needs-review-translation"`` with
  ``state-qualifier="mt-suggestion"``: a translator reviews it. It goes right after
  ``</source>`` (``</seg-source>``), indented as the source; an empty target is replaced and
  keeps its other attributes, and so does one whose empty segments nmt filled.
- Inline tags: ``<g>`` and ``<mrk>`` wrap text, so their start and end tags travel in the text
  given to the translator (an empty one, ``<g id="1"/>``, whole); ``<x/>``, ``<bx/>``,
  ``<ex/>``, ``<ph>``, ``<bpt>``, ``<ept>`` and ``<it>`` travel whole, as written, and so
  does a ``<mrk mtype="protected">`` (text not to translate). The translator is given an
  element that travels whole as an empty one of its name and attributes (``<ph id="1"/>``
  for ``<ph id="1">&lt;b class="x"&gt;</ph>``), as OmegaT shows its tags: the native code or
  protected text inside is not text to translate, and a model would garble it. A
  translation must give back every one of them, with the wrapping tags well nested (as
  :func:`nmt.data.spans.tags.unpaired` pairs tags), or the unit is left untranslated and
  reported; the target has each as the source wrote it.
- Safety: the file is read whole within a bound (:func:`nmt.localisation.read_file`), and a
  document type declaration is refused, so no entity can be declared, let alone expanded
  (billion laughs, external entities). Only UTF-8 (or ASCII) files are read.

XLIFF 2 (``<xliff version="2.0">``, 2.1, 2.2) by the same rules, in its own terms: what is
filled is a ``<segment>`` (a ``<unit>`` may hold several, and ``<ignorable>`` whitespace
between them, left as it is); ``translate="no"`` on a file, group or unit is inherited as in
1.2; a segment nmt filled is marked ``state="translated"`` with ``subState="nmt:mt"`` (the
state lives on the segment in XLIFF 2: a translator reviews it and makes it ``reviewed``); the
inline ``<pc>`` and ``<mrk>`` wrap text, ``<ph/>``, ``<sc/>``, ``<ec/>``, ``<cp/>``, ``<sm/>``
and ``<em/>`` travel whole. In either version an inline element marked ``translate="no"``
(XLIFF 2) travels whole, its text untranslated.

Why not a library: translate-toolkit's ``translate.storage.xliff`` reads XLIFF well but is
GPL-licensed (nmt is MIT) and rewrites the whole document through lxml; what nmt needs (find
the units, splice targets in) is this module.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from xml.parsers import expat
from xml.sax.saxutils import escape, quoteattr

from nmt.data.spans import tags
from nmt.errors import DataError
from nmt.localisation.filled import (
    Filled,
    NamedCheck,
    Translate,
    other_language,
    translate_texts,
)

_ENCODINGS = {"utf-8", "utf8", "us-ascii", "ascii"}


@dataclass(frozen=True)
class Version:
    """What differs between XLIFF 1.2 and 2.x, for nmt's purpose."""

    unit: str  # the element holding one <source> and its <target>
    wrapping: frozenset[str]  # inline elements around text: their tags travel one by one
    target_marks: tuple[tuple[str, str], ...]  # attributes of a target nmt wrote
    unit_marks: tuple[tuple[str, str], ...]  # attributes of its unit element
    language: tuple[str, str]  # the element and attribute that name the target language


VERSIONS = {
    "1": Version("trans-unit", frozenset({"g", "mrk"}),
                 (("state", "needs-review-translation"), ("state-qualifier", "mt-suggestion")),
                 (), ("file", "target-language")),
    "2": Version("segment", frozenset({"pc", "mrk"}), (),
                 (("state", "translated"), ("subState", "nmt:mt")), ("xliff", "trgLang")),
}


@dataclass
class _Event:
    kind: str  # start, end, text, other, or declaration (its text: the encoding)
    start: int  # byte offsets of what it covers in the document
    end: int = 0
    name: str = ""  # an element's local name
    qname: str = ""  # as written, prefix and all
    attributes: list[str] = field(default_factory=list)  # name, value, name, value...
    text: str = ""
    line: int = 0


class _Piece(NamedTuple):
    """A piece of a source's content: text, or an inline element's tags."""

    kind: str  # text, open, close (a wrapping element's tags), or tag (travels whole)
    markup: str  # as written (text as expat gives it: unescaped)
    given: str  # what the translator is given for it


@dataclass
class _Segment:
    """A segment of a 1.2 unit's ``<seg-source>`` (an ``<mrk mtype="seg">``, as Okapi and
    Trados segment units) and where its translation goes."""

    mid: str
    pieces: list[_Piece]
    content: tuple[int, int]  # its content's bytes in the <seg-source>
    target: tuple[_Event, _Event] | None = None  # the empty <mrk> of its mid in the target


@dataclass
class _Unit:
    line: int
    translate: bool  # not translate="no", nor in a group so marked
    start: _Event | None = None  # its own start tag (XLIFF 2 marks the segment)
    translated: bool = False  # its target has content
    qname: str = ""  # of its <source>, for the target's prefix
    insert_at: int = 0  # after </source> (after </seg-source> when there is one)
    indent: str = ""  # the whitespace before <source>
    pieces: list[_Piece] = field(default_factory=list)
    target: _Event | None = None  # the empty target to replace
    target_end: int = 0
    seg_source: tuple[int, int] | None = None  # its <seg-source>'s start and end events
    target_events: tuple[int, int] = (0, 0)  # its target's start and end events
    segments: list[_Segment] = field(default_factory=list)  # of its <seg-source>, to fill
    span: tuple[int, int] = (0, 0)  # its start and end events
    unplaced: list[str] = field(default_factory=list)  # mids of segments the target lacks


def fill(data: bytes, name: str, translate: Translate, language: Callable[[], str | None],
         checks: Sequence[NamedCheck]) -> tuple[bytes, Filled]:
    """The XLIFF document ``data`` (``name`` in messages) with its untranslated units filled
    (``language``, the model's target language, is asked only when a unit is to be filled: a
    file that names another is filled with a warning)."""
    events = _events(data, name)
    version = VERSIONS[_check_root(events, name)]
    units = _units(events, data, version, name)
    # what the targets are written in: a document declared ASCII stays ASCII (é as &#233;)
    encoding = "ascii" if any(e.kind == "declaration" and "ascii" in e.text
                              for e in events[:1]) else "utf-8"
    report = Filled("xliff")
    if units:
        model, (element, attribute) = language(), version.language
        for tag in dict.fromkeys(_attributes(e).get(attribute, "") for e in events
                                 if e.kind == "start" and e.name == element):
            report.messages += other_language(name, f"its {attribute}", tag, model)
    for unit in units:
        if unit.unplaced:
            report.messages.append(
                f"{name}: line {unit.line}: no <mrk mtype=\"seg\"> in the target for segment "
                f"{', '.join(repr(mid) for mid in unit.unplaced)} of the <seg-source>; left "
                "untranslated")
            report.left += len(unit.unplaced)
    units = [unit for unit in units if unit.segments or unit.seg_source is None]
    # what each unit translates: its source, or the segments of its <seg-source> to fill
    contents = [[s.pieces for s in unit.segments] or [unit.pieces] for unit in units]
    sources = ["".join(piece.given for piece in pieces) for each in contents for pieces in each]
    translated = iter(zip(sources, translate_texts(translate, sources), strict=True))
    edits: list[tuple[int, int, bytes]] = []
    for unit, each in zip(units, contents, strict=True):
        checked = [_checked(pieces, *next(translated), checks) for pieces in each]
        why = next((why for _, why in checked if why is not None), None)
        if why is not None:
            report.messages.append(f"{name}: line {unit.line}: {why}; left untranslated")
            report.left += 1
            continue
        texts = [content for content, _ in checked]
        if unit.segments:
            edits += _segment_edits(unit, texts, events, data, encoding, version.target_marks)
        else:
            edits.append(_target_edit(unit, texts[0], encoding, version.target_marks))
        if version.unit_marks and unit.start is not None:
            edits.append(_marked(unit.start, version.unit_marks, encoding))
        report.filled += 1
    for start, end, new in sorted(edits, reverse=True):
        data = data[:start] + new + data[end:]
    return data, report


def _checked(pieces: list[_Piece], source: str, translation: str,
             checks: Sequence[NamedCheck]) -> tuple[str, str | None]:
    """The target content of ``translation`` of ``source`` (made of ``pieces``), and why it
    is refused (None: it is not)."""
    content = _content(translation, pieces)
    why = "its inline tags are not all kept" if content is None else next(
        (why for why, check in checks if not check(source, translation)), None)
    if why is None and not translation.strip():
        why = "empty translation"
    return content or "", why


def _events(data: bytes, name: str) -> list[_Event]:
    """What expat reports of ``data``, each event with the bytes it covers."""
    parser = expat.ParserCreate()  # no namespace processing: names as written
    parser.ordered_attributes = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    events: list[_Event] = []

    def add(kind: str, **more: Any) -> None:
        events.append(_Event(kind, parser.CurrentByteIndex, line=parser.CurrentLineNumber,
                             **more))

    def start(qname: str, attributes: list[str]) -> None:
        add("start", name=qname.rpartition(":")[2], qname=qname, attributes=attributes)

    def refuse_doctype(*_: Any) -> None:
        raise DataError(f"{name}: line {parser.CurrentLineNumber}: a document type "
                        "declaration; XLIFF needs none, and its entities are not expanded")

    def declaration(version: str, encoding: str | None, standalone: int) -> None:
        if encoding and encoding.lower() not in _ENCODINGS:
            raise DataError(f"{name}: in {encoding}; only UTF-8 XLIFF is read (convert it)")
        add("declaration", text=(encoding or "utf-8").lower())

    parser.StartElementHandler = start
    parser.EndElementHandler = lambda qname: add("end", name=qname.rpartition(":")[2])
    parser.CharacterDataHandler = lambda text: add("text", text=text)
    parser.DefaultHandler = lambda _: add("other")
    parser.CommentHandler = lambda _: add("other")
    parser.ProcessingInstructionHandler = lambda *_: add("other")
    parser.StartDoctypeDeclHandler = refuse_doctype
    parser.EntityDeclHandler = refuse_doctype
    parser.XmlDeclHandler = declaration
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise DataError(f"{name}: line {e.lineno}: not well-formed XML "
                        f"({expat.ErrorString(e.code)})") from None
    for event, following in zip(events, events[1:], strict=False):
        event.end = following.start
    if events:
        events[-1].end = len(data)
    return events


class _Reader:
    """The pieces of an element's content (a ``<source>``'s, a segment's), given its events
    one by one: text, the tags of wrapping elements, and inline elements that travel whole
    (:func:`_stand_in`)."""

    def __init__(self, data: bytes, version: Version) -> None:
        self.data, self.version = data, version
        self.pieces: list[_Piece] = []
        self.depth = 0  # elements open inside the content
        self.atomic: _Event | None = None  # the start of an inline element travelling whole
        self.base = 0  # the depth it starts at

    def ends(self, event: _Event) -> bool:
        """Whether ``event`` is the end of the element whose content this reads."""
        return event.kind == "end" and self.depth == 0 and self.atomic is None

    def feed(self, event: _Event) -> None:
        step = {"start": 1, "end": -1}.get(event.kind, 0)
        if self.atomic is not None:  # inside <x/>, <ph>...</ph>
            self.depth += step
            if self.depth == self.base:
                markup = _markup(self.data, self.atomic.start, event.end)
                self.pieces.append(_Piece("tag", markup,
                                          _stand_in(self.atomic, self.pieces, markup)))
                self.atomic = None
            return
        if event.kind == "text":
            self.pieces.append(_Piece("text", event.text, event.text))
        elif event.kind == "start" and (event.name not in self.version.wrapping
                                        or _protected(event)):
            self.atomic, self.base = event, self.depth
        elif event.kind in ("start", "end"):
            markup = _markup(self.data, event.start, event.end)
            if not markup:  # the end of ``<g id="1"/>``: it wraps nothing, travels whole
                self.pieces[-1] = self.pieces[-1]._replace(kind="tag")
            else:
                kind = "open" if event.kind == "start" else "close"
                self.pieces.append(_Piece(kind, markup, _flat(markup)))
        self.depth += step


def _has_text(pieces: Sequence[_Piece]) -> bool:
    return any(p.kind == "text" and p.markup.strip() for p in pieces)


def _units(events: list[_Event], data: bytes, version: Version, name: str) -> list[_Unit]:
    """The units (1.2's trans-units, 2's segments) of the document that have text to
    translate and no translation (one inside another is refused: the document is not XLIFF,
    and which source a target would belong to is anyone's guess)."""
    units: list[_Unit] = []
    no_translate = [False]  # translate="no" of each open element, inherited
    unit: _Unit | None = None
    inside = ""  # "source", "seg-source" or "target" while in the unit's own
    opened = 0  # the index of its start event
    depth = 0  # elements open inside the unit, or inside its own target or seg-source
    reader: _Reader | None = None  # of its source's content
    for i, event in enumerate(events):
        if event.kind == "start":
            translate = _attributes(event).get("translate")
            no_translate.append(no_translate[-1] if translate is None else translate == "no")
        elif event.kind == "end":
            no_translate.pop()
        step = {"start": 1, "end": -1}.get(event.kind, 0)
        if event.kind == "start" and event.name == version.unit:
            if unit is not None:
                raise DataError(f"{name}: line {event.line}: a <{event.qname}> inside another "
                                f"(from line {unit.line}); not XLIFF")
            unit, depth = _Unit(event.line, translate=not no_translate[-1], start=event,
                                span=(i, i)), 0
        elif unit is None:
            continue
        elif inside == "source" and reader is not None:
            if reader.ends(event):  # </source>
                unit.insert_at, unit.pieces, inside = event.end, reader.pieces, ""
            else:
                reader.feed(event)
        elif inside and event.kind == "end" and depth == 0:  # </target>, </seg-source>
            if inside == "target":
                unit.target_end, unit.target_events = event.end, (opened, i)
            else:
                unit.seg_source, unit.insert_at = (opened, i), event.end
            inside = ""
        elif inside:
            unit.translated |= inside == "target" and (event.kind == "start"
                                                       or bool(event.text.strip()))
            depth += step
        elif event.kind == "start" and depth == 0 and event.name in ("source", "target",
                                                                     "seg-source"):
            seen = {"source": bool(unit.qname), "target": unit.target is not None,
                    "seg-source": unit.seg_source is not None}
            if seen[event.name]:
                raise DataError(f"{name}: line {event.line}: a second <{event.qname}> in the "
                                f"unit of line {unit.line}; not XLIFF")
            inside, opened = event.name, i
            if event.name == "source":
                unit.qname, reader = event.qname, _Reader(data, version)
                unit.indent = _space_before(events, data, i)
            elif event.name == "target":
                unit.target = event
            else:
                unit.seg_source = (i, i)
        elif event.kind == "end" and depth == 0:  # the unit's own end
            unit.span = (unit.span[0], i)
            if unit.seg_source is not None:
                unit.segments = _segments(unit, events, data, version)
            if unit.translate and (bool(unit.segments or unit.unplaced)
                                   if unit.seg_source is not None
                                   else not unit.translated and _has_text(unit.pieces)):
                units.append(unit)
            unit = None
        else:  # in <alt-trans>, <note>...: not the unit's own source or target
            depth += step
    return units


def _segments(unit: _Unit, events: list[_Event], data: bytes,
              version: Version) -> list[_Segment]:
    """The segments of ``unit``'s ``<seg-source>`` that hold text and have no translation:
    every one when the unit has no target or an empty one, else those whose ``<mrk
    mtype="seg">`` of the same ``mid`` in the target is empty (a target with text and no
    segments is a translation)."""
    first, last = unit.seg_source or (0, 0)
    segments = [_Segment(_attributes(start).get("mid", ""), pieces, (start.end, end.start))
                for start, end, pieces in _marked_segments(events[first + 1:last], data,
                                                           version)]
    segments = [s for s in segments if _has_text(s.pieces)]
    if unit.target is None or not unit.translated:
        return segments
    a, b = unit.target_events
    in_target = {_attributes(start).get("mid", ""): (start, end, pieces)
                 for start, end, pieces in _marked_segments(events[a + 1:b], data, version)}
    if not in_target:
        return []
    for segment in segments:
        found = in_target.get(segment.mid)
        if found is None:  # nowhere to put its translation: said, and left
            unit.unplaced.append(segment.mid)
        elif not found[2]:  # there, and empty
            segment.target = found[0], found[1]
    return [s for s in segments if s.target is not None]


def _marked_segments(events: Sequence[_Event], data: bytes, version: Version
                     ) -> list[tuple[_Event, _Event, list[_Piece]]]:
    """The ``<mrk mtype="seg">`` elements among ``events`` (the content of a ``<seg-source>``
    or ``<target>``), at any depth (Trados puts them inside the ``<g>`` around a paragraph):
    each one's start and end events and the pieces of its content (none when it is empty or
    only whitespace)."""
    found: list[tuple[_Event, _Event, list[_Piece]]] = []
    reader, start = None, None
    for event in events:
        if reader is not None and start is not None:
            if reader.ends(event):
                pieces = reader.pieces if any(p.kind != "text" or p.markup.strip()
                                              for p in reader.pieces) else []
                found.append((start, event, pieces))
                reader = None
            else:
                reader.feed(event)
        elif event.kind == "start" and event.name == "mrk" and \
                _attributes(event).get("mtype") == "seg":
            reader, start = _Reader(data, version), event
    return found


def _space_before(events: list[_Event], data: bytes, i: int) -> str:
    """The whitespace right before event ``i`` as written (expat may report it in several
    pieces, and reads a CRLF line end as LF: a target inserted in a file of CRLF lines
    must end its line as the others do)."""
    first = i
    while first > 0 and events[first - 1].kind == "text" and not events[first - 1].text.strip():
        first -= 1
    return _markup(data, events[first].start, events[i].start) if first < i else ""


def _check_root(events: list[_Event], name: str) -> str:
    """The major version of the XLIFF document (``1`` or ``2``)."""
    root = next((e for e in events if e.kind == "start"), None)
    version = _attributes(root).get("version", "") if root else ""
    major = version.partition(".")[0]
    if root is None or root.name != "xliff" or major not in VERSIONS or not version[2:3]:
        shown = f"<{root.qname} version={version!r}>" if root else "no element"
        raise DataError(f"{name}: not an XLIFF 1.x or 2.x document (its root is {shown})")
    return major


def _attributes(event: _Event) -> dict[str, str]:
    return dict(zip(event.attributes[::2], event.attributes[1::2], strict=True))


def _markup(data: bytes, start: int, end: int) -> str:
    return data[start:end].decode("utf-8")


def _flat(markup: str) -> str:
    """An inline element as the translator is given it: each run of whitespace one space, so
    that one written over several lines (``<x id="2"\n ctype="image"/>``) is not cut into
    the lines a string is translated by. The target gets it as the source wrote it."""
    return " ".join(markup.split()) if "\n" in markup or "\r" in markup else markup


def _protected(start: _Event) -> bool:
    """Whether a wrapping element holds text not to translate: XLIFF 2's (and ITS')
    ``translate="no"``, 1.2's ``<mrk mtype="protected">``."""
    attributes = _attributes(start)
    return attributes.get("translate") == "no" or attributes.get("mtype") == "protected"


def _stand_in(start: _Event, pieces: Sequence[_Piece], markup: str) -> str:
    """What the translator is given for the inline element ``markup`` that travels whole,
    starting with ``start``: an empty element of its name and attributes, on one line (with
    ``nmt-n="2"``, ``"3"``... where another element of the unit's ``pieces`` already has
    that form)."""
    form, n = f"<{start.qname}{_with_marks(start, ())}/>", 1
    while any(p.given == form and p.markup != markup for p in pieces):
        n += 1
        form = f"<{start.qname}{_with_marks(start, (('nmt-n', str(n)),))}/>"
    return form


def _content(translation: str, pieces: list[_Piece]) -> str | None:
    """The target's content for ``translation`` of a source made of ``pieces``: its text
    escaped, its inline elements as the source wrote them (given to the translator as
    :func:`_flat` and :func:`_stand_in` say); None when the translation lost, added or badly
    nested one."""
    inline = {p.given: p for p in pieces if p.kind != "text"}
    if not inline:
        return escape(translation)
    split = re.split("(" + "|".join(map(re.escape, sorted(inline, key=len, reverse=True)))
                     + ")", translation)
    wrapping = [m for m in split[1::2] if inline[m].kind in ("open", "close")]
    if tags.unpaired(wrapping) or Counter(split[1::2]) != Counter(
            p.given for p in pieces if p.kind != "text"):
        return None
    return "".join(inline[piece].markup if i % 2 else escape(piece)
                   for i, piece in enumerate(split))


def _segment_edits(unit: _Unit, contents: list[str], events: list[_Event], data: bytes,
                   encoding: str, marks: Sequence[tuple[str, str]]
                   ) -> list[tuple[int, int, bytes]]:
    """The edits that put ``contents``, the translations of a segmented unit's segments,
    in its target: into the target's empty segments, or, when it has none, a target written
    as the ``<seg-source>`` is, each segment's content translated (a segment without text as
    it is); the target marked ``marks``."""
    edits = _trados_records(unit, events, data, encoding)
    if unit.target is None or not unit.translated:
        first, last = unit.seg_source or (0, 0)
        at, pieces = events[first].end, []
        for segment, content in zip(unit.segments, contents, strict=True):
            pieces += [_markup(data, at, segment.content[0]), content]
            at = segment.content[1]
        pieces.append(_markup(data, at, events[last].start))
        return [*edits, _target_edit(unit, "".join(pieces), encoding, marks)]
    edits.append(_marked(unit.target, marks, encoding))
    for segment, content in zip(unit.segments, contents, strict=True):
        assert segment.target is not None  # a target with segments: each has its place there
        start, end = segment.target
        if _empty(start, data):  # <mrk mtype="seg" mid="1"/>
            element = f"<{start.qname}{_with_marks(start, ())}>{content}</{start.qname}>"
            edits.append((start.start, end.end, element.encode(encoding, "xmlcharrefreplace")))
        else:
            edits.append((start.end, end.start, content.encode(encoding, "xmlcharrefreplace")))
    return edits


# Trados Studio's record of a segment it shows as machine translated and not yet confirmed
TRADOS_MARKS = (("conf", "Draft"), ("origin", "mt"))


def _trados_records(unit: _Unit, events: list[_Event], data: bytes,
                    encoding: str) -> list[tuple[int, int, bytes]]:
    """The edits marking the segments of ``unit`` that nmt fills in Trados' own records of
    them (SDLXLIFF: ``<sdl:seg id="MID">`` in the unit's ``<sdl:seg-defs>``, where Trados
    keeps each segment's status) as :data:`TRADOS_MARKS`; none in other XLIFF."""
    filled = {segment.mid for segment in unit.segments}
    first, last = unit.span
    return [_marked(e, TRADOS_MARKS, encoding, empty=_empty(e, data))
            for e in events[first:last] if e.kind == "start" and e.name == "seg"
            and e.qname != e.name and _attributes(e).get("id") in filled]


def _empty(start: _Event, data: bytes) -> bool:
    """Whether the start tag ``start`` is an empty element's (``<mrk mid="1"/>``)."""
    return data[start.start:start.end].endswith(b"/>")


def _with_marks(event: _Event | None, marks: Sequence[tuple[str, str]]) -> str:
    """The attributes of ``event`` (None: none) with ``marks`` set (in place of any of the
    same name), as written in a start tag."""
    names = {k for k, _ in marks}
    kept = [(k, v) for k, v in (_attributes(event) if event else {}).items() if k not in names]
    return "".join(f" {k}={quoteattr(v)}" for k, v in [*kept, *marks])


def _marked(start: _Event, marks: Sequence[tuple[str, str]], encoding: str,
            empty: bool = False) -> tuple[int, int, bytes]:
    """(start, end, bytes) rewriting the start tag ``start`` of an element nmt filled (a unit,
    a target) or a record of it (``empty``: an empty element, ``<sdl:seg id="1"/>``) with
    ``marks`` set."""
    tag = f"<{start.qname}{_with_marks(start, marks)}{'/' if empty else ''}>"
    return start.start, start.end, tag.encode(encoding, "xmlcharrefreplace")


def _target_edit(unit: _Unit, content: str, encoding: str,
                 marks: Sequence[tuple[str, str]]) -> tuple[int, int, bytes]:
    """(start, end, bytes) replacing ``unit``'s empty target, or inserting one after its
    source, with ``content``, its attributes ``marks`` set (1.2: marked for review), in
    ``encoding`` (a character it lacks as a character reference)."""
    prefix = unit.qname.rpartition(":")[0]
    qname = f"{prefix}:target" if prefix else "target"
    element = f"<{qname}{_with_marks(unit.target, marks)}>{content}</{qname}>"
    if unit.target is not None:
        return unit.target.start, unit.target_end, element.encode(encoding, "xmlcharrefreplace")
    return unit.insert_at, unit.insert_at, (unit.indent + element).encode(encoding,
                                                                          "xmlcharrefreplace")
