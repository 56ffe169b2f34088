"""The ``nmt`` command line: parse, call the library, print. Errors are one line, no traceback."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from nmt.errors import NmtError

app = typer.Typer(
    help="Neural machine translation, English to French: data, train, translate, bleu.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
data_app = typer.Typer(help="Get and prepare the fra-eng corpus.", no_args_is_help=True)
app.add_typer(data_app, name="data")

console = Console(stderr=True)

ConfigOpt = Annotated[
    Optional[Path], typer.Option("--config", "-c", help="TOML config (see configs/).")
]
SetOpt = Annotated[
    Optional[list[str]],
    typer.Option("--set", "-s", help="Override a config value: section.key=value (repeatable)."),
]

F = TypeVar("F", bound=Callable[..., Any])


def friendly(fn: F) -> F:
    """Decorate every command: an :class:`NmtError` becomes one red line and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except NmtError as e:
            console.print(f"[red]error:[/red] {escape(str(e))}", highlight=False, soft_wrap=True)
            raise typer.Exit(e.exit_code) from None

    return wrapper  # type: ignore[return-value]


# --- nmt data ---------------------------------------------------------------------------------

DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Corpus and cache directory (default $NMT_DATA_DIR or data/)."),
]
SourceOpt = Annotated[
    str | None,
    typer.Option("--source", help="fra-eng.zip to use: a file, a directory holding it, or a URL "
                 "(default $NMT_DATA_MIRROR, then the original address)."),
]


def _data_log(message: str) -> None:
    console.print(message, markup=False, highlight=False, soft_wrap=True)


@data_app.command("download")
@friendly
def data_download(source: SourceOpt = None, data_dir: DataDirOpt = None) -> None:
    """Get fra-eng.zip, verify fra.txt's SHA-256 and extract it (does nothing when present)."""
    from nmt.data.download import default_data_dir, ensure_corpus

    ensure_corpus(data_dir or default_data_dir(), source, log=_data_log)


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
    from nmt.data.stats import stats_table

    cfg = load_config(config, set_ or [])
    prepared = prepare(cfg.data, data_dir or default_data_dir(), log=_data_log)
    Console().print(stats_table(prepared))


# --- nmt train --------------------------------------------------------------------------------


@app.command()
@friendly
def train(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue runs/NAME exactly where it stopped.")
    ] = False,
    run_name: Annotated[
        Optional[str], typer.Option("--run-name", help="Run directory name (default: config name).")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing run directory of that name.")
    ] = False,
    runs_dir: Annotated[Path, typer.Option("--runs-dir", help="Where runs are kept.")] = Path("runs"),
    data_dir: Annotated[
        Optional[Path], typer.Option("--data-dir", help="Corpus and cache directory (default data/).")
    ] = None,
) -> None:
    """Train a model: GRU+Bahdanau or Transformer, as the config says."""
    from nmt.data.download import default_data_dir
    from nmt.train import run_train_command

    if config is None and not resume:
        raise NmtError("--config: expected a TOML config, e.g. --config configs/demo.toml")
    result = run_train_command(
        config, list(set_ or []), run_name=run_name, runs_dir=runs_dir,
        data_dir=data_dir or default_data_dir(), resume=resume, overwrite=overwrite,
        log=lambda s: console.print(s, highlight=False, markup=False),
    )
    p = result.progress
    console.print(f"{result.run_dir}: {p.stop_reason}; step {p.step}, best valid score "
                  f"{p.best_score:.2f} at step {p.best_step}" if p.best_step else
                  f"{result.run_dir}: {p.stop_reason}; step {p.step}", highlight=False)
    typer.echo(f"loss {result.train_loss:.3f} (per-token CE), "
               f"{result.tokens_per_sec:,.0f} tokens/sec on {result.device}")



# --- nmt translate / bleu ---------------------------------------------------------------------


# --- nmt plot / runs / attention --------------------------------------------------------------


def main() -> None:
    """Console-script entry: run the app, turning :class:`NmtError` into a one-line message."""
    try:
        app(standalone_mode=False)
    except NmtError as e:
        console.print(f"[red]error:[/red] {escape(str(e))}", highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        console.print("aborted")
        sys.exit(1)
    except Exception as e:  # click usage errors come through here with standalone_mode=False
        import click

        if isinstance(e, click.ClickException):
            e.show()
            sys.exit(e.exit_code)
        raise
