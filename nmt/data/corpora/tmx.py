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

Bounds: the file is read in pieces by expat, never whole; a segment longer than
:data:`nmt.files.MAX_LINE_BYTES` is read as empty (its pair dropped, said at the end), and a
run of that many bytes with no ``>`` (a tag or a text node no translation memory holds) is an
error. A document type declaration naming the TMX DTD is accepted (most files have one), an
entity declaration is refused, so nothing is expanded and nothing is fetched. The encodings
are those XML allows expat to read: UTF-8, UTF-16 (with its byte-order mark), ISO-8859-1,
ASCII.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any
from xml.parsers import expat

from nmt.data.compressed import plain_name
from nmt.data.corpora.base import (
    Context,
    Corpus,
    Identity,
    Lazy,
    Opener,
    opener,
    read_as_empty,
    resolve,
)
from nmt.data.download import sha256_file
from nmt.data.languages import same_language
from nmt.errors import DataError
from nmt.files import MAX_LINE_BYTES

PIECE = 1 << 16  # bytes given to the parser at a time
_LANGUAGES_SAID = 8  # languages named in the error of a file that lacks a side


class _Reader:
    """The parser's handlers: the units read so far, each as ``{language tag: text}``."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.units: list[dict[str, str]] = []
        self.long = [0, 0]  # segments read as empty for their length: how many, the first line
        self.root: str | None = None
        self.unit: dict[str, str] | None = None
        self.language = ""
        self.text: list[str] | None = None  # the segment being read
        self.size = 0
        self.cut = False  # it is longer than the bound: read as empty

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
            self.text, self.size, self.cut = [], 0, False

    def end(self, name: str) -> None:
        if name == "seg" and self.text is not None and self.unit is not None:
            text = "" if self.cut else re.sub(r"[\r\n]+", " ", "".join(self.text))
            self.unit.setdefault(self.language, text)
            self.text = None
        elif name == "tu" and self.unit is not None:
            self.units.append(self.unit)
            self.unit = None

    def characters(self, text: str, line: int) -> None:
        if self.text is None or self.cut:
            return
        self.size += len(text.encode("utf-8"))
        if self.size > MAX_LINE_BYTES:
            self.cut, self.text = True, []
            self.long[0] += 1
            self.long[1] = self.long[1] or line
        else:
            self.text.append(text)

    def refuse_entity(self, *_: Any) -> None:
        raise DataError(f"{self.where}: an entity declaration; a translation memory needs none, "
                        "and nmt expands none")

    def refuse_skipped(self, name: str, _: bool) -> None:  # declared in a DTD nmt never reads
        raise DataError(f"{self.where}: the entity &{name}; of a DTD, which nmt does not read "
                        "(write the character itself)")


def _units(open_: Opener, reader: _Reader) -> Iterator[dict[str, str]]:
    """The units of the TMX file ``open_`` opens, each as ``{language tag: text}``, as
    ``reader``'s handlers read them, piece by piece."""
    where = reader.where
    parser = expat.ParserCreate()  # no namespace processing: "xml:lang" as written
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = lambda text: reader.characters(text,
                                                                 parser.CurrentLineNumber)
    parser.EntityDeclHandler = reader.refuse_entity
    parser.SkippedEntityHandler = reader.refuse_skipped
    since = 0  # bytes since the last ">"
    with open_() as stream:
        while True:
            piece = stream.read(PIECE)
            close = piece.rfind(b">")
            since = since + len(piece) if close < 0 else len(piece) - close - 1
            if since > MAX_LINE_BYTES:
                raise DataError(f"{where}: line {parser.CurrentLineNumber}: more than "
                                f"{MAX_LINE_BYTES // 2**20} MiB without a '>'; expected a "
                                "translation memory (TMX)")
            try:
                parser.Parse(piece, not piece)
            except expat.ExpatError as e:
                raise DataError(f"{where}: line {e.lineno}: not well-formed XML "
                                f"({expat.ErrorString(e.code)})") from None
            except LookupError as e:  # an encoding declared that expat does not know
                raise DataError(f"{where}: {e}; save the file as UTF-8") from None
            yield from reader.units
            reader.units.clear()
            if not piece:
                break


def read_pairs(open_: Opener, where: str, source: str, target: str,
               log: Callable[[str], None] = print) -> Iterator[tuple[str, str]]:
    """The (source, target) pairs of a TMX file, in file order (the module's rules)."""
    units = paired = 0
    languages: dict[str, None] = {}  # those seen, in order, a few
    reader = _Reader(where)
    for unit in _units(open_, reader):
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


class Tmx:
    name = "tmx"

    def claims(self, spec: str, ctx: Context) -> bool:
        return plain_name(spec).lower().endswith(".tmx")

    def open(self, spec: str, ctx: Context) -> Corpus:
        path = resolve(spec, ctx.option)
        open_ = opener(path, str(path))
        cfg = ctx.cfg
        identity = Identity(self.name, spec, sha256_file(path), cfg.source, cfg.target,
                            files=[str(path)])
        return Lazy(identity, lambda: read_pairs(open_, str(path), cfg.source, cfg.target,
                                                 ctx.log))


FORM = Tmx()
