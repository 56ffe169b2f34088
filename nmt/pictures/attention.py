"""Pictures: attention heatmaps of one translation (written as :mod:`nmt.pictures.curves` writes
every picture: matplotlib's Agg canvas, never ``pyplot``).

Attention pictures follow the recipe's layout: grids of heatmaps (rows = layers, columns =
heads), each queries x keys, with shared axes, the token labels of the keys on the last row,
those of the queries on the first column, titles "Head 1", "Head 2", ... and ONE colour bar
(colormap "Reds", one scale from 0 to the largest weight shown). The GRU's Bahdanau attention is
one map, output tokens x source tokens. For the Transformer one file holds three groups:
encoder self-attention (source x source), decoder self-attention (output x previous outputs)
and encoder-decoder attention (output x source).

Rows of the decoder maps are the tokens the step *produced* (``<eos>`` last when produced);
the keys of decoder self-attention are what the decoder was fed: ``<bos>`` and the outputs
before the last.

Tokens and the sentence are drawn through :mod:`nmt.pictures.text` (right-to-left scripts in their
visual order, fonts that have every script's characters).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt.errors import DataError
from nmt.pictures.curves import image_format, save_figure
from nmt.pictures.text import display, display_parts, warn_stderr, width_in_chars

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from torch import Tensor

    from nmt.translation.translator import Translator

CMAP = "Reds"
MAX_FIGURE = (30.0, 44.0)  # inches: a 6-layer, 8-head model still fits (4500 x 6600 pixels)
# Source tokens (<eos> included) of the longest sentence drawn: at the smallest cell (0.04 in)
# a 4.5-inch panel holds about 110 tokens; beyond that labels thin out and the file grows with
# no picture to read (a 1024-token source drew 2.4 MB). Longer sentences are refused.
MAX_ATTENTION_TOKENS = 100
ARROW = "  →  "  # between the sentence and its translation in the title

# The three Transformer groups: weights key, group title, query role, key role.
GROUPS = (
    ("enc", "Encoder self-attention", "source (query)", "source (key)"),
    ("self", "Decoder self-attention", "output (query)", "decoder input (key)"),
    ("cross", "Encoder-decoder attention", "output (query)", "source (key)"),
)


@dataclass
class _Group:
    title: str
    weights: Any  # numpy (layers, heads, queries, keys)
    queries: list[str]
    keys: list[str]
    query_role: str
    key_role: str


def _groups(
    tokens: Sequence[str], src_tokens: Sequence[str], weights: Mapping[str, Tensor]
) -> list[_Group]:
    """The heatmap groups to draw, with their axis labels, checked against the weights' shapes."""
    inputs = ["<bos>", *tokens[:-1]]  # what the decoder was fed at each step
    labels = {"enc": (list(src_tokens), list(src_tokens)), "self": (list(tokens), inputs),
              "cross": (list(tokens), list(src_tokens))}
    groups = []
    for key, title, q_role, k_role in GROUPS:
        if key not in weights:
            continue
        w = weights[key].detach().float().cpu().numpy()
        queries, keys = labels[key]
        if w.ndim != 4 or w.shape[2:] != (len(queries), len(keys)):
            raise ValueError(f"attention {key!r}: weights {tuple(w.shape)} do not match "
                             f"{len(queries)} query and {len(keys)} key tokens")
        if key == "cross" and "self" not in weights and w.shape[:2] == (1, 1):
            title = "Encoder-decoder attention (Bahdanau)"
        groups.append(_Group(title, w, queries, keys, q_role, k_role))
    if not groups:
        raise ValueError("attention: no weights to draw (expected 'enc', 'self' or 'cross')")
    return groups


def _cell_size(groups: list[_Group]) -> float:
    """Inches per token: a little more than a line of 8-point text; less for long sentences, so
    a panel stays under ~4.5 inches, and for big grids, so the figure stays under MAX_FIGURE
    (labels then shrink or are thinned); more for very short sentences, so a panel is wide
    enough for its title and axis label."""
    longest = max(max(len(g.queries), len(g.keys)) for g in groups)
    shortest = min(min(len(g.queries), len(g.keys)) for g in groups)
    cell = min(0.2, 4.5 / longest)
    if shortest * cell < 1.1:
        cell = max(cell, min(1.1 / shortest, 0.45, 4.5 / longest))
    # Whatever the grids need beyond the cells (same margins as attention_figure's size).
    label = 8.5 * 0.62 / 72 * max(width_in_chars(t) for g in groups for t in g.queries + g.keys)
    fit_w = min((MAX_FIGURE[0] - 1.8 - label - g.weights.shape[1] * 0.15)
                / (g.weights.shape[1] * len(g.keys)) for g in groups)
    fit_h = ((MAX_FIGURE[1] - sum(g.weights.shape[0] * 0.35 + label + 0.8 for g in groups))
             / sum(g.weights.shape[0] * len(g.queries) for g in groups))
    return max(min(cell, fit_w, fit_h), 0.04)  # 6 pixels: below that, bigger beats unreadable


