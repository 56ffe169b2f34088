"""A corpus of OPUS (https://opus.nlpl.eu) in Moses format, as its download links give it:
``data.corpus = "en-fr.txt.zip"``, a zip holding ``NAME.L1-L2.L1`` and ``NAME.L1-L2.L2``
(aligned files, one sentence a line, as :mod:`.aligned` reads them), a README and a LICENSE.

The two files are read straight out of the archive, a piece at a time, never unpacked (OPUS's
archives run to gigabytes), with the bounds of :mod:`nmt.data.compressed` against a zip bomb.
Their languages come from their names and are matched to ``data.source`` and ``data.target`` by
the language-tag rule of :func:`nmt.data.languages.same_language` (OPUS writes ``pt_BR``,
``zh_CN``, ``sr_Latn``), in either order (OPUS names a pair in alphabetical order). OPUS
states each corpus's terms in the archive's LICENSE and README, which differ by corpus:
nmt does not read them as a licence; ``licence`` in ``[[data.sources]]`` states them for an
export's card.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from nmt.data.corpora.aligned import aligned_members
from nmt.data.corpora.base import Context, Corpus, opener, reading_zip, resolve
from nmt.data.download import ZIP_ERRORS
from nmt.data.languages import same_language
from nmt.errors import DataError, named

_CODE = r"[A-Za-z]{2,3}(?:_[A-Za-z0-9]+)*"
# NAME.L1-L2.L1, NAME.L1-L2.L2 (ParaCrawl.en-is.is), at the top of the archive
MEMBER = re.compile(rf"(?P<name>[^/]+)\.(?P<pair>{_CODE}-{_CODE})\.(?P<code>{_CODE})")


def _members(path: Path) -> list[zipfile.ZipInfo]:
    """The archive's members named as OPUS names its text files (those of their own pair)."""
    with zipfile.ZipFile(path) as z:
        found = []
        for info in z.infolist():
            m = MEMBER.fullmatch(info.filename)
            if m and not info.is_dir() and m["code"] in m["pair"].split("-"):
                found.append(info)
        return found


class Opus:
    name = "opus"

    def claims(self, spec: str, ctx: Context) -> bool:
        path = resolve(spec, ctx.option)
        if not spec.lower().endswith(".zip") or not path.is_file():
            return False
        try:
            return bool(_members(path))
        except (OSError, *ZIP_ERRORS):
            return False  # not a zip: the Tatoeba form's error says what was expected

    def open(self, spec: str, ctx: Context) -> Corpus:
        path = resolve(spec, ctx.option)
        label = str(path)
        opener(path, label)  # a directory, a FIFO: one line
        with reading_zip(label):
            members = _members(path)
        source, target = (_member(members, code, label)
                          for code in (ctx.cfg.source, ctx.cfg.target))
        if source.filename.rpartition(".")[0] != target.filename.rpartition(".")[0]:
            raise DataError(f"{label}: {named(source.filename)} and "
                            f"{named(target.filename)} are not one corpus's two sides")
        return aligned_members(self.name, spec, path, (source, target), ctx)


def _member(members: list[zipfile.ZipInfo], code: str, label: str) -> zipfile.ZipInfo:
    for info in members:
        m = MEMBER.fullmatch(info.filename)
        if m and same_language(m["code"], code):
            return info
    held = ", ".join(named(m.filename) for m in members[:4])
    raise DataError(f"{label}: no file in language {code!r} (the archive holds {held}); "
                    "expected an OPUS corpus in Moses format of data.source and data.target")


FORM = Opus()
