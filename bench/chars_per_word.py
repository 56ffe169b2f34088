"""How many characters of a script written without spaces a word of English comes to: the
figures of ``nmt.data.languages.CHARS_PER_WORD``, which ``max_words`` and the ``ratio`` filter
count such text in.

``python -m bench.chars_per_word DIR:LANG ...`` reads the pairs ``DIR/software.en`` and
``DIR/software.LANG`` that ``python -m bench.software_strings corpus --out DIR --target LANG``
makes from Debian's catalogues, keeps the strings of at least ``--min-words`` English words
whose translation has no letter or digit of another script, and prints per language the strings
kept and the quartiles of the translation's characters of its script per English word (a word:
one with a letter or digit), the median beside the figure nmt uses.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from nmt.data.languages import CHARS_PER_WORD, Language, language


def ratios(english: list[str], translated: list[str], lang: Language,
           min_words: int) -> list[float]:
    """Characters of ``lang``'s script per English word, for each pair that counts."""
    out = []
    for src, tgt in zip(english, translated, strict=True):
        words = language("en").words(src)
        chars = [c for c in tgt if c.isalnum()]
        if words >= min_words and chars and all(lang.writes(c) for c in chars):
            out.append(len(chars) / words)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("corpora", nargs="+", metavar="DIR:LANG",
                   help="a software_strings corpus and its target's file suffix (ja, zh_CN)")
    p.add_argument("--min-words", type=int, default=5, help="English words a string has at least")
    args = p.parse_args()
    print("| language | strings | first quartile | median | third quartile | nmt's figure |")
    print("|---|---:|---:|---:|---:|---:|")
    for item in args.corpora:
        directory, _, suffix = item.rpartition(":")
        if not directory:
            p.error(f"{item!r}: expected DIR:LANG")
        lang = language(suffix.split("_")[0])
        if lang.spaced:
            p.error(f"{item!r}: {lang.name} is written with spaces")
        folder = Path(directory)
        english = (folder / "software.en").read_text(encoding="utf-8").splitlines()
        translated = (folder / f"software.{suffix}").read_text(encoding="utf-8").splitlines()
        found = ratios(english, translated, lang, args.min_words)
        if len(found) < 4:
            print(f"| {lang.name} | {len(found)} | | | | {CHARS_PER_WORD[lang.script]} |")
            continue
        q1, median, q3 = statistics.quantiles(found, n=4)
        print(f"| {lang.name} | {len(found):,} | {q1:.2f} | {median:.2f} | {q3:.2f} | "
              f"{CHARS_PER_WORD[lang.script]} |")


if __name__ == "__main__":
    main()
