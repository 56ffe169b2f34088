"""The ``nmt`` command line: parse, call the library, print. Errors are one line, no traceback.

Long for a reason: one function per command, each its options beside it and one library call.
"""

from __future__ import annotations

import functools
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from nmt import arguments, environment, fast_exit, process
from nmt.errors import DataError, NmtError, os_reason
from nmt.export import targets_help
from nmt.options import (
    BeamOpt,
    CheckpointOpt,
    ComputeTypeOpt,
    ConfigOpt,
    DataDirOpt,
    DecodeBatchOpt,
    DeviceOpt,
    EngineOpt,
    ImageOpt,
    MarkupOpt,
    MaxTokensOpt,
    ModelDirOpt,
    NoEmaOpt,
    RunOpt,
    SetOpt,
    SourceOpt,
    SpansOpt,
)
from nmt.setting_ranges import INT_MAX, int_limit

app = typer.Typer(
    help="Neural machine translation of any language pair (English to French by default): "
         "data, train, translate, bleu.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help is plain text: "[decode]" is a config section, not a style
)
data_app = typer.Typer(help="Get and prepare the corpus the config declares ([data] corpus, "
                       "source, target; the built-in fra-eng by default).", no_args_is_help=True,
                       rich_markup_mode=None)
app.add_typer(data_app, name="data")


def _console(stderr: bool = False) -> Console:
    """Where nmt prints: lines are never cut into several (a terminal wraps them itself, and a
    file or a pipe gets them whole, for grep), and a table has its natural width where the
    output is not a terminal."""
    out = Console(stderr=stderr)
    if not out.is_terminal:
        out.width = 10_000
    return out


console = _console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

# The options whose names are not the API's parameter names with dashes (nmt.arguments.option)
OPTION_OF = {"averaged": "--no-ema", "refs": "--ref", "from_": "--from"}


def _option(parameter: str) -> str:
    """The option of the API's ``parameter``: ``input`` -> ``--input``."""
    return OPTION_OF.get(parameter, "--" + parameter.replace("_", "-"))


def friendly(fn: F) -> F:
    """Decorate every command: an :class:`NmtError` becomes one red line and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            environment.check_all()  # a bad variable is said before anything is done
            with arguments.spelled_as(_option):  # the API's messages name the options typed
                result = fn(*args, **kwargs)
            if sys.stdout is not None:  # None: closed when nmt started
                sys.stdout.flush()  # a full disk behind stdout is reported here, not at exit
            return result
        except NmtError as e:
            console.print(f"[red]error:[/red] {escape(str(e))}", highlight=False)
            raise typer.Exit(e.exit_code) from None
        except BrokenPipeError:
            raise  # the reader went away: click exits quietly
        except OSError as e:
            # what commands do not report themselves: mostly writing stdout (click.echo flushes
            # it), which names no file
            what = (f"{e.filename}: {os_reason(e)}" if e.filename is not None else
                    f"standard output: cannot write ({os_reason(e)})")
            console.print(f"[red]error:[/red] {escape(what)}", highlight=False)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


# --- nmt data ---------------------------------------------------------------------------------

def _data_log(message: str) -> None:
    console.print(message, markup=False, highlight=False)


@data_app.command("download")
@friendly
def data_download(source: SourceOpt = None, data_dir: DataDirOpt = None,
                  config: ConfigOpt = None, set_: SetOpt = None) -> None:
    """Get the config's corpus when it is downloaded (fra-eng.zip, or a Tatoeba pair such as
    deu-eng), check it and extract it (does nothing when present); a user's files are checked."""
    from nmt.config import load_config
    from nmt.data.corpora import open_data
    from nmt.data.download import default_data_dir

    cfg = load_config(config, set_ or [])
    open_data(cfg.data, data_dir or default_data_dir(), source=source, log=_data_log)


@data_app.command("prepare")
@friendly
def data_prepare(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    data_dir: DataDirOpt = None,
    source: SourceOpt = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Rebuild even if cached.")] = False,
) -> None:
    """Normalise, clean, split, train the tokenizer and cache the encoded splits."""
    from nmt.config import load_config
    from nmt.data.download import default_data_dir
    from nmt.data.prepare import prepare

    cfg = load_config(config, set_ or [])
    prepare(cfg.data, data_dir or default_data_dir(), source=source, log=_data_log,
            rebuild=rebuild)


