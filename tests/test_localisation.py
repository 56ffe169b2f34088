"""Localisation files in and out (nmt.localisation, ``nmt translate --input FILE.po``): only the
untranslated strings filled and marked for review, everything else kept byte for byte, every
output valid (``msgfmt -c`` for PO), placeholders and inline tags kept or the string left, bad
input a one-line error with nothing written."""

from __future__ import annotations

import collections
import os
import re
import shutil
import string
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polib
import pytest
from conftest import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt import localisation
from nmt.api import translate_file
from nmt.config import DecodeConfig
from nmt.errors import DataError
from nmt.localisation.filled import translate_texts
from nmt.localisation.placeholders import brace_kept, printf_kept
from nmt.localisation.plurals import plural_count, plural_forms
from nmt.translation.layout import translate_laid_out
from nmt.translation.translator import StreamTranslator, TruncateHook

HEADER = r'''# German translation of demo.
# Copyright (C) 2026 Demo
#
msgid ""
msgstr ""
"Project-Id-Version: demo 1.0\n"
"Report-Msgid-Bugs-To: \n"
"POT-Creation-Date: 2026-01-01 00:00+0000\n"
"PO-Revision-Date: 2026-01-01 00:00+0000\n"
"Last-Translator: A <a@example.com>\n"
"Language-Team: German\n"
"Language: \n"
"MIME-Version: 1.0\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Content-Transfer-Encoding: 8bit\n"
'''

# each entry kind; the ones nmt must not touch are marked KEEP in a comment
ENTRIES = [r'''#. TRANSLATORS: the file name and the reason
#: src/main.c:10 src/main.c:20
#, c-format
msgid "Cannot open %s: %s"
msgstr ""
''', r'''# a translator's comment
#: src/main.c:30
#, python-format
msgid "%(count)d files in %(dir)s"
msgstr ""
''', r'''# KEEP translated, with a context
msgctxt "menu"
msgid "Open"
msgstr "Öffnen"
''', r'''# KEEP fuzzy, awaiting review
#, fuzzy
msgid "Close"
msgstr "Schließen?"
''', r'''msgctxt "verb"
msgid "Save the file"
msgstr ""
''', r'''#, c-format
msgid "One file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""
''', r'''# KEEP a plural entry translated
#, c-format
msgid "%d dog"
msgid_plural "%d dogs"
msgstr[0] "%d Hund"
msgstr[1]   "%d Hunde"
''', r'''#, python-brace-format
msgid "Hello {name}"
msgstr ""
''', r'''msgid ""
"Usage: demo [OPTION]\n"
"  --help  show this\n"
msgstr ""
''', r'''#, no-c-format
msgid "100% done"
msgstr ""
''', r'''# KEEP obsolete
#~ msgid "Old string"
#~ msgstr ""
''']
CATALOGUE = HEADER + "\n" + "\n".join(ENTRIES)
KEPT = [e for e in ENTRIES if "KEEP" in e]


def shout(texts: Sequence[str]) -> list[str]:
    """A fake translator: words in capitals, placeholders (``%...``, ``{...}``) as written."""
    return [" ".join(w if re.search(r"[%{]", w) else w.upper() for w in t.split(" "))
            for t in texts]


def drop_placeholders(texts: Sequence[str]) -> list[str]:
    """A fake translator that loses every printf and brace placeholder."""
    return [re.sub(r"%\S*|\{[^}]*\}", "", t).upper() for t in texts]


def fill_po(tmp_path: Path, text: str, translate: Callable[[list[str]], list[str]] = shout,
            language: str | None = "de") -> tuple[str, localisation.Filled]:
    source, out = tmp_path / "in.po", tmp_path / "out.po"
    source.write_text(text, encoding="utf-8")
    filled = localisation.fill_file(source, out, translate, format="po",
                                    language=lambda: language)
    return out.read_text(encoding="utf-8"), filled