def _label_size(cell: float) -> float:
    """Tick-label points for a cell of ``cell`` inches; never below 6 (long sentences get every
    k-th label instead, see :func:`_set_token_ticks`)."""
    return max(6.0, min(8.5, cell * 72 * 0.8))


def _set_token_ticks(ax: Axes, labels: list[str], axis: str, fontsize: float, cell: float) -> None:
    # Every k-th label when even the smallest font would overlap its neighbours.
    step = max(1, math.ceil(fontsize * 1.15 / 72 / cell))
    positions = list(range(0, len(labels), step))
    shown = [display(labels[i]) for i in positions]
    if axis == "x":
        ax.set_xticks(positions, shown, rotation=90, fontsize=fontsize)
    else:
        ax.set_yticks(positions, shown, fontsize=fontsize)


def attention_figure(
    tokens: Sequence[str],
    src_tokens: Sequence[str],
    weights: Mapping[str, Tensor],
    title: str | None = None,
) -> Figure:
    """Heatmaps of one translation's attention.

    Args:
        tokens: the output pieces, ``<eos>`` last when produced (``T`` of them).
        src_tokens: the source pieces, ``<eos>`` last (``S`` of them).
        weights: ``{"enc": (L, h, S, S), "self": (L, h, T, T), "cross": (L, h, T, S)}`` as
            :func:`nmt.translation.translator.translate_with_attention` returns them; the GRU has
            only ``"cross"`` ``(1, 1, T, S)``.
        title: the figure title, drawn as given: text made with :func:`nmt.pictures.text.display`
            (or :func:`~nmt.pictures.text.display_parts`, as the sentence and its translation).

    Returns a Figure with one subfigure per group present (rows = layers, columns = heads):
    axes titled "Head 1"... on each group's first row (when there are several heads), key
    tokens and the key role as x-label on the last row, query tokens and "Layer i" (or the
    query role, for one layer) as y-label on the first column, and one colour bar.
    """
    from matplotlib.figure import Figure

    groups = _groups(tokens, src_tokens, weights)
    cell = _cell_size(groups)
    font = _label_size(cell)
    vmax = max(float(g.weights.max()) for g in groups) or 1.0
    char = font * 0.62 / 72  # inches per character of a tick label, roughly
    heights, widths = [], []
    for g in groups:
        layers, heads = g.weights.shape[:2]
        heights.append(layers * (len(g.queries) * cell + 0.35)
                       + max(width_in_chars(k) for k in g.keys) * char + 0.8)
        widths.append(heads * (len(g.keys) * cell + 0.15)
                      + max(width_in_chars(q) for q in g.queries) * char + 0.9)
    bar_w = 0.9
    fig_w = max(widths) + bar_w
    fig_h = sum(heights) + (0.4 if title else 0.0)
    fig = Figure(figsize=(fig_w, fig_h), layout="constrained")
    if len(groups) > 1:  # the groups in a column, the colour bar in a narrow column beside them
        if title:
            fig.suptitle(title, fontsize=10)
        outer: Any = fig.subfigures(1, 2, width_ratios=[fig_w - bar_w, bar_w], wspace=0.0)
        left, right = outer  # an array of two subfigures
        subs = list(left.subfigures(len(groups), 1, height_ratios=heights, hspace=0.03,
                                    squeeze=False)[:, 0])
    else:  # one map: the colour bar beside it
        fig.suptitle(f"{title}\n{groups[0].title}" if title else groups[0].title, fontsize=10)
        subs, right = [fig], None
    image = None
    all_axes = []
    for g, sub in zip(groups, subs, strict=True):
        layers, heads = g.weights.shape[:2]
        if len(groups) > 1:
            sub.suptitle(g.title, fontsize=10, fontweight="bold")
        axes = sub.subplots(layers, heads, sharex=True, sharey=True, squeeze=False)
        if layers > 1:  # rows are layers: the query role once for the group, "Layer i" per row
            sub.supylabel(g.query_role.capitalize(), fontsize=9)
        # The key role under each panel of the last row, or once under the group when a panel
        # is narrower than the words (neighbouring labels would run into each other).
        x_label = g.key_role.capitalize()
        if heads > 1 and len(g.keys) * cell < len(x_label) * 8.5 * 0.55 / 72 + 0.15:
            sub.supxlabel(x_label, fontsize=8.5)
            x_label = ""
        for i in range(layers):
            for j in range(heads):
                ax = axes[i, j]
                all_axes.append(ax)
                image = ax.imshow(g.weights[i, j], cmap=CMAP, vmin=0.0, vmax=vmax,
                                  interpolation="nearest")
                ax.tick_params(length=2, pad=1)
                if i == 0 and heads > 1:
                    ax.set_title(f"Head {j + 1}", fontsize=9)
                if i == layers - 1:
                    _set_token_ticks(ax, g.keys, "x", font, cell)
                    ax.set_xlabel(x_label, fontsize=8.5)
                if j == 0:
                    _set_token_ticks(ax, g.queries, "y", font, cell)
                    ax.set_ylabel(f"Layer {i + 1}" if layers > 1 else g.query_role.capitalize(),
                                  fontsize=8.5)
                ax.label_outer()  # shared axes: tick labels only on the outer panels
    assert image is not None
    if right is not None:
        bar = right.colorbar(image, cax=right.add_axes((0.1, 0.3, 0.18, 0.4),
                                                       label="<colorbar>"))
    else:
        bar = fig.colorbar(image, ax=all_axes, shrink=0.8, aspect=25)
    bar.set_label("attention weight", fontsize=8.5)
    bar.ax.tick_params(labelsize=8)
    return fig


