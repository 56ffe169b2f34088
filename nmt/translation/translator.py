"""Text in, text out: normalise, encode, batch, search, detokenize; and streaming for big inputs.

Input gets the normalisation training used (:func:`nmt.data.normalize.normalize`): for a
natural-text run only a Unicode clean-up (case augmentation in training teaches it ``"i'm home
."`` as well as ``"I'm home."``); for a textbook run lower-casing and spaced punctuation, so
``"I'm home."`` and ``"i'm home ."`` are the same input. A source is ``encode_src(text) + <eos>``
(what training's batching feeds the encoder); a run trained on sources cut to ``data.truncate``
tokens (the d2l presets: 10) gets its sources cut the same way, as the recipe's ``predict`` does.
Empty lines give empty lines without decoding. Streams are read in chunks of lines, so a pipe
of any length runs in bounded memory: a line is read up to ``nmt.files.MAX_LINE_BYTES`` (the
rest is skipped, with a warning, or refused; see :func:`nmt.files.read_lines`), a chunk holds
at most ``CHUNK_LINES`` lines and ``CHUNK_CHARS`` characters, and the decoder's batches are
bounded in sentences and in tokens (:func:`nmt.translation.search.decode_batches`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from nmt import arguments
from nmt.arguments import option
from nmt.config import DataConfig, DecodeConfig
from nmt.data import compressed
from nmt.data.normalize import is_natural_text, normalize, upper
from nmt.data.tokenizers import EOS_ID
from nmt.errors import DataError, os_reason
from nmt.runs.layout import CONFIG_FILE
from nmt.translation.alignment import WordAlignment, word_alignment
from nmt.translation.arriving import Arriving
from nmt.translation.input_case import in_capitals, sentence_case
from nmt.translation.limits import output_limit
from nmt.translation.structure import SpanGuard, UnplacedSpan, guarded, span_guard

if TYPE_CHECKING:
    import torch

    from nmt.data.tokenizers import Tokenizer
    from nmt.models.base import EncoderDecoder
    from nmt.runs.loading import LoadedRun
    from nmt.translation.search import Sampling

DEFAULT_MAX_SRC_TOKENS = 1024  # longer sources are cut (a warning says so): memory stays bounded
CHUNK_LINES = 2048  # lines per streamed chunk: enough to fill length-sorted batches
CHUNK_CHARS = 1 << 22  # and characters: a chunk of long lines holds fewer of them

# (line index within the call, source tokens, limit) -> None; for warnings about cut lines
TruncateHook = Callable[[int, int, int], None]


def source_limit(
    model: EncoderDecoder, max_src_tokens: int | None = None, truncate: int = 0
) -> int:
    """Most source tokens (``<eos>`` included) the model takes: the option, else the run's
    ``data.truncate`` (when training cut its sources), else 1024; capped by the model's position
    table when it has one."""
    return source_limit_for(model.max_positions, max_src_tokens, truncate)


def source_limit_for(
    max_positions: int | None, max_src_tokens: int | None = None, truncate: int = 0
) -> int:
    """:func:`source_limit` of a model whose position table (if any) has ``max_positions``
    rows; what an engine other than the PyTorch model (an export) needs."""
    limit = DEFAULT_MAX_SRC_TOKENS if truncate <= 0 else truncate
    limit = limit if max_src_tokens is None else max_src_tokens
    if max_positions is not None:
        limit = min(limit, max_positions)
    return max(limit, 1)


def source_ids(
    tokenizer: Tokenizer, normalized: str, limit: int, keep_eos: bool = True
) -> tuple[list[int], int]:
    """Normalised text -> encoder ids ending in ``<eos>``, cut to ``limit`` tokens.

    ``keep_eos``: a cut source still ends in ``<eos>`` (training never showed one without it);
    False cuts as training's ``data.truncate`` did, ``<eos>`` and all. Returns the ids and the
    uncut length (so callers can warn). Empty text -> ``[]``.
    """
    if not normalized:
        return [], 0
    ids = tokenizer.encode_src(normalized) + [EOS_ID]
    n = len(ids)
    if n > limit:
        ids = ids[: limit - 1] + [EOS_ID] if keep_eos else ids[:limit]
    return ids, n


def source_cut(
    model: EncoderDecoder, max_src_tokens: int | None = None, truncate: int = 0
) -> tuple[int, bool]:
    """:func:`source_limit` and :func:`source_ids`' ``keep_eos`` for it: a cut at the run's
    ``data.truncate`` (no option given) drops ``<eos>`` with the rest, as training's did."""
    keep_eos = max_src_tokens is not None or truncate <= 0
    return source_limit(model, max_src_tokens, truncate), keep_eos


