"""Language codes and what the text rules need to know about each language's script.

A language is named by its ISO 639-1 code (``en``, ``fr``, ``de``) or, for one without such a
code, its ISO 639-3 code (``yue``, ``kab``). Tatoeba / ManyThings.org name their files with
3-letter codes (``deu-eng.zip``, ``spa.txt``): :func:`from_tatoeba` maps them.

What the rest of the package asks of a language: its name (Argos packages show it), whether its
script has letter case (case augmentation, lower-casing), whether it separates words with spaces
(``max_words``, the word tokenizer) and whether it is written right to left.
"""

from __future__ import annotations

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
        return self.script not in _UNSPACED


_CASED = {"Latin", "Cyrillic", "Greek", "Armenian"}
_UNSPACED = {"Han", "Japanese", "Thai", "Lao", "Khmer", "Myanmar", "Tibetan"}

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


def language(code: str) -> Language:
    """The :class:`Language` of ``code`` (the config check has made sure it is known)."""
    return LANGUAGES[code]


def from_tatoeba(code: str, where: str) -> str:
    """``"deu"`` -> ``"de"``: the language of a Tatoeba 3-letter code (a one-line error naming
    ``where`` for one this table does not know)."""
    if code in _TATOEBA:
        return _TATOEBA[code]
    if code in LANGUAGES:  # already a code of ours
        return code
    raise DataError(f"{where}: unknown language code {code!r} (expected a Tatoeba 3-letter code "
                    "such as deu, spa, rus, jpn; or set data.source and data.target)")
