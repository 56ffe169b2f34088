"""Text of any script in pictures: right-to-left text in visual order and joined, dollar signs
kept literal, fonts that have the characters, one warning for what no font has. The fonts are
matplotlib's own DejaVu files (monkeypatched in as "installed"), so the results do not depend
on what the machine has installed."""

from __future__ import annotations

import sys
import unicodedata
import warnings
from pathlib import Path

import matplotlib
import pytest
import torch

from nmt.pictures import text as plot_text
from nmt.pictures.attention import ARROW, attention_figure
from nmt.pictures.curves import plot_training_curves, save_figure
from nmt.pictures.text import Font, display, display_parts, font_families, visual_order

FONTS = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
SANS = Font("DejaVu Sans", str(FONTS / "DejaVuSans.ttf"))  # has Hebrew and Arabic
SERIF = Font("DejaVu Serif", str(FONTS / "DejaVuSerif.ttf"))  # has neither
MONO = Font("DejaVu Sans Mono", str(FONTS / "DejaVuSansMono.ttf"))  # Arabic, no Hebrew
HEBREW, ARABIC = "שלום", "سلام"  # shalom, salam
# سلام shaped and in visual order: meem (isolated), lam-alef (final), seen (initial).
ARABIC_VISUAL = "\ufee1\ufefc\ufeb3"


@pytest.fixture
def fonts(monkeypatch: pytest.MonkeyPatch) -> list[Font]:
    """The machine's fonts as the module sees them: DejaVu Sans by default, then Mono and Sans
    installed (no CJK font, whatever the machine has). Returned for tests to change."""
    installed = [MONO, SANS]
    monkeypatch.setattr(plot_text, "default_font", lambda: SANS)
    monkeypatch.setattr(plot_text, "installed_fonts", lambda: installed)
    return installed


def drawn(text: str) -> list[str]:
    """What matplotlib draws for ``text``, left to right (matplotlib's own layout, which is
    private API; format characters, which draw nothing, left out)."""
    from matplotlib import _text_helpers
    from matplotlib.font_manager import get_font

    return [item.char for item in _text_helpers.layout(text, get_font(SANS.path))
            if unicodedata.category(item.char[0]) != "Cf"]


def drawn_glyphs(text: str) -> list[int]:
    from matplotlib import _text_helpers
    from matplotlib.font_manager import get_font

    return [getattr(item, "glyph_index", None) or item.glyph_idx  # before matplotlib 3.11
            for item in _text_helpers.layout(text, get_font(SANS.path))]


# --- the string ---------------------------------------------------------------------------------


def test_visual_order_reverses_hebrew_and_joins_arabic() -> None:
    assert visual_order(HEBREW) == "םולש"  # the letters reversed
    assert visual_order(ARABIC) == ARABIC_VISUAL  # presentation forms U+FE70..U+FEFF, reversed
    assert visual_order("مرحبا") == "\ufe8e\ufe92\ufea3\ufeae\ufee3"  # marhaba
    assert visual_order(f"hello {HEBREW} world") == "hello םולש world"  # a Latin line keeps
    assert visual_order("שלום 123") == "123 םולש"  # its direction; numbers read left to right


@pytest.mark.parametrize("bidi", [False, True])
def test_display_leaves_other_scripts_alone(monkeypatch: pytest.MonkeyPatch, bidi: bool) -> None:
    monkeypatch.setattr(plot_text, "layout_does_bidi", lambda: bidi)
    for text in ("The cat.", "Кошка.", "猫です。", "고양이", "<eos>", "▁chat"):
        assert display(text) == text
    assert display("$$ costs $5") == r"\$\$ costs \$5"  # never mathtext
    assert plot_text.width_in_chars("日本 ab") == pytest.approx(1.6 * 2 + 3)  # CJK: full width


def test_display_puts_rtl_in_visual_order_unless_matplotlib_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(plot_text, "layout_does_bidi", lambda: False)  # matplotlib < 3.11
    assert display(HEBREW) == "םולש" and display(ARABIC) == ARABIC_VISUAL
    assert display("שלום $5") == r"\$5 םולש"  # escaped after reordering
    monkeypatch.setattr(plot_text, "layout_does_bidi", lambda: True)  # libraqm does it
    assert display(HEBREW) == HEBREW and display(ARABIC) == ARABIC


def test_matplotlib_draws_display_as_written() -> None:
    """Whichever matplotlib is installed, what it draws left to right is the visual order:
    reordering twice (ours and libraqm's) or never would put the letters back to front."""
    assert drawn(display(HEBREW)) == list("םולש")
    from matplotlib.font_manager import get_font

    glyphs = drawn_glyphs(display(ARABIC))
    index = get_font(SANS.path).get_char_index
    assert len(glyphs) == 3  # lam and alef drawn as one ligature
    assert glyphs[0] in (index(0x0645), index(0xFEE1))  # meem, isolated (the same glyph)
    assert glyphs[1:] == [index(0xFEFC), index(0xFEB3)]  # lam-alef final, seen initial
    # The sentence, then the arrow, then the translation, left to right.
    line = drawn(display_parts([f"{HEBREW} עולם", "hello"], ARROW))
    assert "".join(line) == f"םלוע םולש{ARROW}hello"


