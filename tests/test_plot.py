"""Pictures: attention heatmaps (layout, labels, one colour bar, formats) and training curves,
on tiny toy runs; `nmt attention`, `nmt translate --attention` and `nmt plot`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import invoke
from test_decode import make_run

from nmt.errors import CheckpointError, ConfigError
from nmt.pictures.attention import MAX_FIGURE, attention_figure, plot_attention
from nmt.pictures.curves import (
    plot_training_curves,
    training_curves_figure,
)
from nmt.runs.directory import read_metrics
from nmt.runs.loading import load_run
from nmt.translation.translator import Translator, translate_with_attention

SENTENCE = "A b c"  # normalised to "a b c": source pieces a, b, c, <eos>
SRC = ["a", "b", "c", "<eos>"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Toy runs (d_model 16, 2 layers, 2 heads) trained to reverse letter sequences."""
    root = tmp_path_factory.mktemp("runs")
    return {arch: make_run(root / arch, arch) for arch in ("transformer", "gru")}


def translator_of(run: Path) -> Translator:
    return Translator.from_run(load_run(run, "best", "cpu"))


def heatmaps(fig) -> list:  # noqa: ANN001 - a matplotlib Figure
    return [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]


def ticks(labels) -> list[str]:  # noqa: ANN001 - matplotlib Text objects
    return [t.get_text() for t in labels]


# --- attention pictures --------------------------------------------------------------------------


def test_gru_attention_is_one_labelled_map(runs: dict[str, Path], tmp_path: Path) -> None:
    translator = translator_of(runs["gru"])
    picture = plot_attention(translator, SENTENCE, tmp_path / "gru.png")
    assert picture.path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert picture.src_tokens == SRC
    assert picture.tokens == ["c", "b", "a", "<eos>"]  # the toy model reverses its input
    assert picture.translation == "c b a" == translator.translate([SENTENCE])[0]
    maps = heatmaps(picture.figure)
    assert len(maps) == 1 and len(picture.figure.axes) == 2  # the map and one colour bar
    ax = maps[0]
    assert ticks(ax.get_xticklabels()) == SRC
    assert ticks(ax.get_yticklabels()) == picture.tokens
    assert ax.get_xlabel() == "Source (key)" and ax.get_ylabel() == "Output (query)"
    image = ax.images[0]
    assert image.get_cmap().name == "Reds"
    _, _, weights = translate_with_attention(
        translator.model, translator.tokenizer, SENTENCE, lowercase=translator.lowercase,
        policy=translator.normalization)
    np.testing.assert_allclose(np.asarray(image.get_array()), weights["cross"][0, 0].numpy())