def assert_msgfmt_accepts(path: Path) -> None:
    if shutil.which("msgfmt") is None:
        pytest.skip("GNU gettext's msgfmt is not installed; the PO output is not checked by it")
    # --use-fuzzy: without it msgfmt -c skips fuzzy entries, and every entry nmt fills is fuzzy
    result = subprocess.run(["msgfmt", "-c", "--use-fuzzy", "-o", os.devnull, str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_po_every_entry_kind(tmp_path: Path) -> None:
    written, filled = fill_po(tmp_path, CATALOGUE)
    assert_msgfmt_accepts(tmp_path / "out.po")
    for entry in KEPT:  # translated, fuzzy, obsolete: byte for byte
        assert entry in written
    before, after = polib.pofile(CATALOGUE), polib.pofile(written)
    assert [(e.msgctxt, e.msgid, e.obsolete) for e in before] == \
        [(e.msgctxt, e.msgid, e.obsolete) for e in after]
    for old, new in zip(before, after, strict=True):
        assert (new.comment, new.tcomment, new.occurrences) == \
            (old.comment, old.tcomment, old.occurrences)
        if old.translated() or old.obsolete or "fuzzy" in old.flags:
            assert (new.msgstr, new.msgstr_plural, new.flags) == \
                (old.msgstr, old.msgstr_plural, old.flags)
        else:  # filled, and marked for review, its own flags kept
            assert new.flags == ["fuzzy", *old.flags]
    got = {e.msgid: e for e in after}
    assert got["Cannot open %s: %s"].msgstr == "CANNOT OPEN %s: %s"
    assert got["Save the file"].msgctxt == "verb" and got["Save the file"].msgstr == \
        "SAVE THE FILE"
    assert got["One file"].msgstr_plural == {0: "ONE FILE", 1: "%d FILES"}
    assert got["Hello {name}"].msgstr == "HELLO {name}"
    assert got["Usage: demo [OPTION]\n  --help  show this\n"].msgstr == \
        "USAGE: DEMO [OPTION]\n  --HELP  SHOW THIS\n"
    assert filled.filled == 7 and filled.left == 0
    # the header: what it must set, the rest as it was
    assert after.metadata["Language"] == "de"
    assert after.metadata["Plural-Forms"] == "nplurals=2; plural=(n != 1);"
    assert after.metadata["X-Generator"] == "nmt"
    assert {k: v for k, v in after.metadata.items() if k not in ("Language", "Plural-Forms",
                                                                  "X-Generator")} == \
        {k: v for k, v in before.metadata.items() if k != "Language"}
    assert written.startswith("# German translation of demo.\n# Copyright (C) 2026 Demo\n#\n")


def test_po_filled_again_changes_nothing(tmp_path: Path) -> None:
    once, _ = fill_po(tmp_path, CATALOGUE)
    twice, filled = fill_po(tmp_path, once)
    assert twice == once and filled.filled == 0


def test_po_placeholders_lost_leave_the_entry_and_say_so(tmp_path: Path) -> None:
    written, filled = fill_po(tmp_path, CATALOGUE, drop_placeholders)
    assert_msgfmt_accepts(tmp_path / "out.po")
    got = {e.msgid: e for e in polib.pofile(written)}
    for msgid in ("Cannot open %s: %s", "%(count)d files in %(dir)s", "One file",
                  "Hello {name}"):
        assert not got[msgid].translated() and "fuzzy" not in got[msgid].flags
        assert not any(got[msgid].msgstr_plural.values())
    assert got["Save the file"].msgstr == "SAVE THE FILE"  # no placeholder: filled
    assert filled.left == 4 and len(filled.messages) == 4
    assert all(re.fullmatch(r".*in\.po: line \d+: its [a-z-]+ placeholders are not all kept; "
                            r"left untranslated \(msgid .*\)", m) for m in filled.messages)


def test_po_a_further_check_is_applied_to_every_entry(tmp_path: Path) -> None:
    source, out = tmp_path / "in.po", tmp_path / "out.po"
    source.write_text(CATALOGUE, encoding="utf-8")
    filled = localisation.fill_file(source, out, shout, format="po", language=lambda: "de",
                                    check=lambda src, tr: "FILE" not in tr)
    got = {e.msgid: e.msgstr for e in polib.pofile(out.read_text(encoding="utf-8"))}
    assert got["Save the file"] == "" and got["Cannot open %s: %s"] == "CANNOT OPEN %s: %s"
    assert any("the check refused it" in m for m in filled.messages)


PLURAL = '''msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

#, c-format
msgid "One file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""
'''


@pytest.mark.parametrize("language, forms", [
    ("ru", ["%d FILES"] * 3),  # form 0 serves 1, 21, 31...: it needs the number
    ("fr", ["ONE FILE", "%d FILES"]),
    ("ja", ["%d FILES"]),
])
def test_po_plural_forms_from_the_language(tmp_path: Path, language: str,
                                           forms: list[str]) -> None:
    written, filled = fill_po(tmp_path, PLURAL, language=language)
    assert_msgfmt_accepts(tmp_path / "out.po")
    catalog = polib.pofile(written)
    assert catalog.metadata["Plural-Forms"] == plural_forms(language)
    assert catalog[0].msgstr_plural == dict(enumerate(forms))


def test_po_plural_without_known_forms_is_left_for_the_translator(tmp_path: Path) -> None:
    written, filled = fill_po(tmp_path, PLURAL, language="xx")
    assert "Plural-Forms" not in polib.pofile(written).metadata
    assert filled.left == 1 and "no Plural-Forms" in filled.messages[0]


def test_po_header_plural_forms_win(tmp_path: Path) -> None:
    text = PLURAL.replace('charset=UTF-8\\n"', 'charset=UTF-8\\n"\n"Plural-Forms: '
                          'nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;\\n"')
    written, _ = fill_po(tmp_path, text, language="de")
    assert len(polib.pofile(written)[0].msgstr_plural) == 3


@pytest.mark.parametrize("header, model, warned", [
    ("de_DE", "de", False), ("de", "de-AT", False), ("sr@latin", "sr", False),
    ("ca@valencia", "ca", False), ("fr", "de", True), ("pt_PT", "pt-BR", True),
])
def test_po_of_another_language_than_the_models_is_said(tmp_path: Path, header: str,
                                                        model: str, warned: bool) -> None:
    text = HEADER.replace('"Language: \\n"', f'"Language: {header}\\n"') + \
        '\nmsgid "Open"\nmsgstr ""\n'
    written, filled = fill_po(tmp_path, text, language=model)
    assert polib.pofile(written).metadata["Language"] == header
    said = [m for m in filled.messages if "the model translates into" in m]
    assert said == ([f"warning: {tmp_path / 'in.po'}: its Language is {header}, the model "
                     f"translates into {model}"] if warned else [])


def test_po_in_another_charset_and_without_header(tmp_path: Path) -> None:
    text = HEADER.replace("charset=UTF-8", "charset=ISO-8859-1") + '\nmsgid "Café"\nmsgstr ""\n'
    source, out = tmp_path / "in.po", tmp_path / "out.po"
    source.write_bytes(text.encode("latin-1"))
    localisation.fill_file(source, out, shout, format="po", language=lambda: "de")
    catalog = polib.pofile(out.read_text(encoding="utf-8"))
    assert catalog.metadata["Content-Type"] == "text/plain; charset=UTF-8"
    assert catalog[0].msgstr == "CAFÉ"
    written, _ = fill_po(tmp_path, 'msgid "Cat"\nmsgstr ""\n')
    assert_msgfmt_accepts(tmp_path / "out.po")
    assert polib.pofile(written).metadata["Language"] == "de"


# --- placeholders, plurals, layout --------------------------------------------------------------

@pytest.mark.parametrize("source, translation, kept", [
    ("Cannot open %s: %s", "Kann %s nicht öffnen: %s", True),
    ("--%s argument %s too large", "Argument %2$s für Option --%1$s zu groß", False),
    ("%1$s of %2$s", "%2$s von %1$s", True),
    ("%s is %d", "%d ist %s", False),  # the arguments' order is the source's
    ("100%% of %lu", "%lu zu 100%%", True),
    ("%-10.3f", "%f", False),
    ("%(count)d in %(dir)s", "in %(dir)s: %(count)d", True),
    ("%(count)d files", "%(n)d Dateien", False),
    ("%s", "", False),
    # a % that starts no directive: formatting fails ("% P", as msgfmt -c reads it), unless
    # the source has as many (glibc's %m, read as no directive)
    ("no placeholder", "kein % Platzhalter", False),
    ("Welcome back, %(name)s!", "Bon retour, %(s) %(name)s", False),
    ("%m: %s", "%m : %s", True),
    # %% is a percent sign, no directive; lost, the % left reads the next letter
    ("%%d of %%s", "%%s von %%d", True),
    ("%%(name)s", "", True),
    ("100%% done", "100% erledigt", False),  # "% e"
    # a space is a flag in a format string, as msgfmt -c reads one: "% d" is a number
    ("50% done", "50 % erledigt", False),
    # what msgfmt reads and the protected spans keep: grouping, locale digits, the old wide
    # conversions, Python's %r, gettext's <inttypes.h> macros
    ("%'d items", "%'d Dinge", True),
    ("%'d items", "%d Dinge", False),
    ("%Id bytes", "Bytes", False),
    ("%S and %C", "%S und %C", True),
    ("%S", "%s", False),
    ("%r is not %s", "%s ist nicht %r", False),
    ("%(name)r is bad", "%(name)r ist schlecht", True),
    ("%<PRIu64> bytes", "%<PRIu64> Bytes", True),
    ("%<PRIu64> bytes", "<PRIu64> Bytes", False),
])
def test_printf_check(source: str, translation: str, kept: bool) -> None:
    assert printf_kept(source, translation) is kept


@pytest.mark.parametrize("source, translation, kept", [
    ("Hello {name}", "{name}, hallo", True),
    ("{0!r:>10} and {1}", "{1} und {0!r:>10}", True),
    ("{count} files", "{anzahl} Dateien", False),
    ("{{literal}} {x}", "{x} {{wörtlich}}", True),
    ("{{{name}}}", "{{name}}", False),  # a brace, the field {name}, a brace
    ("{name!r}", "{name}", False),
    ("{n} files", "{n} fichiers }", False),  # a lone brace: str.format fails
    ("{n} files", "{n} fichiers {", False),
    ("a } b {n}", "{n} a } b", True),  # as many as the source
])
def test_brace_check(source: str, translation: str, kept: bool) -> None:
    assert brace_kept(source, translation) is kept


def test_plural_table() -> None:
    assert plural_forms("pt_BR") == "nplurals=2; plural=(n > 1);"
    assert plural_forms("pt-PT") == plural_forms("pt") == plural_forms("de")
    assert plural_forms("sr@latin") == plural_forms("ru") and plural_forms("xx") is None
    assert plural_count("nplurals=INTEGER; plural=EXPRESSION;") is None
    assert plural_count(plural_forms("ar") or "") == 6


def test_layout_keeps_lines_and_spaces() -> None:
    """A string reaches the translator cut into its lines, all in one call, and is joined
    again; the ends of each line are kept by the translation's layout (as the API's translator
    lays out every line), not by the localisation code."""
    seen: list[list[str]] = []

    def engine(texts: list[str]) -> list[str]:
        seen.append(texts)
        return shout(texts)

    texts = ["  Indented\n\nsecond line \n", "", "\tone"]
    got = translate_texts(engine, texts)
    assert got == ["  INDENTED\n\nSECOND LINE \n", "", "\tONE"]
    assert seen == [["  Indented", "", "second line ", "", "", "\tone"]]  # lines as written
    seen.clear()
    got = translate_texts(lambda lines: translate_laid_out(lines, engine), texts)
    assert got == ["  INDENTED\n\nSECOND LINE \n", "", "\tONE"]
    assert seen == [["Indented", "second line", "one"]]  # one call, blank lines not sent
    with pytest.raises(ValueError, match="1 translations for 2 lines"):
        translate_texts(lambda lines: lines[:1], ["a\nb"])


# --- generated entries --------------------------------------------------------------------------

def reverse_words(texts: Sequence[str]) -> list[str]:
    """A fake translator that reverses the order of the words (placeholders travel along)."""
    return [" ".join(reversed(t.split(" "))) for t in texts]


_PIECE = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=8) \
    | st.sampled_from(['"', "\\", "\n", "\t", "%s", "%d", "{name}", " ", "#", "msgid"])
_TEXT = st.lists(_PIECE, min_size=1, max_size=8).map("".join).filter(lambda t: t.strip() != "")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(st.tuples(_TEXT, st.one_of(st.none(), _TEXT), st.booleans()),
                        min_size=1, max_size=6, unique_by=lambda e: (e[0], e[1])))