@data_app.command("stats")
@friendly
def data_stats(config: ConfigOpt = None, set_: SetOpt = None, data_dir: DataDirOpt = None) -> None:
    """A table per split: pairs, sources, references, lengths, <unk> rates, vocabulary."""
    from nmt.config import load_config
    from nmt.data.download import default_data_dir
    from nmt.data.prepare import prepare
    from nmt.data.stats import cleaning_lines, stats_table

    cfg = load_config(config, set_ or [])
    prepared = prepare(cfg.data, data_dir or default_data_dir(), log=_data_log)
    _console().print(stats_table(prepared))
    for line in cleaning_lines(prepared):
        print(line)


# --- nmt train --------------------------------------------------------------------------------


@app.command()
@friendly
def train(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue runs/NAME exactly where it stopped.")
    ] = False,
    from_: Annotated[
        Path | None,
        typer.Option("--from", help="Continue a trained run's model (its best checkpoint, model "
                     "and tokenizer) on the data --config and --set give; a new optimizer, "
                     "schedule and step count."),
    ] = None,
    run_name: Annotated[
        str | None, typer.Option("--run-name", help="Run directory name (default: config name).")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing run directory of that name "
                           "(only a run, holding only what nmt wrote; kept until the new run "
                           "saves its first checkpoint).")
    ] = False,
    runs_dir: Annotated[
        Path, typer.Option("--runs-dir", help="Where runs are kept.")
    ] = Path("runs"),
    data_dir: DataDirOpt = None,
    max_minutes: Annotated[
        float | None,
        typer.Option("--max-minutes", min=0.0,
                     help="Time budget: stop, validate and save after this many minutes of "
                          "training (same as --set train.max_minutes=M; 0: none)."),
    ] = None,
) -> None:
    """Train a model: GRU+Bahdanau or Transformer, as the config says."""
    from nmt.training.command import run_train_command, speed_summary

    if config is None and not resume and from_ is None:
        raise NmtError("--config: expected a TOML config, e.g. --config configs/demo.toml")
    overrides = list(set_ or [])
    if max_minutes is not None:
        overrides.append(f"train.max_minutes={max_minutes!r}")
    result = run_train_command(
        config, overrides, run_name=run_name, runs_dir=runs_dir,
        data_dir=data_dir, resume=resume, overwrite=overwrite,
        log=lambda s: console.print(s, highlight=False, markup=False), parent=from_,
    )
    if not result.main:  # under torchrun, rank 0 reports
        return
    p = result.progress
    console.print(f"{result.run_dir}: {p.stop_reason}; step {p.step}, best valid score "
                  f"{p.best_score:.2f} at step {p.best_step}" if p.best_step else
                  f"{result.run_dir}: {p.stop_reason}; step {p.step}", highlight=False)
    if result.tokens == 0 and not result.signal:
        typer.echo(f"{result.run_dir}: nothing left to train; to continue it, raise the limit "
                   "that ended it with --set (train.epochs, train.max_steps, train.max_minutes "
                   "or train.patience)")
    else:  # this invocation's figures: a resumed run's earlier steps are not in them
        typer.echo(f"train loss {result.train_loss:.3f} (per-token CE) and "
                   f"{speed_summary(result)}, over steps "
                   f"{result.first_step}-{p.step} (this invocation)")
    if result.cut_short:  # last: a model the time budget cut short is not the config's model
        typer.echo(f"note: {result.run_dir} {result.cut_short}")
    if result.signal:  # stopped by a signal, last.pt saved: say so to shells and schedulers
        raise typer.Exit(128 + result.signal)


# --- nmt translate / bleu ---------------------------------------------------------------------

