"""The model card every export carries: what the model is, what it was trained on and under
which licence (its own data and every ancestor's), how it was trained, how good it measured on
which test set, and what runs it in which precision.

It is written into the CTranslate2 directory's README, the Argos package's README and, as data,
under ``nmt`` in the package's ``metadata.json`` (Argos Translate ignores keys it does not
know). It is read from the run's records through :mod:`nmt.runs.records`, which checks every
value (type, range, finite numbers, printable single-line text of bounded length; a value that
fails is one line naming the file and the field), and every value the README shows passes
:func:`md`, so no text of anyone's making can add a heading, a tag or a table cell. It never
holds a local path: files are named by their names only, runs by their names.

What it claims of the engines is derived: the precision from the export's quantization, the
search from the run's ``[decode]``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from nmt import __version__

if TYPE_CHECKING:
    from nmt.runs.loading import LoadedRun
    from nmt.runs.records import TestSet

NOT_STATED = "not stated: state it before sharing this model"
_MARKDOWN = re.compile(r"([\\`*_{}\[\]#|~!])")


def md(value: Any) -> str:
    """``value`` as literal Markdown text: every character Markdown or GFM gives a meaning
    escaped with a backslash, ``<``, ``>`` and ``&`` as HTML entities (no tag passes), on one
    line."""
    text = " ".join(str(value).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN.sub(r"\\\1", text)


def scores(run_dir: Any, checkpoint: str) -> dict[str, dict[str, Any]]:
    """The newest test-split scores of ``checkpoint`` by how they were made (``nmt``, or the
    tag of their file: ``ct2-int8``, ...): BLEU and chrF with their sacrebleu signatures, the
    beam and the sentences scored (:func:`nmt.runs.records.test_scores`)."""
    from nmt.runs.records import test_scores

    return {engine: s.to_dict() for engine, s in test_scores(run_dir, checkpoint).items()}


def _data(run: LoadedRun) -> list[dict[str, Any]]:
    """The run's own sources; for a run made before runs recorded their data, its corpus by
    its config's name (the built-in one's licence known)."""
    from nmt.data.corpora.base import TATOEBA_LICENCE
    from nmt.data.corpora.builtin import NAME
    from nmt.runs.records import Source, file_name, run_data

    data = run_data(run.run_dir, run.config.data.corpus)
    if data is None:
        corpus = run.config.data.corpus
        data = (Source(file_name(corpus), TATOEBA_LICENCE if corpus == NAME else ""),)
    return [_stated(s.to_dict()) for s in data]


def _stated(source: dict[str, Any]) -> dict[str, Any]:
    """A source as the card holds it: its licence, or that none was stated."""
    return {**source, "licence": source.get("licence") or NOT_STATED}


def runtime(quantization: str, decode_beam: int) -> dict[str, Any]:
    """What runs the export and how, as the card states it: the weights' type, the compute
    type argostranslate and LibreTranslate use by default (``ARGOS_COMPUTE_TYPE`` unset:
    ``auto``), and the search ``nmt translate`` runs the model with by default."""
    return {"weights": quantization,
            # argostranslate passes "auto": CTranslate2 picks the CPU's fastest type
            "argostranslate": "auto (int8 on CPUs with int8 kernels)",
            # LibreTranslate's argos-translate-lt passes none: the weights' own type
            "libretranslate": quantization,
            "nmt_translate_beam": decode_beam}


def model_card(run: LoadedRun, quantization: str = "float32") -> dict[str, Any]:
    """The card's facts, as ``metadata.json`` holds them; ``quantization``: the export's."""
    from nmt.data.languages import language
    from nmt.runs.checkpoint import load_checkpoint
    from nmt.runs.records import checkpoint_hardware, run_ancestors, run_test_set
    from nmt.runs.schema import Fields
    from nmt.runs.table import count_state_parameters, describe_model

    cfg = run.config
    payload = load_checkpoint(run.checkpoint_path, mmap=True)
    progress = Fields(payload.get("progress", {}), run.checkpoint_path, "progress")
    tok = run.tokenizer
    return {
        "pair": {"source": cfg.data.source, "target": cfg.data.target,
                 "source_name": language(cfg.data.source).name,
                 "target_name": language(cfg.data.target).name},
        "data": _data(run),
        "model": {"family": cfg.model.arch, "shape": describe_model(cfg.model.to_dict()),
                  "parameters": count_state_parameters(payload["model"]),
                  "vocabulary": {"kind": tok.kind, "joint": tok.joint,
                                 "source": tok.src_vocab_size, "target": tok.tgt_vocab_size}},
        "training": {"run": run.run_dir.resolve().name,
                     "checkpoint": run.checkpoint_path.name, "steps": run.step,
                     "target_tokens": progress.count("tokens", None),
                     "training_minutes": round(progress.number("elapsed", 0.0) / 60, 1),
                     "hardware": checkpoint_hardware(payload, run.checkpoint_path),
                     "weights": run.weights},
        "ancestors": [{**a, "data": None if a["data"] is None else list(map(_stated, a["data"]))}
                      for a in (x.to_dict() for x in run_ancestors(run.run_dir))],
        "test_set": run_test_set(run.run_dir, cfg.data.test).to_dict(),
        "scores": scores(run.run_dir, run.checkpoint_path.name),
        "runtime": runtime(quantization, cfg.decode.beam),
        "nmt_version": __version__,
    }


def _source_lines(source: dict[str, Any]) -> list[str]:
    what = [f"**{md(source['name'])}**"]
    if source.get("form"):
        digest = f", SHA-256 {source['sha256'][:16]}…" if source.get("sha256") else ""
        what.append(f"({md(source['form'])}{digest})")
    if source.get("weight") is not None:
        what.append(f"weight {source['weight']:g}")
    line = "- " + " ".join(what)
    if source.get("read") is not None and source.get("kept") is not None:
        line += f": {source['read']:,} pairs read, {source['kept']:,} kept"
        removed = {k: v for k, v in (source.get("filtered") or {}).items() if v}
        if removed:
            line += " (removed: " + ", ".join(f"{md(k)} {v:,}" for k, v in removed.items()) + ")"
    return [line + ".", f"  Licence: {md(source.get('licence') or NOT_STATED)}"]


def test_set_words(test_set: dict[str, Any] | TestSet | None) -> str:
    """Which test set scores are of, in words."""
    if test_set is None:
        return "a test set not recorded"
    found = test_set if isinstance(test_set, dict) else test_set.to_dict()
    if found.get("kind") != "file":
        return "the run's own test split (held out from its training data)"
    digest = found.get("sha256")
    return f"the file {md(found.get('name'))}" + (
        f" (SHA-256 {digest})" if digest else " (its SHA-256 not recorded)")


def _score_rows(found: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| engine | beam | BLEU | chrF | sentences | signatures |",
             "|---|---|---|---|---|---|"]
    for engine, s in found.items():
        signatures = f"{md(s.get('bleu_signature', ''))}; {md(s.get('chrf_signature', ''))}"
        sentences = "—" if s.get("sentences") is None else f"{s['sentences']:,}"
        lines.append(f"| {md(engine)} | {s.get('beam', 1)} | {s['bleu']:.2f} | "
                     f"{s['chrf']:.2f} | {sentences} | {signatures} |")
    return lines


def _ancestor_lines(card: dict[str, Any]) -> list[str]:
    """What the model derives from: each ancestor, its data and licences, its scores."""
    lines: list[str] = []
    for n, a in enumerate(card.get("ancestors") or [], 1):
        what = "Parent" if n == 1 else "Grandparent" if n == 2 else f"Ancestor {n}"
        step = f", step {a['step']:,}" if a.get("step") is not None else ""
        digest = f", SHA-256 {a['sha256'][:16]}…" if a.get("sha256") else ""
        lines += ["", f"### {what}: run {md(a['run'])} ({md(a['checkpoint'])}{step}{digest})",
                  "", "This model continues its weights and tokenizer, so it derives from its "
                      "data too:", ""]
        if a.get("data") is None:
            lines.append(f"- Data {NOT_RECORDED_WORDS}.")
        for source in a.get("data") or []:
            lines += _source_lines(source)
        if a.get("scores"):
            lines += ["", f"Its scores on {test_set_words(a.get('test_set'))}:", "",
                      *_score_rows(a["scores"])]
    return lines


NOT_RECORDED_WORDS = ("not recorded (continued from a run made before runs recorded their "
                      "ancestry): state it before sharing this model")


def _runtime_lines(card: dict[str, Any]) -> list[str]:
    rt = card["runtime"]
    found = card["scores"]
    int8, base = found.get("ct2-int8"), found.get("nmt")
    cost = (f" (measured: BLEU {int8['bleu'] - base['bleu']:+.2f} against nmt's)"
            if int8 and base else " (int8's cost not measured: `nmt bleu --engine "
            "ctranslate2 --compute-type int8`)")
    return ["", "### Running it", "",
            f"- Weights stored in {md(rt['weights'])}. LibreTranslate runs them in "
            f"{md(rt['libretranslate'])}; argostranslate, with `ARGOS_COMPUTE_TYPE` unset, "
            f"lets CTranslate2 pick ({md(rt['argostranslate'])}){cost}; "
            "`ARGOS_COMPUTE_TYPE` pins the type for both.",
            "- `nmt translate` decodes this model with "
            + ("greedy search" if rt["nmt_translate_beam"] == 1 else
               f"beam search of width {rt['nmt_translate_beam']}")
            + " by default (the run's `decode.beam`).",
            "- Placeholders, markup tags and other protected spans (`%s`, `{name}`): `nmt "
            "translate` checks every output against its source and puts back what the model "
            "dropped or garbled, with either engine (`--spans`), and translates a line without "
            "its tags, placing them after (`--markup`). Run without nmt (argostranslate, "
            "LibreTranslate, or CTranslate2 directly), the model's output is used as it is: a "
            "placeholder it drops or invents stays dropped or invented, and tags in a line go "
            "to the model, which may garble the line around them. argostranslate (1.11) "
            "also writes every `_` of a translation as a space (its SentencePiece decoding), so "
            "a span with an underscore (`%(file_name)s`, `--dry_run`) comes out broken there "
            "even where the model wrote it right."]


def card_markdown(card: dict[str, Any]) -> str:
    """The card as a README section, every value escaped (:func:`md`)."""
    pair, model, training = card["pair"], card["model"], card["training"]
    vocab = model["vocabulary"]
    tokens = training.get("target_tokens")
    lines = ["## Model card", "",
             f"- **Pair**: {md(pair['source_name'])} ({md(pair['source'])}) → "
             f"{md(pair['target_name'])} ({md(pair['target'])}).",
             f"- **Model**: {md(model['shape'])} ({md(model['family'])}), "
             f"{model['parameters']:,} parameters; {md(vocab['kind'])} vocabulary"
             + (f" of {vocab['source']:,} (joint)." if vocab["joint"] else
                f"s of {vocab['source']:,} and {vocab['target']:,}."),
             f"- **Training**: run {md(training['run'])}, {md(training['checkpoint'])} at step "
             f"{training['steps']:,}" + (f", {tokens:,} target tokens" if tokens else "")
             + f", {training['training_minutes']} min on {md(training['hardware'])}; "
             f"{md(training['weights'])} weights.",
             f"- **nmt** {md(card['nmt_version'])}."]
    ancestors = card.get("ancestors") or []
    if ancestors:
        lines.append("- **Continued from** run " + " ← ".join(md(a["run"]) for a in ancestors)
                     + " (their data and licences below).")
    lines += ["", "### Data", ""]
    for source in card["data"]:
        lines += _source_lines(source)
    lines += _ancestor_lines(card)
    lines += ["", f"### Scores (test set: {test_set_words(card.get('test_set'))})", ""]
    if not card["scores"]:
        lines.append("Not measured (`nmt bleu --run RUN` measures it; `nmt export` does when "
                     "`--no-score` is not given).")
    else:
        lines += _score_rows(card["scores"])
    lines += _runtime_lines(card)
    return "\n".join(lines) + "\n"
