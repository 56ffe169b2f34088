"""Sentence splitters compared: which one ``nmt translate`` cuts a line of several sentences
with (:mod:`nmt.translation.layout`).

``python -m bench.splitters`` prints a Markdown table: for each candidate installed (sentencex,
pysbd, minisbd), whether it loads without the network, the languages it names, its speed on
10,000 lines of 3-6 sentences of the built-in corpus (English), and how many of the hard cases
below it cuts exactly as a reader would (abbreviations, decimals, quotes, ellipses; English,
French, Russian, Chinese). A candidate that is not installed or cannot load is a row saying why.
"""

from __future__ import annotations

import argparse
import os
import random
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from bench import ROOT

Split = Callable[[str], list[str]]

# (language, line, the sentences a reader finds in it)
CASES: list[tuple[str, str, list[str]]] = [
    ("en", "Dr. Smith is here. He paid $3.50 for it.",
     ["Dr. Smith is here.", "He paid $3.50 for it."]),
    ("en", "I met Mr. and Mrs. Brown at 5 p.m. yesterday. They were late.",
     ["I met Mr. and Mrs. Brown at 5 p.m. yesterday.", "They were late."]),
    ("en", 'He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
    ("en", "Wait... I know him. Really?! Yes.", ["Wait...", "I know him.", "Really?!", "Yes."]),
    ("en", "Version 2.5.1 is out, e.g. on the site. Install it.",
     ["Version 2.5.1 is out, e.g. on the site.", "Install it."]),
    ("en", "The U.S. economy grew 3.2% in 2019. Experts agree.",
     ["The U.S. economy grew 3.2% in 2019.", "Experts agree."]),
    ("fr", "M. Dupont est arrivé. Il a payé 3,50 €.", ["M. Dupont est arrivé.",
                                                     "Il a payé 3,50 €."]),
    ("fr", "Il a dit « Arrête ! » Puis il est parti.", ["Il a dit « Arrête ! »",
                                                       "Puis il est parti."]),
    ("fr", "Attends... Je le connais. Vraiment ?", ["Attends...", "Je le connais.",
                                                    "Vraiment ?"]),
    ("fr", "Voir p. 12, etc. La suite est là.", ["Voir p. 12, etc.", "La suite est là."]),
    ("ru", "Т. е. всё хорошо. Он заплатил 3.50 руб. Потом ушёл.",
     ["Т. е. всё хорошо.", "Он заплатил 3.50 руб.", "Потом ушёл."]),
    ("ru", "Привет! Как дела? Всё хорошо.", ["Привет!", "Как дела?", "Всё хорошо."]),
    ("zh", "你好。今天天气很好！你去哪儿？", ["你好。", "今天天气很好！", "你去哪儿？"]),
    ("zh", "他说：“我走了。”然后离开了。", ["他说：“我走了。”", "然后离开了。"]),
]


def _sentencex() -> tuple[Split, Callable[[str], Split]]:
    import sentencex

    def make(lang: str) -> Split:
        return lambda text: list(sentencex.segment(lang, text))

    return make("en"), make


def _pysbd() -> tuple[Split, Callable[[str], Split]]:
    import pysbd

    def make(lang: str) -> Split:
        segmenter = pysbd.Segmenter(language=lang, clean=False)
        return lambda text: list(segmenter.segment(text))

    return make("en"), make


def _minisbd() -> tuple[Split, Callable[[str], Split]]:
    import minisbd

    def make(lang: str) -> Split:
        detector = minisbd.SBDetect(lang, use_gpu=False)
        return lambda text: list(detector.sentences(text))

    return make("en"), make


CANDIDATES: dict[str, tuple[Callable[[], tuple[Split, Callable[[str], Split]]], str, str]] = {
    # name: (loader, languages, kept up: the latest release)
    "sentencex": (_sentencex, "about 240 (rules for ~30, the rest by fallback chains)",
                  "1.0.x, 2025; Wikimedia"),
    "pysbd": (_pysbd, "23", "0.3.4, 2021"),
    "minisbd": (_minisbd, "about 80 ONNX models, fetched from GitHub at first use",
                "0.9.x, 2025; LibreTranslate"),
}


def paragraphs(corpus: Path, count: int, seed: int = 1) -> list[str]:
    """``count`` lines of 3-6 English sentences of the built-in corpus, joined by a space."""
    with zipfile.ZipFile(corpus) as z, z.open("fra-eng/fra.txt") as f:
        english = [line.decode("utf-8").split("\t")[0] for line in f]
    rng = random.Random(seed)
    return [" ".join(rng.sample(english, rng.randint(3, 6))) for _ in range(count)]


def clean(sentences: list[str]) -> list[str]:
    return [s.strip() for s in sentences if s.strip()]


def measure(name: str, lines: list[str]) -> dict[str, str]:
    loader, languages, release = CANDIDATES[name]
    row = {"splitter": name, "languages": languages, "release": release}
    try:
        english, make = loader()
        english("Warm up. Now.")
    except Exception as e:  # noqa: BLE001 - a row saying why, not a failed benchmark
        return {**row, "offline": f"no ({type(e).__name__}: {str(e)[:70]})", "lines_per_s": "-",
                "cases": "-", "wrong": "-"}
    start = time.perf_counter()
    for line in lines:
        english(line)
    seconds = time.perf_counter() - start
    right, wrong = 0, []
    for lang, text, expected in CASES:
        try:
            got = clean(make(lang)(text))
        except Exception as e:  # noqa: BLE001 - a language it lacks is a wrong answer
            got = [f"<{type(e).__name__}>"]
        if got == expected:
            right += 1
        else:
            wrong.append(f"{lang}: {' | '.join(got)}")
    return {**row, "offline": "yes", "lines_per_s": f"{len(lines) / seconds:,.0f}",
            "cases": f"{right}/{len(CASES)}", "wrong": "; ".join(wrong) or "-"}


def main(argv: list[str] | None = None) -> None:
    default = Path(os.environ.get("NMT_DATA_MIRROR", ROOT / "data")) / "fra-eng.zip"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=default, help="fra-eng.zip")
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--only", nargs="*", default=list(CANDIDATES), choices=list(CANDIDATES))
    args = parser.parse_args(argv)
    lines = paragraphs(args.corpus, args.lines)
    keys = ["splitter", "offline", "languages", "release", "lines_per_s", "cases", "wrong"]
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for name in args.only:
        row = measure(name, lines)
        print("| " + " | ".join(row[k] for k in keys) + " |", flush=True)


if __name__ == "__main__":
    main()