@app.command()
@friendly
def translate(
    sentences: Annotated[
        list[str] | None,
        typer.Argument(help="Sentences to translate (otherwise --input FILE or stdin)."),
    ] = None,
    input_: Annotated[
        Path | None,
        typer.Option("--input", "-i", help="One sentence per line, UTF-8 (gzip, bzip2 or xz "
                     "compressed too), or a PO or XLIFF file; '-' is stdin (a terminal, or a "
                     "program sending a line at a time: each translated as it comes)."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write translations here, not stdout.")
    ] = None,
    run: RunOpt = None,
    checkpoint: CheckpointOpt = "best",
    beam: BeamOpt = None,
    batch_size: DecodeBatchOpt = None,
    max_tokens: MaxTokensOpt = None,
    device: DeviceOpt = "auto",
    no_ema: NoEmaOpt = False,
    max_src_tokens: Annotated[
        int | None,
        typer.Option("--max-src-tokens", min=2, max=INT_MAX, help="Cut longer sources, with a "
                     "warning (default: the run's data.truncate when it trained on cut sources, "
                     "else 1024; never more than the model's positions)."),
    ] = None,
    attention: Annotated[
        Path | None,
        typer.Option("--attention", help="Also draw the attention of the one sentence argument "
                     "(greedy search) to this .png/.svg/.pdf; see `nmt attention`."),
    ] = None,
    engine: EngineOpt = None,
    model: ModelDirOpt = None,
    compute_type: ComputeTypeOpt = "default",
    format_: Annotated[
        str | None,
        typer.Option("--format", help="Of --input: po (gettext), xliff (1.2, 2.x) or text; default "
                     "from its extension (.po/.pot, .xlf/.xliff/.sdlxliff/.mqxliff, else text). A "
                     "PO or XLIFF file's untranslated strings are filled, marked for review, "
                     "into --output."),
    ] = None,
    split: Annotated[
        bool,
        typer.Option("--split/--no-split", help="Translate a line of several sentences a "
                     "sentence at a time (by the source language's rules), joined as written; "
                     "--no-split gives the model each line whole. Spacing is kept either way."),
    ] = True,
    spans: SpansOpt = "repair",
    markup: MarkupOpt = "place",
) -> None:
    """Translate from the run's source language into its target, a line out per line in (or
    the untranslated strings of a PO or XLIFF file)."""
    fast_exit.allow()  # reads a model, writes text: no teardown needed
    from nmt.api import engine_of, open_translator, translate_lines

    if output is None and sys.stdout is None:
        raise DataError("standard output: closed; nowhere to write the translations (use "
                        "--output FILE)")
    if attention is not None:
        if engine_of(engine, model) != "nmt":
            raise NmtError("--attention: the attention weights come from --engine nmt")
        _check_translate_attention(sentences, attention)
    if sentences and input_ is not None:  # before loading the model
        raise DataError("--input: give sentences as arguments or --input FILE, not both")
    open_ = functools.partial(open_translator, run, checkpoint, engine=engine, model=model,
                              device=device, averaged=not no_ema, compute_type=compute_type,
                              beam=beam, batch_size=batch_size, max_tokens=max_tokens,
                              max_src_tokens=max_src_tokens, spans=spans, markup=markup)
    if attention is not None:  # one sentence argument (checked above), then its picture
        _translate_attention(open_(), sentences, output, attention)
        return
    if format_ is not None:
        from nmt.arguments import choice
        from nmt.localisation import FORMATS

        choice(format_, "--format", FORMATS)
    if (format_ or _format_of(input_)) != "text":
        _translate_file(open_, input_, output, format_)
        return
    # the inputs are checked (and opened) before open_ loads the model
    translate_lines(open_, sentences or None, input=input_, output=output, stream=sys.stdout,
                    warn=_warn, split=split)


def _format_of(path: Path | None) -> str:
    from nmt.localisation import format_of

    return format_of(path, None)


def _translate_file(open_: Callable[[], Any], input_: Path | None, output: Path | None,
                    format_: str | None) -> None:
    """``nmt translate --input FILE.po --output OUT.po``: a localisation file filled."""
    from nmt.api import translate_file

    if input_ is None or output is None:
        raise DataError("--format: a PO or XLIFF file is read from --input FILE and written to "
                        "--output FILE")
    filled = translate_file(open_, input_, output, format=format_, warn=_warn)
    if filled.format != "text":
        strings = "string" if filled.filled == 1 else "strings"
        _warn(f"--output {output}: {filled.filled} {strings} filled and marked for review"
              + (f", {filled.left} left untranslated" if filled.left else ""))


def _warn(message: str) -> None:
    console.print(message, highlight=False, markup=False)


@app.command()
@friendly
def bleu(
    run: RunOpt = None,
    checkpoint: CheckpointOpt = "best",
    split: Annotated[str, typer.Option("--split", help="Split of the run's data.")] = "test",
    src: Annotated[
        Path | None, typer.Option("--src", help="Score on this source file instead of a split.")
    ] = None,
    ref: Annotated[
        list[Path] | None,
        typer.Option("--ref", help="References of --src, line-aligned (repeat for several)."),
    ] = None,
    beam: BeamOpt = None,
    batch_size: DecodeBatchOpt = None,
    max_tokens: MaxTokensOpt = None,
    device: DeviceOpt = "auto",
    no_ema: NoEmaOpt = False,
    limit: Annotated[int, typer.Option("--limit", min=0, max=INT_MAX,
                                       help="Only the first N sources.")] = 0,
    examples: Annotated[
        bool,
        typer.Option("--examples", help="The recipe's four check sentences, per-sentence BLEU "
                     "(English-French runs, either direction)."),
    ] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    data_dir: DataDirOpt = None,
    textbook_input: Annotated[
        bool,
        typer.Option("--textbook-input", help="Give the sources lower-cased with punctuation "
                     "split off (\"i'm home .\"), to measure robustness to such input."),
    ] = False,
    engine: EngineOpt = None,
    model: ModelDirOpt = None,
    compute_type: ComputeTypeOpt = "default",
    spans: SpansOpt = "repair",
    markup: MarkupOpt = "place",
) -> None:
    """Corpus BLEU and chrF (sacrebleu) of a run on its test split or on --src/--ref files, and
    how its outputs keep the sources' protected spans."""
    fast_exit.allow()  # reads a model, writes text: no teardown needed
    import json

    from nmt.api import score, score_examples

    settings: dict[str, Any] = dict(
        engine=engine, model=model, device=device, averaged=not no_ema,
        compute_type=compute_type, beam=beam, batch_size=batch_size, max_tokens=max_tokens)
    if examples:
        _print_examples(score_examples(run, checkpoint, **settings), json_)
        return
    report = score(run, checkpoint, split=split, src=src, refs=list(ref or []), limit=limit,
                   data_dir=data_dir, textbook_input=textbook_input, log=_warn, spans=spans,
                   markup=markup, **settings)
    if json_:
        typer.echo(json.dumps(report.to_dict(), ensure_ascii=False))
        return
    search = "greedy" if report.beam == 1 else f"beam {report.beam}"
    if report.engine != "nmt":
        search += f", {report.engine}"
    if report.precision != "fp32":
        search += f", {report.precision} (decode.precision)"
    typer.echo(f"{report.run_dir} ({report.checkpoint}, step {report.step}) on {report.data}: "
               f"{report.sentences} sentences, {search}, {report.sentences_per_second:.1f} "
               "sentences/s")
    # one reference per source: the two scores are one, printed once
    shown = [("multi-ref", report.multi), ("single-ref", report.single)]
    if report.multi.references <= 1:
        shown = [("", report.multi)]
    for label, s in shown:
        typer.echo(f"BLEU {label:10s} {s.bleu:6.2f}  {s.bleu_signature}  "
                   f"(case-insensitive {s.bleu_ci:.2f})")
        typer.echo(f"chrF {label:10s} {s.chrf:6.2f}  {s.chrf_signature}")
    if report.cut_short:  # beside the scores: they are those of a partly trained model
        typer.echo(f"note: {report.cut_short}")
    if report.spans is not None:
        typer.echo(f"spans           {report.spans.summary()}")
    typer.echo(f"hypotheses: {report.hypotheses}; scores: {report.scores}")


def _print_examples(rows: list[dict[str, Any]], json_: bool) -> None:
    import json

    if json_:
        typer.echo(json.dumps(rows, ensure_ascii=False))
    for r in [] if json_ else rows:
        typer.echo(f"{r['src']} => {r['hyp']}, bleu {r['bleu']:.3f} (reference: {r['ref']})")


# --- nmt export -------------------------------------------------------------------------------


@app.command()
@friendly
def export(
    run: RunOpt = None,
    checkpoint: CheckpointOpt = "best",
    to: Annotated[
        str, typer.Option("--to", help=f"The target: {targets_help()}.")
    ] = "ctranslate2",
    quantization: Annotated[
        str | None,
        typer.Option("--quantization", help="Weights: int8, int8_float32, int8_float16, "
                     "int8_bfloat16, int16, float16, bfloat16 or float32 (default)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where the export goes (a directory for "
                     "ctranslate2, a file for argos); default under exports/."),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an earlier export or package at "
                           "--output (nothing else: not a run, not a folder of one's own).")
    ] = False,
    no_score: Annotated[
        bool, typer.Option("--no-score", help="Do not score a checkpoint nmt bleu never "
                           "scored for the model card (it then says 'not measured').")
    ] = False,
    with_checkpoint: Annotated[
        bool, typer.Option("--with-checkpoint", help="Also put the PyTorch checkpoint, its "
                           "tokenizer and config in the export (nmt-run/), so that nmt train "
                           "--from can continue it.")
    ] = False,
    data_dir: DataDirOpt = None,
) -> None:
    """Export a Transformer run to CTranslate2 or as an Argos Translate package, with its model
    card (data, licence, training, test scores)."""
    from nmt.api import export as export_run

    typer.echo(str(export_run(run, checkpoint, to=to, quantization=quantization, output=output,
                              overwrite=overwrite, score_first=not no_score, data_dir=data_dir,
                              with_checkpoint=with_checkpoint,
                              log=lambda line: typer.echo(line, err=True))))