def translate_normalized(
    model: EncoderDecoder,
    tokenizer: Tokenizer,
    sources: Sequence[str],
    cfg: DecodeConfig,
    device: torch.device | None = None,
    beam: int | None = None,
    max_src_tokens: int | None = None,
    on_truncate: TruncateHook | None = None,
    truncate: int = 0,
    sampling: Sampling | None = None,
) -> list[str]:
    """Translate already-normalised sentences; outputs detokenized, in input order.

    ``beam`` overrides ``cfg.beam``; ``truncate`` is the run's ``data.truncate`` (see
    :func:`source_limit`); ``sampling`` draws the outputs instead of searching.
    """
    from nmt.translation.search import search_ids

    if beam is not None:
        cfg = replace(cfg, beam=beam)
    limit, keep_eos = source_cut(model, max_src_tokens, truncate)
    batch: list[list[int]] = []
    for i, text in enumerate(sources):
        ids, n = source_ids(tokenizer, text, limit, keep_eos)
        if n > limit and on_truncate is not None:
            on_truncate(i, n, limit)
        batch.append(ids)
    hyps = search_ids(model, batch, cfg, device, sampling=sampling, scores=False)
    return [
        tokenizer.decode_tgt(h.tokens) if ids else "" for h, ids in zip(hyps, batch, strict=True)
    ]