def test_po_generated_entries(tmp_path: Path, entries: list[tuple[str, str | None, bool]]
                              ) -> None:
    """Any text, with quotes, backslashes, line breaks and placeholders: the output parses to
    the same entries, the untranslated ones filled with the fake translation of each line, the
    translated ones as they were."""
    catalog = polib.POFile()
    catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for msgid, msgctxt, done in entries:
        catalog.append(polib.POEntry(msgid=msgid, msgctxt=msgctxt,
                                     msgstr="übersetzt" if done else ""))
    written, filled = fill_po(tmp_path, str(catalog), reverse_words)
    after = polib.pofile(written)
    assert [(e.msgctxt, e.msgid) for e in after] == [(e.msgctxt, e.msgid) for e in catalog]
    for old, new in zip(catalog, after, strict=True):
        if old.msgstr:
            assert new.msgstr == old.msgstr and new.flags == []
        elif new.msgstr:
            assert new.msgstr == translate_texts(reverse_words, [old.msgid])[0]
            assert new.flags == ["fuzzy"]
    assert filled.filled + filled.left == sum(1 for e in catalog if not e.msgstr)


_FORMATS = {  # a flag -> format strings of its kind, and the arguments they take
    "c-format": ["Cannot open %s: %s", "%d of %d files", "%1$s is %2$d%% done", "100%% sure"],
    "python-format": ["Hello %(name)s, you have %(count)d", "%s is %d%% done", "%(a)r"],
    "python-brace-format": ["{name} has {count} files", "{0} of {1}", "{{literal}} {x!r:>5}"],
}
_GARBLES = ["%", "% ", "%(", "%(s) ", "{", "}", "{x", "%s", "{name}", "%d"]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flag=st.sampled_from(sorted(_FORMATS)), data=st.data())
def test_a_garbled_format_string_is_never_written(tmp_path: Path, flag: str,
                                                   data: st.DataObject) -> None:
    """Whatever a translator makes of a format string (a stray ``%``, a lone brace, a lost or
    an added placeholder), the PO file written is valid (``msgfmt -c``) and each string it
    fills formats as its source does: a translation that would not is left untranslated."""
    msgid = data.draw(st.sampled_from(_FORMATS[flag]))
    at = data.draw(st.integers(0, len(msgid)))
    cut = data.draw(st.integers(0, 3))
    garble = data.draw(st.sampled_from(_GARBLES))

    def garbling(texts: Sequence[str]) -> list[str]:
        return [t[:at] + garble + t[at + cut:] for t in texts]

    catalog = polib.POFile()
    catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    catalog.append(polib.POEntry(msgid=msgid, msgstr="", flags=[flag]))
    written, _ = fill_po(tmp_path, str(catalog), garbling)
    assert_msgfmt_accepts(tmp_path / "out.po")
    msgstr = polib.pofile(written)[0].msgstr
    if msgstr and flag == "python-brace-format":
        list(string.Formatter().parse(msgstr))  # a lone brace raises ValueError
    elif msgstr and flag == "python-format" and "%(" in msgid:
        msgstr % collections.defaultdict(int)  # noqa: B018 (a stray % raises ValueError)


# --- XLIFF --------------------------------------------------------------------------------------

XLIFF = '''<?xml version="1.0" encoding="UTF-8"?>
<!-- exported by a CAT tool -->
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file original="app.properties" source-language="en" target-language="de" datatype="plaintext">
    <body>
      <trans-unit id="1">
        <source>Open the file</source>
        <note>A menu item.</note>
      </trans-unit>
      <trans-unit id="2">
        <source>Save</source>
        <target state="translated">Speichern</target>
      </trans-unit>
      <trans-unit id="3" translate="no">
        <source>ACME</source>
      </trans-unit>
      <trans-unit id="4">
        <source>Click <g id="1">here</g> to <x id="2"/> continue &amp; wait</source>
        <target state="needs-translation" xml:lang="de"/>
      </trans-unit>
      <group translate="no">
        <trans-unit id="5"><source>Hidden</source></trans-unit>
      </group>
      <trans-unit id="6">
        <source>Press <ph id="1">&lt;b&gt;</ph> now</source>
      </trans-unit>
    </body>
  </file>
</xliff>
'''


def shout_xml(texts: Sequence[str]) -> list[str]:
    """The fake translator for XLIFF: text in capitals, tags as written (as a model keeps
    tags and translates everything else)."""
    return [re.sub(r"(<[^>]*>)|([^<]+)", lambda m: m[1] or m[2].upper(), t) for t in texts]


def fill_xliff(tmp_path: Path, text: str, translate: Callable[[list[str]], list[str]],
               language: str | None = None) -> tuple[str, localisation.Filled]:
    source, out = tmp_path / "in.xlf", tmp_path / "out.xlf"
    source.write_text(text, encoding="utf-8")
    filled = localisation.fill_file(source, out, translate, format="xliff",
                                    language=lambda: language)
    return out.read_text(encoding="utf-8"), filled


def targets(text: str) -> dict[str, str]:
    import xml.etree.ElementTree as ET

    ns = {"x": "urn:oasis:names:tc:xliff:document:1.2"}
    root = ET.fromstring(text.encode("utf-8"))
    out = {}
    for unit in root.iterfind(".//x:trans-unit", ns):
        target = unit.find("x:target", ns)
        if target is not None:
            out[unit.get("id", "")] = ET.tostring(target, encoding="unicode").split(">", 1)[1] \
                .rsplit("</", 1)[0].replace(' xmlns:ns0="urn:oasis:names:tc:xliff:document:1.2"',
                                            "").replace("ns0:", "") + "|" + \
                f"{target.get('state')}"
    return out


@pytest.mark.parametrize("version, model, warned", [
    ("1", "de", False), ("1", "de-AT", False), ("1", "fr", True),
    ("2", "de", False), ("2", "de-CH", False), ("2", "fr", True),
])
def test_xliff_of_another_language_than_the_models_is_said(tmp_path: Path, version: str,
                                                           model: str, warned: bool) -> None:
    text, said = (XLIFF, "target-language") if version == "1" else (XLIFF2, "trgLang")
    written, filled = fill_xliff(tmp_path, text, shout_xml, language=model)
    assert filled.filled > 0
    warnings = [m for m in filled.messages if "the model translates into" in m]
    assert warnings == ([f"warning: {tmp_path / 'in.xlf'}: its {said} is de, the model "
                         f"translates into {model}"] if warned else [])


