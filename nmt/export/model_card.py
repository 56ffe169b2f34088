"""The model card every export carries: what the model is, what it was trained on and under
which licence, how it was trained, and how good it measured.

It is written into the CTranslate2 directory's README, the Argos package's README and, as data,
under ``nmt`` in the package's ``metadata.json`` (Argos Translate ignores keys it does not
know). It is read from the run's own files: its config and checkpoint, ``corpus.json`` (the data
and each source's counts and licence), ``train.log`` (the hardware) and the newest
``scores.test*.json`` of the exported checkpoint (``nmt bleu``; ``nmt export`` scores the run
first when there is none, unless ``--no-score``). It never holds an absolute path: files are
named by their names only, the run by its name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt import __version__

if TYPE_CHECKING:
    from nmt.runs.loading import LoadedRun

NOT_STATED = "not stated: state it before sharing this model"
ARGOS_COMPUTE_TYPE = "int8"  # what Argos Translate and LibreTranslate load CTranslate2 models with


def scores(run_dir: Path, checkpoint: str) -> dict[str, dict[str, Any]]:
    """The newest test-split scores of ``checkpoint`` by how they were made (``nmt``, or the
    tag of their file: ``ct2-int8``, ...): BLEU and chrF with their sacrebleu signatures, the
    beam and the sentences scored (:func:`nmt.runs.records.test_scores`)."""
    from nmt.runs.records import test_scores

    return {engine: s.to_dict() for engine, s in test_scores(run_dir, checkpoint).items()}


def _source(identity: dict[str, Any], counts: dict[str, Any] | None) -> dict[str, Any]:
    out = {"name": Path(str(identity.get("name") or identity.get("corpus", "?"))).name,
           "form": identity.get("form"), "sha256": identity.get("sha256"),
           "files": [Path(str(f)).name for f in identity.get("files", [])],
           "licence": identity.get("licence") or NOT_STATED}
    if "weight" in identity:
        out["weight"] = identity["weight"]
    for key in ("read", "kept", "filtered", "train_pairs", "train_pairs_weighted"):
        value = (counts or {}).get(key, identity.get(key))
        if value is not None:
            out[key] = value
    return out


def _parent(run_dir: Path) -> dict[str, Any] | None:
    """The run this one continued (``nmt train --from``), as its ``parent.json`` says."""
    from nmt.errors import NmtError
    from nmt.runs.layout import PARENT_FILE
    from nmt.runs.records import read_parent

    try:
        return read_parent(run_dir)
    except NmtError:
        return {"run": f"unreadable {PARENT_FILE}"}


def model_card(run: LoadedRun) -> dict[str, Any]:
    """The card's facts, as ``metadata.json`` holds them."""
    from nmt.data.languages import language
    from nmt.runs.checkpoint import load_checkpoint
    from nmt.runs.table import count_state_parameters, describe_model

    cfg = run.config
    from nmt.runs.records import checkpoint_hardware, read_corpus_record

    record = read_corpus_record(run.run_dir) or {}
    if record.get("sources"):
        data = [_source(s, None) for s in record["sources"] if isinstance(s, dict)]
    elif record:
        data = [_source(record["corpus"], record.get("cleaning"))]
    else:  # a run made before runs recorded their data: the built-in corpus, or not known
        from nmt.data.corpora.base import TATOEBA_LICENCE
        from nmt.data.corpora.builtin import NAME

        data = [{"name": cfg.data.corpus,
                 "licence": TATOEBA_LICENCE if cfg.data.corpus == NAME else NOT_STATED}]
    payload = load_checkpoint(run.checkpoint_path, mmap=True)
    progress = payload.get("progress", {})
    tok = run.tokenizer
    return {
        "pair": {"source": cfg.data.source, "target": cfg.data.target,
                 "source_name": language(cfg.data.source).name,
                 "target_name": language(cfg.data.target).name},
        "data": data,
        "model": {"family": cfg.model.arch, "shape": describe_model(cfg.model.to_dict()),
                  "parameters": count_state_parameters(payload["model"]),
                  "vocabulary": {"kind": tok.kind, "joint": tok.joint,
                                 "source": tok.src_vocab_size, "target": tok.tgt_vocab_size}},
        "training": {"run": Path(run.run_dir).resolve().name,
                     "checkpoint": run.checkpoint_path.name, "steps": run.step,
                     "target_tokens": progress.get("tokens"),
                     "training_minutes": round(float(progress.get("elapsed", 0.0)) / 60, 1),
                     "hardware": checkpoint_hardware(payload, run.checkpoint_path),
                     "weights": run.weights},
        "parent": _parent(run.run_dir),
        "scores": scores(run.run_dir, run.checkpoint_path.name),
        "argos_compute_type": ARGOS_COMPUTE_TYPE,
        "nmt_version": __version__,
    }


