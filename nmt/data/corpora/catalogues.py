"""gettext catalogues, as free software projects keep their translations:
``data.corpus = "po/de.po"`` (or a compiled ``de.mo``), or a directory of them
(``"/usr/share/locale/de/LC_MESSAGES"``: its ``.po`` and ``.mo`` files, not its
subdirectories', in name order), read with polib.

A catalogue pairs each ``msgid`` (the program's string, in the language it is written in) with
its ``msgstr`` in the catalogue's language, which its ``Language`` header names. That language
must be ``data.target`` or ``data.source`` (``de`` takes ``de_DE``; either direction trains);
without the header, the catalogue is taken to be in ``data.target``. In a directory, the
catalogues of other languages are skipped (counted in one warning; none of either language is
an error); a file given alone is an error.

What is read: every translated entry (a ``msgstr`` with text), neither fuzzy nor obsolete, its
context aside; a plural entry gives its singular with the first form and its plural with the
second, where there is one. A string of several lines is one pair, each side's lines joined
by a space (a pair is one line of the cache): translators re-wrap a paragraph as their
language needs, so that line *i* of a translation is often not the translation of line *i*,
even where both have as many lines (coreutils' French ``--help`` texts read line by line gave
pairs such as ``SIG may be a signal name like 'PIPE', or a signal number like '13'.`` /
``SIG peut être un nom de signal comme « PIPE », un numéro de signal comme``).

Bounds: a catalogue is read whole by polib, so one over :data:`MAX_BYTES` is refused; a file
that is no catalogue (not PO, a damaged MO, an encoding its header does not name truly) is one
line naming it.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from nmt.data.corpora.base import (
    Context,
    Corpus,
    Identity,
    Lazy,
    combined_sha256,
    resolve,
)
from nmt.data.download import sha256_file
from nmt.data.languages import same_language
from nmt.errors import DataError, os_reason
from nmt.files import path_problem

MAX_BYTES = 32 << 20  # the largest catalogues of big projects are a few MB
MAX_FILES = 10_000  # a directory's catalogues read (a system's locale holds a few hundred)
SUFFIXES = (".po", ".mo")


def _language(entries: Any) -> str:
    """The catalogue's language, from its header (``de``, ``pt_BR``; "" when not said)."""
    return str(entries.metadata.get("Language", "")).strip()


def _open(path: Path) -> Any:
    """The catalogue's entries (polib's), or a one-line :class:`DataError`."""
    import polib

    where = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise DataError(f"{where}: {size / 2**20:,.0f} MiB; a catalogue of more than "
                            f"{MAX_BYTES >> 20} MiB is not read (split it)")
        if path.suffix.lower() == ".mo":
            return polib.mofile(str(path))
        return polib.pofile(str(path))
    except DataError:
        raise
    except OSError as e:
        if e.errno is not None:  # the system's
            raise DataError(f"{where}: cannot read ({os_reason(e)})") from None
        line = re.search(r"\(line (\d+)\)", str(e))  # polib's syntax errors are OSErrors
        if line:
            raise DataError(f"{where}: line {line[1]}: not a gettext catalogue (a syntax "
                            "error)") from None
        said = str(e).strip().splitlines()[0] if str(e).strip() else "unreadable"
        raise DataError(f"{where}: not a gettext catalogue ({said})") from None
    except (ValueError, UnicodeError, LookupError, IndexError, KeyError, struct.error) as e:
        raise DataError(f"{where}: not a gettext catalogue ({type(e).__name__}: "
                        f"{str(e).splitlines()[0] if str(e) else 'unreadable'})") from None


def read_pairs(paths: Sequence[Path], where: str, source: str, target: str,
               log: Callable[[str], None] = print) -> Iterator[tuple[str, str]]:
    """The (source, target) pairs of the catalogues ``paths`` (a file, or a directory's:
    ``where``), one after another (the module's rules)."""
    read = 0
    others: dict[str, int] = {}  # the languages of the catalogues skipped, how many of each
    for path in paths:
        entries = _open(path)
        language = _language(entries)
        if language and not (same_language(language, target) or
                             same_language(language, source)):
            if len(paths) == 1:
                raise DataError(f"{path}: a catalogue of {language!r} (its Language header), "
                                f"not {target!r} or {source!r} (data.source = {source!r}, "
                                f"data.target = {target!r})")
            others[language] = others.get(language, 0) + 1
            continue
        read += 1
        turned = bool(language) and same_language(language, source) and \
            not same_language(language, target)
        for original, translated in _strings(entries):
            a, b = _one_line(original), _one_line(translated)
            yield (b, a) if turned else (a, b)
    if others:
        held = ", ".join(f"{n} of {language!r}" for language, n in others.items())
        if not read:
            raise DataError(f"{where}: no catalogue of {target!r} or {source!r} ({held}, by "
                            "their Language headers)")
        n = sum(others.values())
        log(f"warning: {where}: {n:,} catalogue{'s' if n > 1 else ''} of other languages "
            f"skipped ({held})")


def _strings(entries: Any) -> Iterator[tuple[str, str]]:
    """(original, translation) of each finished translation of a catalogue: neither fuzzy
    nor obsolete, a plural entry's singular with its first form and plural with its second."""
    for entry in entries:
        if not entry.msgid or entry.obsolete or "fuzzy" in entry.flags:
            continue
        if entry.msgid_plural:
            forms = entry.msgstr_plural or {}
            strings = [(entry.msgid, forms.get(0, ""))]
            if 1 in forms:
                strings.append((entry.msgid_plural, forms[1]))
        else:
            strings = [(entry.msgid, entry.msgstr)]
        yield from ((o, t) for o, t in strings if t.strip())


def _one_line(text: str) -> str:
    """``text`` as a line of the cache: a string of several lines, its lines stripped and
    joined by a space; one line as it is."""
    if "\n" not in text and "\r" not in text:
        return text
    return " ".join(line.strip() for line in re.split(r"[\r\n]+", text) if line.strip())


def _in(directory: Path) -> list[Path]:
    """The catalogues of ``directory`` (not those of its subdirectories), sorted by name."""
    try:
        return sorted(p for p in directory.iterdir()
                      if p.suffix.lower() in SUFFIXES and not p.name.startswith("."))
    except OSError:
        return []


class Catalogues:
    name = "gettext"

    def claims(self, spec: str, ctx: Context) -> bool:
        if spec.lower().endswith(SUFFIXES):
            return True
        path = resolve(spec, ctx.option)
        return path.is_dir() and bool(_in(path))

    def open(self, spec: str, ctx: Context) -> Corpus:
        path = resolve(spec, ctx.option)
        paths = _in(path) if path.is_dir() else [path]
        if len(paths) > MAX_FILES:
            raise DataError(f"{path}: {len(paths):,} catalogues; more than {MAX_FILES:,} are "
                            "not read (give a directory of one language's)")
        for file in paths:
            problem = path_problem(file)
            if problem:
                raise DataError(f"{file}: {problem}")
        digest = sha256_file(path) if paths == [path] else combined_sha256(
            {p.name: sha256_file(p) for p in paths})
        cfg = ctx.cfg
        identity = Identity(self.name, spec, digest, cfg.source, cfg.target,
                            files=[str(p) for p in paths])
        return Lazy(identity, lambda: read_pairs(paths, str(path), cfg.source, cfg.target,
                                                 ctx.log))


FORM = Catalogues()