def test_xliff_round_trip(tmp_path: Path) -> None:
    written, filled = fill_xliff(tmp_path, XLIFF, shout_xml)
    assert filled.filled == 3 and filled.left == 0
    got = targets(written)
    assert got == {
        "1": "OPEN THE FILE|needs-review-translation",
        "2": "Speichern|translated",
        "4": 'CLICK <g id="1">HERE</g> TO <x id="2" /> CONTINUE &amp; WAIT|'
             "needs-review-translation",
        "6": 'PRESS <ph id="1">&lt;b&gt;</ph> NOW|needs-review-translation',
    }
    # everything but the filled targets is byte for byte the input
    without = re.sub(r'\n *<target [^>]*state-qualifier="mt-suggestion">[^\n]*</target>', "",
                     written)
    assert without == XLIFF.replace('\n        <target state="needs-translation" '
                                    'xml:lang="de"/>', "")
    assert '<target xml:lang="de" state="needs-review-translation" state-qualifier=' \
        '"mt-suggestion">CLICK' in written  # an empty target keeps its attributes
    again, filled = fill_xliff(tmp_path, written, shout_xml)
    assert again == written and filled.filled == 0


def test_xliff_lost_tags_leave_the_unit(tmp_path: Path) -> None:
    written, filled = fill_xliff(tmp_path, XLIFF,
                                 lambda ts: [re.sub(r"<[^>]*>", "", t) for t in ts])
    assert set(targets(written)) == {"1", "2", "4"} and "needs-translation" in written
    assert filled.left == 2 and all("inline tags are not all kept" in m
                                    for m in filled.messages)
    swapped, filled = fill_xliff(tmp_path, XLIFF, lambda ts: [
        t.replace('<g id="1">', "#").replace("</g>", '<g id="1">').replace("#", "</g>")
        for t in ts])
    assert filled.left == 1  # </g> before <g>: not written, the file stays well-formed


def test_xliff_wrapping_tags_nest_as_elements_do(tmp_path: Path) -> None:
    """An empty ``<g id="1"/>`` travels whole (it was read as an opening tag whose closing tag
    was missing, and the unit was left); ``<g>`` inside ``<g>`` and a prefixed ``<xl:g>`` are
    filled; a translation that crosses them (``<g><mrk></g></mrk>``) is left."""
    units = ['Click <g id="1"/> here', 'A <g id="1">b <g id="2">c</g></g> d',
             'Click <xl:g id="3">here</xl:g> now', 'A <g id="4">b <mrk mtype="x">c</mrk></g>']
    text = XLIFF.replace('xmlns="urn:oasis:names:tc:xliff:document:1.2"',
                         'xmlns="urn:oasis:names:tc:xliff:document:1.2" '
                         'xmlns:xl="urn:oasis:names:tc:xliff:document:1.2"').replace(
        "    </body>", "".join(f'      <trans-unit id="n{i}"><source>{u}</source></trans-unit>\n'
                              for i, u in enumerate(units)) + "    </body>")
    written, filled = fill_xliff(tmp_path, text, shout_xml)
    got = targets(written)
    assert got["n0"] == 'CLICK <g id="1" /> HERE|needs-review-translation'
    assert got["n1"].startswith('A <g id="1">B <g id="2">C</g></g> D|')
    assert "n2" in got and filled.left == 0
    crossed, filled = fill_xliff(tmp_path, text, lambda ts: [
        t.replace("C</mrk></g>", "C</g></mrk>") for t in shout_xml(ts)])
    assert "n3" not in targets(crossed) and filled.left == 1


def test_po_a_tag_or_icu_block_written_over_lines_reaches_the_translator_whole(
        tmp_path: Path) -> None:
    """A string is translated a line at a time; a tag or an ICU block written over two lines
    goes on one (a space for the break, as HTML and ICU read it), not cut in halves that are
    no span."""
    text = HEADER + r'''
msgid ""
"Where is <a\n"
"   href=\"https://example.org/\">the station</a>?\n"
"Next line."
msgstr ""

msgid ""
"{n, plural,\n"
"  one {# file} other {# files}} deleted"
msgstr ""
'''
    seen: list[str] = []

    def translate(texts: list[str]) -> list[str]:
        seen.extend(texts)
        return shout_xml(texts)

    written, filled = fill_po(tmp_path, text, translate)
    assert filled.filled == 2 and filled.left == 0, filled.messages
    assert seen == ['Where is <a href="https://example.org/">the station</a>?', "Next line.",
                    "{n, plural, one {# file} other {# files}} deleted"]
    got = {e.msgid: e.msgstr for e in polib.pofile(written)}
    assert got['Where is <a\n   href="https://example.org/">the station</a>?\nNext line.'] == \
        'WHERE IS <a href="https://example.org/">THE STATION</a>?\nNEXT LINE.'


def test_xliff_inline_tag_written_over_lines_travels_whole(tmp_path: Path) -> None:
    """A string is translated a line at a time; an inline element written over two lines (its
    attributes wrapped) reaches the translator on one, and the target has it as written."""
    tag = '<x id="2"\n             ctype="image"/>'
    text = XLIFF.replace("<source>Open the file</source>",
                         f"<source>Where is {tag} the station?</source>")
    seen: list[str] = []

    def translate(texts: list[str]) -> list[str]:
        seen.extend(texts)
        return shout_xml(texts)

    written, filled = fill_xliff(tmp_path, text, translate)
    assert filled.left == 0, filled.messages
    assert 'Where is <x id="2" ctype="image"/> the station?' in seen
    assert f"WHERE IS {tag} THE STATION?</target>" in written


def test_xliff_native_code_and_protected_text_reach_the_translator_as_empty_elements(
        tmp_path: Path) -> None:
    """What an inline element that travels whole holds (native code, ``&lt;b class="x"&gt;``;
    text marked not to translate) is not given to the translator, which would garble it: it
    gets an empty element of the same name and attributes, and the target has the element as
    written. Two different elements of one form are told apart."""
    sources = ['Click <ph id="1">&lt;a href="x"&gt;</ph>here<ph id="2">&lt;/a&gt;</ph> now',
               'Run <mrk mtype="protected">Acme &amp; Co</mrk> first',
               '<bpt id="1">&lt;b&gt;</bpt>Bold<ept id="1">&lt;/b&gt;</ept> and'
               ' <ph id="3">&lt;i&gt;</ph>x<ph id="3">&lt;u&gt;</ph> y']
    text = XLIFF.replace("    </body>", "".join(
        f'<trans-unit id="n{i}"><source>{s}</source></trans-unit>\n'
        for i, s in enumerate(sources)) + "    </body>")
    seen: list[str] = []

    def translate(texts: list[str]) -> list[str]:  # reorders the last unit's two <ph id="3">
        seen.extend(texts)
        return [t.replace('<ph id="3"/>X<ph id="3" nmt-n="2"/>', '<ph id="3" nmt-n="2"/>X'
                          '<ph id="3"/>') for t in shout_xml(texts)]

    written, filled = fill_xliff(tmp_path, text, translate)
    assert filled.left == 0, filled.messages
    assert seen[-3:] == ['Click <ph id="1"/>here<ph id="2"/> now',
                         'Run <mrk mtype="protected"/> first',
                         '<bpt id="1"/>Bold<ept id="1"/> and <ph id="3"/>x<ph id="3" nmt-n="2"/>'
                         ' y']
    got = targets(written)
    assert got["n0"] == ('CLICK <ph id="1">&lt;a href="x"&gt;</ph>HERE<ph id="2">&lt;/a&gt;</ph>'
                         " NOW|needs-review-translation")
    assert got["n1"] == 'RUN <mrk mtype="protected">Acme &amp; Co</mrk> FIRST|' \
        "needs-review-translation"
    assert got["n2"].startswith('<bpt id="1">&lt;b&gt;</bpt>BOLD<ept id="1">&lt;/b&gt;</ept> AND '
                                '<ph id="3">&lt;u&gt;</ph>X<ph id="3">&lt;i&gt;</ph> Y|')


