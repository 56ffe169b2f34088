"""CTranslate2: convert a Transformer run into an export directory (needs torch).

The converter fills CTranslate2's ``TransformerSpec`` from :class:`~nmt.models.transformer.
Transformer` weights (no retraining, no other toolkit in between):

- pre-norm (with the final LayerNorm of each stack) or post-norm, ReLU feed-forward;
- embeddings scaled by ``sqrt(d_model)``, tied or not, one vocabulary or two;
- the position table is written out: CTranslate2's built-in sinusoids put all sines before
  all cosines, ``nmt``'s interleave them (:func:`~nmt.models.transformer.sinusoidal_positions`);
- the packed ``q;k;v`` projection of self-attention is CTranslate2's fused projection as it
  stands (``nn.Linear`` weights need no transpose); cross-attention splits into the queries and
  the fused ``k;v`` rows;
- LayerNorm epsilon 1e-5 (torch's), not CTranslate2's default 1e-6;
- sources end in ``<eos>`` with no ``<bos>``, the decoder starts from ``<bos>``. The model
  appends the ``<eos>`` itself (``add_source_eos``), so Argos Translate, which passes bare
  SentencePiece pieces, feeds it what training did; except for runs trained on sources cut to
  ``data.truncate`` tokens (the d2l presets), whose cut sources had no ``<eos>``: there the
  input carries it, cut as training cut it, and translation matches ``nmt`` on long inputs too;
- ``<pad>`` and ``<bos>`` are never outputs in ``nmt`` (:func:`nmt.translation.search._log_probs`):
the
  export gives them an output bias of -10^4, so every engine, Argos and LibreTranslate included,
  keeps that rule without an option. Their probability after the softmax is then 0 instead of
  tiny, so CTranslate2's beam scores are renormalised over the other tokens (greedy is unchanged).

The exported directory holds the CTranslate2 model (``model.bin``, ``config.json``, vocabulary
JSON), the tokenizer (``tokenizer.json`` and ``spm.model``, or ``src.model``/``tgt.model``, or a
word vocabulary), ``normalize.py`` (the text normalisation of training, standard library only),
``nmt-export.json`` (what :class:`~nmt.export.ct2_translate.CT2Translator` needs to translate
as ``nmt`` does) and a README with the Python lines that use it without ``nmt``.


The directory's layout is :mod:`nmt.export.ct2_directory`; translating with it,
:mod:`nmt.export.ct2_translate` (which imports no torch).
"""

from __future__ import annotations

import fnmatch
import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ctranslate2
import numpy as np
from ctranslate2.converters import Converter
from ctranslate2.specs import common_spec, model_spec, transformer_spec

import nmt.data.normalize as normalize_module
from nmt.arguments import option
from nmt.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, SPECIALS, Tokenizer
from nmt.errors import CheckpointError, ConfigError, NmtError, os_reason
from nmt.export import output_path
from nmt.export.ct2_directory import (
    ATTENTION,
    EXPORT_ENTRIES,
    FORMAT,
    META_FILE,
    checkpoint_stamp,
    replace_dir,
    run_export,
    run_export_where,
    temporary_export,
    vocabulary,
    why_not_an_export,
)
from nmt.export.model_card import card_markdown, md, model_card
from nmt.files import replaceable_output
from nmt.runs.portable import write_run_copy
from nmt.translation.structure import span_guard

if TYPE_CHECKING:
    import torch

    from nmt.config import Config, ModelConfig
    from nmt.models.transformer import Transformer
    from nmt.runs.loading import LoadedRun

QUANTIZATIONS: tuple[str, ...] = tuple(model_spec.ACCEPTED_MODEL_TYPES)
NEVER_BIAS = -1.0e4  # output bias of <pad> and <bos>: exp(-1e4) is 0 in every float type
LAYER_NORM_EPS = 1.0e-5  # torch.nn.LayerNorm's default, which the model trains with