@dataclass
class AttentionPicture:
    """What :func:`plot_attention` drew: the file, the translation and the figure."""

    path: Path
    tokens: list[str]  # output pieces, <eos> last when produced
    src_tokens: list[str]  # source pieces, <eos> last
    translation: str  # the detokenized greedy output
    figure: Figure


def plot_attention(translator: Translator, sentence: str, output: Path,
                   option: str = "--output",
                   warn: Callable[[str], None] = warn_stderr) -> AttentionPicture:
    """Translate ``sentence`` greedily (whatever the translator's beam) and draw its attention to
    ``output`` (format from the extension: ``.png``, ``.svg`` or ``.pdf``); ``warn`` gets a line
    naming characters no installed font has."""
    from dataclasses import replace

    from nmt.translation.translator import translate_with_attention

    image_format(output, option)  # before the translation: a bad name fails fast
    check_attention_size(translator, sentence, output, option)
    greedy = replace(translator, cfg=replace(translator.cfg, beam=1))
    read, _ = greedy.as_read(sentence)  # a sentence typed in capitals: in sentence case
    tokens, src_tokens, weights = translate_with_attention(
        greedy.model, greedy.tokenizer, read, lowercase=greedy.lowercase, cfg=greedy.cfg,
        policy=greedy.normalization, truncate=greedy.truncate, lang=greedy.source_lang)
    # The text of the same greedy output (the pieces alone do not detokenize in general).
    translation = greedy.translate([sentence])[0]
    # The sentence has no two spaces in a row: the first ARROW is the one put there.
    text = _shorten(f"{' '.join(sentence.split())}{ARROW}{translation}", 110)
    title = display_parts(text.split(ARROW, 1), ARROW)
    fig = attention_figure(tokens, src_tokens, weights, title=title)
    save_figure(fig, output, option, warn)
    return AttentionPicture(Path(output), tokens, src_tokens, translation, fig)


def check_attention_size(translator: Translator, sentence: str, output: Path,
                         option: str = "--output") -> None:
    """Refuse, in one line, a sentence whose source as the model takes it (cut to the run's
    limit) has more than :data:`MAX_ATTENTION_TOKENS` tokens: its picture could not be read."""
    from nmt.translation.translator import source_cut, source_ids

    normalized = translator.normalize_source(translator.as_read(sentence)[0])
    ids, n = source_ids(translator.tokenizer, normalized,
                        *source_cut(translator.model, None, translator.truncate))
    if len(ids) > MAX_ATTENTION_TOKENS:
        raise DataError(f"{option} {output}: the sentence has {n:,} source tokens; attention is "
                        f"drawn for at most {MAX_ATTENTION_TOKENS} (draw a shorter sentence)")


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