class StreamTranslator:
    """What every engine's translator shares: :meth:`translate_stream` over its
    :meth:`translate`."""

    cfg: DecodeConfig  # the search settings (beam, batch size, length limits)
    tokenizer: Tokenizer
    aligns: bool = False  # forced_attention gives the weights tags are placed by
    lowercase: bool  # the run's data.lowercase and data.normalization: how input is normalised
    normalization: str
    source_lang: str | None  # the run's data.source: language rules apply as in training

    def normalize_source(self, text: str) -> str:
        """A raw sentence as training normalised the run's sources."""
        return normalize(text, self.lowercase, self.normalization, self.source_lang)

    @property
    def natural_text(self) -> bool:
        """The model reads and writes text as written, not the textbook's lower-cased, spaced
        text (:func:`nmt.data.normalize.is_natural_text`)."""
        return is_natural_text(self.lowercase, self.normalization)

    target_lang: str | None  # the run's data.target: the capitals of a translation (input_case)

    @property
    def precision(self) -> str:
        """What nmt's own searches compute in, for reports: ``fp32`` or ``bf16``
        (``decode.precision``); another engine says ``fp32`` here and names its compute type
        in its tag."""
        return "fp32"

    # the protected spans each output keeps (nmt.translation.structure); None: not checked
    spans: SpanGuard | None = None

    def translate(self, texts: Sequence[str], on_truncate: TruncateHook | None = None) -> list[str]:
        """Raw sentences -> translations, in input order, with their sources' spans
        (:attr:`spans`). A natural-text run reads a sentence typed in capitals in sentence
        case and gives it back in capitals (:mod:`nmt.translation.input_case`)."""

        def engine(sources: list[str]) -> list[str]:
            read = [self.as_read(t) for t in sources]
            outputs = self.translate_as_written([source for source, _ in read], on_truncate)
            return [upper(out, self.target_lang) if shouted else out
                    for out, (_, shouted) in zip(outputs, read, strict=True)]

        return guarded(engine, list(arguments.sentences(texts, "texts")), self.spans,
                       self.align)

    def align(self, sources: Sequence[str], targets: Sequence[str]
              ) -> list[WordAlignment | None]:
        """Which word of each of ``targets`` renders each word of its source in ``sources``
        (raw sentences, as :meth:`translate` takes them), where the model's attention tells
        (:mod:`nmt.translation.alignment`). A sentence typed in capitals is aligned as the
        model read and wrote it, in sentence case (its translation was put in capitals after)."""
        read = [self.as_read(t) for t in sources]
        written = [sentence_case(t, self.target_lang) if shouted else t
                   for t, (_, shouted) in zip(targets, read, strict=True)]
        found = self.align_as_written([text for text, _ in read], written)
        return [replace(a, source=s, target=t) if a is not None else a
                for a, s, t in zip(found, sources, targets, strict=True)]

    def align_as_written(self, texts: Sequence[str], targets: Sequence[str]
                         ) -> list[WordAlignment | None]:
        """:meth:`align` of sentences read as written: each target forced through the engine
        (:meth:`forced_attention`) in the batches of its searches; none where the engine
        gives no attention (:attr:`aligns`), nor for a source its length limit cuts."""
        from nmt.translation.rules import decode_batches

        aligned: list[WordAlignment | None] = [None] * len(texts)
        if not self.aligns:
            return aligned
        limit = self.source_limit()
        todo: list[tuple[int, list[int], list[int], str]] = []  # i, source, target, normalized
        for i, (text, target) in enumerate(zip(texts, targets, strict=True)):
            normalized = self.normalize_source(text)
            ids, n = source_ids(self.tokenizer, normalized, limit)
            tgt = self.tokenizer.encode_tgt(target)
            if ids and n <= limit and tgt:
                todo.append((i, ids, tgt, normalized))
        for idx in decode_batches([len(ids) + len(tgt) for _, ids, tgt, _ in todo], self.cfg):
            batch = [todo[k] for k in idx]
            weights = self.forced_attention([ids for _, ids, _, _ in batch],
                                            [tgt for _, _, tgt, _ in batch])
            for (i, _, tgt, normalized), rows in zip(batch, weights, strict=True):
                aligned[i] = word_alignment(rows, self.tokenizer.src_tokens(normalized),
                                            self.tokenizer.tgt_tokens(tgt), texts[i],
                                            targets[i])
        return aligned

    def source_limit(self) -> int:
        """Most source tokens (``<eos>`` included) the engine takes."""
        raise NotImplementedError

    def forced_attention(self, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]]
                         ) -> list[Sequence[Sequence[float]]]:
        """Per sentence, the weights each ``tgt[i]`` token (ids without ``<bos>``/``<eos>``),
        forced through the engine as the translation of ``src[i]`` (encoder ids, as
        :func:`source_ids` makes them), puts on each source token: the last decoder layer's
        encoder-decoder attention, heads averaged (:mod:`nmt.translation.alignment`)."""
        raise NotImplementedError

    def as_read(self, text: str) -> tuple[str, bool]:
        """The sentence the model is given for ``text``, and whether its translation is given
        back in capitals: a natural-text run reads a sentence typed in capitals in sentence case
        (:mod:`nmt.translation.input_case`); every other sentence is read as written."""
        if self.natural_text and in_capitals(text):
            return sentence_case(text, self.source_lang), True
        return text, False

    def translate_as_written(self, texts: Sequence[str],
                             on_truncate: TruncateHook | None = None) -> list[str]:
        """Raw sentences -> translations, in input order, each engine's own."""
        raise NotImplementedError

    def translate_lines(self, lines: Sequence[str], on_truncate: TruncateHook | None = None,
                        split: bool = True) -> list[str]:
        """Lines as written -> their translations, laid out as the source
        (:mod:`nmt.translation.layout`): the spacing at the ends and between columns and escaped
        ``\\n``/``\\t`` kept, and with ``split`` a line of several sentences translated a
        sentence at a time (the run's source language's rules). ``on_truncate`` gets the index
        of the line whose sentence was cut."""
        from nmt.translation.layout import lay_out, sentence_splitter

        lines = list(arguments.sentences(lines, "lines"))
        guard = self.spans
        keep = None if guard is None else (
            lambda text: [(s.start, s.end) for s in guard.rules.find(text)])
        layout = lay_out(lines, sentence_splitter(self.source_lang, keep) if split else None,
                         keep)

        def hook(i: int, n: int, limit: int) -> None:
            if on_truncate is not None:
                on_truncate(layout.line_of[i], n, limit)

        segments = layout.segments
        try:
            return layout.join(self.translate(segments, on_truncate=hook) if segments else [])
        except UnplacedSpan as e:  # counted in segments: said of the line
            raise e.of_line(layout.line_of[e.index]) from None

    def translate_stream(
        self,
        lines: Iterable[str],
        write: Callable[[str], object],
        on_truncate: TruncateHook | None = None,
        chunk_lines: int = CHUNK_LINES,
        split: bool = True,
    ) -> int:
        """Translate ``lines`` chunk by chunk, calling ``write(translation)`` per line in order;
        each chunk as :meth:`translate_lines` lays it out (``split``: sentence by sentence).

        ``on_truncate`` gets line indices counted from 0 over the whole stream. Returns the
        number of lines translated.
        """
        done = 0
        for chunk in chunks(lines, chunk_lines, CHUNK_CHARS):
            offset = done

            def hook(i: int, n: int, limit: int, offset: int = offset) -> None:
                if on_truncate is not None:
                    on_truncate(offset + i, n, limit)

            try:
                outputs = self.translate_lines(chunk, on_truncate=hook, split=split)
            except UnplacedSpan as e:
                raise e.at(offset) from None
            for out in outputs:
                write(out)
            done += len(chunk)
        return done


