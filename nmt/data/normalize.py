"""Text normalisation shared by data preparation and translation input.

Callers pass the data config's choices: ``normalize(text, cfg.lowercase, cfg.normalization)``.

``natural`` (the default): text as people write it, with only a Unicode clean-up that is safe for
both languages and for scoring (sacrebleu's tokenizer treats every variant below alike):

- Unicode NFC; every whitespace character is a space, runs collapse, the ends are stripped (the
  corpus writes ``Va !`` with a plain space, U+00A0 or U+202F before ``!``: one spelling);
- invisible characters (categories Cf, Cc, Cs) are deleted;
- ``’`` and ``‘`` become ``'``, ``…`` becomes ``...`` (one spelling of the apostrophe and the
  ellipsis); on the target side ``’`` and ``‘`` stay as written unless
  ``data.target_apostrophes = "straight"``, so the model writes what its references write.

Case, punctuation and its spacing stay as written. ``full`` adds the textbook's tokenized style
below; ``recipe`` is the textbook's rules only.

The recipe's rules (U+202F and U+00A0 become spaces, lower-case, a space before ``, . ! ?`` when
the previous character is not a space) plus a policy for the rest of Unicode, chosen so that the
result is stable (``normalize(normalize(x)) == normalize(x)``), never raises, and is always valid
UTF-8 text without newlines (the cache stores one sentence per line). See docs/DATA.md.

- Unicode NFC, so composed and decomposed accents are the same token.
- Every whitespace character (tab, newline, U+2009 thin space, U+202F, U+00A0, ...) is a space;
  runs of spaces collapse to one and the ends are stripped.
- Invisible characters are deleted: format characters (U+200B zero-width space, U+200C/U+200D
  outside the languages whose spelling needs them (``lang``),
  U+2060, U+FEFF, U+00AD soft hyphen, bidi marks), control characters and lone surrogates. The
  corpus has ``sur \u200b\u200bla`` and ``sink\u00ad.``, which become ``sur la`` and ``sink .``.
- Curly apostrophes ``’`` and ``‘`` become ``'``: the corpus writes ``j'ai`` 95k times and
  ``j’ai`` a few hundred, and they should be one token.
- ``…`` becomes ``...``, which the punctuation rule then splits like the recipe splits ``...``.
- French guillemets ``« »`` are kept (they are what references use) but, in French text, always
  stand apart from the quoted words: ``«ouistiti»`` becomes ``« ouistiti »`` like the corpus'
  usual spelling.
"""

from __future__ import annotations

import re
import unicodedata

# Characters with a fixed replacement; everything else is decided by its Unicode category.
_FIXED = {
    "\u2019": "'",  # right single quotation mark, used as an apostrophe
    "\u2018": "'",  # left single quotation mark, also used as an apostrophe in the corpus
    "\u2026": "...",  # horizontal ellipsis
}


class _CharMap(dict[int, "str | int | None"]):
    """``str.translate`` table filled lazily: one category lookup per distinct code point."""

    def __missing__(self, cp: int) -> str | int | None:
        ch = chr(cp)
        value: str | int | None
        if ch in _FIXED:
            value = _FIXED[ch]
        elif ch.isspace():
            value = " "
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs"):
            value = None  # invisible: delete
        else:
            value = cp  # keep
        self[cp] = value
        return value


_TABLE = _CharMap()
# Zero-width non-joiner and joiner (U+200C, U+200D) are spelling in Persian and the scripts of
# India and Sri Lanka (they decide how letters join); elsewhere they are invisible junk.
_JOINER_LANGS = frozenset({"fa", "ur", "ps", "ckb", "hi", "mr", "ne", "sa", "bn", "as", "pa",
                           "gu", "or", "ta", "te", "kn", "ml", "si"})
_TABLE_KEEPING_JOINERS = _CharMap({0x200C: 0x200C, 0x200D: 0x200D})
_KEPT_APOSTROPHES = {0x2019: 0x2019, 0x2018: 0x2018}
_TABLE_KEEPING_APOSTROPHES = (_CharMap(_KEPT_APOSTROPHES),
                              _CharMap({**_KEPT_APOSTROPHES, 0x200C: 0x200C, 0x200D: 0x200D}))
_PUNCT = re.compile(r"(?<=[^ ])([,.!?])")  # the recipe: only when the previous char is not a space
_OPEN_QUOTE = re.compile(r"«(?=[^ ])")
_CLOSE_QUOTE = re.compile(r"(?<=[^ ])»")


