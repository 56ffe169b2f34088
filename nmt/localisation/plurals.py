"""How many plural forms a language has: the ``Plural-Forms`` header gettext's own tables give
(and Weblate and Pootle write) for the languages most often translated into.

A PO file's own ``Plural-Forms`` is always used; this table only fills a header that has none
(or the template's ``nplurals=INTEGER``, or a count no language has: 0, over 100). A language
missing here gets no ``Plural-Forms`` written, and its plural entries are left untranslated
with a message asking for the header.
"""

from __future__ import annotations

import re

_ONE = "nplurals=1; plural=0;"
_TWO = "nplurals=2; plural=(n != 1);"
_TWO_FRENCH = "nplurals=2; plural=(n > 1);"
_SLAVIC = ("nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && "
           "(n%100<10 || n%100>=20) ? 1 : 2);")

PLURAL_FORMS: dict[str, str] = {
    **dict.fromkeys(("ja", "ko", "zh", "vi", "th", "id", "ms"), _ONE),
    **dict.fromkeys(("en", "de", "nl", "sv", "da", "nb", "nn", "no", "fi", "it", "es", "pt",
                     "el", "hu", "bg", "et", "eo", "ca", "gl", "eu", "he", "af", "sq", "tr"),
                    _TWO),
    **dict.fromkeys(("fr", "pt_BR"), _TWO_FRENCH),
    **dict.fromkeys(("ru", "uk", "be", "sr", "hr", "bs"), _SLAVIC),
    "pl": ("nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) "
           "? 1 : 2);"),
    "cs": "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;",
    "sk": "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;",
    "ro": "nplurals=3; plural=(n==1 ? 0 : (n==0 || (n%100 > 0 && n%100 < 20)) ? 1 : 2);",
    "ar": ("nplurals=6; plural=(n==0 ? 0 : n==1 ? 1 : n==2 ? 2 : n%100>=3 && n%100<=10 ? 3 "
           ": n%100>=11 ? 4 : 5);"),
}

_NPLURALS = re.compile(r"nplurals\s*=\s*([0-9]+)")
MAX_FORMS = 100  # far beyond any language's (Arabic has 6): a larger count is no count


def plural_forms(language: str) -> str | None:
    """The ``Plural-Forms`` of ``language`` (``de``, ``pt_BR``, ``pt-BR``, ``sr@latin``), None
    when the table has none: the full code first, then the language alone."""
    code = language.replace("-", "_").split("@")[0].split(".")[0]
    return PLURAL_FORMS.get(code) or PLURAL_FORMS.get(code.split("_")[0].lower())


def plural_count(header: str) -> int | None:
    """``nplurals`` of a ``Plural-Forms`` value; None when it names no count from 1 to
    :data:`MAX_FORMS` (missing, a template's ``nplurals=INTEGER``, ``nplurals=0``, a number
    of 5,000 digits)."""
    found = _NPLURALS.search(header)
    digits = found[1].lstrip("0") if found else ""
    count = int(digits) if digits and len(digits) <= len(str(MAX_FORMS)) else 0
    return count if 1 <= count <= MAX_FORMS else None
