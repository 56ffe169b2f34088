"""The Python API: one function per command, doing what ``nmt translate``, ``nmt bleu`` and
``nmt export`` do (the commands parse their options and call these).

- :func:`open_translator`: the translator of a run (``engine="nmt"``, PyTorch) or of its
  CTranslate2 export (``engine="ctranslate2"``, or ``model=DIR``);
- :func:`translate_lines`: sentences, a file or stdin in, translations out (a file written
  atomically, a callback, or a returned list);
- :func:`translate_file`: a PO or XLIFF file's untranslated strings filled
  (:mod:`nmt.localisation`);
- :func:`score` and :func:`score_examples`: ``nmt bleu`` and ``nmt bleu --examples``;
- :func:`export`: ``nmt export --to TARGET`` through the registry of :mod:`nmt.export`;
- :func:`backtranslate`: ``nmt backtranslate``, synthetic pairs from monolingual text.

Nothing here imports torch at import time, and the CTranslate2 engine never does: it needs only
ctranslate2, sentencepiece and sacrebleu.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from nmt import arguments
from nmt.arguments import option
from nmt.errors import ConfigError, DataError, NmtError, shown

if TYPE_CHECKING:
    from nmt.config import Config
    from nmt.evaluate import BleuReport, ScoredRun
    from nmt.localisation import Filled
    from nmt.translation.backtranslate import BackTranslated
    from nmt.translation.translator import StreamTranslator

ENGINES = ("nmt", "ctranslate2")


def engine_of(engine: str | None, model: Path | None) -> str:
    """The engine of ``--engine``/``--model``: nmt by default, ctranslate2 for an exported
    ``model``; ctranslate2 only when it is installed."""
    if engine is None:
        engine = "nmt" if model is None else "ctranslate2"
    if engine not in ENGINES:
        raise NmtError(f"{option('engine')} {engine}: expected nmt or ctranslate2")
    if model is not None and engine != "ctranslate2":
        raise NmtError(f"{option('model')}: an exported directory is decoded by "
                       f"{option('engine')} ctranslate2, not nmt")
    if engine == "ctranslate2":
        from nmt.export import require_ctranslate2

        require_ctranslate2()
    return engine


def _check_no_ema(engine: str, averaged: bool) -> None:
    if engine == "ctranslate2" and not averaged:
        raise NmtError(f"{option('averaged')}: the export holds the weights nmt translates with "
                       f"(their average when the run keeps one); {option('averaged')} applies to "
                       f"{option('engine')} nmt")


def _ct2_directory(run: Path | None, checkpoint: str, model: Path | None) -> tuple[Path, str]:
    """The export CTranslate2 decodes: ``model``, else the run's on-the-fly export (made when
    missing or stale), and how messages name it."""
    from nmt.export.ct2_directory import run_export, run_export_where

    if model is not None:
        from nmt.export.ct2_directory import export_directory

        where = f"{option('model')} {model}"
        return export_directory(Path(model), where), where
    found = run_export(run, checkpoint)
    directory = found.directory
    if not found.current:  # made again: converting needs torch, reading an export does not
        from nmt.export.ct2_convert import run_export_dir

        directory = run_export_dir(run, checkpoint)
    return directory, run_export_where(directory)


def open_translator(
    run: Path | str | None = None, checkpoint: str = "best", *, engine: str | None = None,
    model: Path | str | None = None, device: str = "auto", averaged: bool = True,
    compute_type: str = "default", beam: int | None = None, batch_size: int | None = None,
    max_tokens: int | None = None, max_src_tokens: int | None = None, spans: str = "repair",
    markup: str = "place",
) -> StreamTranslator:
    """The translator ``nmt translate`` uses: of the run directory ``run`` (default: the latest
    under runs/) and its ``checkpoint`` (best, last or a file), decoded by ``engine``;
    ``beam``/``batch_size``/``max_tokens`` override the run's [decode]. ``spans``: each output
    keeps its source's protected spans, ``repair`` (put back what can be, guessing a place by
    position), ``strict`` (refuse a line that needs a guess) or ``off``
    (:mod:`nmt.translation.structure`). ``markup``: ``place`` (the engine translates each
    source without its tags, placed in its output on the words its attention names, else by
    position) or ``model`` (the engine sees
    the tags); with ``spans`` off the engine always sees them."""
    run, model = arguments.path(run, "run"), arguments.path(model, "model")
    spans, markup = _spans_mode(spans), _markup_mode(markup)
    beam, batch_size, max_tokens, max_src_tokens = _decode_arguments(
        checkpoint, device, averaged, compute_type, beam, batch_size, max_tokens, max_src_tokens)
    engine = engine_of(engine, model)
    _check_no_ema(engine, averaged)
    if engine == "ctranslate2":
        from nmt.export.ct2_translate import CT2Translator

        directory, where = _ct2_directory(run, checkpoint, model)
        return CT2Translator.from_export(directory, beam=beam, batch_size=batch_size,
                                         max_src_tokens=max_src_tokens, device=device,
                                         compute_type=compute_type, max_tokens=max_tokens,
                                         where=where, spans=spans, markup=markup)
    from nmt.runs.loading import load_run
    from nmt.translation.translator import Translator

    loaded = load_run(run, checkpoint, device, averaged=averaged)
    return Translator.from_run(loaded, beam=beam, batch_size=batch_size, max_tokens=max_tokens,
                               max_src_tokens=max_src_tokens, spans=spans, markup=markup)


def _spans_mode(spans: Any) -> str:
    from nmt.translation.structure import MODES

    return arguments.choice(spans, "spans", MODES)


def _markup_mode(markup: Any) -> str:
    from nmt.translation.structure import MARKUP

    return arguments.choice(markup, "markup", MARKUP)


def _decode_arguments(
    checkpoint: Any, device: Any, averaged: Any, compute_type: Any, beam: Any, batch_size: Any,
    max_tokens: Any, max_src_tokens: Any = None,
) -> tuple[int | None, int | None, int | None, int | None]:
    """The options every translating call shares, checked as ``nmt translate`` checks them."""
    for name, value in (("checkpoint", checkpoint), ("device", device),
                        ("compute_type", compute_type)):
        arguments.text(value, name)
    arguments.flag(averaged, "averaged")
    return (arguments.count(beam, "beam", "decode.beam"),
            arguments.count(batch_size, "batch_size", "decode.batch_size"),
            arguments.count(max_tokens, "max_tokens", "decode.max_tokens"),
            arguments.count(max_src_tokens, "max_src_tokens", "decode.max_src_tokens"))


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def translate_lines(
    translator: StreamTranslator | Callable[[], StreamTranslator],
    sentences: Iterable[str] | None = None, *,
    input: Path | str | None = None, output: Path | str | None = None,  # noqa: A002
    stream: TextIO | None = None, warn: Callable[[str], None] = _say, split: bool = True,
) -> list[str] | None:
    """Translate ``sentences``, or the lines of the file ``input`` (``"-"`` or None: stdin),
    one translation per line, in order, each ended as its source line was (a file of CRLF
    lines comes back so; ``\n`` where a line had no end).

    The translations go to ``output`` (a file, renamed into place once complete: a failure
    leaves an earlier file intact; never the input itself), else to the text ``stream`` (as
    they come); with neither they are returned as a list. ``warn`` gets one line per source
    that was read in part or cut to the length limit, and one line when protected spans were
    repaired (:mod:`nmt.translation.structure`; a line ``--spans strict`` cannot place is a
    :class:`DataError` naming it).

    Each line comes back laid out as written (:mod:`nmt.translation.layout`): its spacing at
    the ends, its runs of spaces and tabs between columns and its escaped ``\\n``/``\\t``
    kept; with ``split`` (the default) a line of several sentences is translated a sentence at a
    time and the sentences joined as in the source (``split=False``: a line is one input).

    ``translator`` may be a function that opens it (say :func:`open_translator` with its
    options): it is called only once the inputs are checked and opened, so that a missing
    ``input``, a closed or terminal stdin or an ``output`` that is the input fails at once,
    before a model is loaded."""
    from nmt.errors import write_errors
    from nmt.files import atomic_text_output
    from nmt.translation.structure import SpanCounts, UnplacedSpan
    from nmt.translation.translator import StreamTranslator, check_output_is_not_input

    if sentences is not None:
        sentences = arguments.sentences(sentences)
    arguments.flag(split, "split")
    if not (callable(translator) or hasattr(translator, "translate_stream")):
        raise TypeError(f"translator: expected a translator (open_translator) or a function "
                        f"that opens one, got {shown(translator)}")
    if sentences is not None and input is not None:
        raise DataError(f"{option('input')}: give sentences or {option('input')}, not both")
    input_ = Path(input) if input is not None else None
    output_ = Path(output) if output is not None else None
    from_file = input_ is not None and str(input_) != "-"
    if sentences is None and not from_file and sys.stdin is None:
        raise DataError(f"stdin: closed; give sentences, {option('input')} FILE, or pipe text "
                        "in")
    if output_ is not None and sentences is None:
        check_output_is_not_input(output_, input_ if from_file else None,
                                  None if from_file else sys.stdin.buffer)

    with contextlib.ExitStack() as stack:
        ends: collections.deque[str] = collections.deque()  # of the lines read, not yet written
        lines, name = _source_lines(stack, sentences, input_, from_file, warn, ends.append)
        if not isinstance(translator, StreamTranslator):  # the inputs are good: load the model
            translator = translator()
        collected: list[str] = []
        out = stream
        target = "standard output"
        if output_ is not None:
            target = f"{option('output')} {output_}"
            try:
                # renamed into place at the end: a failure midway leaves the old file intact
                stack.enter_context(write_errors(target))  # also the final rename, on exit
                out = stack.enter_context(atomic_text_output(output_))
            except OSError as e:
                raise DataError(f"{target}: cannot write ({e.strerror or e})") from None

        def truncated(i: int, n: int, limit: int) -> None:
            warn(f"warning: {name}: line {i + 1}: {n} source tokens, cut to the first {limit}")

        guard = translator.spans
        before = SpanCounts() if guard is None else replace(guard.counts)
        with write_errors(target):
            try:
                if out is None:
                    translator.translate_stream(lines, collected.append, on_truncate=truncated,
                                                split=split)
                else:
                    writer = out

                    def write(text: str) -> None:  # ended as its source line was, or "\n"
                        writer.write(text + ((ends.popleft() if ends else "") or "\n"))

                    translator.translate_stream(lines, write, on_truncate=truncated,
                                                split=split)
                    out.flush()
            except UnplacedSpan as e:
                raise DataError(f"{name}: {e}") from None
        if guard is not None and (summary := guard.counts.since(before).summary()):
            warn(f"warning: {name}: {summary}")
        return collected if out is None else None
    return None


def _source_lines(stack: contextlib.ExitStack, sentences: Iterable[str] | None,
                  input_: Path | None, from_file: bool, warn: Callable[[str], None],
                  on_end: Callable[[str], object]) -> tuple[Iterable[str], str]:
    """What :func:`translate_lines` translates, and how messages name it: the ``sentences``
    given, else the lines of the file ``input_`` (opened on ``stack``; ``-`` is stdin), else
    stdin's, which must not be a terminal unless ``-`` asked for it. ``on_end`` is given the
    line end of each line read from a file or stdin (:func:`nmt.files.read_lines`)."""
    from nmt.files import read_lines
    from nmt.translation.arriving import Arriving, pauses
    from nmt.translation.translator import open_input

    def warn_long(name: str) -> Callable[[int, int], None]:
        return lambda number, limit: warn(f"warning: {name}: line {number}: longer than "
                                          f"{limit:,} bytes; only the first are read")

    if sentences is not None:
        return sentences, "argument"
    if input_ is not None and from_file:
        name = f"{option('input')} {input_}"
        stream = stack.enter_context(open_input(input_, option("input")))
        if pauses(stream):  # a FIFO (``<(program)``, /dev/stdin): each line as it comes
            # what opening it peeked at (its first bytes) is all the buffer holds
            buffered = stream.read1(len(stream.peek(1)))  # type: ignore[attr-defined]
            return Arriving(stream, name, on_long=warn_long(name), on_end=on_end,
                            buffered=buffered), name
        return read_lines(stream, name, on_long=warn_long(name), on_end=on_end), name
    if sys.stdin.isatty() and input_ is None:
        raise DataError(f"nothing to translate: give sentences, {option('input')} FILE, or "
                        f"pipe text in ({option('input')} - to type sentences here, each "
                        "translated as it is typed)")
    if pauses(sys.stdin.buffer):  # a terminal or another program: each line as it comes
        return Arriving(sys.stdin.buffer, "stdin", on_long=warn_long("stdin"),
                        on_end=on_end), "stdin"
    return read_lines(sys.stdin.buffer, "stdin", on_long=warn_long("stdin"),
                      on_end=on_end), "stdin"


def translate_file(
    translator: StreamTranslator | Callable[[], StreamTranslator],
    input: Path | str, output: Path | str, *, format: str | None = None,  # noqa: A002
    check: Callable[[str, str], bool] | None = None, warn: Callable[[str], None] = _say,
) -> Filled:
    """``nmt translate --input FILE --output FILE`` for localisation files: the untranslated
    strings of the PO or XLIFF (1.2, 2.x) file ``input`` filled and marked for review, the
    whole file written to ``output`` atomically (never the input itself). ``format``: po,
    xliff or text (default: from the extension; text is :func:`translate_lines`). A
    translation that loses a placeholder of a ``c-format``/``python-format`` entry, an inline
    tag, or that ``check`` (``check(source, translation) -> bool``) refuses, is left
    untranslated; ``warn`` gets a line for each. ``translator`` may be a function that opens
    it, called only once the file is read."""
    from nmt.localisation import FORMATS, Filled, fill_file, format_of
    from nmt.translation.structure import UnplacedSpan
    from nmt.translation.translator import StreamTranslator, check_output_is_not_input

    input_ = arguments.path(input, "input", optional=False)
    output_ = arguments.path(output, "output", optional=False)
    assert input_ is not None and output_ is not None
    if format is not None:
        arguments.choice(format, "format", FORMATS)
    if not (callable(translator) or hasattr(translator, "translate_stream")):
        raise TypeError(f"translator: expected a translator (open_translator) or a function "
                        f"that opens one, got {shown(translator)}")
    if check is not None and not callable(check):
        raise TypeError(f"check: expected a function (source, translation) -> bool, got "
                        f"{shown(check)}")
    kind = format_of(input_, format)
    if kind == "text":
        translate_lines(translator, input=input_, output=output_, warn=warn)
        return Filled("text")
    check_output_is_not_input(output_, input_, None)
    opened: list[StreamTranslator] = []

    def engine() -> StreamTranslator:
        if not opened:
            opened.append(translator if isinstance(translator, StreamTranslator)
                          else translator())
        return opened[0]

    name = f"--input {input_}"

    def translate(lines: list[str]) -> list[str]:  # laid out as written, as fill_file wants
        out: list[str] = []
        try:
            engine().translate_stream(lines, out.append, on_truncate=lambda i, n, limit: warn(
                f"warning: {name}: a string of {n} source tokens, cut to {limit}"))
        except UnplacedSpan as e:  # said of the string's line: its index is no line of the file
            raise DataError(f"{name}: the string {shown(lines[e.index])}: {e.reason}") from None
        return out

    filled = fill_file(input_, output_, translate, format=kind, check=check,
                       language=lambda: engine().target_lang, name=name,
                       output_name=f"--output {output_}")
    for message in filled.messages:
        warn(message)
    return filled


@dataclass
class RunRecord:
    """What scoring needs of a run whose export CTranslate2 decodes: its directory, config and
    the checkpoint the export holds (see :class:`nmt.evaluate.ScoredRun`); no weights."""

    run_dir: Path
    config: Config
    checkpoint_path: Path
    step: int
    weights: str = "trained"


def _run_record(run: Path | None, checkpoint: str, export_dir: Path) -> ScoredRun:
    """The run scored through its export ``export_dir``: config from ``RUN/config.toml``, the
    checkpoint and step from the export (without loading a checkpoint, so without torch)."""
    from nmt.config import load_config
    from nmt.export.ct2_directory import read_export
    from nmt.runs.layout import CONFIG_FILE
    from nmt.runs.paths import latest_run

    run_dir = latest_run() if run is None else run
    path = run_dir / CONFIG_FILE
    if not path.is_file():  # an older or hand-made run: the checkpoint holds its config
        from nmt.runs.loading import load_run

        return load_run(run_dir, checkpoint, "cpu")
    cfg = load_config(path)
    meta = read_export(export_dir)
    data = meta.get("data", {})
    trained = {"lowercase": cfg.data.lowercase, "normalization": cfg.data.normalization,
               "truncate": cfg.data.truncate}
    if any(data.get(k) != v for k, v in trained.items()):
        raise ConfigError(f"{path}: its [data] is not that of the export {export_dir} "
                          f"({data} against {trained})")
    return RunRecord(run_dir, cfg, Path(str(meta.get("checkpoint", checkpoint))),
                     int(meta.get("step", 0)))


def _scored(run: Path | str | None, checkpoint: str, engine: str | None,
            model: Path | str | None, device: str, averaged: bool, compute_type: str,
            beam: int | None, batch_size: int | None, max_tokens: int | None,
            spans: str = "repair", markup: str = "place"
            ) -> tuple[ScoredRun, StreamTranslator, str]:
    """The run, its translator and the tag of the engine in the saved files."""
    run, model = arguments.path(run, "run"), arguments.path(model, "model")
    spans, markup = _spans_mode(spans), _markup_mode(markup)
    beam, batch_size, max_tokens, _ = _decode_arguments(
        checkpoint, device, averaged, compute_type, beam, batch_size, max_tokens)
    engine = engine_of(engine, model)
    _check_no_ema(engine, averaged)
    if engine == "ctranslate2":
        from nmt.export.ct2_translate import CT2Translator
        from nmt.runs.paths import latest_run

        run = latest_run() if run is None else run
        if not run.is_dir():
            from nmt.errors import CheckpointError

            raise CheckpointError(f"{option('run')} {run}: run directory not found")
        directory, where = _ct2_directory(run, checkpoint, model)
        translator = CT2Translator.from_export(directory, beam=beam, batch_size=batch_size,
                                               device=device, compute_type=compute_type,
                                               max_tokens=max_tokens, where=where, spans=spans,
                                               markup=markup)
        tag = "ct2" if compute_type == "default" else f"ct2-{compute_type}"
        if model is not None:
            tag += f"-{model.resolve().name}"
        return _run_record(run, checkpoint, directory), translator, tag
    from nmt.runs.loading import load_run
    from nmt.translation.translator import Translator

    loaded = load_run(run, checkpoint, device, averaged=averaged)
    return loaded, Translator.from_run(loaded, beam=beam, batch_size=batch_size,
                                       max_tokens=max_tokens, spans=spans,
                                       markup=markup), ""


def backtranslate(
    run: Path | str | None = None, *, input: Path | str,  # noqa: A002
    output: Path | str, search: str = "sample", beam: int | None = None, top_k: int = 10,
    seed: int = 1,
    checkpoint: str = "best", device: str = "auto", warn: Callable[[str], None] = _say,
) -> BackTranslated:
    """``nmt backtranslate``: translate the monolingual ``input`` with the run (trained in the
    direction opposite to the model the data is for) into ``OUTPUT.<source>`` (the text as
    read) and ``OUTPUT.<target>`` (its translation); :mod:`nmt.translation.backtranslate`.
    ``beam``: the width of ``search="beam"`` (None: the run's ``decode.beam``)."""
    from nmt.runs.loading import load_run
    from nmt.setting_ranges import INT_MAX
    from nmt.translation.backtranslate import SEARCHES
    from nmt.translation.backtranslate import backtranslate as run_backtranslate

    run = arguments.path(run, "run")
    input_ = arguments.path(input, "input", optional=False)
    prefix = arguments.path(output, "output", optional=False)
    arguments.choice(search, "search", SEARCHES)
    arguments.count(beam, "beam", "decode.beam")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 0 <= top_k <= INT_MAX:
        raise ConfigError(f"top_k: expected 0 (every token) or more, got {shown(top_k, 30)}")
    arguments.seed(seed)
    arguments.text(checkpoint, "checkpoint")
    arguments.text(device, "device")
    assert input_ is not None and prefix is not None
    if not input_.exists():  # before the model loads (a FIFO or /dev/stdin is read as it is)
        raise DataError(f"{option('input')} {input_}: file not found")
    if input_.is_dir():
        raise DataError(f"{option('input')} {input_}: is a directory; expected a text file")
    loaded = load_run(run, checkpoint, device)
    return run_backtranslate(loaded, input_, prefix, search=search, beam=beam, top_k=top_k,
                             seed=seed, warn=warn)


def score(
    run: Path | str | None = None, checkpoint: str = "best", *, split: str = "test",
    src: Path | str | None = None, refs: Iterable[Path | str] = (), engine: str | None = None,
    model: Path | str | None = None, device: str = "auto", averaged: bool = True,
    compute_type: str = "default", beam: int | None = None, batch_size: int | None = None,
    max_tokens: int | None = None, limit: int = 0, data_dir: Path | str | None = None,
    textbook_input: bool = False, log: Callable[[str], None] = _say, spans: str = "repair",
    markup: str = "place",
) -> BleuReport:
    """``nmt bleu``: corpus BLEU and chrF of a run on a split of its data (all references of each
    source) or on ``src`` with its line-aligned ``refs``, and how its outputs keep the sources'
    protected spans; hypotheses and scores are saved in the run directory (see
    :func:`nmt.evaluate.evaluate`). ``limit`` > 0 scores the first N; ``spans`` and ``markup``
    as in :func:`open_translator` (``off``: the model's own outputs)."""
    from nmt.evaluate import evaluate_run

    split = arguments.choice(split, "split", arguments.SPLITS)
    src, data_dir = arguments.path(src, "src"), arguments.path(data_dir, "data_dir")
    refs = arguments.paths(refs, "refs")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise TypeError(f"limit: expected a count >= 0 (0: all), got {shown(limit)}")
    arguments.flag(textbook_input, "textbook_input")
    scored, translator, tag = _scored(run, checkpoint, engine, model, device, averaged,
                                      compute_type, beam, batch_size, max_tokens, spans,
                                      markup)
    return evaluate_run(scored, translator, split=split,
                        data_dir=Path(data_dir) if data_dir is not None else None,
                        src=Path(src) if src is not None else None,
                        refs=[Path(r) for r in refs], limit=limit, log=log,
                        textbook_input=textbook_input, tag=tag)


def score_examples(
    run: Path | str | None = None, checkpoint: str = "best", *, engine: str | None = None,
    model: Path | str | None = None, device: str = "auto", averaged: bool = True,
    compute_type: str = "default", beam: int | None = None, batch_size: int | None = None,
    max_tokens: int | None = None,
) -> list[dict[str, Any]]:
    """``nmt bleu --examples``: the recipe's four check sentences, translated, with their
    references and per-sentence BLEU (English-French runs, either direction)."""
    from nmt.evaluate import run_examples

    scored, translator, _ = _scored(run, checkpoint, engine, model, device, averaged,
                                    compute_type, beam, batch_size, max_tokens)
    return run_examples(translator, scored.config.data.source, scored.config.data.target)


def export(
    run: Path | str | None = None, checkpoint: str = "best", *, to: str = "ctranslate2",
    quantization: str | None = None, output: Path | str | None = None, overwrite: bool = False,
    score_first: bool = True, data_dir: Path | str | None = None, with_checkpoint: bool = False,
    log: Callable[[str], None] = _say,
) -> Path:
    """``nmt export``: write the run's export for ``to`` (a target of
    :data:`nmt.export.TARGETS`) to ``output`` (default ``exports/`` and the target's name for
    it); ``overwrite`` replaces only an earlier export of that target. Returns the path.

    Its model card (:mod:`nmt.export.model_card`) has the checkpoint's test scores; with
    ``score_first`` a checkpoint ``nmt bleu`` never scored is scored first (on the data in
    ``data_dir``; when that fails, the export says so and goes on without scores).
    ``with_checkpoint``: the export also holds the checkpoint and what ``nmt train --from``
    needs to continue the model (:mod:`nmt.runs.portable`)."""
    from nmt.export import export_target
    from nmt.runs.paths import latest_run

    run, output = arguments.path(run, "run"), arguments.path(output, "output")
    data_dir = arguments.path(data_dir, "data_dir")
    arguments.text(checkpoint, "checkpoint")
    arguments.text(to, "to")
    arguments.text(quantization, "quantization", optional=True)
    arguments.flag(overwrite, "overwrite")
    arguments.flag(score_first, "score_first")
    arguments.flag(with_checkpoint, "with_checkpoint")
    target = export_target(to)
    if with_checkpoint and "with_checkpoint" not in inspect.signature(target.export).parameters:
        from nmt.errors import ConfigError

        raise ConfigError(f"{option('with_checkpoint')}: the target {to} cannot hold a "
                          "checkpoint")
    run_dir = Path(run) if run is not None else latest_run()
    check = getattr(target, "check", None)
    if check is not None:  # refuse what the target cannot take before loading the weights
        from nmt.config import load_config
        from nmt.runs.layout import CONFIG_FILE

        path = run_dir / CONFIG_FILE
        check(load_config(path) if path.is_file() else None, quantization,
              f"{option('run')} {run_dir}")
    from nmt.runs.loading import load_run
    from nmt.runs.records import test_scores

    loaded = load_run(run_dir, checkpoint, "cpu")
    if score_first and not test_scores(run_dir, loaded.checkpoint_path.name):
        from nmt.evaluate import evaluate_run
        from nmt.translation.translator import Translator

        log(f"scoring {run_dir} on its test split for the model card (--no-score skips it)")
        try:
            evaluate_run(loaded, Translator.from_run(loaded), split="test",
                         data_dir=Path(data_dir) if data_dir is not None else None, log=log)
        except NmtError as e:
            log(f"warning: not scored ({e}); the model card says so")
    extra = {"with_checkpoint": True} if with_checkpoint else {}
    written: Path = target.export(loaded,
                                  Path(output) if output is not None else None, quantization,
                                  overwrite, **extra)
    return written