def test_text_without_rtl_imports_no_bidi_library(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("bidi", "arabic_reshaper"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    display("The cat, Кошка, 猫")
    display_parts(["a", "b"], ARROW)
    assert "bidi" not in sys.modules and "arabic_reshaper" not in sys.modules


# --- the fonts ----------------------------------------------------------------------------------


def test_the_default_font_alone_when_it_has_every_character(fonts: list[Font]) -> None:
    said: list[str] = []
    assert font_families(["Hello", "Кошка", HEBREW, ARABIC, "→ <eos>\n"], said.append) == [
        "DejaVu Sans"]
    assert said == []


def test_fallback_fonts_are_the_ones_with_the_missing_characters(
    monkeypatch: pytest.MonkeyPatch, fonts: list[Font]
) -> None:
    monkeypatch.setattr(plot_text, "default_font", lambda: SERIF)
    said: list[str] = []
    # Arabic alone: Mono has it (and comes first); Hebrew too: Sans has both, Mono is not needed.
    assert font_families(["a", ARABIC], said.append) == ["DejaVu Serif", "DejaVu Sans Mono"]
    assert font_families([HEBREW, ARABIC], said.append) == ["DejaVu Serif", "DejaVu Sans"]
    assert said == []


def test_no_font_with_a_character_is_one_warning_naming_it(fonts: list[Font]) -> None:
    said: list[str] = []
    texts = ["日本語", "\ue000", "ሰላም", "日本", HEBREW]  # CJK, private use, Ethiopic
    assert font_families(texts, said.append, "x.png") == ["DejaVu Sans"]
    (line,) = said
    assert line.startswith("warning: x.png: no installed font has U+120B ላ (Ethiopic), "
                           "U+65E5 日 (Han), U+E000 and 4 more; drawn as boxes")
    assert "fonts-noto-cjk and fonts-noto-core" in line and "\n" not in line
    said.clear()
    font_families(["日本"], said.append)
    assert "fonts-noto-cjk," in said[0] and "fonts-noto-core" not in said[0]


def test_fallback_fonts_are_used_when_drawn(
    monkeypatch: pytest.MonkeyPatch, fonts: list[Font], tmp_path: Path
) -> None:
    """The family list reaches matplotlib: drawn with a default font without Hebrew, the
    Hebrew comes from the fallback (no glyph is missing); without the list it would be."""
    from matplotlib.figure import Figure

    monkeypatch.setitem(matplotlib.rcParams, "font.family", ["DejaVu Serif"])
    monkeypatch.setattr(plot_text, "default_font", lambda: SERIF)

    def draw(fit: bool) -> list[str]:
        fig = Figure()
        fig.suptitle(display(HEBREW))
        if fit:
            plot_text.fit_fonts(fig, pytest.fail)
            assert fig._suptitle.get_fontfamily() == ["DejaVu Serif", "DejaVu Sans"]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig.savefig(tmp_path / "f.png")
        return [str(w.message) for w in caught if "Glyph" in str(w.message)]

    assert draw(fit=False)  # DejaVu Serif has no Hebrew
    assert draw(fit=True) == []


# --- the pictures -------------------------------------------------------------------------------


def test_attention_of_arabic_and_cjk_is_written_with_one_warning(
    fonts: list[Font], tmp_path: Path
) -> None:
    src = [ARABIC, "مرحبا", HEBREW, "$$", "<eos>"]
    tgt = ["日本", "語", "$", "<eos>"]
    fig = attention_figure(tgt, src, {"cross": torch.rand(1, 1, len(tgt), len(src))},
                           title=display_parts([f"{ARABIC} $5 $6", "日本語"], ARROW))
    said: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = save_figure(fig, tmp_path / "a.png", warn=said.append)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [str(w.message) for w in caught] == []  # no "Glyph missing" per character
    (line,) = said
    assert line.startswith(f"warning: {path}: no installed font has U+65E5 日 (Han), ")
    (ax,) = [a for a in fig.axes if a.images]
    assert [t.get_text() for t in ax.get_xticklabels()] == [display(t) for t in src]


def test_curves_of_a_language_pair_run(fonts: list[Font], tmp_path: Path) -> None:
    """The curves draw no corpus text: the run's name is the only text not nmt's own."""
    said: list[str] = []
    for name in ("ja-en", "עברית"):
        run = tmp_path / name
        run.mkdir()
        (run / "metrics.jsonl").write_text('{"step": 3, "train_loss": 2.0}\n')
        path = plot_training_curves(run, warn=said.append)
        assert path.read_bytes()[:4] == b"\x89PNG"
    assert said == []
    plot_training_curves(tmp_path / "ja-en", tmp_path / "日本.svg", warn=said.append)
    assert said == []  # the file name is not drawn