def test_transformer_attention_has_three_groups_of_layers_by_heads(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    picture = plot_attention(translator_of(runs["transformer"]), SENTENCE, tmp_path / "t.png")
    fig, tokens = picture.figure, picture.tokens
    assert tokens[-1] == "<eos>"
    groups = fig.subfigs[0].subfigs  # left column; the colour bar is in the right one
    assert [g._suptitle.get_text() for g in groups] == [
        "Encoder self-attention", "Decoder self-attention", "Encoder-decoder attention"]
    expected = [  # (query labels, key labels) per group
        (SRC, SRC), (tokens, ["<bos>", *tokens[:-1]]), (tokens, SRC)]
    for group, (queries, keys) in zip(groups, expected, strict=True):
        axes = np.array(group.axes).reshape(2, 2)  # layers x heads
        assert [ax.get_title() for ax in axes[0]] == ["Head 1", "Head 2"]
        assert [ax.get_title() for ax in axes[1]] == ["", ""]
        assert [ax.get_ylabel() for ax in axes[:, 0]] == ["Layer 1", "Layer 2"]
        for ax in axes[-1]:
            assert ticks(ax.get_xticklabels()) == keys
        for ax in axes[:, 0]:
            assert ticks(ax.get_yticklabels()) == queries
        for ax in axes.flat:  # shared axes: inner panels show no tick labels
            if ax not in axes[-1]:
                assert not any(ticks(ax.get_xticklabels()))
            if ax not in axes[:, 0]:
                assert not any(ticks(ax.get_yticklabels()))
            assert ax.images[0].get_array().shape == (len(queries), len(keys))
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(heatmaps(fig)) == 12 and len(bars) == 1
    norms = {(im.norm.vmin, im.norm.vmax) for ax in heatmaps(fig) for im in ax.images}
    assert len(norms) == 1  # one scale, so the one colour bar is true for every panel
    assert norms.pop()[1] == pytest.approx(max(float(np.max(ax.images[0].get_array()))
                                               for ax in heatmaps(fig)))


def test_attention_formats_follow_the_extension(runs: dict[str, Path], tmp_path: Path) -> None:
    translator = translator_of(runs["gru"])
    svg = plot_attention(translator, SENTENCE, tmp_path / "deep" / "a.svg").path
    assert b"<svg" in svg.read_bytes()[:500]
    pdf = plot_attention(translator, SENTENCE, tmp_path / "a.PDF").path
    assert pdf.read_bytes()[:5] == b"%PDF-"
    with pytest.raises(ConfigError, match=r"^--output .*a\.jpg: expected a file name ending in "
                                          r"\.png, \.svg or \.pdf$"):
        plot_attention(translator, SENTENCE, tmp_path / "a.jpg")
    assert not (tmp_path / "a.jpg").exists()


def test_attention_figure_checks_shapes() -> None:
    with pytest.raises(ValueError, match="do not match"):
        attention_figure(["x", "<eos>"], SRC, {"cross": torch.rand(1, 1, 3, 4)})
    with pytest.raises(ValueError, match="no weights"):
        attention_figure(["x"], SRC, {})


def test_long_sentences_keep_labels_apart_and_the_figure_bounded() -> None:
    torch.manual_seed(0)
    s, t, layers, heads = 60, 70, 3, 8
    src = [f"w{i}" for i in range(s - 1)] + ["<eos>"]
    tgt = [f"m{i}" for i in range(t - 1)] + ["<eos>"]
    weights = {"enc": torch.rand(layers, heads, s, s), "self": torch.rand(layers, heads, t, t),
               "cross": torch.rand(layers, heads, t, s)}
    fig = attention_figure(tgt, src, weights)
    width, height = fig.get_size_inches()
    assert width <= MAX_FIGURE[0] + 0.5 and height <= MAX_FIGURE[1] + 0.5
    assert len(heatmaps(fig)) == 3 * layers * heads
    cross_last = fig.subfigs[0].subfigs[2].axes[-1]
    labels = cross_last.get_xticklabels()
    assert 1 < len(labels) < s and {x.get_fontsize() for x in labels} == {6.0}
    positions = list(cross_last.get_xticks())
    assert [src[int(p)] for p in positions] == ticks(labels)  # thinned, still the right words


# --- training curves -----------------------------------------------------------------------------


def write_metrics(run: Path, lines: list[object]) -> None:
    run.mkdir(parents=True, exist_ok=True)
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    (run / "metrics.jsonl").write_text(text)


METRICS: list[object] = [
    {"step": 3, "epoch": 1, "train_loss": 4.0, "lr": 0.1, "tokens_per_sec": 9.0},
    {"step": 6, "epoch": 1, "train_loss": 3.0, "lr": 0.1, "tokens_per_sec": 9.0},
    {"step": 6, "epoch": 1, "valid_loss": 3.5, "valid_bleu": None},
    {"step": 9, "epoch": 2, "train_loss": 2.0, "lr": 0.1, "tokens_per_sec": 9.0},
    {"step": 9, "epoch": 2, "valid_loss": 2.5, "valid_bleu": 12.5},
    {"step": 12, "epoch": 2, "valid_loss": 2.6, "valid_bleu": 11.0},
    '{"step": 15, "epoch": 3, "train_lo',  # a line cut short by a crash
]


def test_curves_show_losses_and_bleu_with_the_best_marked(tmp_path: Path) -> None:
    run = tmp_path / "r"
    write_metrics(run, METRICS)
    path = plot_training_curves(run)
    assert path == run / "curves.png" and path.read_bytes()[:4] == b"\x89PNG"
    fig = training_curves_figure(read_metrics(run))
    loss_ax, bleu_ax = fig.axes
    lines = {ln.get_label(): ln for ln in loss_ax.get_lines()}
    assert list(lines["train loss"].get_xdata()) == [3, 6, 9]
    assert list(lines["train loss"].get_ydata()) == [4.0, 3.0, 2.0]
    assert list(lines["valid loss"].get_xdata()) == [6, 9, 12]
    bleu = {ln.get_label(): ln for ln in bleu_ax.get_lines()}
    assert list(bleu["valid BLEU"].get_xdata()) == [9, 12]  # the null BLEU is skipped
    assert "best 12.50 at step 9" in bleu
    assert loss_ax.get_xlabel() == bleu_ax.get_xlabel() == "step"


def test_curves_without_validation_have_one_log_scale_panel(tmp_path: Path) -> None:
    records = [{"step": s, "epoch": 1, "train_loss": 5.0 / s} for s in range(1, 40)]
    fig = training_curves_figure(records)  # type: ignore[arg-type]
    (ax,) = fig.axes
    assert ax.get_yscale() == "log"  # 5.0 .. 0.13: a linear axis would hide the late steps
    assert ax.yaxis.get_major_formatter()(0.5, 0) == "0.5"


def test_curves_errors_are_checkpoint_errors(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="run directory not found"):
        plot_training_curves(tmp_path / "none")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"metrics\.jsonl: not found"):
        plot_training_curves(tmp_path / "empty")
    write_metrics(tmp_path / "junk", ["not json", '{"step": 1, "epoch": 1, "lr": 0.1}'])
    with pytest.raises(CheckpointError, match="no loss or BLEU values yet"):
        plot_training_curves(tmp_path / "junk")


