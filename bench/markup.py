"""Markup through translation: tags kept, and nested as in the source (``python -m bench.markup``).

``python -m bench.markup --run RUN --work DIR`` puts HTML tags into the first ``--lines``
sentences of the run's test split (or of ``--src``, with its references ``--ref``), seeded:
around one or two runs of one to three words each (``<b>``, ``<i>``, ``<em>``, ``<code>``,
``<a href="...">``), a third of them with a second tag inside the first, closing before a
word's end punctuation (``<b>now</b>.``). It writes them to ``DIR/markup.en`` (the first
references, without tags, to ``DIR/markup.ref``) and translates them with ``nmt translate``
through each ``--engines`` (``nmt``; ``ctranslate2`` where the run has an export): ``--spans
off`` (what the model writes, seeing the tags), ``--spans repair --markup model`` (the model
sees the tags, the repair checks them) and ``--spans repair --markup place`` (the model
translates each line without its tags, placed by position), into
``DIR/hyp.ENGINE.SPANS.MARKUP.txt``.

Per translation: lines; tags kept (as many times as the source has them); lines whose output
holds the source's spans, each as often; of those, lines whose tags are out of order (``</b>
ici <b>``, ``<b>a <i>b</b></i>``); lines exact (the source's spans, nested as the source's:
what ``nmt bleu`` counts); lines with a span the source lacks; BLEU and chrF of the outputs with
their tags taken out, against the references. It prints a Markdown table and writes the rows,
stamped with the machine and commit, to ``DIR/results.json``.

Where the tags land: ``DIR/words.en`` holds up to ``--lines`` sentences of the same source
with a tag pair around one word the translation keeps as written (a name or a number: a word
with a capital, not the first, or digits, once in the sentence and once in its first reference,
``DIR/words.ref``), translated the same ways into ``DIR/hyp.words.ENGINE.SPANS.MARKUP.txt``.
Of the lines whose output holds that word once, the share with the tag pair around it
(``<b>Tom</b>``): the second table.

``python -m bench.markup --work DIR --score HYP ...`` scores translations of ``DIR/markup.en``
(or of ``DIR/words.en``, for files named ``hyp.words.*``) made elsewhere (by another commit's
``nmt translate``, say) with the same tables.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import ROOT
from bench.machine import machine

TAGS = ("b", "i", "em", "code", "a")
ENGINES = ("nmt", "ctranslate2")
MODES = (("off", "model"), ("repair", "model"), ("repair", "place"))  # --spans, --markup
_WORD_END = re.compile(r"[.,;:!?…»”\"')\]]+$")


def _open(name: str) -> str:
    return '<a href="https://example.org/">' if name == "a" else f"<{name}>"


def marked(sentence: str, rng: random.Random) -> str:
    """``sentence`` with tags around one or two runs of its words (the module docstring)."""
    words = sentence.split()
    if not words:
        return sentence
    pairs = rng.choice((1, 1, 2)) if len(words) >= 4 else 1
    cut = sorted(rng.sample(range(1, len(words)), pairs - 1)) if pairs > 1 else []
    bounds = list(zip([0, *cut], [*cut, len(words)], strict=True))
    names = rng.sample(TAGS, pairs + 1)
    for (lo, hi), name in zip(bounds, names, strict=False):
        first = rng.randrange(lo, hi)
        last = min(hi - 1, first + rng.randrange(3))
        inner = names[-1] if rng.random() < 1 / 3 else None
        head, tail = words[first], words[last]
        end = _WORD_END.search(tail)
        punct = end.group() if end and end.start() > 0 else ""
        tail = tail[:len(tail) - len(punct)]
        if first == last:
            core = tail
            if inner:
                core = f"{_open(inner)}{core}</{inner}>"
            words[first] = f"{_open(name)}{core}</{name}>{punct}"
        else:
            if inner:
                tail = f"{_open(inner)}{tail}</{inner}>"
            words[first] = _open(name) + head
            words[last] = f"{tail}</{name}>{punct}"
    return " ".join(words)


def on_kept_word(sentence: str, reference: str, rng: random.Random) -> str | None:
    """``sentence`` with a tag pair around a word the translation keeps as written (the
    module docstring), or None when it has none."""
    words = sentence.split()
    plain = [_WORD_END.sub("", w).strip("\"'«(") for w in words]
    theirs = [_WORD_END.sub("", w).strip("\"'«(") for w in reference.split()]
    for k, w in enumerate(plain):
        if (w and (w.isdigit() or (k > 0 and w[0].isupper() and w.isalpha()))
                and plain.count(w) == 1 and theirs.count(w) == 1):
            name = rng.choice(TAGS)
            words[k] = words[k].replace(w, f"{_open(name)}{w}</{name}>", 1)
            return " ".join(words)
    return None


def build(run: Path, work: Path, lines: int, seed: int, data_dir: Path | None,
          src: Path | None = None, ref: Path | None = None) -> Path:
    """``work/markup.en`` and ``work/markup.ref`` from ``run``'s test split, or from the files
    ``src`` and ``ref``; the first."""
    from nmt.config import load_config
    from nmt.evaluate import trained_data

    cfg = load_config(run / "config.toml")
    if src is not None and ref is not None:
        sources = src.read_text(encoding="utf-8").splitlines()
        references = [[r] for r in ref.read_text(encoding="utf-8").splitlines()]
    else:
        prepared = trained_data(run, cfg.data, data_dir, log=lambda s: None)
        sources, references = prepared.splits["test"].grouped()
    rng = random.Random(seed)
    work.mkdir(parents=True, exist_ok=True)
    src = work / "markup.en"
    src.write_text("".join(marked(s, rng) + "\n" for s in sources[:lines]), encoding="utf-8")
    (work / "markup.ref").write_text("".join(r[0] + "\n" for r in references[:lines]),
                                     encoding="utf-8")
    kept = [(m, r[0]) for m, r in ((on_kept_word(s, r[0], rng), r)
                                   for s, r in zip(sources, references, strict=True)) if m]
    (work / "words.en").write_text("".join(m + "\n" for m, _ in kept[:lines]), encoding="utf-8")
    (work / "words.ref").write_text("".join(r + "\n" for _, r in kept[:lines]),
                                    encoding="utf-8")
    (work / "markup.json").write_text(json.dumps({"run": str(run), "target": cfg.data.target,
                                                  "spans": cfg.data.spans}) + "\n",
                                      encoding="utf-8")
    return src


def translate(run: Path, src: Path, out: Path, engine: str, spans: str, markup: str) -> None:
    """``nmt translate`` of ``src`` into ``out`` (this tree's nmt, on the CPU)."""
    cmd = [sys.executable, "-m", "nmt", "translate", "--run", str(run), "--input", str(src),
           "--output", str(out), "--engine", engine, "--spans", spans, "--markup", markup,
           "--device", "cpu"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)}: {done.stderr.strip()[-500:]}")