def check_exportable(config: Config, where: str) -> None:
    """A one-line :class:`CheckpointError` for a model CTranslate2 cannot run."""
    if config.model.arch != "transformer":
        raise CheckpointError(
            f"{where}: a {config.model.arch.upper()} model cannot be exported to CTranslate2, "
            "which has no recurrent decoder; only Transformer runs export")


def check(config: Config | None, quantization: str | None, where: str) -> None:
    """Refuse, before the weights are loaded, a ``quantization`` CTranslate2 does not know and a
    run (``config``, when known) it cannot run; ``where`` names the run."""
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise NmtError(f"{option('quantization')} {quantization}: expected one of "
                       f"{', '.join(QUANTIZATIONS)}")
    if config is not None:
        check_exportable(config, where)


def export(run: LoadedRun, output: Path | None, quantization: str | None = None,
           overwrite: bool = False, with_checkpoint: bool = False) -> Path:
    """The ``ctranslate2`` target of ``nmt export`` (see :mod:`nmt.export`): the model directory
    ``output``, by default ``exports/NAME-ctranslate2[-QUANTIZATION]``."""
    suffix = f"-{quantization}" if quantization else ""
    path, where = output_path(output, f"{run.run_dir.resolve().name}-ctranslate2{suffix}")
    return export_run(run, path, quantization, overwrite, where=where,
                      with_checkpoint=with_checkpoint)


def _array(t: torch.Tensor) -> np.ndarray:
    """A float32 copy: never the tensor's own memory, which CTranslate2's quantization would
    rewrite in place (the PyTorch model must stay as it was)."""
    return np.array(t.detach().cpu().float().numpy(), dtype=np.float32, copy=True,
                    order="C")


