"""A gettext catalogue, as free software projects keep their translations:
``data.corpus = "po/de.po"`` (or a compiled ``de.mo``), read with polib.

A catalogue pairs each ``msgid`` (the program's string, in the language it is written in) with
its ``msgstr`` in the catalogue's language, which its ``Language`` header names. That language
must be ``data.target`` or ``data.source`` (``de`` takes ``de_DE``; either direction trains);
without the header, the catalogue is taken to be in ``data.target``.

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nmt.data.corpora.base import Context, Corpus, Identity, Lazy, resolve, same_language
from nmt.data.download import sha256_file
from nmt.errors import DataError, os_reason
from nmt.files import path_problem

MAX_BYTES = 32 << 20  # the largest catalogues of big projects are a few MB


def _language(entries: Any) -> str:
    """The catalogue's language, from its header (``de``, ``pt_BR``; "" when not said)."""
    metadata = getattr(entries, "metadata", {}) or {}
    return str(metadata.get("Language", "")).strip()


def _open(path: Path, where: str) -> Any:
    """The catalogue's entries (polib's), or a one-line :class:`DataError`."""
    import polib

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


def read_pairs(path: Path, where: str, source: str, target: str) -> Iterator[tuple[str, str]]:
    """The (source, target) pairs of the catalogue at ``path`` (the module's rules)."""
    entries = _open(path, where)
    language = _language(entries)
    if language and not (same_language(language, target) or same_language(language, source)):
        raise DataError(f"{where}: a catalogue of {language!r} (its Language header), not "
                        f"{target!r} or {source!r} (data.source = {source!r}, data.target = "
                        f"{target!r})")
    turned = bool(language) and same_language(language, source) and \
        not same_language(language, target)
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
        for original, translated in strings:
            if translated.strip():
                a, b = _one_line(original), _one_line(translated)
                yield (b, a) if turned else (a, b)


def _one_line(text: str) -> str:
    """``text`` as a line of the cache: a string of several lines, its lines stripped and
    joined by a space; one line as it is."""
    if "\n" not in text and "\r" not in text:
        return text
    return " ".join(line.strip() for line in re.split(r"[\r\n]+", text) if line.strip())


class Catalogues:
    name = "gettext"

    def claims(self, spec: str, ctx: Context) -> bool:
        return spec.lower().endswith((".po", ".mo"))

    def open(self, spec: str, ctx: Context) -> Corpus:
        path = resolve(spec, ctx.option)
        problem = path_problem(path)
        if problem:
            raise DataError(f"{path}: {problem}")
        cfg = ctx.cfg
        identity = Identity(self.name, spec, sha256_file(path), cfg.source, cfg.target,
                            files=[str(path)])
        return Lazy(identity, lambda: read_pairs(path, str(path), cfg.source, cfg.target))


FORM = Catalogues()
