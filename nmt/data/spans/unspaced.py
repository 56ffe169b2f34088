"""Scripts written without spaces between words: Chinese, Japanese, Thai, Lao, Khmer, Myanmar,
Tibetan, and Korean, whose particles join the word before (``파일을``).

A span that ends where a word ends (an option, a path, an address, a variable, a term) ends
where the letters of such a script start, and may start right after them: in
``/proc/net/snmpを開けません`` the path is ``/proc/net/snmp``, in ``新しいFirefoxを起動``
the term ``Firefox`` stands alone. (A slash after a letter of any script starts no path, as
in ``Install/Remove``: ``32ビット/64ビット`` holds none.) The kinds' patterns say "a letter,
a digit or ``_``" with :data:`WORD` instead of ``\\w``, which counts these letters too. So a
path or an address written in these scripts' letters (``/home/太郎``,
``https://ja.wikipedia.org/wiki/東京``) is found only up to them: software strings write them
in ASCII, and a span that swallowed the sentence after it would be no span at all.
"""

from __future__ import annotations

# the letters, digits and punctuation of those scripts, as the body of a character class
LETTERS = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u0f00-\u0fff"  # Tibetan
    "\u1000-\u109f"  # Myanmar
    "\u1100-\u11ff"  # Hangul Jamo
    "\u1780-\u17ff"  # Khmer
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi radicals
    "\u3000-\u303f"  # CJK symbols and punctuation (、。「」)
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u31ff"  # Bopomofo, Hangul compatibility Jamo, Katakana extensions
    "\u3200-\u4dbf"  # enclosed CJK, CJK compatibility, CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended A
    "\uac00-\ud7ff"  # Hangul syllables, Jamo extended B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff00-\uffef"  # full-width and half-width forms (ＡＢＣ, ｶﾀｶﾅ, （）)
    "\U00020000-\U0003ffff"  # CJK extensions B to H
)
WORD = rf"[^\W{LETTERS}]"  # a letter, digit or ``_`` of a script that spaces its words