def test_xliff_translation_candidates_are_not_the_units_own(tmp_path: Path) -> None:
    """A unit's ``<alt-trans>`` (1.2) and ``<mtc:matches>`` (XLIFF 2's translation candidates)
    hold sources and targets of other strings: the unit is filled from its own source, and
    they stay as written (their targets were read as the unit's, and it was never filled)."""
    alt = ('<alt-trans match-quality="80"><source>Open a file</source>'
           "<target>Eine Datei</target></alt-trans>")
    text = XLIFF.replace("<note>A menu item.</note>", f"<note>A menu item.</note>{alt}")
    written, filled = fill_xliff(tmp_path, text, shout_xml)
    assert filled.filled == 3 and targets(written)["1"] == \
        "OPEN THE FILE|needs-review-translation"
    assert alt in written
    matches = ('<mtc:matches xmlns:mtc="urn:oasis:names:tc:xliff:matches:2.0">'
               '<mtc:match ref="#s1"><source>Open a file.</source><target>Eine Datei.</target>'
               "</mtc:match></mtc:matches>")
    text = XLIFF2.replace("<notes><note>A menu item.</note></notes>", matches)
    written, filled = fill_xliff(tmp_path, text, shout_xml)
    assert (filled.filled, filled.left) == (3, 0) and matches in written
    assert "<target>OPEN THE FILE.</target>" in written


_ATOMIC = ['<x id="1"/>', '<ph id="2">&lt;b&gt;</ph>', '<g id="3"/>', '<mrk mtype="x"/>',
           '<bpt id="4">&lt;i&gt;</bpt>', '<ept id="4">&lt;/i&gt;</ept>', '<bx id="5"/>',
           '<x id="6"\n   ctype="image"/>', '<ph id="7">&lt;b\n&gt;</ph>',  # over two lines
           '<ph id="2">&lt;i&gt;</ph>', '<mrk mtype="protected">Acme &amp; Co</mrk>']


# the wrapping elements, with the attributes their start tags are written with
_WRAPPING = {"g": ' id="9"', "mrk": ' mtype="term"\n     '}


@st.composite
def inline_content(draw: st.DrawFn, atomic: Sequence[str] = tuple(_ATOMIC),
                   wrapping: dict[str, str] = _WRAPPING, depth: int = 0) -> str:
    """A source's content: text (escaped), inline tags that travel whole (``atomic``), and
    ``wrapping`` elements (1.2: ``<g>``, ``<mrk>``) around more of the same, two deep at most."""
    from xml.sax.saxutils import escape

    def wrapped(name: str) -> st.SearchStrategy[str]:
        return inline_content(atomic, wrapping, depth + 1).map(
            lambda inner: f"<{name}{wrapping[name]}>{inner}</{name}>")

    text = st.text(st.sampled_from("ab é<>&\"'"), min_size=1, max_size=6).map(escape)
    piece = text | st.sampled_from(atomic)
    if depth < 2:
        piece = st.one_of(piece, *(wrapped(name) for name in wrapping))
    return "".join(draw(st.lists(piece, min_size=1, max_size=4)))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(inline_content(), min_size=1, max_size=3), st.sampled_from(["", " ", "\n  "]),
       st.sampled_from(["", "<target/>", '<target><mrk mid="0" mtype="seg"/></target>']))
def test_xliff_segments_of_any_markup_come_back_as_written(tmp_path: Path, contents: list[str],
                                                           between: str, target: str) -> None:
    """Segments of any inline markup, with any space between them, filled by a translator
    that gives back what it was given: the target is the ``<seg-source>``'s content, or its
    one empty segment filled."""
    if target.startswith("<target><mrk"):
        contents = contents[:1]
    segs = between.join(f'<mrk mid="{i}" mtype="seg">Word {c}</mrk>'
                        for i, c in enumerate(contents))
    unit = (f'<trans-unit id="s"><source>{segs}</source><seg-source>{segs}</seg-source>'
            f"{target}</trans-unit>\n")
    text = XLIFF.replace("    </body>", unit + "    </body>")
    written, filled = fill_xliff(tmp_path, text, list)
    assert filled.left == 0 and filled.filled == 4, filled.messages  # XLIFF has 3 to fill
    assert (f'</seg-source><target state="needs-review-translation" '
            f'state-qualifier="mt-suggestion">{segs}</target></trans-unit>') in written


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(inline_content(), min_size=1, max_size=4))
def test_xliff_inline_markup_of_any_shape_comes_back_as_written(tmp_path: Path,
                                                               contents: list[str]) -> None:
    """Whatever inline markup a source holds (nested ``<g>``, empty ones, ``<x/>``, ``<ph>``,
    ``<bpt>``, escaped text), a translator that gives back what it was given fills every unit
    with the source's content, byte for byte; it was given none of what the elements that
    travel whole hold."""
    units = "".join(f'<trans-unit id="u{i}"><source>Word {c}</source></trans-unit>\n'
                    for i, c in enumerate(contents))
    text = XLIFF.replace("    </body>", units + "    </body>")
    seen: list[str] = []
    written, filled = fill_xliff(tmp_path, text, lambda ts: seen.extend(ts) or list(ts))
    assert filled.left == 0, filled.messages
    assert not any("&lt;" in t or "Acme" in t for t in seen)
    for content in contents:
        assert (f'<source>Word {content}</source><target state="needs-review-translation" '
                f'state-qualifier="mt-suggestion">Word {content}</target>') in written


SEGS_1 = ('<mrk mid="0" mtype="seg">Hello.</mrk> <mrk mid="1" mtype="seg">Where is <g id="1">'
          'the station</g>?</mrk> <mrk mid="2" mtype="seg"><x id="2"/></mrk>')
SEGS_2 = ('<mrk mid="0" mtype="seg">Go.</mrk> <mrk mid="1" mtype="seg">Run.</mrk> '
          '<mrk mid="2" mtype="seg">Stop.</mrk>')
TARGET_2 = ('<mrk mid="0" mtype="seg">Geh!</mrk> <mrk mid="1" mtype="seg"/> '
            '<mrk mid="2" mtype="seg"></mrk>')
SEGMENTED = f'''<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
<file original="a.html" source-language="en" target-language="de" datatype="html">
<body>
<trans-unit id="1">
<source>Hello. Where is <g id="1">the station</g>? <x id="2"/></source>
<seg-source>{SEGS_1}</seg-source>
</trans-unit>
<trans-unit id="2">
<source><g id="5">Go. Run. Stop.</g></source>
<seg-source><g id="5">{SEGS_2}</g></seg-source>
<target><g id="5">{TARGET_2}</g></target>
<sdl:seg-defs xmlns:sdl="http://sdl.com/FileTypes/SdlXliff/1.0"><sdl:seg id="0" conf="Translated"/>
  <sdl:seg id="1"/><sdl:seg id="2" conf="Draft"><sdl:value key="x">y</sdl:value></sdl:seg>
</sdl:seg-defs>
</trans-unit>
<trans-unit id="3">
<source>Save.</source>
<seg-source><mrk mid="0" mtype="seg">Save.</mrk></seg-source>
<target><mrk mid="0" mtype="seg">Speichern.</mrk></target>
</trans-unit>
<trans-unit id="4">
<source>Done.</source>
<seg-source><mrk mid="0" mtype="seg">Done.</mrk></seg-source>
<target/>
</trans-unit>
</body>
</file>
</xliff>
'''


