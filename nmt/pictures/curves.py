"""Pictures: the training curves of a run, and how every picture is written.

matplotlib is imported inside the functions (the CLI starts without it) and only through
:class:`matplotlib.figure.Figure`, never ``pyplot``: figures are drawn on the Agg canvas and
written with ``savefig``, so nothing needs a display and no global figure state leaks (the
backend chosen by ``MPLBACKEND`` is never used). Attention pictures are
:mod:`nmt.pictures.attention`'s. Text from the corpus or the user (sentences, tokens, run names) is
drawn through :mod:`nmt.pictures.text`: any script, right to left included, with a font that has
its characters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt.errors import CheckpointError, ConfigError, DataError, NmtError
from nmt.pictures.text import display, warn_stderr
from nmt.runs.directory import read_metrics
from nmt.runs.layout import CURVES_FILE, METRICS_FILE

if TYPE_CHECKING:
    from matplotlib.figure import Figure

IMAGE_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
DPI = 150  # PNG only; SVG and PDF are vector


def image_format(path: Path, option: str = "--output") -> str:
    """``.png``/``.svg``/``.pdf`` (any case) -> the matplotlib format; else a one-line error
    naming ``option`` (the command-line option ``path`` came from; "" for a default path)."""
    fmt = IMAGE_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        where = f"{option} {path}" if option else str(path)
        raise ConfigError(f"{where}: expected a file name ending in .png, .svg or .pdf")
    return fmt


def save_figure(fig: Figure, path: Path, option: str = "--output",
                warn: Callable[[str], None] = warn_stderr) -> Path:
    """Write ``fig`` to ``path`` in the format its extension names (parent folders created).

    Its texts get fonts that have their characters first (:func:`nmt.pictures.text.fit_fonts`):
    characters no installed font has are named in one ``warn`` line, and matplotlib's own
    warning per missing glyph is silenced while this figure is written.

    Written to a temporary file renamed over ``path`` (:func:`atomic_write_bytes`): a full disk
    leaves the previous picture (or none), never an empty or half file, and a symbolic link at
    ``path`` is replaced, never written through.
    """
    import warnings

    from nmt.files import atomic_write_bytes
    from nmt.pictures.text import GLYPH_WARNING, fit_fonts

    path = Path(path)
    fmt = image_format(path, option)
    fit_fonts(fig, warn, where=str(path))

    def write(f: Any) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", GLYPH_WARNING, UserWarning)
            fig.savefig(f, format=fmt, dpi=DPI, metadata=_metadata(fmt))

    try:
        atomic_write_bytes(path, write)
    except NmtError as e:
        raise DataError(f"{option} {e}" if option else str(e)) from None
    return path


def _metadata(fmt: str) -> dict[str, Any]:
    # No creation dates in SVG/PDF, so the same picture gives the same bytes.
    return {"Date": None} if fmt in ("svg", "pdf") else {}


# --- training curves -----------------------------------------------------------------------------


def _series(records: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of the finite numbers under ``key`` (null and missing are skipped)."""
    steps, values = [], []
    for rec in records:
        v = rec.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            steps.append(int(rec["step"]))
            values.append(float(v))
    return steps, values


def training_curves_figure(records: list[dict[str, Any]], title: str = "") -> Figure:
    """Train and valid loss against step (left) and valid BLEU against step (right, only when
    some validation computed BLEU), the best BLEU marked. Loss is per-token cross-entropy.

    No corpus text is drawn; the title (the run's name, which may be in any script) is the only
    text that is not nmt's own."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    train = _series(records, "train_loss")
    valid = _series(records, "valid_loss")
    bleu = _series(records, "valid_bleu")
    if not (train[0] or valid[0] or bleu[0]):
        raise ValueError("no train_loss, valid_loss or valid_bleu values to plot")
    panels = 2 if bleu[0] else 1
    fig = Figure(figsize=(5.2 * panels, 3.8), layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False, sharex=True)[0]  # steps line up
    if title:
        fig.suptitle(display(title), fontsize=11)
    ax = axes[0]
    if train[0]:
        ax.plot(*train, color="tab:blue", lw=1.4, label="train loss",
                marker="o" if len(train[0]) < 30 else None, ms=3)
    if valid[0]:
        ax.plot(*valid, color="tab:orange", lw=1.4, marker="o", ms=3, label="valid loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (per-token cross-entropy)")
    values = train[1] + valid[1]
    if min(values) > 0 and max(values) / min(values) > 8:
        ax.set_yscale("log")  # early losses dwarf the rest otherwise
        # Plain numbers (0.3, not 3x10^-1); 2, 3 and 5 between powers of ten when few decades.
        decades = math.log10(max(values) / min(values))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(
            lambda v, _: f"{v:g}" if decades < 2.5 and _mantissa(v) in (2, 3, 5) else ""))
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=9)
    if bleu[0]:
        ax.set_title("loss", fontsize=10)
        ax = axes[1]
        ax.plot(*bleu, color="tab:green", lw=1.4, marker="o", ms=3, label="valid BLEU")
        best = max(range(len(bleu[1])), key=lambda k: bleu[1][k])  # first of equal bests
        ax.plot([bleu[0][best]], [bleu[1][best]], marker="*", ms=13, color="tab:red",
                ls="none", label=f"best {bleu[1][best]:.2f} at step {bleu[0][best]:,}")
        ax.set_xlabel("step")
        ax.set_ylabel("BLEU (greedy)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9)
        ax.set_title("validation BLEU", fontsize=10)
    for ax in axes:
        ax.tick_params(labelsize=9)
    return fig


def _mantissa(v: float) -> int:
    """The leading digit of a positive tick value (0.3 -> 3), 0 when it is not a whole digit."""
    m = v / 10 ** math.floor(math.log10(v))
    return round(m) if abs(m - round(m)) < 1e-6 else 0


def plot_training_curves(run_dir: Path, output: Path | None = None,
                         warn: Callable[[str], None] = warn_stderr) -> Path:
    """Draw ``run_dir/metrics.jsonl`` into ``run_dir/curves.png`` (or ``output``); returns the
    path. A run without metrics is a :class:`CheckpointError`; ``warn`` gets a line naming
    characters of the title no installed font has."""
    run_dir = Path(run_dir)
    records = read_metrics(run_dir)
    try:
        fig = training_curves_figure(records, title=_run_title(run_dir, records))
    except ValueError:
        raise CheckpointError(
            f"{run_dir / METRICS_FILE}: no loss or BLEU values yet; nothing to plot"
        ) from None
    if output is None:  # the default picture: no option to name in a message
        return save_figure(fig, run_dir / CURVES_FILE, option="", warn=warn)
    return save_figure(fig, output, warn=warn)


def _run_title(run_dir: Path, records: list[dict[str, Any]]) -> str:
    last = max(int(r["step"]) for r in records) if records else 0
    return f"{run_dir.name} ({last:,} steps)"
