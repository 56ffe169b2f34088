"""Where the repair puts back a span the model lost (``python -m bench.placement``).

``python -m bench.placement --src SRC --hyp HYP --ref REF`` reads a model's translations as it
wrote them (``nmt translate --spans off``, or ``nmt bleu``'s ``*.spans-off.txt``) of the
sources ``SRC``, repairs each line as ``--spans repair`` does (no engine needed: the repair is
a function of the source and the output; tags are placed by position, as an engine that gives no
attention would have them) and reports two things:

- **the lines that needed a guess** (a span put back by position or beside a kept one): how
  many, how many of them have a span put back touching a letter or digit on a side where the
  source has no letter or digit beside any copy of it (``parce %sque`` for ``column "%s.%s"``:
  the span reads as part of a word), and BLEU and chrF of those lines against ``REF``;
- **agreement with the model**: of the lines whose output holds exactly its source's one
  span (not a tag), the span taken out of the output and put back by the repair: the share
  that comes back exactly as the model wrote it. The model's own place is not always right,
  but it is the place a guess could hope to find.

It prints a Markdown table, stamped with the machine and commit, and ``--json`` writes the row.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import sacrebleu

from bench.machine import machine
from nmt.data.spans import Span, SpanRules, parse
from nmt.translation.structure import SpanGuard, guarded

RULES = SpanRules(parse("default"))


def _touches(text: str, span: Span) -> tuple[bool, bool]:
    """Whether ``span`` of ``text`` has a letter or digit right before it, right after it."""
    return text[span.start - 1:span.start].isalnum(), text[span.end:span.end + 1].isalnum()


def glued_where_the_source_is_not(source: str, text: str) -> bool:
    """Whether a span of ``text`` that ``source`` has (not a tag) touches a letter or digit on a
    side where no copy of it in ``source`` does."""
    allowed: dict[str, tuple[bool, bool]] = {}
    for span in RULES.find(source):
        a, b = allowed.get(span.text, (False, False))
        c, d = _touches(source, span)
        allowed[span.text] = (a or c, b or d)
    for span in RULES.find(text):
        if span.kind == "tags" or span.text not in allowed:
            continue
        before, after = _touches(text, span)
        if (before and not allowed[span.text][0]) or (after and not allowed[span.text][1]):
            return True
    return False


def repaired(source: str, output: str) -> tuple[str, bool]:
    """``output`` repaired as ``--spans repair --markup model`` repairs it, and whether a span
    was placed by a guess."""
    guard = SpanGuard(RULES, "repair", "model")
    text = guarded(lambda batch: [output], [source], guard)[0]
    return text, guard.counts.guessed > 0


def measure(sources: list[str], outputs: list[str], refs: list[str]) -> dict[str, Any]:
    guessed, glued, hyps, wanted = 0, 0, [], []
    for source, output, ref in zip(sources, outputs, refs, strict=True):
        text, guess = repaired(source, output)
        if guess:
            guessed += 1
            glued += glued_where_the_source_is_not(source, text) and not (
                glued_where_the_source_is_not(source, output))  # (the model's own glue aside)
            hyps.append(text)
            wanted.append(ref)
    single, same = 0, 0
    for source, output in zip(sources, outputs, strict=True):
        want, got = RULES.find(source), RULES.find(output)
        if len(want) != 1 or len(got) != 1 or want[0].text != got[0].text or (
                want[0].kind == "tags"):
            continue
        span = got[0]
        without = " ".join((output[:span.start] + " " + output[span.end:]).split())
        single += 1
        same += repaired(source, without)[0] == output
    return {
        "lines": len(sources), "guessed": guessed, "glued": glued,
        "bleu": round(sacrebleu.corpus_bleu(hyps, [wanted]).score, 2) if hyps else None,
        "chrf": round(sacrebleu.corpus_chrf(hyps, [wanted]).score, 2) if hyps else None,
        "single": single, "as_the_model": same,
    }


def table(row: dict[str, Any]) -> str:
    share = f"{row['as_the_model'] / row['single']:.1%}" if row["single"] else "-"
    return "\n".join([
        "| lines | lines with a guess | of them, a span glued to a word | BLEU | chrF "
        "| one-span lines | put back where the model had it |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {row['lines']:,} | {row['guessed']:,} | {row['glued']:,} | {row['bleu']} "
        f"| {row['chrf']} | {row['single']:,} | {row['as_the_model']:,} ({share}) |",
    ])


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, required=True, help="the sources, one a line")
    parser.add_argument("--hyp", type=Path, required=True,
                        help="their translations as the model wrote them (--spans off)")
    parser.add_argument("--ref", type=Path, required=True, help="their references")
    parser.add_argument("--json", type=Path, default=None, help="write the row here")
    args = parser.parse_args(argv)
    sources, outputs, refs = _lines(args.src), _lines(args.hyp), _lines(args.ref)
    if not len(sources) == len(outputs) == len(refs):
        parser.error(f"--src, --hyp, --ref: expected as many lines each, got {len(sources)}, "
                     f"{len(outputs)}, {len(refs)}")
    row = {**measure(sources, outputs, refs), "machine": machine()}
    print(table(row))
    if args.json:
        args.json.write_text(json.dumps(row, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