# Turkish and Azerbaijani write the capital of ``i`` as ``İ`` and the small of ``I`` as ``ı``
# (Unicode's SpecialCasing); str.lower / str.upper follow English: ``I`` -> ``i``, ``i`` -> ``I``.
_DOTTED_I = frozenset({"tr", "az"})


def special_casing(lang: str | None) -> bool:
    """Whether ``lang``'s capitals differ from Unicode's default mapping (Turkish, Azerbaijani)."""
    return _language(lang) in _DOTTED_I


def _language(lang: str | None) -> str | None:
    """The language of a code that may name its script too (``az-Latn`` -> ``az``), whose
    rules hold in any script: :func:`nmt.data.languages.base_language`'s rule, written here
    because this module ships alone in every CTranslate2 export (the standard library only)."""
    return lang.partition("-")[0] if lang else None


def lower(text: str, lang: str | None) -> str:
    """``text`` in small letters, as ``lang`` spells them (None: Unicode's default rules)."""
    if special_casing(lang):
        text = text.replace("I", "ı").replace("İ", "i")
    return text.lower()


def upper(text: str, lang: str | None) -> str:
    """``text`` in capitals, as ``lang`` spells them (None: Unicode's default rules)."""
    if special_casing(lang):
        text = text.replace("i", "İ")
    return text.upper()


POLICIES = ("natural", "full", "recipe")


def normalize(text: str, lowercase: bool, policy: str, lang: str | None = None, *,
              apostrophes: bool = True) -> str:
    """Normalise one sentence (see the module docstring for the policies). Callers pass the
    run's ``data.lowercase`` and ``data.normalization`` (no defaults here: the config's are
    the one place that says what a run does).

    ``policy="natural"`` (the default of :attr:`DataConfig.normalization`) only cleans Unicode:
    the text keeps its case (unless ``lowercase``) and its punctuation as written.
    ``policy="full"`` is that clean-up plus the recipe's punctuation rule (the textbook's
    tokenized style). Both are idempotent, total on any ``str`` (lone surrogates included) and
    free of newlines. ``policy="recipe"`` applies only the recipe's rules, to reproduce its
    vocabulary exactly (it keeps ``’``, U+2009 and double spaces); it is idempotent and total too.

    ``lang``: the text's language; the rule that holds for French only (guillemets stand apart
    from the quoted words) applies to French text, or to any when the language is not given
    (translation input of runs made before the pair was configurable); the zero-width
    (non-)joiners U+200C/U+200D are kept in the languages whose spelling uses them
    (Persian, Urdu, Hindi, Bengali, Tamil, ...) and deleted elsewhere.

    ``apostrophes=False`` keeps ``’`` and ``‘`` as written (a target side whose corpus writes
    them: ``data.target_apostrophes = "kept"``); the source side always straightens them, so
    input typed either way reads alike.
    """
    if policy == "recipe":
        text = text.replace("\u202f", " ").replace("\xa0", " ")
        return _PUNCT.sub(r" \1", text.lower() if lowercase else text)
    if policy not in POLICIES:
        raise ValueError(f"policy={policy!r}: expected one of {', '.join(POLICIES)}")
    base = _language(lang)
    table = _TABLE_KEEPING_JOINERS if base in _JOINER_LANGS else _TABLE
    if not apostrophes:
        table = _TABLE_KEEPING_APOSTROPHES[table is _TABLE_KEEPING_JOINERS]
    text = unicodedata.normalize("NFC", text.translate(table))
    if lowercase:
        # lower() can decompose (``İ`` -> ``i̇``), so compose again
        text = unicodedata.normalize("NFC", lower(text, lang))
    text = " ".join(text.split())  # only " " is whitespace by now
    if policy == "natural":
        return text
    if base in (None, "fr"):
        text = _OPEN_QUOTE.sub("« ", text)
        text = _CLOSE_QUOTE.sub(" »", text)
    return _PUNCT.sub(r" \1", text)


def is_natural_text(lowercase: bool, policy: str) -> bool:
    """Whether ``normalize(text, lowercase, policy)`` is text as written (the ``natural`` policy,
    case kept), not the textbook's lower-cased or spaced text: such text is scored against the
    corpus' references with sacrebleu's own tokenizer, and the model's outputs are read as they
    are. A run's answer is :attr:`nmt.config.DataConfig.natural_text`."""
    return policy == "natural" and not lowercase


def textbook_form(text: str, lang: str | None = None) -> str:
    """A natural sentence as the textbook writes its input: lower-cased, a space before
    ``, . ! ?`` (``"I'm home."`` -> ``"i'm home ."``). Case augmentation trains on it so that a
    cased model also translates input typed that way."""
    return normalize(text, lowercase=True, policy="full", lang=lang)