def test_xliff_segmented_units_are_filled_a_segment_at_a_time(tmp_path: Path) -> None:
    """A 1.2 unit segmented by its ``<seg-source>`` (Okapi, Trados' SDLXLIFF): each segment
    with text is a string of its own; a unit without a target gets one written as the
    ``<seg-source>`` is, each segment translated; a target's empty segments are filled and
    its translated ones kept, and Trados' records of the segments filled say machine
    translated, draft; every other byte as it was."""
    seen: list[str] = []
    written, filled = fill_xliff(tmp_path, SEGMENTED, lambda ts: seen.extend(ts) or shout_xml(ts))
    assert (filled.filled, filled.left) == (3, 0), filled.messages
    assert seen == ["Hello.", 'Where is <g id="1">the station</g>?', "Run.", "Stop.", "Done."]
    marks = ' state="needs-review-translation" state-qualifier="mt-suggestion"'
    expected = SEGMENTED.replace(
        "</mrk></seg-source>\n</trans-unit>",
        '</mrk></seg-source>\n'
        f'<target{marks}><mrk mid="0" mtype="seg">HELLO.</mrk> <mrk mid="1" mtype="seg">'
        'WHERE IS <g id="1">THE STATION</g>?</mrk> <mrk mid="2" mtype="seg"><x id="2"/></mrk>'
        "</target>\n</trans-unit>", 1).replace(
        '<target><g id="5"><mrk mid="0" mtype="seg">Geh!</mrk> <mrk mid="1" mtype="seg"/> '
        '<mrk mid="2" mtype="seg"></mrk></g></target>',  # Trados' segments in a <g>
        f'<target{marks}><g id="5"><mrk mid="0" mtype="seg">Geh!</mrk> <mrk mid="1" '
        'mtype="seg">RUN.</mrk> <mrk mid="2" mtype="seg">STOP.</mrk></g></target>').replace(
        "<target/>", f'<target{marks}><mrk mid="0" mtype="seg">DONE.</mrk></target>').replace(
        '<sdl:seg id="1"/><sdl:seg id="2" conf="Draft">',  # Trados' records of them (SDLXLIFF)
        '<sdl:seg id="1" conf="Draft" origin="mt"/><sdl:seg id="2" conf="Draft" origin="mt">')
    assert written == expected
    again, filled = fill_xliff(tmp_path, written, shout_xml)  # nothing left to fill
    assert again == written and filled.filled == 0


@pytest.mark.parametrize(("name", "expected"), [
    ("de.po", "po"), ("messages.POT", "po"), ("app.xlf", "xliff"), ("app.xliff", "xliff"),
    ("Manual.docx.sdlxliff", "xliff"), ("site.html.mqxliff", "xliff"), ("notes.txt", "text"),
    ("README", "text"),
])
def test_the_format_of_a_file_is_told_by_its_extension(name: str, expected: str) -> None:
    """Trados' and memoQ's XLIFF among them: read as text, a file of them would be
    translated a line of XML at a time."""
    assert localisation.format_of(Path(name), None) == expected


def test_xliff_segment_that_loses_a_tag_leaves_its_unit(tmp_path: Path) -> None:
    written, filled = fill_xliff(tmp_path, SEGMENTED, drop_placeholders_and_tags)
    assert filled.left == 1 and "line 5: its inline tags are not all kept" in filled.messages[0]
    assert written.count("<target") == SEGMENTED.count("<target") + 0  # unit 1 has none
    assert "RUN." in written and "HELLO." not in written


def test_xliff_segment_without_a_place_in_the_target_is_said_and_left(tmp_path: Path) -> None:
    text = SEGMENTED.replace('<mrk mid="1" mtype="seg"/> ', "")  # unit 2's target lacks mid 1
    written, filled = fill_xliff(tmp_path, text, shout_xml)
    assert "STOP." in written and "RUN." not in written  # mid 2 filled, mid 1 not
    assert filled.left == 1 and filled.filled == 3
    assert filled.messages == [f"{tmp_path / 'in.xlf'}: line 9: no <mrk mtype=\"seg\"> in the "
                               "target for segment '1' of the <seg-source>; left untranslated"]


def drop_placeholders_and_tags(texts: Sequence[str]) -> list[str]:
    return [re.sub(r"<[^>]*>", "", t).upper() for t in texts]


XLIFF2 = '''<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en" trgLang="de">
  <file id="f1">
    <unit id="1">
      <notes><note>A menu item.</note></notes>
      <segment id="s1">
        <source>Open the file.</source>
      </segment>
      <ignorable>
        <source> </source>
      </ignorable>
      <segment id="s2" state="initial">
        <source>Click <pc id="1">here</pc> to <ph id="2" dataRef="d1"/> go &amp; wait.</source>
        <target/>
      </segment>
    </unit>
    <unit id="2">
      <segment state="translated"><source>Save</source><target>Speichern</target></segment>
    </unit>
    <unit id="3" translate="no">
      <segment><source>ACME</source></segment>
    </unit>
    <group id="g" translate="no">
      <unit id="4"><segment><source>Hidden</source></segment></unit>
    </group>
    <unit id="5">
      <segment>
        <source>Run <mrk id="m" translate="no">make</mrk> <sc id="3"/>now<ec startRef="3"/></source>
      </segment>
    </unit>
  </file>
</xliff>
'''

MARKS2 = ' state="translated" subState="nmt:mt"'


def test_xliff2_round_trip(tmp_path: Path) -> None:
    """XLIFF 2: segments filled (several in a unit, ignorables left), the segment marked
    translated by nmt, translate="no" inherited, an inline element marked translate="no"
    given to the translator as an empty element and kept whole, and every other byte as it
    was."""
    seen: list[str] = []

    def translate(texts: list[str]) -> list[str]:
        seen.extend(texts)
        return shout_xml(texts)

    written, filled = fill_xliff(tmp_path, XLIFF2, translate)
    assert (filled.filled, filled.left) == (3, 0), filled.messages
    assert seen == ["Open the file.", 'Click <pc id="1">here</pc> to <ph id="2" dataRef="d1"/> '
                    "go & wait.", 'Run <mrk id="m" translate="no"/> <sc id="3"/>'
                    'now<ec startRef="3"/>']
    expected = XLIFF2.replace('<segment id="s1">', f'<segment id="s1"{MARKS2}>').replace(
        "<source>Open the file.</source>", "<source>Open the file.</source>\n"
        "        <target>OPEN THE FILE.</target>").replace(
        '<segment id="s2" state="initial">', f'<segment id="s2"{MARKS2}>').replace(
        "<target/>", '<target>CLICK <pc id="1">HERE</pc> TO <ph id="2" dataRef="d1"/> GO '
        "&amp; WAIT.</target>").replace(
        "<segment>\n        <source>Run", f"<segment{MARKS2}>\n        <source>Run").replace(
        '<ec startRef="3"/></source>', '<ec startRef="3"/></source>\n        <target>RUN <mrk '
        'id="m" translate="no">make</mrk> <sc id="3"/>NOW<ec startRef="3"/></target>')
    assert written == expected  # every other byte as it was
    again, filled = fill_xliff(tmp_path, written, translate)
    assert again == written and filled.filled == 0


def test_po_of_crlf_lines_is_filled_as_of_lf_lines_and_stays_crlf(tmp_path: Path) -> None:
    of_lf, _ = fill_po(tmp_path, CATALOGUE)
    of_crlf, filled = fill_po(tmp_path, CATALOGUE.replace("\n", "\r\n"))
    written = (tmp_path / "out.po").read_bytes()
    assert filled.filled > 0 and written.count(b"\n") == written.count(b"\r\n")
    assert of_crlf == of_lf
    assert_msgfmt_accepts(tmp_path / "out.po")


@pytest.mark.parametrize("text", [XLIFF, XLIFF2], ids=["1.2", "2"])
def test_xliff_of_crlf_lines_is_filled_as_of_lf_lines_and_stays_crlf(tmp_path: Path,
                                                                     text: str) -> None:
    of_lf, _ = fill_xliff(tmp_path, text, shout_xml)
    of_crlf, filled = fill_xliff(tmp_path, text.replace("\n", "\r\n"), shout_xml)
    written = (tmp_path / "out.xlf").read_bytes()
    assert filled.filled > 0 and written.count(b"\n") == written.count(b"\r\n")  # no LF alone
    assert of_crlf == of_lf  # read with universal newlines


