"""CTranslate2: translate with an export as ``nmt`` does, without importing torch.

Decoding matches ``nmt``'s: the same normalisation, source cut and length limit per sentence.
CTranslate2 takes one length limit per call; greedy search runs a batch to its longest limit and
cuts each output to its own (greedy output does not depend on the limit, so this is exact), beam
search runs each group of equal limits as its own call (there the limit changes the result).
Beam search is CTranslate2's, which keeps the same candidates per step as
:func:`nmt.translation.search.beam_search`; its own length penalty divides by ``length ** alpha``
where ``nmt`` uses GNMT's ``((5 + steps) / 6) ** alpha``, so it runs without one and returns its
``beam`` hypotheses with their scores, and :class:`CT2Translator` ranks them with ``nmt``'s
penalty. Without a length penalty the result is ``nmt``'s; with one the searches stop by
different rules (CTranslate2 once ``2 x beam`` hypotheses have finished, see
:data:`BEAM_PATIENCE`; ``nmt`` once no live beam can beat its ``beam`` kept ones), so a rare
line differs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ctranslate2

from nmt.arguments import option
from nmt.config import DataConfig, DecodeConfig, from_dict
from nmt.data.spans import SpanRules
from nmt.data.spans import parse as parse_spans
from nmt.data.tokenizers import EOS_ID, Tokenizer, load_tokenizer
from nmt.errors import CheckpointError, ConfigError, NmtError, first_line
from nmt.export.ct2_directory import (
    ATTENTION,
    CT2_FILES,
    META_FILE,
    check_model_vocabulary,
    export_directory,
    read_export,
    vocabulary,
)
from nmt.files import open_stored
from nmt.translation.rules import decode_batches, length_penalty
from nmt.translation.structure import SpanGuard
from nmt.translation.translator import (
    StreamTranslator,
    TruncateHook,
    decode_settings,
    output_limit,
    source_ids,
    source_limit_for,
)

# Beam search: CTranslate2 stops a sentence once BEAM_PATIENCE x beam hypotheses have finished
# (nmt: once no live beam can beat its kept ones); 2 matched nmt on 2,330 of 2,336 demo test
# lines against 2,310 for 1, at 25% more time. CTranslate2 only applies patience with a length
# penalty, so it gets a negligible one (undone on its scores) and nmt's ranks the hypotheses.
BEAM_PATIENCE = 2.0
SEARCH_PENALTY = 1e-6


def _language(meta: dict[str, Any], key: str) -> str | None:
    """The export's source or target language (exports older than the pair have none)."""
    value = meta.get(key)
    return value if isinstance(value, str) else None


def _span_guard(data: dict[str, Any], mode: str, where: str, markup: str) -> SpanGuard:
    """The guard of the spans the export records (an export older than them: the default
    kinds); a one-line error for a record that is not one."""
    spec, terms = data.get("spans", "default"), data.get("terms", [])
    if not (isinstance(spec, str) and isinstance(terms, list)
            and all(isinstance(t, str) for t in terms)):
        raise CheckpointError(f"{where}: {META_FILE}: data.spans and data.terms: expected a "
                              "string and a list of strings; export the run again")
    try:
        return SpanGuard(SpanRules(parse_spans(spec, have_terms=bool(terms)), tuple(terms)),
                         mode, markup)
    except ValueError as e:
        raise CheckpointError(f"{where}: {META_FILE}: data.spans: {e}") from None


def _ct2_device(device: str) -> tuple[str, int]:
    """``nmt``'s ``--device`` -> CTranslate2's device and index."""
    if device == "auto":
        return ("cuda", 0) if ctranslate2.get_cuda_device_count() > 0 else ("cpu", 0)
    if device == "cpu":
        return "cpu", 0
    if device == "cuda" or device.startswith("cuda:"):
        index = device.partition(":")[2]
        if index and not index.isdigit():
            raise ConfigError(f"{option('device')} {device}: expected cuda or cuda:N")
        if ctranslate2.get_cuda_device_count() == 0:
            raise ConfigError(f"{option('device')} {device}: CTranslate2 sees no CUDA device")
        return "cuda", int(index or 0)
    raise ConfigError(f"{option('device')} {device}: CTranslate2 runs on auto, cpu, cuda or cuda:N")