def card_markdown(card: dict[str, Any]) -> str:
    """The card as a README section."""
    pair, model, training = card["pair"], card["model"], card["training"]
    vocab = model["vocabulary"]
    lines = ["## Model card", "",
             f"- **Pair**: {pair['source_name']} ({pair['source']}) → {pair['target_name']} "
             f"({pair['target']}).",
             f"- **Model**: {model['shape']} ({model['family']}), {model['parameters']:,} "
             f"parameters; {vocab['kind']} vocabulary"
             + (f" of {vocab['source']:,} (joint)." if vocab["joint"] else
                f"s of {vocab['source']:,} and {vocab['target']:,}."),
             f"- **Training**: run `{training['run']}`, `{training['checkpoint']}` at step "
             f"{training['steps']:,}"
             + (f", {training['target_tokens']:,} target tokens"
                if isinstance(training.get("target_tokens"), int) else "")
             + f", {training['training_minutes']} min on {training['hardware']}; "
             f"{training['weights']} weights.",
             f"- **nmt** {card['nmt_version']}."]
    parent = card.get("parent")
    if parent:
        lines.append(f"- **Continued from** run `{parent.get('run')}` "
                     f"(`{parent.get('checkpoint')}`, step {parent.get('step')}, SHA-256 "
                     f"{str(parent.get('sha256'))[:16]}…): its model and tokenizer.")
    lines += ["", "### Data", ""]
    for source in card["data"]:
        what = [f"**{source['name']}**"]
        if source.get("form"):
            what.append(f"({source['form']}")
            what[-1] += f", SHA-256 {str(source.get('sha256'))[:16]}…)"
        if "weight" in source:
            what.append(f"weight {source['weight']:g}")
        line = "- " + " ".join(what)
        if isinstance(source.get("read"), int) and isinstance(source.get("kept"), int):
            line += f": {source['read']:,} pairs read, {source['kept']:,} kept"
            removed = {k: v for k, v in (source.get("filtered") or {}).items() if v}
            if removed:
                line += " (removed: " + ", ".join(f"{k} {v:,}" for k, v in removed.items()) + ")"
        lines += [line + ".", f"  Licence: {source['licence']}"]
    lines += ["", "### Scores (test split)", ""]
    if not card["scores"]:
        lines.append("Not measured (`nmt bleu --run RUN` measures it; `nmt export` does when "
                     "`--no-score` is not given).")
    else:
        lines += ["| engine | beam | BLEU | chrF | sentences | signatures |",
                  "|---|---|---|---|---|---|"]
        for engine, s in card["scores"].items():
            signatures = f"`{s['bleu_signature']}`; `{s['chrf_signature']}`".replace("|", "\\|")
            lines.append(f"| {engine} | {s['beam']} | {s['bleu']:.2f} | {s['chrf']:.2f} | "
                         f"{s['sentences']} | {signatures} |")
        int8 = card["scores"].get(f"ct2-{card['argos_compute_type']}")
        base = card["scores"].get("nmt")
        cost = (f" (measured: BLEU {int8['bleu'] - base['bleu']:+.2f} against nmt's)"
                if int8 and base else " (its cost not measured: `nmt bleu --engine ctranslate2 "
                "--compute-type int8`)")
        lines += ["", f"Argos Translate and LibreTranslate run it with CTranslate2's "
                      f"`{card['argos_compute_type']}` compute type{cost}."]
    return "\n".join(lines) + "\n"