def test_xliff2_lost_tags_leave_the_segment(tmp_path: Path) -> None:
    written, filled = fill_xliff(tmp_path, XLIFF2, lambda ts: [re.sub(r"<[^>]*>", "", t)
                                                               for t in ts])
    assert (filled.filled, filled.left) == (1, 2)
    assert written.count(MARKS2) == 1 and "<target>Open the file.</target>" in written


_ATOMIC2 = ['<ph id="1"/>', '<sc id="2"/>', '<ec startRef="2"/>', '<cp hex="0009"/>',
            '<pc id="3"/>', '<mrk id="4" translate="no">keep &lt;me&gt;</mrk>', '<sm id="5"/>',
            '<em startRef="5"/>', '<ph id="6"\n   dataRef="d1"/>',
            '<mrk id="4" translate="no">Acme</mrk>']
_WRAPPING2 = {"pc": ' id="w"', "mrk": ' id="w"'}


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(inline_content(_ATOMIC2, _WRAPPING2), min_size=1, max_size=4))
def test_xliff2_inline_markup_of_any_shape_comes_back_as_written(tmp_path: Path,
                                                                contents: list[str]) -> None:
    units = "".join(f'<unit id="u{i}"><segment><source>Word {c}</source></segment></unit>\n'
                    for i, c in enumerate(contents))
    text = XLIFF2.replace("  </file>", units + "  </file>")
    written, filled = fill_xliff(tmp_path, text, list)
    assert filled.left == 0, filled.messages
    for content in contents:
        assert (f"<segment{MARKS2}><source>Word {content}</source><target>Word {content}"
                "</target></segment>") in written


def reverse_empty_elements(texts: Sequence[str]) -> list[str]:
    """A fake translator that moves tags about: on each line, the empty elements it was given
    (``<x id="1"/>``, the stand-ins of elements that travel whole) in reverse order."""
    out = []
    for text in texts:
        parts = re.split(r"(<[^<>]*/>)", text)
        parts[1::2] = parts[1::2][::-1]
        out.append("".join(parts))
    return out


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
@pytest.mark.parametrize("version", ["1.2", "2"])
def test_xliff_elements_moved_by_the_translator_come_back_where_it_put_them(
        tmp_path: Path, version: str, data: st.DataObject) -> None:
    """Whatever a source's elements that travel whole (two of one form among them:
    ``<ph id="2">&lt;b&gt;</ph>`` and ``<ph id="2">&lt;i&gt;</ph>``), a translator that gives
    their stand-ins back in another order gets each element as written where it put it."""
    atomic = _ATOMIC if version == "1.2" else _ATOMIC2
    wrapping = _WRAPPING if version == "1.2" else _WRAPPING2
    contents = data.draw(st.lists(inline_content(atomic, wrapping), min_size=1, max_size=4))
    if version == "1.2":
        units = "".join(f'<trans-unit id="u{i}"><source>Word {c}</source></trans-unit>\n'
                        for i, c in enumerate(contents))
        text = XLIFF.replace("    </body>", units + "    </body>")
    else:
        units = "".join(f'<unit id="u{i}"><segment><source>Word {c}</source></segment></unit>\n'
                        for i, c in enumerate(contents))
        text = XLIFF2.replace("  </file>", units + "  </file>")
    written, filled = fill_xliff(tmp_path, text, reverse_empty_elements)
    assert filled.left == 0, filled.messages
    whole = "(" + "|".join(map(re.escape, sorted(set(atomic), key=len, reverse=True))) + ")"
    for content in contents:
        parts = re.split(whole, content)
        parts[1::2] = parts[1::2][::-1]
        assert re.search(re.escape(f"<source>Word {content}</source><target") + "[^>]*>"
                         + re.escape(f"Word {''.join(parts)}</target>"), written), content


# --- bad input ----------------------------------------------------------------------------------

BILLION_LAUGHS = '''<?xml version="1.0"?>
<!DOCTYPE xliff [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>
<xliff version="1.2"><file><body><trans-unit id="1"><source>&c;</source></trans-unit>
</body></file></xliff>
'''


