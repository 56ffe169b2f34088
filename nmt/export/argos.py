"""Argos Translate: a run as an ``.argosmodel`` package, which ``argostranslate`` installs with
``package.install_from_path`` and LibreTranslate serves.

The package is a zip archive of one directory (Argos Translate extracts it into its package
directory as it stands)::

    nmt-SRC_TGT-NAME/       (nmt-en_fr-NAME for the default pair)
      metadata.json         package_version, argos_version, from/to code and name, type
      README.md             what the model is and its model card (data, licences, scores)
      sentencepiece.model   the joint SentencePiece model: Argos encodes and decodes with it
      model/                the CTranslate2 export of :mod:`nmt.export.ct2_convert`
                            (``add_source_eos``, so the bare pieces Argos passes get the
                            <eos> training put there)

Argos Translate tokenizes with one SentencePiece model for both languages, so only runs with a
joint SentencePiece vocabulary package. It passes text as it comes (no lower-casing, no space
before punctuation): a run trained on normalised text sees raw text there, which costs quality
on capitals and punctuation that ``nmt translate`` would have normalised.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt.arguments import option
from nmt.data.download import ZIP_ERRORS
from nmt.errors import ConfigError, NmtError
from nmt.export.model_card import card_markdown, md, model_card
from nmt.files import Temporary

if TYPE_CHECKING:
    from nmt.config import Config, DataConfig
    from nmt.runs.loading import LoadedRun

ARGOS_VERSION = "1.9.0"  # the package format Argos Translate 1.9 and later read
EXTENSION = ".argosmodel"


def check_packageable(run: LoadedRun) -> None:
    """A one-line error for a run Argos Translate could not tokenize."""
    tok = run.tokenizer
    if tok.kind != "sentencepiece" or not tok.joint:
        what = "a word-level vocabulary" if tok.kind != "sentencepiece" else (
            "separate source and target SentencePiece models")
        raise ConfigError(f"{option('to')} argos: Argos Translate tokenizes both languages with "
                          f"one SentencePiece model, but {run.run_dir} has {what}; train with "
                          "data.tokenizer = \"sentencepiece\" and data.joint_vocab = true")


def package_name(run: LoadedRun) -> str:
    """The package directory's name: ``nmt-<source>_<target>-<run name>`` (``nmt-en_fr-demo``)
    in safe characters."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(run.run_dir).resolve().name) or "run"
    data = run.config.data
    return f"nmt-{data.source}_{data.target}-{name}"


def metadata(run: LoadedRun, card: dict[str, Any]) -> dict[str, Any]:
    """``metadata.json``: the fields Argos Translate reads, and where the model came from
    (``card``: :func:`nmt.export.model_card.model_card`)."""
    from nmt.data.languages import language

    src, tgt = language(run.config.data.source), language(run.config.data.target)
    return {
        "package_version": "1.0", "argos_version": ARGOS_VERSION, "type": "translate",
        "from_code": src.code, "from_name": src.name, "to_code": tgt.code, "to_name": tgt.name,
        "links": [],
        "nmt": {"run": Path(run.run_dir).resolve().name, "checkpoint": run.checkpoint_path.name,
                "step": run.step, "arch": run.config.model.arch, "card": card},
    }


def _textbook_style(data: DataConfig) -> str:
    """How a run that does not write natural text wrote its text, in words."""
    spaced = data.normalization != "natural"
    case = "lower-cased text" if data.lowercase else "text"
    return f"{case} with a space before punctuation" if spaced else case


def _readme(run: LoadedRun, card: dict[str, Any]) -> str:
    from nmt.data.languages import language

    m = run.config.model
    data = run.config.data
    pair = f"{language(data.source).name} → {language(data.target).name}"
    return (
        f"# {pair} (nmt)\n\n"
        f"A {m.n_layers}-layer Transformer (d_model {m.d_model}, {m.n_heads} heads) trained with "
        f"`nmt` (run {md(run.run_dir.resolve().name)}, {md(run.checkpoint_path.name)}, step "
        f"{run.step}), "
        "decoded by CTranslate2.\n\n"
        + (f"It was trained on {_textbook_style(data)}; Argos Translate passes text as it "
           "comes, so write input that way for the best results.\n\n"
           if not data.natural_text else "")
        + card_markdown(card)
    )


