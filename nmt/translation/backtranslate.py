"""``nmt backtranslate``: synthetic parallel data from monolingual text (Sennrich et al. 2016).

A run trained in the other direction (say fr->en, to help an en->fr model) translates
monolingual text of its source language (French). The result is a pair of aligned files:
``PREFIX.<the run's source>`` holds the monolingual text exactly as it was read, line for line,
and ``PREFIX.<the run's target>`` its synthetic translation. Declared as a source with
``back_translated = true`` (``[[data.sources]]``), they train the other direction: the synthetic
side is its source, marked with a tag (:data:`nmt.data.tokenizers.BT_TAG`, Caswell et al. 2019),
the real text its target.

The search is greedy, beam, or sampling from the top-k tokens (:class:`Sampling`), which
Edunov et al. (2018) found best where the pair has enough data; beam is better for small ones.
The text is read and written in chunks: memory stays bounded by a chunk, whatever the input.
Both files are written beside their names and renamed into place once complete.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from nmt.arguments import option
from nmt.errors import DataError, write_errors
from nmt.files import atomic_text_output, path_problem, read_lines
from nmt.runs.loading import LoadedRun
from nmt.translation.search import Sampling
from nmt.translation.translator import (
    CHUNK_CHARS,
    CHUNK_LINES,
    Translator,
    chunks,
    open_input,
)

SEARCHES = ("greedy", "beam", "sample")


@dataclass(frozen=True)
class BackTranslated:
    """What :func:`backtranslate` wrote."""

    monolingual: Path  # PREFIX.<source>: the text as read
    synthetic: Path  # PREFIX.<target>: its translation
    lines: int


def output_paths(prefix: Path, run: LoadedRun) -> tuple[Path, Path]:
    """``PREFIX.<source>`` and ``PREFIX.<target>`` of the run's languages."""
    data = run.config.data
    return (prefix.with_name(f"{prefix.name}.{data.source}"),
            prefix.with_name(f"{prefix.name}.{data.target}"))


def backtranslate(run: LoadedRun, input_path: Path, prefix: Path, *, search: str = "sample",
                  beam: int | None = None, top_k: int = 10, seed: int = 1,
                  warn: Callable[[str], None] = print) -> BackTranslated:
    """Translate the monolingual ``input_path`` with ``run`` into the aligned files of
    ``prefix`` (see the module docstring). ``search``: greedy, beam (``beam`` wide; None: the
    run's ``decode.beam``) or sample (from the ``top_k`` most likely tokens, seeded with
    ``seed``); :func:`nmt.api.backtranslate` checks them."""
    data = run.config.data
    if prefix.name in ("", ".", "..") or prefix.is_dir():
        raise DataError(f"{option('output')} {prefix}: expected DIR/PREFIX, the start of two "
                        f"file names (PREFIX.{data.source}, PREFIX.{data.target})")
    mono_path, synthetic_path = output_paths(prefix, run)
    parent = prefix.parent if str(prefix.parent) else Path(".")
    problem = path_problem(parent, "directory")
    if problem:
        raise DataError(f"{option('output')} {prefix}: its folder {parent} {problem}")
    for path in (mono_path, synthetic_path):
        if path.exists() and path.resolve() == input_path.resolve():
            raise DataError(f"{option('output')} {prefix}: would write {path}, which is "
                            f"{option('input')}")
    translator = Translator.from_run(run, beam=beam if search == "beam" else 1)  # None: the run's
    if search == "sample":
        translator = replace(translator, sampling=Sampling(top_k, seed))
    lines = 0
    name = f"{option('input')} {input_path}"

    def long_line(number: int, limit: int) -> None:
        warn(f"warning: {name}: line {number}: longer than {limit:,} bytes; only the first "
             "are read (and written to both files)")

    with contextlib.ExitStack() as stack:
        stack.enter_context(write_errors(f"{option('output')} {prefix}"))
        source = read_lines(stack.enter_context(open_input(input_path, option("input"))), name,
                            on_long=long_line)
        mono = stack.enter_context(atomic_text_output(mono_path))
        synthetic = stack.enter_context(atomic_text_output(synthetic_path))
        for chunk in chunks(source, CHUNK_LINES, CHUNK_CHARS):
            for text, translation in zip(chunk, translator.translate(chunk), strict=True):
                mono.write(text + "\n")
                synthetic.write(translation + "\n")
            lines += len(chunk)
    return BackTranslated(mono_path, synthetic_path, lines)