def score(work: Path, hyp: Path) -> dict[str, Any]:
    """One row of the table: ``hyp``, a translation of ``work/markup.en``, counted as ``nmt
    bleu`` counts (:func:`nmt.evaluate.span_integrity`), and the lines whose spans are the
    source's but whose tags are out of order."""
    from nmt.data.spans import misplaced_tags, rules
    from nmt.evaluate import corpus_scores, span_integrity
    from nmt.translation.structure import without_tags

    meta = json.loads((work / "markup.json").read_text(encoding="utf-8"))
    found = rules(meta["spans"])
    sources = (work / "markup.en").read_text(encoding="utf-8").splitlines()
    refs = (work / "markup.ref").read_text(encoding="utf-8").splitlines()
    hyps = hyp.read_text(encoding="utf-8").splitlines()
    if len(hyps) != len(sources):
        raise SystemExit(f"{hyp}: {len(hyps)} lines, but {work / 'markup.en'} has "
                         f"{len(sources)}")
    counts = span_integrity(sources, hyps, [[r] for r in refs], found)
    out_of_order = 0
    for source, out in zip(sources, hyps, strict=True):
        wanted, got = found.find(source), found.find(out)
        out_of_order += (Counter(s.text for s in wanted) == Counter(s.text for s in got)
                         and bool(misplaced_tags(wanted, got)))
    scores = corpus_scores([without_tags(h, found) for h in hyps], [[r] for r in refs],
                           lang=meta["target"])
    lines = max(counts.lines, 1)
    return {"translation": hyp.name, "lines": len(sources), "spans": counts.spans,
            "kept": round(100 * counts.kept / max(counts.spans, 1), 2),
            "same_spans": round(100 * (counts.exact + out_of_order) / lines, 2),
            "out_of_order": out_of_order, "exact": round(100 * counts.exact / lines, 2),
            "invented": round(100 * counts.invented / lines, 2),
            "bleu": round(scores.bleu, 2), "chrf": round(scores.chrf, 2)}