@app.command()
@friendly
def backtranslate(
    input_: Annotated[
        Path, typer.Option("--input", "-i", help="Monolingual text in the run's source "
                           "language, one sentence per line, UTF-8 (gzip, bzip2 or xz "
                           "compressed too).")
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="DIR/PREFIX: writes PREFIX.<source> (the "
                           "text as read) and PREFIX.<target> (its translation).")
    ],
    run: RunOpt = None,
    checkpoint: CheckpointOpt = "best",
    search: Annotated[
        str, typer.Option("--search", help="sample (from the top-k tokens: best for pairs with "
                          "enough data), beam, or greedy.")
    ] = "sample",
    beam: BeamOpt = None,
    top_k: Annotated[int, typer.Option("--top-k", min=0, max=INT_MAX,
                                       help="--search sample draws from this many most likely "
                                       "tokens (0: all).")] = 10,
    seed: Annotated[int, typer.Option("--seed", min=0, max=int_limit("train.seed"),
                                      help="Seed of the sampling.")] = 1,
    device: DeviceOpt = "auto",
) -> None:
    """Synthetic pairs from monolingual text, with a run trained in the other direction;
    declare them with back_translated = true in a [[data.sources]] table."""
    from nmt.api import backtranslate as run_backtranslate

    done = run_backtranslate(run, input=input_, output=output, search=search, beam=beam,
                             top_k=top_k, seed=seed, checkpoint=checkpoint, device=device,
                             warn=lambda line: typer.echo(line, err=True))
    typer.echo(f"{done.lines:,} lines: {done.monolingual} (as read), {done.synthetic} "
               "(back-translated)")