def check(config: Config | None, quantization: str | None, where: str) -> None:
    """What the CTranslate2 export inside the package refuses (:func:`nmt.export.ct2_convert.
    check`), before the weights are loaded."""
    from nmt.export.ct2_convert import check as check_ct2

    check_ct2(config, quantization, where)


def export(run: LoadedRun, output: Path | None, quantization: str | None = None,
           overwrite: bool = False, with_checkpoint: bool = False) -> Path:
    """The ``argos`` target of ``nmt export`` (see :mod:`nmt.export`): the package ``output``,
    by default ``exports/NAME.argosmodel``."""
    from nmt.export import output_path

    path, where = output_path(output, f"{run.run_dir.resolve().name}.argosmodel")
    return package_run(run, path, quantization, overwrite, where=where,
                       with_checkpoint=with_checkpoint)


def package_run(run: LoadedRun, output: Path, quantization: str | None = None,
                overwrite: bool = False, where: str | None = None,
                with_checkpoint: bool = False) -> Path:
    """Write the ``.argosmodel`` package of ``run`` to ``output`` (a new file unless
    ``overwrite``, and then only a package nmt wrote is replaced: :func:`why_not_a_package`;
    written beside it and renamed into place). ``where`` starts the error messages: what the
    user named (default ``--output OUTPUT``)."""
    from nmt.export.ct2_convert import check_exportable, export_run
    from nmt.files import atomic_write_bytes, replaceable_output

    output = Path(output)
    where = where or f"{option('output')} {output}"
    check_exportable(run.config, f"{option('run')} {run.run_dir}")
    check_packageable(run)
    if output.suffix != EXTENSION:
        raise NmtError(f"{where}: expected a file name ending in {EXTENSION}")
    target = replaceable_output(output, where, overwrite, why_not_a_package,
                                "a package nmt export wrote")
    name = package_name(run)
    card = model_card(run, quantization or "float32")  # its records checked before writing
    with Temporary(Path(tempfile.gettempdir()), "nmt-argos-") as tmp:
        root = tmp / name
        export_run(run, root / "model", quantization, add_source_eos=True,  # Argos adds none
                   where=where, with_checkpoint=with_checkpoint)  # model/nmt-run: Argos
        # and CTranslate2 read only the files they know
        shutil.copyfile(root / "model" / "spm.model", root / "sentencepiece.model")
        (root / "metadata.json").write_text(json.dumps(metadata(run, card), indent=1) + "\n",
                                            encoding="utf-8")
        (root / "README.md").write_text(_readme(run, card), encoding="utf-8")

        archive = Path(tmp) / f"{name}{EXTENSION}"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            for path in sorted(root.rglob("*")):
                z.write(path, path.relative_to(tmp).as_posix())
        with archive.open("rb") as src:
            atomic_write_bytes(target, lambda f: shutil.copyfileobj(src, f), where)
    return output


def why_not_a_package(path: Path) -> str | None:
    """Why the existing ``path`` may not be replaced by a package; None when it may: it is a
    zip archive of one directory whose ``metadata.json`` carries the ``nmt`` entry that
    :func:`metadata` writes."""
    if not path.is_file():
        return "exists and is not a file"
    meta = None
    try:
        with zipfile.ZipFile(path) as z:
            tops = {n.split("/")[0] for n in z.namelist()}
            info = z.getinfo(f"{tops.pop()}/metadata.json") if len(tops) == 1 else None
            if info is not None and info.file_size < 2**20:
                meta = json.loads(z.read(info))
    except (OSError, ValueError, KeyError, *ZIP_ERRORS):
        pass  # not a zip archive, or not one of ours (a damaged one too): refused below
    if not isinstance(meta, dict) or not isinstance(meta.get("nmt"), dict):
        return "is not an Argos package written by nmt (no metadata.json with an nmt entry)"
    return None