def _load(directory: Path, device: str, index: int, compute_type: str, threads: int,
          where: str) -> Any:
    """``ctranslate2.Translator`` of the export: its refusals are one line. The files it reads
    pass :func:`nmt.files.open_stored` first (CTranslate2 would block on a FIFO for ever)."""
    for name in CT2_FILES:
        if os.path.lexists(directory / name):
            open_stored(directory / name, directory, CheckpointError).close()
    try:
        return ctranslate2.Translator(str(directory), device=device, device_index=index,
                                      compute_type=compute_type, intra_threads=threads)
    except (RuntimeError, ValueError) as e:
        if compute_type != "default" and "compute type" in str(e):
            raise ConfigError(f"{option('compute_type')} {compute_type}: "
                              f"{first_line(e, 200)}") from None
        raise CheckpointError(f"{where}: CTranslate2 cannot load it "
                              f"({first_line(e, 200)})") from None


def _cuda_unusable(translator: Any) -> str:
    """Why a translator loaded on CUDA cannot translate ("" when it can). CTranslate2 loads
    cuBLAS at the first product, so a wheel built for one CUDA major release loads its model on
    a machine that has only another one (libcublas.so.12 beside CUDA 13), then fails at the
    first sentence: one sentence of one token (unknown to any vocabulary, so read as its
    ``<unk>``), translated here, finds out."""
    try:
        translator.translate_batch([["<unk>"]], max_decoding_length=1)
    except RuntimeError as e:
        return first_line(e, 160)
    return ""


