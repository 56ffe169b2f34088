"""Text in pictures: corpus text of any script as matplotlib must be handed it, and the fonts
to draw it with (used by :mod:`nmt.pictures.curves` and :mod:`nmt.pictures.attention`).

Two rules, each once:

- :func:`display`: the string to give matplotlib for a piece of text. Dollar signs are escaped
  (two of them would start mathtext: ``$$`` in a sentence fails the whole picture). Right-to-left
  text (Hebrew, Arabic, Persian, Urdu) needs its letters in visual order and, for the Arabic
  script, joined: matplotlib 3.11 and later lay text out with libraqm (bidi and shaping
  themselves), so the text is left as it is; before 3.11 matplotlib draws characters left to
  right in logical order, so the text is shaped (``arabic_reshaper``) and put in visual order
  (``python-bidi``) first. Text without right-to-left characters is never touched by either.
- :func:`font_families`: the fonts to draw a picture's strings with: matplotlib's default font
  when it has every glyph; else the default followed by installed fonts that have the missing
  ones (matplotlib falls back glyph by glyph along the list); what no installed font has is
  reported in one line (see :func:`fit_fonts`) naming the characters, their script and what to
  install, instead of matplotlib's warning per glyph.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RTL_CLASSES = ("R", "AL", "AN")  # unicodedata.bidirectional of right-to-left characters
LAST_RESORT = "Last Resort"  # matplotlib's placeholder font (boxes for every character)
_SHOWN = 3  # missing characters named in the warning
# What to install for characters no font has (Debian/Ubuntu package names).
CJK_SCRIPTS = ("Han", "Japanese", "Hangul")
CJK_FONTS = "fonts-noto-cjk"
OTHER_FONTS = "fonts-noto-core"
# matplotlib's warning per missing glyph ("Glyph 26085 (...) missing from font(s) DejaVu Sans."),
# which fit_fonts' one line replaces.
GLYPH_WARNING = r"Glyph \d+ .*missing from"


def warn_stderr(message: str) -> None:
    """Where a picture's warning goes when the caller names no place: standard error."""
    print(message, file=sys.stderr)


# --- the string -------------------------------------------------------------------------------


def has_rtl(text: str) -> bool:
    """Whether ``text`` has a right-to-left character (Hebrew, Arabic letters or digits)."""
    return any(unicodedata.bidirectional(c) in RTL_CLASSES for c in text)


def layout_does_bidi() -> bool:
    """matplotlib 3.11 and later lay text out with libraqm: bidi order and Arabic shaping."""
    import matplotlib

    return tuple(matplotlib.__version_info__[:2]) >= (3, 11)


def visual_order(text: str) -> str:
    """``text`` shaped (Arabic letters in their joined presentation forms) and in the visual
    order of the Unicode bidi algorithm, for a renderer that draws characters left to right."""
    import arabic_reshaper
    from bidi import get_display

    return str(get_display(arabic_reshaper.reshape(text)))


def display(text: str) -> str:
    """``text`` as matplotlib must be handed it to draw it as written (see the module)."""
    if has_rtl(text) and not layout_does_bidi():
        text = visual_order(text)
    return text.replace("$", r"\$")


def display_parts(parts: Sequence[str], separator: str) -> str:
    """``parts`` joined by ``separator`` and drawn left to right in that order, each part in its
    own direction (a Hebrew sentence, then an arrow, then its English translation)."""
    if not any(has_rtl(p) for p in parts) or not layout_does_bidi():
        return separator.join(display(p) for p in parts)
    # Each part an isolate (U+2068 ... U+2069) in a left-to-right line (U+200E): else the line
    # takes the direction of its first letter and a Hebrew source would be drawn on the right.
    return "\u200e" + separator.join(f"\u2068{display(p)}\u2069" for p in parts)


def width_in_chars(text: str) -> float:
    """Roughly how wide ``text`` is drawn, in average Latin characters: CJK characters are full
    width (about 1.6 of them)."""
    return sum(1.6 if unicodedata.east_asian_width(c) in "WF" else 1.0 for c in text)


# --- the fonts --------------------------------------------------------------------------------


class Font(NamedTuple):
    name: str  # the family name matplotlib finds it by
    path: str


@functools.cache
def charmap(path: str) -> frozenset[str]:
    """The characters the font file at ``path`` has glyphs for (its character map; none when
    the file cannot be read)."""
    from matplotlib.ft2font import FT2Font

    try:
        return frozenset(map(chr, FT2Font(path).get_charmap()))
    except (OSError, RuntimeError, ValueError):
        return frozenset()