def on_word(work: Path, hyp: Path) -> dict[str, Any]:
    """One row of the second table: ``hyp``, a translation of ``work/words.en``: of the lines
    whose output holds the marked word once, those with the source's tag pair around it."""
    from nmt.data.spans import rules
    from nmt.translation.structure import without_tags

    meta = json.loads((work / "markup.json").read_text(encoding="utf-8"))
    found = rules(meta["spans"])
    sources = (work / "words.en").read_text(encoding="utf-8").splitlines()
    hyps = hyp.read_text(encoding="utf-8").splitlines()
    if len(hyps) != len(sources):
        raise SystemExit(f"{hyp}: {len(hyps)} lines, but {work / 'words.en'} has "
                         f"{len(sources)}")
    lines = kept = 0
    for source, out in zip(sources, hyps, strict=True):
        tag = re.search(r"<[a-z]+(?: [^>]*)?>([^<]+)</[a-z]+>", source)
        assert tag is not None, source
        word = tag.group(1)
        if re.findall(rf"(?<!\w){re.escape(word)}(?!\w)", without_tags(out, found)) != [word]:
            continue
        lines += 1
        kept += tag.group() in out
    return {"translation": hyp.name, "lines": len(sources), "with_word": lines,
            "on_word": round(100 * kept / max(lines, 1), 2)}


def markdown_words(rows: Sequence[dict[str, Any]]) -> str:
    head = ("| translation | lines | lines whose output has the word once | of which the tag "
            "pair around it |\n|---|---:|---:|---:|\n")
    return head + "".join(f"| {r['translation']} | {r['lines']:,} | {r['with_word']:,} | "
                          f"{r['on_word']:.1f}% |\n" for r in rows)


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    head = ("| translation | lines | spans kept | lines with the source's spans | of which tags "
            "out of order | lines exact | lines with an invented span | BLEU | chrF |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    return head + "".join(
        f"| {r['translation']} | {r['lines']:,} | {r['kept']:.1f}% | {r['same_spans']:.1f}% | "
        f"{r['out_of_order']} | {r['exact']:.1f}% | {r['invented']:.1f}% | {r['bleu']:.2f} | "
        f"{r['chrf']:.2f} |\n" for r in rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="where files go")
    parser.add_argument("--run", type=Path, help="the run directory (to build and translate)")
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--engines", default="nmt,ctranslate2")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="corpus and cache directory (default data/)")
    parser.add_argument("--src", type=Path, help="sentences to mark up (not the test split)")
    parser.add_argument("--ref", type=Path, help="their references, line for line")
    parser.add_argument("--score", type=Path, nargs="+", default=None,
                        help="score these translations of WORK/markup.en instead")
    args = parser.parse_args(argv)
    words: list[dict[str, Any]] = []
    if args.score:
        rows = [score(args.work, h) for h in args.score if not h.name.startswith("hyp.words.")]
        words = [on_word(args.work, h) for h in args.score if h.name.startswith("hyp.words.")]
    else:
        if args.run is None:
            parser.error("--run: expected a run directory (or --score HYP ...)")
        engines = [e for e in args.engines.split(",") if e]
        if any(e not in ENGINES for e in engines) or args.lines < 1:
            parser.error(f"--engines: expected names among {', '.join(ENGINES)}; "
                         "--lines: 1 or more")
        if (args.src is None) != (args.ref is None):
            parser.error("--src and --ref: expected both or neither")
        src = build(args.run, args.work, args.lines, args.seed, args.data_dir, args.src,
                    args.ref)
        rows = []
        for engine in engines:
            for spans, markup in MODES:
                hyp = args.work / f"hyp.{engine}.{spans}.{markup}.txt"
                translate(args.run, src, hyp, engine, spans, markup)
                rows.append(score(args.work, hyp))
                hyp = args.work / f"hyp.words.{engine}.{spans}.{markup}.txt"
                translate(args.run, args.work / "words.en", hyp, engine, spans, markup)
                words.append(on_word(args.work, hyp))
    stamp = machine()
    print(f"{stamp['cpu']}, {stamp.get('date', '')}, commit {stamp.get('commit', '?')}\n")
    if rows:
        print(markdown(rows), end="")
    if words:
        print(("\n" if rows else "") + markdown_words(words), end="")
    (args.work / "results.json").write_text(json.dumps(
        {"machine": stamp, "rows": rows, "words": words}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