# --- nmt plot / runs / attention --------------------------------------------------------------

@app.command()
@friendly
def plot(
    run: RunOpt = None,
    output: ImageOpt = None,
    run_argument: Annotated[
        Path | None, typer.Argument(metavar="[RUN]", show_default=False,
                                    help="The run as an argument, as earlier versions took it "
                                         "(the same as --run).")
    ] = None,
) -> None:
    """Training curves: train and valid loss and valid BLEU against step (runs/NAME/curves.png)."""
    from nmt.pictures.curves import image_format, plot_training_curves
    from nmt.runs.loading import latest_run

    if run is not None and run_argument is not None:
        raise NmtError(f"--run {run}: the run is also given as an argument ({run_argument}); "
                       "give it once, with --run")
    run = run if run is not None else run_argument
    if output is not None:
        image_format(output)
    typer.echo(str(plot_training_curves(run if run is not None else latest_run(), output)))


@app.command()
@friendly
def runs(
    runs_dir: Annotated[Path, typer.Option("--runs-dir", help="Where runs are kept.")] = Path(
        "runs"),
) -> None:
    """A table of runs: model, parameters, steps, best valid BLEU, test BLEU, last update."""
    from nmt.runs.table import list_runs, runs_table

    infos = list_runs(runs_dir)
    if not infos:
        typer.echo(f"no runs in {runs_dir}")
        return
    _console().print(runs_table(infos, title=f"runs in {runs_dir}"))