@pytest.mark.parametrize("name, content, message", [
    ("bad.po", 'msgid "a"\nmsgstr "b\n', r"line 2: not a valid PO file"),
    ("bad.po", 'msgid "a"\nmsgstr ""\nnonsense\n', r"line 3: not a valid PO file"),
    ("bad.po", b'msgid "a\x00"\nmsgstr ""\n', r"line 1: not a text file"),
    ("bad.po", b'msgid "caf\xe9"\nmsgstr ""\n', r"line 1: not valid utf-8"),
    ("bad.xlf", BILLION_LAUGHS, r"line 2: a document type declaration"),
    ("bad.xlf", '<?xml version="1.0"?>\n<!DOCTYPE x SYSTEM "/etc/passwd">\n<xliff/>',
     r"line 2: a document type declaration"),
    ("bad.xlf", '<xliff version="1.2"><file>\n<body></file></xliff>',
     r"line 2: not well-formed XML"),
    ("bad.xlf", '<xliff version="3.0"><file/></xliff>', r"not an XLIFF 1.x or 2.x document"),
    ("bad.xlf", '<xliff version="2.0"><file><unit id="1"><segment>\n<segment><source>a</source>'
     "</segment></segment></unit></file></xliff>",
     r"line 2: a <segment> inside another \(from line 1\); not XLIFF"),
    ("bad.xlf", '<xliff version="1.2"><file><body><trans-unit id="1"><source>a</source>\n'
     "<source>b</source></trans-unit></body></file></xliff>",
     r"line 2: a second <source> in the unit of line 1; not XLIFF"),
    ("bad.xlf", '<xliff version="2.0"><file><unit id="1"><segment><source>a</source><target/>'
     "\n<target>b</target></segment></unit></file></xliff>",
     r"line 2: a second <target> in the unit of line 1; not XLIFF"),
    ("bad.xlf", '<xliff><file/></xliff>', r"not an XLIFF 1.x or 2.x document"),
    ("bad.xlf", '<?xml version="1.0" encoding="ISO-8859-1"?><xliff version="1.2"/>',
     r"in ISO-8859-1; only UTF-8 XLIFF is read"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, name: str,
                                                  content: str | bytes, message: str) -> None:
    source, out = tmp_path / name, tmp_path / ("out" + Path(name).suffix)
    if isinstance(content, str):
        content = content.encode("utf-8")
    source.write_bytes(content)

    def never() -> StreamTranslator:
        raise AssertionError("the model is loaded for a file that cannot be read")

    with pytest.raises(DataError, match=f"^--input {re.escape(str(source))}: {message}") as e:
        translate_file(never, source, out, warn=lambda m: None)
    assert "\n" not in str(e.value) and not out.exists()


def test_fifo_and_huge_file_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    fifo = tmp_path / "messages.po"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="is a named pipe"):
        localisation.read_file(fifo, str(fifo))
    big = tmp_path / "big.po"
    big.write_text('msgid "a"\nmsgstr ""\n' * 100)
    with pytest.raises(DataError, match="larger than 0 MiB"):
        localisation.read_file(big, str(big), limit=1000)


@dataclass
class Shouting(StreamTranslator):
    """A translator the API takes, translating as :func:`shout`."""

    cfg: DecodeConfig = DecodeConfig()
    lowercase: bool = False
    normalization: str = "natural"
    source_lang: str | None = "en"
    target_lang: str | None = "de"

    def translate_as_written(self, texts: Sequence[str],
                             on_truncate: TruncateHook | None = None) -> list[str]:
        return shout(texts)


def test_api_translate_file(tmp_path: Path) -> None:
    source, out = tmp_path / "messages.pot", tmp_path / "de.po"
    source.write_text(CATALOGUE, encoding="utf-8")
    messages: list[str] = []
    filled = translate_file(Shouting(), source, out, warn=messages.append)
    assert filled.format == "po" and filled.filled == 7 and messages == []
    assert out.read_text(encoding="utf-8") == fill_po(tmp_path, CATALOGUE)[0]
    with pytest.raises(DataError, match="is the same file as input"):  # the API's own name
        translate_file(Shouting(), source, source)
    with pytest.raises(TypeError, match="check: expected a function"):
        translate_file(Shouting(), source, out, check="yes")  # type: ignore[arg-type]
    text = tmp_path / "lines.txt"
    text.write_text("hello\n")
    assert translate_file(Shouting(), text, tmp_path / "out.txt").format == "text"
    assert (tmp_path / "out.txt").read_text() == "HELLO\n"


FORMATS_PO = HEADER + r'''
#, c-format
msgid ""
"\n"
"  Usage: %s [OPTION]... FILE\n"
"    -v, --verbose   say 100%% more \n"
msgstr ""

#, c-format
msgid "%1$s of %2$s"
msgstr ""

#, c-format
msgid "Cannot open %s"
msgstr ""

#, c-format
msgid "Save the file"
msgstr ""

#, python-format
msgid "%(count)d files in %(dir)s"
msgstr ""

#, python-format
msgid "%(count)d files"
msgstr ""

#, python-brace-format
msgid "{name} has {{literal}} {count} files"
msgstr ""

#, python-brace-format
msgid "Hello {name}"
msgstr ""
'''


@dataclass
class Scripted(Shouting):
    """A translator the API takes: the translations of ``script``, :func:`shout` for other
    sentences; every batch it is given is kept in ``batches``."""

    script: dict[str, str] = field(default_factory=dict)
    batches: list[list[str]] = field(default_factory=list)

    def translate_as_written(self, texts: Sequence[str],
                             on_truncate: TruncateHook | None = None) -> list[str]:
        self.batches.append(list(texts))
        return [self.script.get(t, shout([t])[0]) for t in texts]


def test_api_po_formats_and_lines(tmp_path: Path) -> None:
    """Through the API as ``nmt translate`` goes: placeholders reordered where they may be,
    a lost or invented one refuses the entry (left untranslated and reported), ``%%`` is a
    percent sign, and a string of several lines comes back with the ends of its own."""
    source, out = tmp_path / "messages.pot", tmp_path / "de.po"
    source.write_text(FORMATS_PO, encoding="utf-8")
    translator = Scripted(script={
        "%1$s of %2$s": "%2$s von %1$s",  # numbered: their order is free
        "Cannot open %s": "Kann nicht öffnen",  # lost
        "Save the file": "Datei %s speichern",  # invented
        "%(count)d files in %(dir)s": "in %(dir)s: %(count)d Dateien",  # named: free
        "%(count)d files": "%(n)d Dateien",  # another name
        "{name} has {{literal}} {count} files": "{count} {{wörtlich}} Dateien hat {name}",
        "Hello {name}": "Hallo {Name}",  # another field
    })
    messages: list[str] = []
    filled = translate_file(translator, source, out, warn=messages.append)
    assert_msgfmt_accepts(out)
    got = {e.msgid: e for e in polib.pofile(out.read_text(encoding="utf-8"))}
    usage = "\n  Usage: %s [OPTION]... FILE\n    -v, --verbose   say 100%% more \n"
    assert got[usage].msgstr == \
        "\n  USAGE: %s [OPTION]... FILE\n    -V, --VERBOSE   SAY 100%% MORE \n"
    assert got["%1$s of %2$s"].msgstr == "%2$s von %1$s"
    assert got["%(count)d files in %(dir)s"].msgstr == "in %(dir)s: %(count)d Dateien"
    assert got["{name} has {{literal}} {count} files"].msgstr == \
        "{count} {{wörtlich}} Dateien hat {name}"
    refused = {"Cannot open %s": "c-format", "Save the file": "c-format",
               "%(count)d files": "python-format", "Hello {name}": "python-brace-format"}
    for msgid, flag in refused.items():
        assert got[msgid].msgstr == "" and "fuzzy" not in got[msgid].flags
        assert any(f"its {flag} placeholders are not all kept; left untranslated (msgid "
                   f"{msgid!r}" in m for m in messages)
    assert all("fuzzy" in e.flags for e in got.values() if e.msgstr)
    assert (filled.filled, filled.left, len(messages)) == (4, 4, 4)
    # the layout kept the ends: the engine saw no blank line and no spaces at a sentence's ends
    sentences = [s for batch in translator.batches for s in batch]
    assert sentences and all(s and s == s.strip() for s in sentences)


ONLY_SPANS_PO = HEADER + r'''
#, c-format
msgid "%s"
msgstr ""

#, c-format
msgid "%s: %s"
msgstr ""

msgid "--help"
msgstr ""

#, c-format
msgid "  -f, --force  %s"
msgstr ""

#, c-format
msgid "Cannot open %s"
msgstr ""
'''


def test_a_string_of_only_spans_is_copied_not_translated(tmp_path: Path) -> None:
    """Where the translator keeps spans (as ``nmt translate`` does), a string with no letter
    outside its placeholders and options is its own translation: a model given ``%s`` alone
    invents a sentence around it."""
    from nmt.config import DataConfig
    from nmt.translation.structure import span_guard

    source, out = tmp_path / "messages.pot", tmp_path / "de.po"
    source.write_text(ONLY_SPANS_PO, encoding="utf-8")
    translator = Scripted()
    translator.spans = span_guard(DataConfig())
    filled = translate_file(translator, source, out)
    assert_msgfmt_accepts(out)
    got = {e.msgid: e for e in polib.pofile(out.read_text(encoding="utf-8"))}
    for msgid in ("%s", "%s: %s", "--help", "  -f, --force  %s"):
        assert got[msgid].msgstr == msgid and "fuzzy" in got[msgid].flags
    assert got["Cannot open %s"].msgstr == "CANNOT OPEN %s"
    assert filled.filled == 5 and translator.batches == [["Cannot open %s"]]


def test_cli_fills_a_po_file_with_a_trained_run(tmp_path: Path) -> None:
    from test_decode import make_run

    run = make_run(tmp_path / "run")
    source, out = tmp_path / "messages.po", tmp_path / "fr.po"
    source.write_text(CATALOGUE, encoding="utf-8")
    code, _, err = invoke("translate", "--run", str(run), "--device", "cpu",
                          "--input", str(source), "--output", str(out))
    assert code == 0, err
    assert_msgfmt_accepts(out)
    written = out.read_text(encoding="utf-8")
    assert all(entry in written for entry in KEPT)
    assert re.search(r"--output .*fr\.po: \d+ strings filled and marked for review", err)
    assert polib.pofile(written).metadata["Language"] == "fr"  # the run's data.target
    one, one_out = tmp_path / "one.po", tmp_path / "one-fr.po"
    one.write_text(HEADER + '\nmsgid "Save the file"\nmsgstr ""\n', encoding="utf-8")
    code, _, err = invoke("translate", "--run", str(run), "--device", "cpu",
                          "--input", str(one), "--output", str(one_out))
    assert code == 0, err
    assert f"--output {one_out}: 1 string filled and marked for review" in " ".join(err.split())
    code, _, err = invoke("translate", "--run", str(run), "--input", str(source), "--output",
                          str(source), "--format", "po")
    assert code != 0 and "is the same file as --input" in err
    bad = tmp_path / "bad.po"
    bad.write_text('msgid "a"\nmsgstr "b\n')
    code, _, err = invoke("translate", "--run", str(run), "--input", str(bad), "--output",
                          str(tmp_path / "bad-out.po"))
    assert code != 0 and "line 2: not a valid PO file" in err and "Traceback" not in err
    assert not (tmp_path / "bad-out.po").exists()