def test_training_writes_curves_at_the_end(tmp_path: Path) -> None:
    from nmt.training.command import write_plots  # what nmt train calls when it finishes

    run = tmp_path / "r"
    write_metrics(run, METRICS)
    write_plots(run)
    assert (run / "curves.png").is_file()
    write_plots(tmp_path / "nothing")  # no metrics: no picture, no exception


# --- the commands --------------------------------------------------------------------------------


def test_cli_attention(runs: dict[str, Path], tmp_path: Path) -> None:
    run = runs["transformer"]
    code, out, err = invoke("attention", SENTENCE, "--run", str(run), "--device", "cpu",
                            "--output", str(tmp_path / "x.svg"))
    assert code == 0, err
    assert out == translator_of(run).translate([SENTENCE])[0] + "\n"
    assert (tmp_path / "x.svg").is_file() and f"attention: {tmp_path / 'x.svg'}" in err
    code, _, _ = invoke("attention", SENTENCE, "--run", str(run), "--device", "cpu")
    assert code == 0 and (run / "attention.png").is_file()  # the default place
    code, out, err = invoke("attention", SENTENCE, "--run", str(run), "-o", "x.gif")
    assert code == 2 and out == ""
    assert err.strip() == "error: --output x.gif: expected a file name ending in .png, .svg " \
                          "or .pdf"


def test_cli_translate_with_attention(runs: dict[str, Path], tmp_path: Path) -> None:
    run, path = runs["gru"], tmp_path / "t.pdf"
    code, out, err = invoke("translate", "--run", str(run), "--device", "cpu",
                            "--attention", str(path), SENTENCE)
    assert code == 0, err
    assert out == "c b a\n" and path.read_bytes()[:5] == b"%PDF-"
    code, _, err = invoke("translate", "--run", str(run), "--attention", str(path), "a", "b")
    assert code == 1
    assert err.strip() == "error: --attention: expected exactly one sentence argument to draw"
    code, _, err = invoke("translate", "--run", str(run), "--attention", "t.bmp", "a")
    assert code == 2 and err.strip().startswith("error: --attention t.bmp: expected")


def test_cli_plot(tmp_path: Path) -> None:
    run = tmp_path / "r"
    write_metrics(run, METRICS)
    code, out, _ = invoke("plot", str(run))
    assert code == 0 and out.strip() == str(run / "curves.png")
    code, out, _ = invoke("plot", str(run), "--output", str(tmp_path / "c.svg"))
    assert code == 0 and (tmp_path / "c.svg").is_file()
    code, _, err = invoke("plot", str(tmp_path / "none"))
    assert code == 1 and err.strip() == f"error: {tmp_path / 'none'}: run directory not found"
    # --run, as every command that reads a run takes it; the argument stays for earlier scripts
    (run / "curves.png").unlink()
    code, out, _ = invoke("plot", "--run", str(run))
    assert code == 0 and out.strip() == str(run / "curves.png") and (run / "curves.png").is_file()
    code, _, err = invoke("plot", "--run", str(run), str(run))
    assert code == 1 and err.strip().startswith(f"error: --run {run}: the run is also given")


def test_pictures_need_no_display(tmp_path: Path) -> None:
    """A display-bound backend in the environment and no DISPLAY: still written (no pyplot)."""
    run = tmp_path / "r"
    write_metrics(run, METRICS)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["MPLBACKEND"] = "TkAgg"
    code = ("import sys; from pathlib import Path; "
            "from nmt.pictures.curves import plot_training_curves; "
            "plot_training_curves(Path(sys.argv[1])); "
            "assert 'matplotlib.pyplot' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code, str(run)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (run / "curves.png").is_file()


def test_attention_of_a_sentence_in_capitals_shows_what_the_model_read(
        runs: dict[str, Path], tmp_path: Path) -> None:
    """A natural-text run reads a sentence typed in capitals in sentence case
    (nmt.translation.input_case): its picture draws that reading, under the translation `nmt
    translate` prints."""
    from dataclasses import replace

    natural = replace(translator_of(runs["gru"]), lowercase=False, normalization="natural")
    picture = plot_attention(natural, "A B C", tmp_path / "caps.png")
    tokens, src_tokens, _ = translate_with_attention(
        natural.model, natural.tokenizer, "A b c", lowercase=False, policy="natural")
    assert (picture.src_tokens, picture.tokens) == (src_tokens, tokens)
    assert picture.translation == natural.translate(["A B C"])[0]
    assert picture.translation == natural.translate(["A b c"])[0].upper()
