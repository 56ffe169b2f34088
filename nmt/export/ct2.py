"""CTranslate2: convert a Transformer run, and translate with the converted model.

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
- ``<pad>`` and ``<bos>`` are never outputs in ``nmt`` (:func:`nmt.decode._log_probs`): the
  export gives them an output bias of -10^4, so every engine, Argos and LibreTranslate included,
  keeps that rule without an option. Their probability after the softmax is then 0 instead of
  tiny, so CTranslate2's beam scores are renormalised over the other tokens (greedy is unchanged).

The exported directory holds the CTranslate2 model (``model.bin``, ``config.json``, vocabulary
JSON), the tokenizer (``tokenizer.json`` and ``spm.model``, or ``src.model``/``tgt.model``, or a
word vocabulary), ``normalize.py`` (the text normalisation of training, standard library only),
``nmt-export.json`` (what :class:`CT2Translator` needs to translate as ``nmt`` does) and a
README with the Python lines that use it without ``nmt``.

Decoding matches ``nmt``'s: the same normalisation, source cut and length limit per sentence.
CTranslate2 takes one length limit per call; greedy search runs a batch to its longest limit and
cuts each output to its own (greedy output does not depend on the limit, so this is exact), beam
search runs each group of equal limits as its own call (there the limit changes the result).
Beam search is CTranslate2's, which keeps the same candidates per step as
:func:`nmt.decode.beam_search`; its own length penalty divides by ``length ** alpha`` where
``nmt`` uses GNMT's ``((5 + steps) / 6) ** alpha``, so it runs without one and returns its
``beam`` hypotheses with their scores, and :class:`CT2Translator` ranks them with ``nmt``'s
penalty. Without a length penalty the result is ``nmt``'s; with one the searches stop by
different rules (CTranslate2 once ``2 x beam`` hypotheses have finished, see
:data:`BEAM_PATIENCE`; ``nmt`` once no live beam can beat its ``beam`` kept ones), so a rare
line differs.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ctranslate2
import numpy as np
from ctranslate2.converters import Converter
from ctranslate2.specs import common_spec, model_spec, transformer_spec

import nmt.data.normalize as normalize_module
from nmt.config import DecodeConfig, from_dict
from nmt.data.normalize import normalize
from nmt.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, SPECIALS, Tokenizer, load_tokenizer
from nmt.errors import CheckpointError, ConfigError, DataError, NmtError, first_line, os_reason
from nmt.files import replaceable_output
from nmt.translate import (
    StreamTranslator,
    TruncateHook,
    decode_settings,
    output_limit,
    source_ids,
    source_limit_for,
)

if TYPE_CHECKING:
    import torch

    from nmt.config import Config, ModelConfig
    from nmt.loading import LoadedRun
    from nmt.models.transformer import Transformer

FORMAT = "nmt-ctranslate2-1"
META_FILE = "nmt-export.json"
QUANTIZATIONS: tuple[str, ...] = tuple(model_spec.ACCEPTED_MODEL_TYPES)
NEVER_BIAS = -1.0e4  # output bias of <pad> and <bos>: exp(-1e4) is 0 in every float type
LAYER_NORM_EPS = 1.0e-5  # torch.nn.LayerNorm's default, which the model trains with
# Beam search: CTranslate2 stops a sentence once BEAM_PATIENCE x beam hypotheses have finished
# (nmt: once no live beam can beat its kept ones); 2 matched nmt on 2,330 of 2,336 demo test
# lines against 2,310 for 1, at 25% more time. CTranslate2 only applies patience with a length
# penalty, so it gets a negligible one (undone on its scores) and nmt's ranks the hypotheses.
BEAM_PATIENCE = 2.0
SEARCH_PENALTY = 1e-6
RUN_EXPORTS = "ctranslate2"  # exports made on the fly live in RUN/ctranslate2/<checkpoint>/


# --- conversion --------------------------------------------------------------------------------


def check_exportable(config: Config, where: str) -> None:
    """A one-line :class:`CheckpointError` for a model CTranslate2 cannot run."""
    if config.model.arch != "transformer":
        raise CheckpointError(
            f"{where}: a {config.model.arch.upper()} model cannot be exported to CTranslate2, "
            "which has no recurrent decoder; only Transformer runs export")


def vocabulary(tokenizer: Tokenizer, side: str) -> list[str]:
    """The tokens of ``side`` (``"src"`` or ``"tgt"``) in id order, as CTranslate2 stores them.

    SentencePiece pieces, or the words of a word-level vocabulary. CTranslate2 maps tokens to
    ids by their text, so every token must be distinct (a :class:`DataError` otherwise).
    """
    tokens = tokenizer.pieces(side)
    if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
        raise DataError(f"{side} vocabulary: expected {SPECIALS} first, got {tokens[:4]}")
    if len(set(tokens)) != len(tokens):
        raise DataError(f"{side} vocabulary: tokens are not distinct, so CTranslate2 could not "
                        "map them back to ids; this vocabulary cannot be exported")
    return tokens


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
            activation=common_spec.Activation.RELU)
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


def _readme(meta: dict[str, Any]) -> str:
    """The exported directory's README: what is in it and the Python lines that use it."""
    tok = meta["tokenizer"]
    data = meta["data"]
    norm = (f"normalize(s, lowercase={data['lowercase']}, policy={data['normalization']!r})")
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

    from nmt.limits import output_cap, output_length

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
        "# nmt's output limit, copied from nmt/limits.py\n"
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
        f"Exported by `nmt export` from `{meta['run']}` ({meta['checkpoint']}, step "
        f"{meta['step']}), weights {meta['quantization']}, CTranslate2 "
        f"{meta['ctranslate2_version']}.\n\n"
        "- `model.bin`, `config.json`, `*_vocabulary.json`: the CTranslate2 model.\n"
        f"- {tokenizer_line}\n"
        "- `normalize.py`: the text normalisation of training (Python standard library only); "
        "apply it to every input sentence.\n"
        "- `nmt-export.json`: the settings `nmt translate --engine ctranslate2` reads.\n\n"
        "Translate without `nmt` (`pip install ctranslate2 sentencepiece`), from this "
        "directory:\n\n"
        f"```python\n{code}```\n\n"
        "These lines decode greedily, as `nmt translate` does by default, and give the same "
        "output. `nmt translate --engine ctranslate2 --model DIR` also batches by length, "
        "streams files and runs beam search.\n\n"
        "Training data: the Tatoeba project (https://tatoeba.org), as packaged by "
        "ManyThings.org (https://www.manythings.org/anki/), CC-BY 2.0 (France).\n"
    )


