"""PO files (gettext), read with polib: the untranslated entries filled, nothing else rewritten.

Rules (those of gettext's tools and of Weblate's and Pootle's machine translation):

- An entry is filled when all its ``msgstr`` are empty (a plural entry with some forms written
  is someone's work in progress). Translated entries, fuzzy ones, obsolete ``#~`` entries,
  comments and the file's layout are kept byte for byte: only the lines of the entries nmt
  fills and of the header are written again (in gettext's layout, 78 columns).
- A filled entry gets the ``fuzzy`` flag: a translator reviews it before ``msgfmt`` uses it.
  Its ``msgctxt``, comments (translator, extracted, references) and other flags are kept.
- Plural entries: ``msgstr[0]`` is the translation of ``msgid`` and every other form that of
  ``msgid_plural``, as many as the header's ``Plural-Forms`` says. ``msgstr[0]`` is the
  translation of ``msgid_plural`` too when the language has one form, or when ``msgid`` lacks
  ``msgid_plural``'s placeholders in a language with more than two forms (``msgfmt -c``
  refuses a form that serves several numbers without the number's placeholder).
- ``c-format``, ``python-format``, ``python-brace-format``: every form must keep its source's
  placeholders (:mod:`nmt.localisation.placeholders`), and any further check given too; an
  entry with a form that fails is left untranslated and reported.
- The header: ``Language`` set when empty (to the translator's target language),
  ``Plural-Forms`` when missing (from :mod:`nmt.localisation.plurals`), ``Content-Type`` to
  ``charset=UTF-8`` (the file is written in UTF-8, whatever it was read in), ``X-Generator``
  to nmt. Its other fields, comments and flags stay as they were.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

import polib

from nmt.errors import DataError, shown
from nmt.localisation.filled import (
    Filled,
    NamedCheck,
    Translate,
    other_language,
    translate_texts,
)
from nmt.localisation.placeholders import FORMAT_CHECKS
from nmt.localisation.plurals import plural_count, plural_forms

GENERATOR = "nmt"
WIDTH = 78  # polib's, as msgcat's 79 columns less the closing quote
_CHARSET = re.compile(rb'"Content-Type:[^"]*charset=([A-Za-z0-9_.:-]+)', re.IGNORECASE)
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_LINE = re.compile(rf"|#.*|(?:msgctxt|msgid|msgid_plural|msgstr(?:\[[0-9]+\])?)\s*{_QUOTED}"
                   rf"|{_QUOTED}")  # what a line of a PO file may be, surrounding spaces aside
_SKIPPED = re.compile(r"|#[:,.]|#~\|(?:\s.*)?")  # lines polib reads as nothing
_STRINGS = re.compile(r"\s*(?:#~\s+)?(?:msg|\")")  # a line of an entry's own, live or obsolete
_SYNTAX = re.compile(r"\(line ([0-9]+)\)(?::\s*(.*))?")
_TWO_FORMS = {"n!=1", "n>1"}  # plural expressions whose form 0 serves one number (msgfmt's view)


def fill(data: bytes, name: str, translate: Translate, language: Callable[[], str | None],
         checks: Sequence[NamedCheck]) -> tuple[bytes, Filled]:
    """The PO file ``data`` (``name`` in messages) with its untranslated entries filled."""
    text = decode(data, name)
    catalog = parse(text, name)
    header = dict(catalog.metadata)
    report = Filled("po")
    model_language = language()
    language_ = header.get("Language") or model_language
    report.messages += other_language(name, "its Language", header.get("Language", ""),
                                      model_language)
    forms = plural_count(header.get("Plural-Forms", ""))
    if forms is None and language_ and plural_forms(language_):
        header["Plural-Forms"] = plural_forms(language_) or ""
        forms = plural_count(header["Plural-Forms"])
    if language_:
        header["Language"] = language_
    header["Content-Type"] = _with_utf8(header.get("Content-Type", ""))
    header["X-Generator"] = GENERATOR

    todo = [e for e in catalog if _untranslated(e)]
    plural = [e for e in todo if e.msgid_plural]
    if plural and forms is None:
        report.left += len(plural)
        for e in plural:
            report.messages.append(f"{name}: line {e.linenum}: a plural entry, and the header has "
                               f"no Plural-Forms (none known for {language_ or 'the language'})"
                               "; set it and run again")
        todo = [e for e in todo if not e.msgid_plural]
    sources = [s for e in todo for s in ([e.msgid, e.msgid_plural] if e.msgid_plural
                                         else [e.msgid])]
    translated = iter(translate_texts(translate, sources))
    changed: set[int] = set()
    for entry in todo:
        pairs = _forms(entry, next(translated), next(translated) if entry.msgid_plural else "",
                       forms or 1, header.get("Plural-Forms", ""))
        entry_checks = [(f"its {flag} placeholders are not all kept", FORMAT_CHECKS[flag])
                        for flag in entry.flags if flag in FORMAT_CHECKS] + list(checks)
        failed = next((why for why, check in entry_checks
                       for source, out in pairs if not check(source, out)), None)
        if failed is not None or not all(out for _, out in pairs):
            why = failed or "the translation is empty"
            report.messages.append(f"{name}: line {entry.linenum}: {why}; left "
                                   f"untranslated (msgid {shown(entry.msgid)})")
            report.left += 1
            continue
        if entry.msgid_plural:
            entry.msgstr_plural = {i: out for i, (_, out) in enumerate(pairs)}
        else:
            entry.msgstr = pairs[0][1]
        if "fuzzy" not in entry.flags:
            entry.flags.insert(0, "fuzzy")
        changed.add(id(entry))
        report.filled += 1
    return write(text, catalog, header, changed).encode("utf-8"), report


def decode(data: bytes, name: str) -> str:
    """The text of a PO file, in the charset its header names (UTF-8 when it names none, or
    the template's ``CHARSET``)."""
    found = _CHARSET.search(data)
    charset = found[1].decode("ascii") if found else "utf-8"
    if charset.upper() == "CHARSET":
        charset = "utf-8"
    try:
        text = data.decode(charset)
        text.encode("utf-8")  # what it is written in: no lone surrogate (utf-7, unicode_escape)
    except LookupError:  # unknown, or no text encoding (rot13, base64)
        raise DataError(f"{name}: the header's charset {charset} is unknown; expected a text "
                        "encoding such as UTF-8") from None
    except UnicodeError as e:  # a byte it cannot read, a character UTF-8 cannot write, or
        # the codec's own refusal (idna)
        line = (data.count(b"\n", 0, e.start) + 1 if isinstance(e, UnicodeDecodeError) else
                e.object.count("\n", 0, e.start) + 1 if isinstance(e, UnicodeEncodeError)
                else None)
        where = f"line {line}: " if line else ""
        raise DataError(f"{name}: {where}not valid {charset} (the header's charset); convert "
                        "the file or correct the header") from None
    return text.removeprefix("\ufeff")


class _Catalogue(polib.POFile):
    """polib's catalogue, which keeps the header entry it takes out of the list of entries
    (wherever the file has it)."""

    header_entry: polib.POEntry | None = None

    def remove(self, entry: polib.POEntry) -> None:
        self.header_entry = entry
        super().remove(entry)


def parse(text: str, name: str) -> _Catalogue:
    """The catalogue of ``text``; a syntax error is one line naming the file and line."""
    for number, line in enumerate(text.splitlines(), 1):  # polib lets some through
        if not _LINE.fullmatch(line.strip()):
            raise DataError(f"{name}: line {number}: not a valid PO file (expected a comment, "
                            'a keyword and a quoted string, or a quoted string: "...")')
    # polib reads an entry once a line after it starts another or ends the file: a line it
    # skips (an empty "#,") after the last entry would make it drop that entry
    lines = text.splitlines(keepends=True)
    last = max((i for i, line in enumerate(lines) if not _SKIPPED.fullmatch(line.strip())),
               default=-1)
    body = "".join(lines[:last + 1]).rstrip("\r\n") + "\n"
    try:  # with a line end polib never reads the text as a file name
        catalogue = polib.pofile(body, wrapwidth=WIDTH, klass=_Catalogue)
    except (OSError, ValueError, LookupError, IndexError) as e:
        found = _SYNTAX.search(str(e))
        where = f"line {found[1]}: " if found else ""
        reason = found[2] if found and found[2] else "syntax error"
        raise DataError(f"{name}: {where}not a valid PO file ({reason})") from None
    headers = 0
    for entry in _in_order(catalogue):  # what polib lets through too
        headers += not (entry.msgid or entry.obsolete or entry.msgctxt is not None)
        why = "a second header (an entry with an empty msgid)" if headers > 1 else _flaw(
            entry, entry is catalogue.header_entry)
        if why:
            at = _start(entry, text.splitlines()) + 1
            raise DataError(f"{name}: line {at}: not a valid PO file ({why})")
    return catalogue


def _flaw(entry: polib.POEntry, header: bool) -> str | None:
    """What makes ``entry`` (the ``header``, or not) one that polib reads and msgfmt does
    not, or that the two read differently; None when nothing does."""
    if entry.msgid_plural and not entry.msgstr_plural:
        return "msgid_plural without msgstr[N]"
    if entry.msgstr_plural and not entry.msgid_plural:
        return "msgstr[N] without msgid_plural"
    if header:
        fields = Counter(line.partition(":")[0] for line in entry.msgstr.splitlines()
                         if ":" in line)
        twice = next((field for field, n in fields.items() if n > 1), None)
        if twice:
            return f"the header gives {twice} twice; expected each field once"
    return None


def _in_order(catalogue: _Catalogue) -> list[polib.POEntry]:
    """The entries of ``catalogue``, its header entry too, in the order of the file."""
    found = catalogue.header_entry
    return sorted([*catalogue, *([found] if found else [])], key=lambda e: e.linenum)


def _untranslated(entry: polib.POEntry) -> bool:
    if entry.obsolete or not entry.msgid:
        return False
    if entry.msgid_plural:
        return not any(entry.msgstr_plural.values())
    return not entry.msgstr


def _forms(entry: polib.POEntry, singular: str, plural: str, forms: int,
           plural_forms: str) -> list[tuple[str, str]]:
    """(source, translation) of each msgstr of ``entry`` (see the module's plural rule)."""
    if not entry.msgid_plural:
        return [(entry.msgid, singular)]
    expression = plural_forms.partition("plural=")[2].split(";")[0]
    one_number = forms == 2 and re.sub(r"[\s()]", "", expression) in _TWO_FORMS
    first = (entry.msgid, singular)
    if forms == 1 or not (one_number or _same_placeholders(entry.msgid, entry.msgid_plural)):
        first = (entry.msgid_plural, plural)
    return [first] + [(entry.msgid_plural, plural)] * (forms - 1)


def _same_placeholders(a: str, b: str) -> bool:
    return all(check(a, b) for check in FORMAT_CHECKS.values())


def _with_utf8(content_type: str) -> str:
    if "charset=" not in content_type:
        return "text/plain; charset=UTF-8"
    return re.sub(r"charset=[^;\s]*", "charset=UTF-8", content_type)


def write(text: str, catalog: _Catalogue, header: dict[str, str], changed: set[int]) -> str:
    """``text`` with its header set to ``header`` (a new one before the first entry when it
    had none) and the entries in ``changed`` (their ids) written again; every other line as it
    was."""
    lines = text.splitlines(keepends=True)  # as polib numbers them
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    found = catalog.header_entry
    entries = _in_order(catalog)
    starts = [_start(e, lines) for e in entries] + [len(lines)]
    top = "".join(lines[:starts[0]])  # the file's own comments
    if found is None:  # a new header after them, on a line of its own
        ended = not top or top.endswith(("\n", "\r"))
        top += ("" if ended else newline) + _header([], header, newline) + newline
    out = [top]
    for entry, start, end in zip(entries, starts, starts[1:], strict=False):
        block = lines[start:end]
        if entry is found:
            out.append(_header(block, header, newline))
            continue
        if id(entry) not in changed:
            out.extend(block)
            continue
        own = max(i for i, line in enumerate(block) if _STRINGS.match(line))
        out.append(entry.__unicode__(WIDTH).rstrip("\n").replace("\n", newline) + newline)
        out.extend(block[own + 1:])  # the blank lines after it
    return "".join(out)


def _start(entry: polib.POEntry, lines: list[str]) -> int:
    """The index of the first line of ``entry``, its comments included. polib numbers it from
    1, but says 0 of the first entry of a file: that one starts after the comments at the top
    (the file's, for polib), at its first keyword or comment of its own (``#. note``,
    ``#:``...); a line polib reads as nothing (``#.`` alone) leaves the file's comments going
    on after it, as polib reads them."""
    if entry.linenum:
        return int(entry.linenum) - 1
    return next((i for i, line in enumerate(lines) if not _SKIPPED.fullmatch(line.strip())
                 and not re.match(r"#(?:\s|#|$)", line.strip())), 0)


def _header(block: list[str], header: dict[str, str], newline: str) -> str:
    """The header entry's lines with its strings set to ``header``, its comments and flags as
    they were (a new header when ``block`` is empty)."""
    fields = "".join(f'"{polib.escape(key)}: {polib.escape(value)}\\n"{newline}'
                     for key, value in header.items())
    written = f'msgid ""{newline}msgstr ""{newline}{fields}'
    own = [i for i, line in enumerate(block) if _STRINGS.match(line)]
    at, end = (own[0], own[-1] + 1) if own else (len(block), len(block))
    return "".join(block[:at]) + written + "".join(block[end:])
