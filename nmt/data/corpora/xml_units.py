"""The XML corpus forms (TMX, XLIFF) read in pieces by expat: the parser's settings, its
bounds and its errors, once for both.

A form's reader (:class:`UnitReader`) is given the start and end of each element and collects
the units it finds in ``units``; :func:`read_units` feeds the parser a piece at a time and
yields them; :class:`XmlForm` is the form of one such file, by its name's suffix.

Bounds: the file is never read whole; a segment longer than :data:`nmt.files.MAX_LINE_BYTES` is
read as empty (its pair dropped, said once by the form), and a run of that many bytes with no
``>`` (a tag or a text node no translation file holds) is an error. An entity declaration is
refused, so nothing is expanded and nothing is fetched (a document type declaration naming a DTD
is accepted: most TMX files have one). The encodings are those XML allows expat to read: UTF-8,
UTF-16 (with its byte-order mark), ISO-8859-1, ASCII.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any
from xml.parsers import expat

from nmt.data.compressed import plain_name
from nmt.data.corpora.base import Context, Corpus, Identity, Lazy, Opener, opener, resolve
from nmt.data.download import sha256_file
from nmt.errors import DataError
from nmt.files import MAX_LINE_BYTES

PIECE = 1 << 16  # bytes given to the parser at a time


class UnitReader:
    """The parser's handlers: ``start`` and ``end`` of each element (a form's own), the text of
    the segment being read (:meth:`begin_text` ... :meth:`end_text`, bounded), and the
    ``units`` read so far. ``what`` names the kind of file in messages."""

    def __init__(self, where: str, what: str) -> None:
        self.where, self.what = where, what
        self.units: list[Any] = []
        self.long = [0, 0]  # segments read as empty for their length: how many, the first line
        self.line = 0  # the parser's line, as text comes
        self._text: list[str] | None = None
        self._size = 0
        self._cut = False  # the segment is longer than the bound: read as empty
        self.was_cut = False  # the last segment's text was

    def start(self, name: str, attributes: dict[str, str]) -> None:
        raise NotImplementedError

    def end(self, name: str) -> None:
        raise NotImplementedError

    def begin_text(self) -> None:
        self._text, self._size, self._cut = [], 0, False

    def reading_text(self) -> bool:
        return self._text is not None

    def add_text(self, text: str) -> None:
        """Text of the segment being read (its characters, or what an element stands for)."""
        if self._text is None or self._cut:
            return
        self._size += len(text.encode("utf-8"))
        if self._size > MAX_LINE_BYTES:
            self._cut, self._text = True, []
            self.long[0] += 1
            self.long[1] = self.long[1] or self.line
        else:
            self._text.append(text)

    def end_text(self) -> str:
        """The segment's text (a line break read as a space: a pair is one line of the cache),
        or ``""`` when it was longer than the bound."""
        text = "" if self._cut else re.sub(r"[\r\n]+", " ", "".join(self._text or []))
        self._text, self.was_cut = None, self._cut
        return text

    def refuse_entity(self, *_: Any) -> None:
        raise DataError(f"{self.where}: an entity declaration; {self.what} needs none, and nmt "
                        "expands none")

    def refuse_skipped(self, name: str, _: bool) -> None:  # declared in a DTD nmt never reads
        raise DataError(f"{self.where}: the entity &{name}; of a DTD, which nmt does not read "
                        "(write the character itself)")


def read_units(open_: Opener, reader: UnitReader) -> Iterator[Any]:
    """The units ``reader`` finds in the file ``open_`` opens, as it reads them, piece by
    piece."""
    where = reader.where
    parser = expat.ParserCreate()  # no namespace processing: "xml:lang" as written
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end

    def characters(text: str) -> None:
        reader.line = parser.CurrentLineNumber
        reader.add_text(text)

    parser.CharacterDataHandler = characters
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
                                f"{MAX_LINE_BYTES // 2**20} MiB without a '>'; expected "
                                f"{reader.what}")
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


# (open, where, source, target, log) -> the file's pairs: a form's ``read_pairs``
PairReader = Callable[[Opener, str, str, str, Callable[[str], None]],
                      Iterator[tuple[str, str]]]


class XmlForm:
    """The corpus form of one XML file (compressed or not) claimed by its name's ``suffixes``
    and read by ``read_pairs``, lazily."""

    def __init__(self, name: str, suffixes: tuple[str, ...], read_pairs: PairReader) -> None:
        self.name, self.suffixes, self.read_pairs = name, suffixes, read_pairs

    def claims(self, spec: str, ctx: Context) -> bool:
        return plain_name(spec).lower().endswith(self.suffixes)

    def open(self, spec: str, ctx: Context) -> Corpus:
        path = resolve(spec, ctx.option)
        open_ = opener(path, str(path))
        cfg = ctx.cfg
        identity = Identity(self.name, spec, sha256_file(path), cfg.source, cfg.target,
                            files=[str(path)])
        return Lazy(identity, lambda: self.read_pairs(open_, str(path), cfg.source, cfg.target,
                                                      ctx.log))