@app.command()
@friendly
def attention(
    sentence: Annotated[str, typer.Argument(help="One sentence in the run's source language.")],
    run: RunOpt = None,
    checkpoint: CheckpointOpt = "best",
    output: ImageOpt = None,
    device: DeviceOpt = "auto",
    no_ema: NoEmaOpt = False,
) -> None:
    """Translate one sentence greedily and draw its attention (default runs/NAME/attention.png).

    GRU: one map, output tokens x source tokens. Transformer: one file with three groups, top
    to bottom: encoder self-attention, decoder self-attention, encoder-decoder attention; in
    each, rows are layers and columns heads. Decoder maps have a row per produced token (<eos>
    last); decoder self-attention keys are what the decoder was fed (<bos>, then the outputs).
    One colour bar, colormap Reds.
    """
    fast_exit.allow()
    from nmt.pictures.attention import plot_attention
    from nmt.pictures.curves import image_format
    from nmt.runs.layout import ATTENTION_FILE
    from nmt.runs.loading import load_run
    from nmt.translation.translator import Translator

    if output is not None:
        image_format(output)  # before loading the model
    loaded = load_run(run, checkpoint, device, averaged=not no_ema)
    path = output if output is not None else loaded.run_dir / ATTENTION_FILE
    picture = plot_attention(Translator.from_run(loaded), sentence, path,
                             option="--output" if output is not None else "")
    typer.echo(picture.translation)
    console.print(f"attention: {picture.path}", highlight=False, markup=False)


def _translate_attention(translator: Any, sentences: list[str] | None, output: Path | None,
                         path: Path) -> None:
    """``nmt translate --attention FILE``: the translation of its one sentence argument (a
    :class:`~nmt.translation.translator.Translator`: engine nmt), then its picture."""
    from nmt.api import translate_lines
    from nmt.pictures.attention import check_attention_size, plot_attention

    sentence = (sentences or [""])[0]
    check_attention_size(translator, sentence, path, "--attention")  # before translating
    translate_lines(translator, [sentence], output=output, stream=sys.stdout, warn=_warn)
    picture = plot_attention(translator, sentence, path, option="--attention")
    console.print(f"attention: {picture.path}", highlight=False, markup=False)


def _check_translate_attention(sentences: list[str] | None, path: Path) -> None:
    from nmt.pictures.curves import image_format

    image_format(path, "--attention")
    if not sentences or len(sentences) != 1:
        raise NmtError("--attention: expected exactly one sentence argument to draw")


def main() -> None:
    """Console-script entry: run the app (:func:`nmt.process.run`), turning :class:`NmtError`
    into a one-line message."""
    process.run(_main)


def _main() -> None:
    try:
        # without standalone mode click *returns* a typer.Exit's code instead of exiting with it
        rc = app(standalone_mode=False)
        if isinstance(rc, int) and rc != 0:
            sys.exit(rc)
    except NmtError as e:
        console.print(f"[red]error:[/red] {escape(str(e))}", highlight=False)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)
    except process.Terminated:
        console.print("terminated")
        sys.exit(128 + signal.SIGTERM)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        console.print("aborted")
        sys.exit(1)
    except Exception as e:  # click usage errors come through here with standalone_mode=False
        # a ClickException; typer >= 0.2x vendors click, so `import click` may not exist
        show, code = getattr(e, "show", None), getattr(e, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            sys.exit(code)
        raise