@dataclass
class Translator(StreamTranslator):
    """A model with everything needed to translate raw text the way it was trained."""

    model: EncoderDecoder
    tokenizer: Tokenizer
    cfg: DecodeConfig
    lowercase: bool = DataConfig.lowercase  # the run's data.lowercase
    device: torch.device | None = None
    max_src_tokens: int | None = None
    normalization: str = DataConfig.normalization  # the run's data.normalization policy
    truncate: int = 0  # the run's data.truncate: sources cut to this many tokens, as in training
    source_lang: str | None = None  # the run's data.source (None: every language's rules)
    target_lang: str | None = None  # the run's data.target
    sampling: Sampling | None = None  # draw the outputs (back-translation) instead of search

    def __post_init__(self) -> None:
        """The model in the precision the searches run in, made once (in bf16 a copy:
        :func:`~nmt.translation.search.in_precision`)."""
        from nmt.device import decode_dtype
        from nmt.translation.search import in_precision

        self.model = in_precision(self.model, decode_dtype(self._device, self.cfg.precision))

    @property
    def _device(self) -> torch.device:
        return self.device if self.device is not None else next(self.model.parameters()).device

    @property
    def precision(self) -> str:
        from nmt.device import decode_dtype

        return "fp32" if decode_dtype(self._device, self.cfg.precision) is None else "bf16"

    @classmethod
    def from_run(
        cls, run: LoadedRun, beam: int | None = None, batch_size: int | None = None,
        max_src_tokens: int | None = None, max_tokens: int | None = None,
        precision: str | None = None, spans: str = "repair", markup: str = "place",
    ) -> Translator:
        """Settings from the run's config; ``beam``/``batch_size``/``max_tokens``/``precision``
        override its [decode]; ``spans`` and ``markup`` are the modes of
        :mod:`nmt.translation.structure`."""
        cfg = decode_settings(run.config.decode, beam, batch_size, max_tokens, precision)
        data = run.config.data
        translator = cls(run.model, run.tokenizer, cfg, data.lowercase, run.device,
                         max_src_tokens, data.normalization, data.truncate, data.source,
                         data.target)
        translator.spans = span_guard(data, spans, f"{run.run_dir / CONFIG_FILE}: data.glossary",
                                      markup)
        return translator

    aligns = True  # the model's own attention

    def source_limit(self) -> int:
        return source_limit(self.model, self.max_src_tokens, self.truncate)

    def forced_attention(self, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]]
                         ) -> list[Sequence[Sequence[float]]]:
        from nmt.translation.search import forced_attention

        return list(forced_attention(self.model, src, tgt))

    def translate_as_written(self, texts: Sequence[str],
                             on_truncate: TruncateHook | None = None) -> list[str]:
        sources = [self.normalize_source(t) for t in texts]
        return translate_normalized(self.model, self.tokenizer, sources, self.cfg, self.device,
                                    max_src_tokens=self.max_src_tokens, on_truncate=on_truncate,
                                    truncate=self.truncate, sampling=self.sampling)


def decode_settings(cfg: DecodeConfig, beam: int | None = None, batch_size: int | None = None,
                    max_tokens: int | None = None, precision: str | None = None) -> DecodeConfig:
    """``cfg`` with the options given (not None) in place of its values."""
    given: dict[str, Any] = {"beam": beam, "batch_size": batch_size, "max_tokens": max_tokens,
                             "precision": precision}
    return replace(cfg, **{k: v for k, v in given.items() if v is not None})