def default_font() -> Font:
    """The font matplotlib draws text with when told nothing (DejaVu Sans unless configured)."""
    from matplotlib.font_manager import FontProperties, findfont, get_font

    path = findfont(FontProperties())
    return Font(get_font(path).family_name, path)


def installed_fonts() -> list[Font]:
    """One font per family matplotlib knows (its regular face where there is one), in
    matplotlib's order, without the Last Resort placeholder font."""
    from matplotlib.font_manager import fontManager

    chosen: dict[str, Font] = {}  # keeps each family's first place in the list
    regular: set[str] = set()
    for entry in fontManager.ttflist:
        if entry.name.startswith(LAST_RESORT) or entry.name in regular:
            continue
        chosen[entry.name] = Font(entry.name, entry.fname)
        if entry.style == "normal" and entry.weight in (400, "normal", "regular"):
            regular.add(entry.name)
    return list(chosen.values())


def _drawn(c: str) -> bool:
    # Controls and format characters (line breaks, bidi marks, joiners) have no glyph to draw.
    return unicodedata.category(c) not in ("Cc", "Cf")


def font_families(texts: Iterable[str], warn: Callable[[str], None] = warn_stderr,
                  where: str = "picture") -> list[str]:
    """The font families to draw ``texts`` with: ``[default]`` when matplotlib's default font has
    every character; else the default then, one by one, the installed font that has the most of
    the characters still missing. Characters no installed font has are named in one ``warn``
    line (``where``: the picture), with their script and what to install."""
    default = default_font()
    missing = {c for t in texts for c in t if _drawn(c)} - charmap(default.path)
    families = [default.name]
    candidates = [f for f in installed_fonts() if f.name != default.name]
    while missing and candidates:
        best = max(candidates, key=lambda f: len(missing & charmap(f.path)))  # first of equals
        found = missing & charmap(best.path)
        if not found:
            break
        families.append(best.name)
        candidates.remove(best)
        missing -= found
    if missing:
        warn(missing_fonts_message(missing, where))
    return families


def script(c: str) -> str | None:
    """The script of the letter ``c`` as :mod:`nmt.data.languages` names scripts (``"Han"``,
    ``"Arabic"``, ``"Ethiopic"``), from its Unicode name; None for what is not a letter or mark
    or has no name (private use)."""
    name = unicodedata.name(c, "")
    if not name or unicodedata.category(c)[0] not in "LM":
        return None
    first = name.split()[0]
    if first in ("CJK", "IDEOGRAPHIC", "KANGXI"):
        return "Han"
    if first in ("HIRAGANA", "KATAKANA"):
        return "Japanese"
    return first.capitalize()


def missing_fonts_message(missing: set[str], where: str = "picture") -> str:
    """One line: a few of the characters no installed font has (one of each script first), their
    script, and which fonts to install."""
    from matplotlib import get_cachedir

    first: dict[str | None, str] = {}  # script -> its first missing character
    for c in sorted(missing):
        first.setdefault(script(c), c)
    shown = [*first.values(), *sorted(missing - set(first.values()))][:_SHOWN]
    scripts = set(first)
    names = ", ".join(f"U+{ord(c):04X}" + (f" {c}" if c.isprintable() else "")
                      + (f" ({script(c)})" if script(c) else "") for c in shown)
    more = f" and {len(missing) - len(shown):,} more" if len(missing) > len(shown) else ""
    packages = [CJK_FONTS] if scripts & set(CJK_SCRIPTS) else []
    if scripts - set(CJK_SCRIPTS):
        packages.append(OTHER_FONTS)
    return (f"warning: {where}: no installed font has {names}{more}; drawn as boxes (install "
            f"fonts that have them, e.g. Debian/Ubuntu {' and '.join(packages)}, then delete "
            f"matplotlib's font list {get_cachedir()}/fontlist-*.json)")


def fit_fonts(fig: Figure, warn: Callable[[str], None] = warn_stderr,
              where: str = "picture") -> None:
    """Give every text of ``fig`` the families :func:`font_families` chooses for all of them
    (nothing changes when the default font has every character)."""
    from matplotlib.text import Text

    texts = [t for t in fig.findobj(Text) if isinstance(t, Text)]
    families = font_families([t.get_text() for t in texts], warn, where)
    if len(families) > 1:
        for t in texts:
            t.set_fontfamily(families)
