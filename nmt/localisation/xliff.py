"""XLIFF files, 1.2 and 2.x, read with the standard library's expat parser: the untranslated
units filled, every other byte of the file kept.

Rules (what CAT tools such as OmegaT, Okapi and Trados expect of machine output), for 1.2:

- A ``<trans-unit>`` is filled when it has no ``<target>`` or an empty one; a unit marked
  ``translate="no"`` (or in a ``<group>`` so marked), one with a ``<seg-source>`` and one whose
  target has any text are left as they are. ``<note>``s, ``<alt-trans>`` and everything
  outside the filled targets stay byte for byte.
- A target nmt writes is ``state="needs-review-translation"`` with
  ``state-qualifier="mt-suggestion"``: a translator reviews it. It goes right after
  ``</source>``, indented as the source; an empty target is replaced and keeps its other
  attributes.
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
class _Unit:
    line: int
    translate: bool  # not translate="no", nor in a group so marked
    start: _Event | None = None  # its own start tag (XLIFF 2 marks the segment)
    translated: bool = False  # its target has content
    segmented: bool = False  # it has a <seg-source>
    qname: str = ""  # of its <source>, for the target's prefix
    insert_at: int = 0  # after </source>
    indent: str = ""  # the whitespace before <source>
    pieces: list[_Piece] = field(default_factory=list)
    target: _Event | None = None  # the empty target to replace
    target_end: int = 0


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
    for unit in units:
        if unit.segmented:
            report.messages.append(f"{name}: line {unit.line}: a segmented unit "
                                   "(<seg-source>), which nmt does not fill; left untranslated")
            report.left += 1
    todo = [u for u in units if not u.segmented]
    if todo:
        model, (element, attribute) = language(), version.language
        for tag in dict.fromkeys(_attributes(e).get(attribute, "") for e in events
                                 if e.kind == "start" and e.name == element):
            report.messages += other_language(name, f"its {attribute}", tag, model)
    sources = ["".join(piece.given for piece in u.pieces) for u in todo]
    edits: list[tuple[int, int, bytes]] = []
    for unit, source, out in zip(todo, sources, translate_texts(translate, sources),
                                 strict=True):
        content = _content(out, unit.pieces)
        why = "its inline tags are not all kept" if content is None else next(
            (why for why, check in checks if not check(source, out)), None)
        if why is not None or not out.strip():
            report.messages.append(f"{name}: line {unit.line}: {why or 'empty translation'}; "
                                   "left untranslated")
            report.left += 1
            continue
        edits.append(_target_edit(unit, content or "", encoding, version.target_marks))
        if version.unit_marks and unit.start is not None:
            edits.append(_marked(unit.start, version.unit_marks, encoding))
        report.filled += 1
    for start, end, new in sorted(edits, reverse=True):
        data = data[:start] + new + data[end:]
    return data, report


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


def _units(events: list[_Event], data: bytes, version: Version, name: str) -> list[_Unit]:
    """The units (1.2's trans-units, 2's segments) of the document that have text to
    translate and no translation (one inside another is refused: the document is not XLIFF,
    and which source a target would belong to is anyone's guess)."""
    units: list[_Unit] = []
    no_translate = [False]  # translate="no" of each open element, inherited
    unit: _Unit | None = None
    inside = ""  # "source" or "target" while in the unit's own
    depth = 0  # elements open inside it (outside them: inside the unit)
    atomic: _Event | None = None  # the start of an inline element travelling whole
    base = 0  # the depth it starts at
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
            unit, depth = _Unit(event.line, translate=not no_translate[-1], start=event), 0
        elif unit is None:
            continue
        elif atomic is not None:  # inside <x/>, <ph>...</ph> in a source
            depth += step
            if depth == base:
                markup = _markup(data, atomic.start, event.end)
                unit.pieces.append(_Piece("tag", markup, _stand_in(atomic, unit.pieces, markup)))
                atomic = None
        elif inside and event.kind == "end" and depth == 0:  # </source>, </target>
            if inside == "source":
                unit.insert_at = event.end
            else:
                unit.target_end = event.end
            inside = ""
        elif inside == "target":
            unit.translated |= event.kind == "start" or bool(event.text.strip())
            depth += step
        elif inside == "source":
            if event.kind == "text":
                unit.pieces.append(_Piece("text", event.text, event.text))
            elif event.kind == "start" and (event.name not in version.wrapping
                                            or _protected(event)):
                atomic, base = event, depth
            elif event.kind in ("start", "end"):
                markup = _markup(data, event.start, event.end)
                if not markup:  # the end of ``<g id="1"/>``: it wraps nothing, travels whole
                    unit.pieces[-1] = unit.pieces[-1]._replace(kind="tag")
                else:
                    kind = "open" if event.kind == "start" else "close"
                    unit.pieces.append(_Piece(kind, markup, _flat(markup)))
            depth += step
        elif event.kind == "start" and depth == 0 and event.name in ("source", "target"):
            if (unit.qname if event.name == "source" else unit.target is not None):
                raise DataError(f"{name}: line {event.line}: a second <{event.qname}> in the "
                                f"unit of line {unit.line}; not XLIFF")
            inside = event.name
            if event.name == "source":
                unit.qname = event.qname
                unit.indent = _space_before(events, data, i)
            else:
                unit.target = event
        elif event.kind == "end" and depth == 0:  # the unit's own end
            if unit.translate and not unit.translated and \
                    any(p.kind == "text" and p.markup.strip() for p in unit.pieces):
                units.append(unit)
            unit = None
        else:  # in <alt-trans>, <seg-source>, <note>...: not the unit's own source or target
            unit.segmented |= event.kind == "start" and depth == 0 and event.name == "seg-source"
            depth += step
    return units


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


def _with_marks(event: _Event | None, marks: Sequence[tuple[str, str]]) -> str:
    """The attributes of ``event`` (None: none) with ``marks`` set (in place of any of the
    same name), as written in a start tag."""
    names = {k for k, _ in marks}
    kept = [(k, v) for k, v in (_attributes(event) if event else {}).items() if k not in names]
    return "".join(f" {k}={quoteattr(v)}" for k, v in [*kept, *marks])


def _marked(start: _Event, marks: Sequence[tuple[str, str]],
            encoding: str) -> tuple[int, int, bytes]:
    """(start, end, bytes) rewriting the start tag ``start`` of a unit nmt filled (never an
    empty element: it holds the source) with ``marks`` set."""
    return start.start, start.end, f"<{start.qname}{_with_marks(start, marks)}>".encode(
        encoding, "xmlcharrefreplace")


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