def chunks(lines: Iterable[str], size: int, chars: int) -> Iterator[list[str]]:
    """``lines`` in lists of ``size`` lines, or fewer once a list holds ``chars`` characters,
    or where lines that arrive as they are typed or sent pause (:mod:`nmt.translation.arriving`)."""
    more = lines.more_at_once if isinstance(lines, Arriving) else None
    chunk: list[str] = []
    held = 0
    for line in lines:
        chunk.append(line)
        held += len(line)
        if len(chunk) >= size or held >= chars or (more is not None and not more()):
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk


def open_input(path: Path, option: str) -> BinaryIO:
    """Open a file of sentences for reading: a regular file or a stream (a FIFO, a process
    substitution ``<(...)``, ``/dev/stdin``), compressed or not (gzip, bzip2, xz: WMT's
    monolingual news for back-translation comes as ``.gz``;
    :func:`nmt.data.compressed.open_file`); a one-line :class:`DataError` naming the
    option when it is missing, a directory or unreadable."""
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            raise DataError(f"{option} {path}: is a directory; expected a text file")
        return compressed.open_file(path, f"{option} {path}")
    except FileNotFoundError:
        raise DataError(f"{option} {path}: file not found") from None
    except OSError as e:
        raise DataError(f"{option} {path}: cannot read ({os_reason(e)})") from None


def translate_with_attention(
    model: EncoderDecoder,
    tokenizer: Tokenizer,
    text: str,
    lowercase: bool = DataConfig.lowercase,
    cfg: DecodeConfig | None = None,
    policy: str = DataConfig.normalization,
    truncate: int = 0,
    lang: str | None = None,
) -> tuple[list[str], list[str], dict[str, torch.Tensor]]:
    """Greedy translation of one raw sentence with its attention weights, for pictures
    (``lang``: the source language, whose rules normalisation applies).

    Returns ``(tokens, src_tokens, weights)``: the output pieces (``<eos>`` last when produced),
    the source pieces (``<eos>`` last unless cut off by ``truncate``), and weights
    ``{"enc": (L, h, S, S), "self": (L, h, T, T), "cross": (L, h, T, S)}`` with
    ``T = len(tokens)`` and ``S = len(src_tokens)``, on the CPU
    (the GRU has only ``"cross"``, one layer and head).
    """
    import torch

    from nmt.translation.search import greedy_with_weights

    cfg = cfg if cfg is not None else DecodeConfig()
    normalized = normalize(text, lowercase, policy, lang)
    if not normalized:
        raise DataError("translate_with_attention: the sentence is empty after normalisation")
    ids, _ = source_ids(tokenizer, normalized, *source_cut(model, None, truncate))
    device = next(model.parameters()).device
    src = torch.tensor([ids], device=device)
    limit = output_limit(len(ids), cfg, model.max_positions)
    hyp, weights = greedy_with_weights(model, src, limit)
    tokens = tokenizer.tgt_tokens(hyp.tokens) + (["<eos>"] if hyp.finished else [])
    pieces = tokenizer.src_tokens(normalized)
    src_tokens = pieces[: len(ids) - 1] + ["<eos>"] if ids[-1] == EOS_ID else pieces[: len(ids)]
    return tokens, src_tokens, {k: v.float().cpu() for k, v in weights.items()}


def check_output_is_not_input(output: Path, input_: Path | None, stdin: BinaryIO | None) -> None:
    """Refuse ``--output`` naming the file the sentences are read from (``--input``, or stdin
    redirected from it), however it is named: the same path, a symbolic or a hard link. The
    translation would replace its own input."""
    try:
        out = os.stat(output)
    except OSError:
        return  # not there yet: it cannot be the input
    same = False
    if input_ is not None:
        with suppress(OSError):
            same = os.path.samestat(out, os.stat(input_))
    elif stdin is not None:
        with suppress(OSError, ValueError, AttributeError):  # stdin may have no file behind it
            same = os.path.samestat(out, os.fstat(stdin.fileno())) and stat.S_ISREG(out.st_mode)
    if same:
        source = f"{option('input')} {input_}" if input_ is not None else "stdin"
        raise DataError(f"{option('output')} {output}: is the same file as {source}; writing the "
                        f"translation there would replace its input (choose another "
                        f"{option('output')})")
