"""Language codes and what the text rules need to know about each language's script.

A language is named by its ISO 639-1 code (``en``, ``fr``, ``de``) or, for one without such a
code, its ISO 639-3 code (``yue``, ``kab``). Tatoeba / ManyThings.org name their files with
3-letter codes (``deu-eng.zip``, ``spa.txt``): :func:`from_tatoeba` maps them.

What the rest of the package asks of a language: its name (Argos packages show it), whether its
script has letter case (case augmentation, lower-casing), whether it separates words with spaces
(the word tokenizer), how long a text is in words (``max_words``, the ``ratio`` filter), which
letters are of its script (the ``script`` filter) and whether it is written right to left.
Whether a file's language tag or gettext locale (``pt-BR``, ``sr@latin``) names a configured
language is :func:`same_language`, the one rule every file form follows.

Words of a script written without spaces are counted as characters of that script divided by
the characters a word of English comes to in it (:data:`CHARS_PER_WORD`), so that "as long as"
means the same between any two languages: ``PAM authentication failed for user "%s"`` (6
words) and ``ユーザー"%s"のPAM認証に失敗しました`` (14 Japanese characters and 2 other words, about
6.7 words) are about as long, where counting its characters as words made the Japanese three
times as long.
"""

from __future__ import annotations

import functools
import itertools
import unicodedata
from dataclasses import dataclass

from nmt.errors import DataError


@dataclass(frozen=True)
class Language:
    code: str  # ISO 639-1 where there is one, else ISO 639-3
    name: str  # English name, as Argos Translate shows it
    script: str  # Latin, Cyrillic, Han, ...

    @property
    def has_case(self) -> bool:
        """Upper and lower case letters (``THE CAT`` and ``the cat`` are one sentence)."""
        return self.script in _CASED

    @property
    def spaced(self) -> bool:
        """Words separated by spaces (Chinese, Japanese and Thai are written without)."""
        return self.script not in CHARS_PER_WORD

    def writes(self, char: str) -> bool:
        """Whether ``char`` is of this language's script (:func:`script_of`)."""
        return script_of(char) in _SCRIPT_NAMES.get(self.script, {self.script.upper()})

    def words(self, text: str) -> float:
        """How long ``text`` is in words: its words with a letter or digit (French ``!`` and
        ``»`` are no words); in a script written without spaces, its characters of that script
        over :data:`CHARS_PER_WORD`, each run of other letters and digits (``PAM``, ``Win``)
        one word."""
        if self.spaced:
            return sum(1 for word in text.split() if any(c.isalnum() for c in word))
        per_word = CHARS_PER_WORD[self.script]
        count = 0.0
        for own, run in itertools.groupby(text, lambda c: self.writes(c) if c.isalnum() else None):
            if own is not None:
                count += sum(1 for _ in run) / per_word if own else 1
        return count


_CASED = {"Latin", "Cyrillic", "Greek", "Armenian"}
# Scripts written without spaces, and the characters of each that a word of English comes to:
# the median over the strings of Debian's catalogues translated from English, at least five
# English words each and no letter of another script in the translation (Chinese 5,674 strings,
# Japanese 4,080, Thai 480, Burmese 403: docs/DATA.md, "Cleaning and mixing"). Lao, Khmer and
# Tibetan, of which a Debian system holds too few strings to measure, take Thai's figure (their
# scripts spell syllables as Thai's does).
CHARS_PER_WORD = {"Han": 1.7, "Japanese": 3.0, "Thai": 4.3, "Myanmar": 2.6,
                  "Lao": 4.3, "Khmer": 4.3, "Tibetan": 4.3}