def _checkpoint_stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"checkpoint_size": st.st_size, "checkpoint_mtime_ns": st.st_mtime_ns}


def export_run(run: LoadedRun, output: Path, quantization: str | None = None,
               overwrite: bool = False, add_source_eos: bool | None = None,
               where: str | None = None) -> Path:
    """Convert a loaded run into the directory ``output`` (see the module docstring).

    ``add_source_eos``: the model appends ``<eos>`` to its inputs; by default unless the run
    trained on cut sources (``data.truncate``), where the input must carry it.

    ``output`` must not exist unless ``overwrite``, and then only an earlier export or an empty
    directory is replaced (:func:`why_not_an_export`); the export is written beside it and
    renamed into place, so a failure leaves whatever was there before. ``where`` starts the
    error messages: what the user named (default ``--output OUTPUT``).
    """
    check_exportable(run.config, f"--run {run.run_dir}")
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ConfigError(f"--quantization {quantization}: expected one of "
                          f"{', '.join(QUANTIZATIONS)}")
    output = Path(output)
    where = where or f"--output {output}"
    target = replaceable_output(output, where, overwrite, why_not_an_export,
                                "an earlier export (or an empty directory)")
    from nmt.models.transformer import Transformer

    model = run.model
    if not isinstance(model, Transformer):
        raise CheckpointError(f"--run {run.run_dir}: not a Transformer model")
    was_training = model.training
    model.eval()
    meta: dict[str, Any] = {
        "format": FORMAT, "engine": "ctranslate2",
        "ctranslate2_version": ctranslate2.__version__,
        "quantization": quantization or "float32",
        "run": str(run.run_dir), "checkpoint": run.checkpoint_path.name, "step": run.step,
        **_checkpoint_stamp(run.checkpoint_path),
        "source_language": run.config.data.source, "target_language": run.config.data.target,
        "tokenizer": {"kind": run.tokenizer.kind, "joint": run.tokenizer.joint,
                      "digest": run.tokenizer.digest()},
        "data": {"lowercase": run.config.data.lowercase,
                 "normalization": run.config.data.normalization,
                 "truncate": run.config.data.truncate},
        "decode": asdict(run.config.decode),
        "max_positions": model.max_positions,
        "add_source_eos": add_source_eos if add_source_eos is not None else (
            run.config.data.truncate <= 0),
    }
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    except OSError as e:
        raise NmtError(f"{where}: cannot write ({os_reason(e)})") from None
    try:
        converter = TransformerConverter(model, run.tokenizer, run.config.model,
                                         meta["add_source_eos"])
        converter.convert(str(tmp), quantization=quantization, force=True)
        run.tokenizer.save(tmp)
        shutil.copyfile(Path(normalize_module.__file__), tmp / "normalize.py")
        (tmp / META_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        (tmp / "README.md").write_text(_readme(meta), encoding="utf-8")
        _replace_dir(tmp, target)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise NmtError(f"{where}: cannot write ({os_reason(e)})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        model.train(was_training)
    return output


# What an export directory holds (glob patterns): the CTranslate2 model and its vocabularies,
# the tokenizer (tokenizer.json with spm.model, src/tgt.model or the word vocabularies),
# normalize.py, nmt-export.json and the README. Replacing an export deletes nothing else.
EXPORT_ENTRIES = ("model.bin", "config.json", "*vocabulary*", "tokenizer.json", "*.model",
                  "*vocab.txt", "normalize.py", META_FILE, "README.md")


def why_not_an_export(path: Path) -> str | None:
    """Why the existing ``path`` may not be replaced by an export; None when it may: it is an
    empty directory, or one ``nmt export`` wrote (its ``nmt-export.json`` is of :data:`FORMAT`)
    holding nothing else than an export does (:data:`EXPORT_ENTRIES`)."""
    from nmt.run_dir import is_run_dir

    if not path.is_dir():
        return "exists and is not a directory"
    entries = sorted(path.iterdir())
    if not entries:
        return None
    if is_run_dir(path):
        return "is a run directory, not an export"
    runs = [e for e in entries if is_run_dir(e)]
    if runs:
        return f"holds the run directory {runs[0].name}"
    try:
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        return f"is not an nmt export (no {META_FILE} of format {FORMAT})"
    for entry in entries:
        if entry.is_dir() or not any(fnmatch.fnmatchcase(entry.name, pattern)
                                     for pattern in EXPORT_ENTRIES):
            return f"holds {entry.name}, which nmt export did not write"
    return None


def _replace_dir(new: Path, target: Path) -> None:
    """Rename ``new`` to ``target``; an existing ``target`` is moved aside first and removed
    only once the new one is in place."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old.{os.getpid()}")
        os.replace(target, old)
    try:
        os.replace(new, target)
    except OSError:
        if old is not None:
            os.replace(old, target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def run_export_dir(run_dir: Path | None, checkpoint: str = "best") -> Path:
    """The on-the-fly export of ``run_dir``'s checkpoint, made (or remade, when the
    checkpoint changed since) under ``RUN/ctranslate2/<checkpoint>/``. A link planted on the
    way is refused (:func:`nmt.run_dir.check_run_path`): what is replaced stays in the run."""
    from nmt.loading import latest_run, load_run, resolve_checkpoint
    from nmt.run_dir import check_run_path

    run_dir = latest_run() if run_dir is None else Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"--run {run_dir}: run directory not found")
    path = resolve_checkpoint(run_dir, checkpoint)
    target = check_run_path(run_dir, run_dir / RUN_EXPORTS / path.stem)
    meta_path = target / META_FILE
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        if (meta.get("format") == FORMAT and meta.get("quantization") == "float32"
                and meta.get("add_source_eos") == (meta.get("data", {}).get("truncate", 0) <= 0)
                and all(meta.get(k) == v for k, v in _checkpoint_stamp(path).items())):
            return target
    run = load_run(run_dir, str(path), "cpu")
    return export_run(run, target, overwrite=True, where=run_export_where(target))


def run_export_where(directory: Path) -> str:
    """How messages name the on-the-fly export ``directory`` (the user named no directory)."""
    return f"{directory} (the run's export for --engine ctranslate2)"


# --- translation -------------------------------------------------------------------------------


def read_export(directory: Path, where: str | None = None) -> dict[str, Any]:
    """``nmt-export.json`` of an exported directory (a one-line error if it is not one, starting
    with ``where``: how the user named it, by default ``--model DIRECTORY``)."""
    directory = Path(directory)
    where = where or f"--model {directory}"
    path = directory / META_FILE
    if not directory.is_dir():
        raise CheckpointError(f"{where}: directory not found")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{where}: not an nmt export (no {META_FILE}; make "
                              "one with `nmt export --to ctranslate2`)") from None
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: unreadable ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an nmt export (expected format {FORMAT!r})")
    return meta


def _ct2_device(device: str) -> tuple[str, int]:
    """``nmt``'s ``--device`` -> CTranslate2's device and index."""
    if device == "auto":
        return ("cuda", 0) if ctranslate2.get_cuda_device_count() > 0 else ("cpu", 0)
    if device == "cpu":
        return "cpu", 0
    if device == "cuda" or device.startswith("cuda:"):
        index = device.partition(":")[2]
        if index and not index.isdigit():
            raise ConfigError(f"--device {device}: expected cuda or cuda:N")
        if ctranslate2.get_cuda_device_count() == 0:
            raise ConfigError(f"--device {device}: CTranslate2 sees no CUDA device")
        return "cuda", int(index or 0)
    raise ConfigError(f"--device {device}: CTranslate2 runs on auto, cpu, cuda or cuda:N")


@dataclass
class CT2Translator(StreamTranslator):
    """An exported model with what is needed to translate raw text as ``nmt`` does:
    :class:`nmt.translate.Translator`'s interface, decoded by CTranslate2."""

    translator: Any  # ctranslate2.Translator
    tokenizer: Tokenizer
    cfg: DecodeConfig
    lowercase: bool = True
    normalization: str = "full"
    truncate: int = 0
    max_positions: int | None = None
    max_src_tokens: int | None = None
    compute_type: str = "default"
    directory: Path | None = None
    add_source_eos: bool = True  # the model appends <eos> (else the input carries it)

    def __post_init__(self) -> None:
        self._src_tokens = vocabulary(self.tokenizer, "src")
        self._tgt_index = {t: i for i, t in enumerate(vocabulary(self.tokenizer, "tgt"))}

    @classmethod
    def from_export(
        cls, directory: Path, beam: int | None = None, batch_size: int | None = None,
        max_src_tokens: int | None = None, device: str = "cpu", compute_type: str = "default",
        threads: int = 0, max_tokens: int | None = None, where: str | None = None,
    ) -> CT2Translator:
        """Load an export; ``beam``/``batch_size``/``max_tokens`` override its [decode],
        ``compute_type`` (``default``: the export's weights, or ``int8``, ``float32``, ...)
        converts at load, ``threads`` is CTranslate2's ``intra_threads`` (0: its default).
        ``where`` names the export in errors (default ``--model DIRECTORY``)."""
        directory = Path(directory)
        where = where or f"--model {directory}"
        meta = read_export(directory, where)
        cfg = from_dict({"decode": meta["decode"]}, where=str(directory / META_FILE)).decode
        cfg = decode_settings(cfg, beam, batch_size, max_tokens)
        dev, index = _ct2_device(device)
        try:
            translator = ctranslate2.Translator(str(directory), device=dev, device_index=index,
                                                compute_type=compute_type,
                                                intra_threads=threads)
        except (RuntimeError, ValueError) as e:
            if compute_type != "default" and "compute type" in str(e):
                raise ConfigError(f"--compute-type {compute_type}: {first_line(e, 200)}"
                                  ) from None
            raise CheckpointError(f"{where}: CTranslate2 cannot load it "
                                  f"({first_line(e, 200)})") from None
        data = meta["data"]
        tokenizer = load_tokenizer(directory)
        recorded = meta.get("tokenizer")
        digest = recorded.get("digest") if isinstance(recorded, dict) else None  # older: none
        if digest is not None and digest != tokenizer.digest():
            raise CheckpointError(
                f"--model {directory}: its tokenizer files are not the ones it was exported "
                f"with (vocabulary digest {tokenizer.digest()[:12]}, expected {digest[:12]})")
        return cls(translator, tokenizer, cfg, bool(data["lowercase"]),
                   str(data["normalization"]), int(data["truncate"]),
                   meta.get("max_positions"), max_src_tokens, compute_type, directory,
                   bool(meta.get("add_source_eos", True)))

    def translate(self, texts: Sequence[str], on_truncate: TruncateHook | None = None) -> list[str]:
        """Raw sentences -> translations, in input order."""
        keep_eos = self.max_src_tokens is not None or self.truncate <= 0
        limit = source_limit_for(self.max_positions, self.max_src_tokens, self.truncate)
        batch: list[list[int]] = []
        for i, text in enumerate(texts):
            ids, n = source_ids(self.tokenizer, normalize(text, self.lowercase,
                                                          self.normalization), limit, keep_eos)
            if n > limit and on_truncate is not None:
                on_truncate(i, n, limit)
            batch.append(ids)
        outputs = self.translate_ids(batch)
        return [self.tokenizer.decode_tgt(out) if ids else ""
                for out, ids in zip(outputs, batch, strict=True)]

    def translate_ids(self, src_ids: Sequence[Sequence[int]]) -> list[list[int]]:
        """Encoder ids (ending in ``<eos>``, as :func:`nmt.translate.source_ids` makes them) ->
        output ids without ``<eos>``, in input order; in the batches of
        :func:`nmt.decode.search_ids` (:func:`nmt.decode.decode_batches`: sentences and
        source tokens times the beam bounded). Empty sources give empty outputs."""
        from nmt.decode import decode_batches

        src_vocab, tgt_index = self._src_tokens, self._tgt_index
        results: list[list[int]] = [[] for _ in src_ids]
        batches = decode_batches([len(s) for s in src_ids], self.cfg)
        limits = {i: output_limit(len(src_ids[i]), self.cfg, self.max_positions)
                  for idx in batches for i in idx}
        for idx in batches:
            groups = [idx] if self.cfg.beam == 1 else _equal_runs(idx, limits)
            for group in groups:
                tokens = [[src_vocab[t] for t in (_without_eos(src_ids[i]) if
                                                   self.add_source_eos else src_ids[i])]
                          for i in group]
                most = max(limits[i] for i in group)
                beam = self.cfg.beam
                # without a length penalty CTranslate2's own stopping rule is exact (it stops
                # once its best beam has finished, which no later hypothesis can beat)
                penalised = beam > 1 and self.cfg.length_penalty != 0
                out = self.translator.translate_batch(
                    tokens, beam_size=beam, num_hypotheses=beam,
                    length_penalty=SEARCH_PENALTY if penalised else 0.0,
                    patience=BEAM_PATIENCE if penalised else 1.0,
                    return_scores=beam > 1, max_decoding_length=most, min_decoding_length=0,
                    max_input_length=0, max_batch_size=0)
                for i, r in zip(group, out, strict=True):
                    best = r.hypotheses[0] if beam == 1 else self._gnmt_best(r, most)
                    results[i] = [tgt_index[t] for t in best[: limits[i]]]
        return results

    def _gnmt_best(self, result: Any, limit: int) -> list[str]:
        """The hypothesis of a beam search result that ``nmt`` ranks first: raw scores divided
        by GNMT's length penalty over the decoder steps (``<eos>`` counted when produced; a
        hypothesis as long as the limit was cut there, without one)."""
        from nmt.decode import length_penalty

        def normalized(k: int) -> float:
            hyp = result.hypotheses[k]
            raw = float(result.scores[k])
            if self.cfg.length_penalty != 0:  # CTranslate2 divided by len ** SEARCH_PENALTY
                raw *= max(len(hyp), 1) ** SEARCH_PENALTY
            steps = len(hyp) + int(len(hyp) < limit)
            return raw / length_penalty(steps, self.cfg.length_penalty)

        best = max(range(len(result.hypotheses)), key=normalized)
        return list(result.hypotheses[best])


def _without_eos(ids: Sequence[int]) -> Sequence[int]:
    return ids[:-1] if ids and ids[-1] == EOS_ID else ids


def _equal_runs(idx: list[int], limits: dict[int, int]) -> list[list[int]]:
    """``idx`` split where the length limit changes (sorted by length, so few runs)."""
    runs: list[list[int]] = []
    for i in idx:
        if runs and limits[runs[-1][0]] == limits[i]:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs
