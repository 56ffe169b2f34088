"""Paragraphs against sentences: what cutting a line into sentences (``nmt translate``'s default,
:mod:`nmt.translation.layout`) is worth to a model trained on single sentences.

``python -m bench.paragraphs --run RUN`` builds paragraphs of 3-6 sentences of the run's test
split (drawn without repeats, joined by a space, their first references joined the same way)
and scores, against those references, paragraph by paragraph:

- ``alone``: every sentence translated on its own line, the translations joined (the ceiling);
- ``split``: each paragraph on one line, as ``nmt translate`` translates it;
- ``no-split``: each paragraph on one line given to the model whole (``--no-split``).

It prints a Markdown table (BLEU and chrF with sacrebleu's settings for the target language)
and, with ``--json FILE``, writes the rows there. ``--engine ctranslate2`` measures the run's
CTranslate2 export instead.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nmt.errors import NmtError

METHODS = ("alone", "split", "no-split")


def paragraphs(count: int, sizes: tuple[int, int] = (3, 6), seed: int = 1,
               most: int | None = None) -> list[list[int]]:
    """Indices of ``count`` sentences cut into paragraphs of ``sizes`` sentences (inclusive),
    each index once, in a shuffled order; ``most`` paragraphs at most."""
    rng = random.Random(seed)
    order = list(range(count))
    rng.shuffle(order)
    out: list[list[int]] = []
    while order and (most is None or len(out) < most):
        size = rng.randint(*sizes)
        if len(order) < sizes[0]:
            break
        out.append(order[:size])
        order = order[size:]
    return out


def measure(translator: Any, sources: Sequence[str], references: Sequence[str],
            groups: Sequence[Sequence[int]], lang: str | None) -> list[dict[str, Any]]:
    """The rows of the table: each method's corpus BLEU and chrF on the paragraphs ``groups``
    of ``sources`` against the joined ``references`` (``translator``: a
    :class:`~nmt.translation.translator.StreamTranslator`)."""
    from nmt.evaluate import corpus_scores

    used = sorted({i for g in groups for i in g})
    alone = dict(zip(used, translator.translate([sources[i] for i in used]), strict=True))
    lines = [" ".join(sources[i] for i in g) for g in groups]
    hyps = {
        "alone": [" ".join(alone[i] for i in g) for g in groups],
        "split": translator.translate_lines(lines, split=True),
        "no-split": translator.translate_lines(lines, split=False),
    }
    refs = [[" ".join(references[i] for i in g)] for g in groups]
    rows = []
    for method in METHODS:
        scores = corpus_scores(hyps[method], refs, tokenized=not translator.natural_text,
                               lang=lang)
        rows.append({"method": method, "paragraphs": len(groups), "sentences": len(used),
                     "bleu": round(scores.bleu, 2), "chrf": round(scores.chrf, 2)})
    return rows


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    head = "| method | paragraphs | sentences | BLEU | chrF |\n|---|---:|---:|---:|---:|\n"
    return head + "".join(f"| {r['method']} | {r['paragraphs']} | {r['sentences']} | "
                          f"{r['bleu']:.2f} | {r['chrf']:.2f} |\n" for r in rows)


def run_bench(run: Path, checkpoint: str = "best", engine: str = "nmt",
              data_dir: Path | None = None, most: int = 500, seed: int = 1,
              log: Any = print) -> list[dict[str, Any]]:
    """:func:`measure` on the test split of ``run`` (prepared from ``data_dir``)."""
    from nmt.api import open_translator
    from nmt.config import load_config
    from nmt.errors import DataError
    from nmt.evaluate import trained_data

    path = run / "config.toml"
    if not path.is_file():
        raise DataError(f"--run {run}: no config.toml (not a run directory)")
    cfg = load_config(path)
    prepared = trained_data(run, cfg.data, data_dir, log=log)  # its own tokenizer and cache
    sources, references = prepared.splits["test"].grouped()
    groups = paragraphs(len(sources), seed=seed, most=most)
    if not groups:
        raise DataError(f"--run {run}: its test split has {len(sources)} sentences; a "
                        "paragraph needs 3")
    translator = open_translator(run, checkpoint, engine=engine, device="cpu")
    return measure(translator, sources, [r[0] for r in references], groups, cfg.data.target)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="the run directory")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--engine", default="nmt", choices=("nmt", "ctranslate2"))
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="corpus and cache directory (default data/)")
    parser.add_argument("--paragraphs", type=int, default=500, help="at most this many")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    if args.paragraphs < 1:
        parser.error("--paragraphs: expected 1 or more")
    try:
        rows = run_bench(args.run, args.checkpoint, args.engine, args.data_dir,
                         args.paragraphs, args.seed, log=lambda s: print(s, file=sys.stderr))
    except NmtError as e:
        sys.exit(f"error: {e}")
    print(markdown(rows), end="")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