# Unicode names a script's letters start with, where they are not the script's own name
_SCRIPT_NAMES = {"Han": {"CJK", "IDEOGRAPHIC"},
                 "Japanese": {"CJK", "IDEOGRAPHIC", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA"},
                 "Hangul": {"HANGUL", "CJK"}}


def letter_runs(text: str) -> list[tuple[int, int]]:
    """Where ``text``'s words are, cut wherever the script changes (``のPAM認証``: ``の``,
    ``PAM``, ``認証``): the runs of letters of one script, as (start, end). Letters of no script
    (fullwidth, modifier) are in none."""
    runs, start, current = [], 0, ""
    for i, c in enumerate(text):
        script = script_of(c) if c.isalpha() else ""
        if script != current:
            if current:
                runs.append((start, i))
            start, current = i, script
    if current:
        runs.append((start, len(text)))
    return runs


@functools.lru_cache(maxsize=65536)
def script_of(char: str) -> str:
    """The script a character's Unicode name starts with: LATIN, CYRILLIC, CJK, HIRAGANA,
    ARABIC, DIGIT...; halfwidth forms are of their script (``ｶ`` is KATAKANA); fullwidth and
    modifier letters are of none ("")."""
    words = unicodedata.name(char, "").split(" ", 2)
    if words[0] == "HALFWIDTH" and len(words) > 1:
        return words[1]
    return "" if words[0] in ("FULLWIDTH", "MODIFIER") else words[0]

# code, name, script, Tatoeba's 3-letter code
_TABLE = [
    ("af", "Afrikaans", "Latin", "afr"), ("am", "Amharic", "Ethiopic", "amh"),
    ("ar", "Arabic", "Arabic", "ara"), ("az", "Azerbaijani", "Latin", "aze"),
    ("be", "Belarusian", "Cyrillic", "bel"), ("bg", "Bulgarian", "Cyrillic", "bul"),
    ("bn", "Bengali", "Bengali", "ben"), ("br", "Breton", "Latin", "bre"),
    ("bs", "Bosnian", "Latin", "bos"), ("ca", "Catalan", "Latin", "cat"),
    ("cs", "Czech", "Latin", "ces"), ("cy", "Welsh", "Latin", "cym"),
    ("da", "Danish", "Latin", "dan"), ("de", "German", "Latin", "deu"),
    ("el", "Greek", "Greek", "ell"), ("en", "English", "Latin", "eng"),
    ("eo", "Esperanto", "Latin", "epo"), ("es", "Spanish", "Latin", "spa"),
    ("et", "Estonian", "Latin", "est"), ("eu", "Basque", "Latin", "eus"),
    ("fa", "Persian", "Arabic", "pes"), ("fi", "Finnish", "Latin", "fin"),
    ("fr", "French", "Latin", "fra"), ("ga", "Irish", "Latin", "gle"),
    ("gl", "Galician", "Latin", "glg"), ("gu", "Gujarati", "Gujarati", "guj"),
    ("he", "Hebrew", "Hebrew", "heb"), ("hi", "Hindi", "Devanagari", "hin"),
    ("hr", "Croatian", "Latin", "hrv"), ("hu", "Hungarian", "Latin", "hun"),
    ("hy", "Armenian", "Armenian", "hye"), ("ia", "Interlingua", "Latin", "ina"),
    ("id", "Indonesian", "Latin", "ind"), ("is", "Icelandic", "Latin", "isl"),
    ("it", "Italian", "Latin", "ita"), ("ja", "Japanese", "Japanese", "jpn"),
    ("ka", "Georgian", "Georgian", "kat"), ("kk", "Kazakh", "Cyrillic", "kaz"),
    ("km", "Khmer", "Khmer", "khm"), ("kn", "Kannada", "Kannada", "kan"),
    ("ko", "Korean", "Hangul", "kor"), ("ku", "Kurdish", "Latin", "kur"),
    ("la", "Latin", "Latin", "lat"), ("lo", "Lao", "Lao", "lao"),
    ("lt", "Lithuanian", "Latin", "lit"), ("lv", "Latvian", "Latin", "lvs"),
    ("mk", "Macedonian", "Cyrillic", "mkd"), ("ml", "Malayalam", "Malayalam", "mal"),
    ("mn", "Mongolian", "Cyrillic", "mon"), ("mr", "Marathi", "Devanagari", "mar"),
    ("ms", "Malay", "Latin", "zsm"), ("my", "Burmese", "Myanmar", "mya"),
    ("nb", "Norwegian Bokmål", "Latin", "nob"), ("ne", "Nepali", "Devanagari", "npi"),
    ("nl", "Dutch", "Latin", "nld"), ("pa", "Punjabi", "Gurmukhi", "pan"),
    ("pl", "Polish", "Latin", "pol"), ("pt", "Portuguese", "Latin", "por"),
    ("ro", "Romanian", "Latin", "ron"), ("ru", "Russian", "Cyrillic", "rus"),
    ("si", "Sinhala", "Sinhala", "sin"), ("sk", "Slovak", "Latin", "slk"),
    ("sl", "Slovenian", "Latin", "slv"), ("sq", "Albanian", "Latin", "sqi"),
    ("sr", "Serbian", "Cyrillic", "srp"), ("sv", "Swedish", "Latin", "swe"),
    ("sw", "Swahili", "Latin", "swh"), ("ta", "Tamil", "Tamil", "tam"),
    ("te", "Telugu", "Telugu", "tel"), ("th", "Thai", "Thai", "tha"),
    ("tl", "Tagalog", "Latin", "tgl"), ("tr", "Turkish", "Latin", "tur"),
    ("tt", "Tatar", "Cyrillic", "tat"), ("ug", "Uyghur", "Arabic", "uig"),
    ("uk", "Ukrainian", "Cyrillic", "ukr"), ("ur", "Urdu", "Arabic", "urd"),
    ("uz", "Uzbek", "Latin", "uzb"), ("vi", "Vietnamese", "Latin", "vie"),
    ("yi", "Yiddish", "Hebrew", "yid"), ("zh", "Chinese", "Han", "cmn"),
    # languages without an ISO 639-1 code keep their 3-letter one
    ("ber", "Berber", "Latin", "ber"), ("kab", "Kabyle", "Latin", "kab"),
    ("yue", "Cantonese", "Han", "yue"), ("lfn", "Lingua Franca Nova", "Latin", "lfn"),
    ("nds", "Low German", "Latin", "nds"), ("tok", "Toki Pona", "Latin", "tok"),
]
LANGUAGES: dict[str, Language] = {c: Language(c, n, s) for c, n, s, _ in _TABLE}
_TATOEBA: dict[str, str] = {t: c for c, _, _, t in _TABLE}


# The scripts a code may name after its language (``sr-Latn``: Serbian in Latin letters, as
# the Serbian catalogues of ``sr@latin`` are written): ISO 15924 code -> (this table's script,
# the word a language's name takes for it)
SCRIPTS: dict[str, tuple[str, str]] = {
    "Latn": ("Latin", "Latin"), "Cyrl": ("Cyrillic", "Cyrillic"), "Arab": ("Arabic", "Arabic"),
    "Deva": ("Devanagari", "Devanagari"), "Grek": ("Greek", "Greek"),
    "Hebr": ("Hebrew", "Hebrew"), "Guru": ("Gurmukhi", "Gurmukhi"),
    "Beng": ("Bengali", "Bengali"), "Mong": ("Mongolian", "Mongolian"),
    "Tfng": ("Tifinagh", "Tifinagh"), "Hans": ("Han", "Simplified"),
    "Hant": ("Han", "Traditional"),
}


def known_language(code: str) -> bool:
    """Whether ``code`` names a language of the table, alone (``sr``) or with a script it may
    be written in (``sr-Latn``, ``zh-Hant``, ``uz-Cyrl``: :data:`SCRIPTS`)."""
    base, dash, script = code.partition("-")
    return code in LANGUAGES or (bool(dash) and base in LANGUAGES and script in SCRIPTS)


def base_language(code: str) -> str:
    """The language of ``code`` without its script: ``sr-Latn`` -> ``sr``, for the rules that
    are the language's in any script (BLEU's tokenizer, sentence splitting)."""
    return code.partition("-")[0]


@functools.cache
def language(code: str) -> Language:
    """The :class:`Language` of ``code`` (the config check has made sure it is known): a
    script after the code is the one its text is written in (``sr-Latn``: "Serbian (Latin)",
    whose ``script`` filter wants Latin letters)."""
    if code in LANGUAGES:
        return LANGUAGES[code]
    base, _, script = code.partition("-")
    name, word = LANGUAGES[base].name, SCRIPTS[script][1]
    return Language(code, f"{name} ({word})", SCRIPTS[script][0])


# gettext's locale modifiers that name a script (``sr@latin``), as the ISO 15924 subtag of a
# language tag (``sr-Latn``); other modifiers (``ca@valencia``) are subtags as written
_SCRIPT_MODIFIERS = {"latin": "latn", "cyrillic": "cyrl", "devanagari": "deva",
                     "arabic": "arab", "hebrew": "hebr", "iqtelif": "latn"}


def same_language(tag: str, code: str) -> bool:
    """Whether the language tag a file gives (a TMX ``xml:lang``, a catalogue's ``Language``
    header) is the language ``code`` or a form of it: its language is ``code``'s and it has
    every subtag ``code`` has, in any case, ``_`` or ``-`` between them. ``en`` takes ``en-US``,
    ``EN_gb`` and ``en-Latn``; ``pt-BR`` takes ``pt-BR`` and ``pt-Latn-BR``, not ``pt`` or
    ``pt-PT``. A gettext locale is read as a tag: ``sr_RS@latin`` is ``sr-RS-Latn``,
    ``ca@valencia`` is ``ca-valencia``, ``de_DE.UTF-8`` is ``de-DE``."""
    have, want = _subtags(tag), _subtags(code)
    return bool(have[0]) and have[0] == want[0] and set(want[1:]) <= set(have[1:])


def _subtags(tag: str) -> list[str]:
    locale, _, modifier = tag.strip().lower().partition("@")
    subtags = locale.partition(".")[0].replace("_", "-").split("-")
    if modifier:
        subtags.append(_SCRIPT_MODIFIERS.get(modifier, modifier))
    return subtags


def from_tatoeba(code: str, where: str) -> str:
    """``"deu"`` -> ``"de"``: the language of a Tatoeba 3-letter code (a one-line error naming
    ``where`` for one this table does not know)."""
    if code in _TATOEBA:
        return _TATOEBA[code]
    if code in LANGUAGES:  # already a code of ours
        return code
    raise DataError(f"{where}: unknown language code {code!r} (expected a Tatoeba 3-letter code "
                    "such as deu, spa, rus, jpn; or set data.source and data.target)")
