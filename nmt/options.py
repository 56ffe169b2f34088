"""The options several commands of the command line share, each declared once (its flag, its
help, its bounds: the same as the API's, from :mod:`nmt.config`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nmt.setting_ranges import int_limit

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="TOML config (see configs/).")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a config value: section.key=value (repeatable)."),
]

DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Corpus and cache directory (default $NMT_DATA_DIR, else, "
                 "for a run's own data (bleu, export, train --resume), the one it was trained "
                 "from, else data/)."),
]
SourceOpt = Annotated[
    str | None,
    typer.Option("--source", help="The archive of a downloaded corpus (fra-eng.zip, deu-eng.zip): "
                 "a file, a directory holding it, or a URL (default $NMT_DATA_MIRROR, then the "
                 "original address)."),
]

RunOpt = Annotated[
    Path | None, typer.Option("--run", help="Run directory runs/NAME (default: the latest).")
]
CheckpointOpt = Annotated[
    str, typer.Option("--checkpoint", help="best, last, or a checkpoint file.")
]
BeamOpt = Annotated[
    int | None, typer.Option("--beam", min=1, max=int_limit("decode.beam"),
                             help="Beam size (default: the run's [decode]).")
]
DecodeBatchOpt = Annotated[
    int | None,
    typer.Option("--batch-size", min=1, max=int_limit("decode.batch_size"),
                 help="Sentences per batch (default: the run's [decode])."),
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option("--max-tokens", min=1, max=int_limit("decode.max_tokens"),
                 help="At most this many source tokens per batch, padding included, times the "
                      "beam: a long line or a big beam gets a smaller batch (default: the run's "
                      "[decode], 8192)."),
]
DeviceOpt = Annotated[str, typer.Option("--device", help="auto, cpu, cuda, cuda:N or mps.")]
NoEmaOpt = Annotated[
    bool,
    typer.Option("--no-ema", help="Use the trained weights, not their moving average (runs "
                 "trained with train.ema_decay translate with the average by default)."),
]
EngineOpt = Annotated[
    str | None,
    typer.Option("--engine", help="nmt (the PyTorch model; the default) or ctranslate2 (an "
                 "export of the run, made on the fly under RUN/ctranslate2/, or --model DIR)."),
]
ModelDirOpt = Annotated[
    Path | None,
    typer.Option("--model", help="A directory made by `nmt export --to ctranslate2` (implies "
                 "--engine ctranslate2)."),
]
SpansOpt = Annotated[
    str,
    typer.Option("--spans", help="Protected spans (placeholders, tags, options, addresses, "
                 "paths, terms: docs/DATA.md): repair (each output gets its source's back, "
                 "guessing a place by position where needed; one warning with a count), strict "
                 "(a line that needs a guess is an error naming it) or off (as the model wrote)."),
]
MarkupOpt = Annotated[
    str,
    typer.Option("--markup", help="Tags (<b>, </b>, <a href=...>) with --spans repair or "
                 "strict: place (the model translates each line without its tags, put on the "
                 "words that render theirs, by the model's attention, else by position; for "
                 "models not trained on markup) or model (the "
                 "model sees them and places them itself)."),
]
ComputeTypeOpt = Annotated[
    str,
    typer.Option("--compute-type", help="CTranslate2 only: default (the export's weights), "
                 "int8, int8_float32, float16, float32, ... (converted when loading)."),
]

ImageOpt = Annotated[
    Path | None,
    typer.Option("--output", "-o", help="Picture file: .png, .svg or .pdf (by the extension)."),
]