@dataclass
class CT2Translator(StreamTranslator):
    """An exported model with what is needed to translate raw text as ``nmt`` does:
    :class:`nmt.translation.translator.Translator`'s interface, decoded by CTranslate2."""

    translator: Any  # ctranslate2.Translator
    tokenizer: Tokenizer
    cfg: DecodeConfig
    lowercase: bool = DataConfig.lowercase  # the run's data.lowercase (the export's meta)
    normalization: str = DataConfig.normalization  # the run's data.normalization policy
    truncate: int = 0
    max_positions: int | None = None
    max_src_tokens: int | None = None
    compute_type: str = "default"
    directory: Path | None = None
    add_source_eos: bool = True  # the model appends <eos> (else the input carries it)
    source_lang: str | None = None  # the run's data.source (None: every language's rules)
    target_lang: str | None = None  # the run's data.target
    aligns: bool = False  # return_attention gives the weights nmt aligns with (ATTENTION)

    def __post_init__(self) -> None:
        self._src_tokens = vocabulary(self.tokenizer, "src")
        self._tgt_index = {t: i for i, t in enumerate(vocabulary(self.tokenizer, "tgt"))}

    @classmethod
    def from_export(
        cls, directory: Path, beam: int | None = None, batch_size: int | None = None,
        max_src_tokens: int | None = None, device: str = "cpu", compute_type: str = "default",
        threads: int = 0, max_tokens: int | None = None, where: str | None = None,
        spans: str = "repair", markup: str = "place",
    ) -> CT2Translator:
        """Load an export; ``beam``/``batch_size``/``max_tokens`` override its [decode],
        ``compute_type`` (``default``: the export's weights, or ``int8``, ``float32``, ...)
        converts at load, ``threads`` is CTranslate2's ``intra_threads`` (0: its default).
        ``where`` names the export in errors (default ``--model DIRECTORY``); ``spans`` is the
        mode of :mod:`nmt.translation.structure`, with the rules the export records."""
        where = where or f"{option('model')} {directory}"
        directory = export_directory(Path(directory), where)
        meta = read_export(directory, where)
        cfg = from_dict({"decode": meta["decode"]}, where=str(directory / META_FILE)).decode
        cfg = decode_settings(cfg, beam, batch_size, max_tokens)
        dev, index = _ct2_device(device)
        translator = _load(directory, dev, index, compute_type, threads, where)
        if dev == "cuda":
            unusable = _cuda_unusable(translator)
            if unusable and device != "auto":
                raise ConfigError(f"{option('device')} {device}: CTranslate2 cannot run on CUDA "
                                  f"here ({unusable}): install the CUDA libraries its wheel was "
                                  f"built for, or use {option('device')} cpu")
            if unusable:
                print(f"note: CTranslate2 cannot run on CUDA here ({unusable}); "
                      "translating on the CPU", file=sys.stderr)
                translator = _load(directory, "cpu", 0, compute_type, threads, where)
        data = meta["data"]
        try:
            tokenizer = load_tokenizer(directory)
        except NmtError:
            raise
        except Exception as e:  # noqa: BLE001 - a tokenizer file of another export, damaged
            raise CheckpointError(f"{where}: its tokenizer files do not load "
                                  f"({first_line(e, 120)}); export the run again") from None
        recorded = meta.get("tokenizer")
        digest = recorded.get("digest") if isinstance(recorded, dict) else None  # older: none
        if digest is not None and digest != tokenizer.digest():
            raise CheckpointError(
                f"{option('model')} {directory}: its tokenizer files are not the ones it was "
                f"exported with (vocabulary digest {tokenizer.digest()[:12]}, expected "
                f"{digest[:12]})")
        check_model_vocabulary(directory, tokenizer, where)
        made = cls(translator, tokenizer, cfg, bool(data["lowercase"]),
                   str(data["normalization"]), int(data["truncate"]),
                   meta.get("max_positions"), max_src_tokens, compute_type, directory,
                   bool(meta.get("add_source_eos", True)),
                   _language(meta, "source_language"), _language(meta, "target_language"),
                   meta.get("attention") == ATTENTION)
        made.spans = _span_guard(data, spans, where, markup)
        return made

    def translate_as_written(self, texts: Sequence[str],
                             on_truncate: TruncateHook | None = None) -> list[str]:
        keep_eos = self.max_src_tokens is not None or self.truncate <= 0
        limit = self.source_limit()
        batch: list[list[int]] = []
        for i, text in enumerate(texts):
            ids, n = source_ids(self.tokenizer, self.normalize_source(text), limit, keep_eos)
            if n > limit and on_truncate is not None:
                on_truncate(i, n, limit)
            batch.append(ids)
        outputs = self.translate_ids(batch)
        return [self.tokenizer.decode_tgt(out) if ids else ""
                for out, ids in zip(outputs, batch, strict=True)]

    def source_limit(self) -> int:
        return source_limit_for(self.max_positions, self.max_src_tokens, self.truncate)

    def forced_attention(self, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]]
                         ) -> list[Sequence[Sequence[float]]]:
        """Each target given to CTranslate2 as the prefix of its translation, with its
        ``return_attention``: the weights nmt aligns with only from an export that records
        its :data:`~nmt.export.ct2_directory.ATTENTION` (:attr:`aligns`; made before it
        averaged the heads, it gives the first head's)."""
        tgt_tokens = [self.tokenizer.tgt_tokens(t) for t in tgt]
        out = self.translator.translate_batch(
            [[self._src_tokens[t] for t in (_without_eos(s) if self.add_source_eos else s)]
             for s in src], target_prefix=tgt_tokens, beam_size=1, return_attention=True,
            min_decoding_length=0, max_input_length=0,
            max_decoding_length=max(len(t) for t in tgt_tokens) + 1)
        return [result.attention[0] for result in out]

    def translate_ids(self, src_ids: Sequence[Sequence[int]]) -> list[list[int]]:
        """Encoder ids (ending in ``<eos>``, as :func:`nmt.translation.translator.source_ids` makes
        them) -> output ids without ``<eos>``, in input order; in the batches of
        :func:`nmt.translation.search.search_ids` (:func:`nmt.translation.rules.decode_batches`:
        sentences and source tokens times the beam bounded). Empty sources give empty outputs."""
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