def _linear(spec: Any, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    spec.weight = _array(weight)
    if bias is not None:
        spec.bias = _array(bias)


def _layer_norm(spec: Any, norm: Any) -> None:
    spec.gamma = _array(norm.weight)
    spec.beta = _array(norm.bias)


def _attention(spec: Any, attn: Any, fused_qkv: bool) -> None:
    """``MultiHeadAttention`` -> ``MultiHeadAttentionSpec``: in_proj rows are queries, keys,
    values; self-attention takes them as one fused projection, cross-attention as queries and
    fused keys;values."""
    w, b, d = attn.in_proj.weight, attn.in_proj.bias, attn.d_model
    if fused_qkv:
        _linear(spec.linear[0], w, b)
    else:
        _linear(spec.linear[0], w[:d], None if b is None else b[:d])
        _linear(spec.linear[1], w[d:], None if b is None else b[d:])
    _linear(spec.linear[-1], attn.W_o.weight, attn.W_o.bias)


def _ffn(spec: Any, ffn: Any, norm: Any) -> None:
    _layer_norm(spec.layer_norm, norm)
    _linear(spec.linear_0, ffn.l1.weight, ffn.l1.bias)
    _linear(spec.linear_1, ffn.l2.weight, ffn.l2.bias)


class TransformerConverter(Converter):  # type: ignore[misc]
    """CTranslate2 converter of an ``nmt`` :class:`~nmt.models.transformer.Transformer` and
    its tokenizer (``convert(output_dir, quantization=...)`` is CTranslate2's)."""

    def __init__(self, model: Transformer, tokenizer: Tokenizer, cfg: ModelConfig,
                 add_source_eos: bool = True) -> None:
        self.model, self.tokenizer, self.cfg = model, tokenizer, cfg
        self.add_source_eos = add_source_eos

    def _load(self) -> Any:
        import torch

        m, pre_norm = self.model, self.cfg.norm_first
        spec = transformer_spec.TransformerSpec.from_config(
            self.cfg.n_layers, self.cfg.n_heads, pre_norm=pre_norm,
            activation=common_spec.Activation.RELU,
            # return_attention: the last layer's heads averaged, as nmt reads its own
            # (nmt.translation.alignment); CTranslate2's default is the first head alone
            alignment_layer=-1, alignment_heads=self.cfg.n_heads)
        positions = _array(m.pos)  # (max_positions, d_model), interleaved sin/cos
        with torch.no_grad():
            for stack, embed in ((spec.encoder, m.src_embed), (spec.decoder, m.tgt_embed)):
                emb = stack.embeddings[0] if isinstance(stack.embeddings, list) else (
                    stack.embeddings)
                emb.weight = _array(embed.weight)
                stack.scale_embeddings = True  # sqrt(d_model), as Transformer._embed
                stack.position_encodings.encodings = positions
            for layer_spec, layer in zip(spec.encoder.layer, m.enc_layers, strict=True):
                _attention(layer_spec.self_attention, layer.self_attn, fused_qkv=True)
                _layer_norm(layer_spec.self_attention.layer_norm, layer.norm1)
                _ffn(layer_spec.ffn, layer.ffn, layer.norm2)
            for layer_spec, layer in zip(spec.decoder.layer, m.dec_layers, strict=True):
                _attention(layer_spec.self_attention, layer.self_attn, fused_qkv=True)
                _layer_norm(layer_spec.self_attention.layer_norm, layer.norm1)
                _attention(layer_spec.attention, layer.cross_attn, fused_qkv=False)
                _layer_norm(layer_spec.attention.layer_norm, layer.norm2)
                _ffn(layer_spec.ffn, layer.ffn, layer.norm3)
            if pre_norm:
                _layer_norm(spec.encoder.layer_norm, m.enc_norm)
                _layer_norm(spec.decoder.layer_norm, m.dec_norm)
            bias = m.out.bias.detach().clone() if m.out.bias is not None else (
                torch.zeros(m.out.weight.shape[0]))
            bias[[PAD_ID, BOS_ID]] = NEVER_BIAS
            _linear(spec.decoder.projection, m.out.weight, bias)
        spec.register_source_vocabulary(vocabulary(self.tokenizer, "src"))
        spec.register_target_vocabulary(vocabulary(self.tokenizer, "tgt"))
        cfg = spec.config
        cfg.unk_token, cfg.bos_token, cfg.eos_token = SPECIALS[0], SPECIALS[BOS_ID], SPECIALS[
            EOS_ID]
        cfg.decoder_start_token = SPECIALS[BOS_ID]
        cfg.add_source_bos, cfg.add_source_eos = False, self.add_source_eos
        cfg.layer_norm_epsilon = LAYER_NORM_EPS
        return spec


def _readme(meta: dict[str, Any], card: str) -> str:
    """The exported directory's README: what is in it, the Python lines that use it, and its
    model card (``card``: :func:`nmt.export.model_card.card_markdown`)."""
    tok = meta["tokenizer"]
    data = meta["data"]
    norm = (f"normalize(s, lowercase={data['lowercase']}, policy={data['normalization']!r}, "
            f"lang={meta['source_language']!r})")
    if tok["kind"] == "sentencepiece":
        src_model, tgt_model = ("spm.model", "spm.model") if tok["joint"] else (
            "src.model", "tgt.model")
        load = (f'src_sp = spm.SentencePieceProcessor(model_file="{src_model}")\n'
                f'tgt_sp = spm.SentencePieceProcessor(model_file="{tgt_model}")\n')
        item = f"src_sp.encode({norm}, out_type=str)"
        decode = "[tgt_sp.decode(r.hypotheses[0][:n]) for r, n in zip(results, limits)]"
        imports = "import ctranslate2\nimport sentencepiece as spm\n"
        tokenizer_line = (f"SentencePiece model{'' if tok['joint'] else 's'}: "
                          f"`{src_model}`" + ("" if tok["joint"] else f", `{tgt_model}`") + ".")
    else:
        load = ""
        item = f'{norm}.split(" ")'
        decode = '[" ".join(r.hypotheses[0][:n]) for r, n in zip(results, limits)]'
        imports = "import ctranslate2\n"
        tokenizer_line = ("Word-level vocabulary: split normalised text on single spaces "
                          "(`vocab.txt` or `src.vocab.txt`/`tgt.vocab.txt`).")
    import inspect

    from nmt.config import DecodeConfig
    from nmt.translation.limits import output_cap, output_length

    dec = DecodeConfig(**meta["decode"])
    cap = output_cap(dec, meta["max_positions"])
    n_src = "len(p) + 1"  # the model appends <eos>
    if not meta.get("add_source_eos", True):  # cut as training cut its sources, <eos> and all
        item, n_src = f'({item} + ["<eos>"])[:{data["truncate"]}]', "len(p)"
    encode = f"[{item} for s in sentences]"
    code = (
        "import math\n"
        "\n"
        f"{imports}"
        "from normalize import normalize  # the text normalisation the model was trained on\n"
        "\n"
        "\n"
        "# nmt's output limit, copied from nmt/translation/limits.py\n"
        f"{inspect.getsource(output_length)}"
        "\n"
        "\n"
        f"{load}"
        'translator = ctranslate2.Translator(".", device="cpu")\n'
        'sentences = ["I\'m home.", "He\'s calm."]\n'
        f"pieces = {encode}\n"
        f"limits = [output_length({n_src}, {dec.max_len_a!r}, {dec.max_len_b}, {cap}) "
        "for p in pieces]\n"
        "results = translator.translate_batch(pieces, beam_size=1, min_decoding_length=0,\n"
        "                                     max_decoding_length=max(limits))\n"
        f"print({decode})\n"
    )
    return (
        f"# {meta['source_language']}→{meta['target_language']} Transformer for CTranslate2\n\n"
        f"Exported by `nmt export` from the run {md(meta['run'])} ({md(meta['checkpoint'])}, "
        f"step {meta['step']}), weights {meta['quantization']}, CTranslate2 "
        f"{meta['ctranslate2_version']}.\n\n"
        "- `model.bin`, `config.json`, `*_vocabulary.json`: the CTranslate2 model.\n"
        f"- {tokenizer_line}\n"
        "- `normalize.py`: the text normalisation of training (Python standard library only); "
        "apply it to every input sentence.\n"
        "- `nmt-export.json`: the settings `nmt translate --engine ctranslate2` reads.\n\n"
        "Translate without `nmt` (`pip install ctranslate2 sentencepiece`), from this "
        "directory:\n\n"
        f"```python\n{code}```\n\n"
        + ("These lines decode greedily, as `nmt translate` does by default for this model "
           "(its `decode.beam` is 1), and give the same output. "
           if dec.beam == 1 else
           f"These lines decode greedily; `nmt translate` decodes this model with beam search "
           f"of width {dec.beam} by default (its `decode.beam`), and so does `nmt translate "
           "--engine ctranslate2 --model DIR` from this directory. ")
        + "`nmt translate --engine ctranslate2 --model DIR` also batches by length and streams "
        "files.\n\n"
        + card
    )


def export_run(run: LoadedRun, output: Path, quantization: str | None = None,
               overwrite: bool = False, add_source_eos: bool | None = None,
               where: str | None = None, with_checkpoint: bool = False) -> Path:
    """Convert a loaded run into the directory ``output`` (see the module docstring).

    ``add_source_eos``: the model appends ``<eos>`` to its inputs; by default unless the run
    trained on cut sources (``data.truncate``), where the input must carry it.

    ``output`` must not exist unless ``overwrite``, and then only an earlier export or an empty
    directory is replaced (:func:`why_not_an_export`); the export is written beside it and
    renamed into place, so a failure leaves whatever was there before. ``where`` starts the
    error messages: what the user named (default ``--output OUTPUT``). ``with_checkpoint``: the
    export also holds the run's checkpoint and what ``nmt train --from`` needs
    (:mod:`nmt.runs.portable`).
    """
    check_exportable(run.config, f"{option('run')} {run.run_dir}")
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ConfigError(f"{option('quantization')} {quantization}: expected one of "
                          f"{', '.join(QUANTIZATIONS)}")
    output = Path(output)
    where = where or f"{option('output')} {output}"
    target = replaceable_output(output, where, overwrite, why_not_an_export,
                                "an earlier export (or an empty directory)")
    card = model_card(run, quantization or "float32")  # its records checked before writing
    from nmt.models.transformer import Transformer

    model = run.model
    if not isinstance(model, Transformer):
        raise CheckpointError(f"{option('run')} {run.run_dir}: not a Transformer model")
    was_training = model.training
    model.eval()
    guard = span_guard(run.config.data, where=f"{option('run')} {run.run_dir}: data.glossary")
    meta: dict[str, Any] = {
        "format": FORMAT, "engine": "ctranslate2",
        "ctranslate2_version": ctranslate2.__version__,
        "quantization": quantization or "float32",
        "run": Path(run.run_dir).resolve().name, "checkpoint": run.checkpoint_path.name,
        "step": run.step,
        **checkpoint_stamp(run.checkpoint_path),
        "source_language": run.config.data.source, "target_language": run.config.data.target,
        "tokenizer": {"kind": run.tokenizer.kind, "joint": run.tokenizer.joint,
                      "digest": run.tokenizer.digest()},
        "data": {"lowercase": run.config.data.lowercase,
                 "normalization": run.config.data.normalization,
                 "truncate": run.config.data.truncate,
                 # the protected spans translation keeps, terms read from the glossary
                 "spans": ",".join(guard.rules.kinds) or "none",
                 "terms": list(guard.rules.terms)},
        "decode": asdict(run.config.decode),
        "max_positions": model.max_positions,
        "add_source_eos": add_source_eos if add_source_eos is not None else (
            run.config.data.truncate <= 0),
        "attention": ATTENTION,
    }
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        held = temporary_export(target)
        tmp = held.path / target.name  # in the held folder: the converter makes it anew
    except OSError as e:
        raise NmtError(f"{where}: cannot write ({os_reason(e)})") from None
    try:
        converter = TransformerConverter(model, run.tokenizer, run.config.model,
                                         meta["add_source_eos"])
        converter.convert(str(tmp), quantization=quantization, force=True)
        run.tokenizer.save(tmp)
        shutil.copyfile(Path(normalize_module.__file__), tmp / "normalize.py")
        (tmp / META_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        (tmp / "README.md").write_text(_readme(meta, card_markdown(card)),
                                       encoding="utf-8")
        if with_checkpoint:
            write_run_copy(run, tmp)
        replace_dir(tmp, target)
    except OSError as e:
        raise NmtError(f"{where}: cannot write ({os_reason(e)})") from None
    finally:
        held.cleanup()
        model.train(was_training)
    return output


def run_export_dir(run_dir: Path | None, checkpoint: str = "best") -> Path:
    """The on-the-fly export of ``run_dir``'s checkpoint (:func:`run_export`), made, or made
    again when the checkpoint changed since or its metadata was damaged (that directory is the
    run's own: :func:`run_export` refused a link planted on the way, and only files an export
    writes are removed)."""
    from nmt.runs.loading import load_run

    found = run_export(run_dir, checkpoint)
    if found.current:
        return found.directory
    run = load_run(found.run_dir, str(found.checkpoint), "cpu")
    if found.directory.is_dir() and why_not_an_export(found.directory) and all(
            e.is_file() and any(fnmatch.fnmatchcase(e.name, pattern) for pattern in
                                EXPORT_ENTRIES) for e in found.directory.iterdir()):
        shutil.rmtree(found.directory)  # damaged metadata, nothing else: made again, as a
        # damaged cache is (a file nmt did not write there is refused by export_run instead)
    return export_run(run, found.directory, overwrite=True,
                      where=run_export_where(found.directory))
