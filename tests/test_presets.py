"""The d2l presets reproduce the textbook recipe on the real corpus (slow: ~1 minute each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nmt.config import load_config
from nmt.evaluate import run_examples
from nmt.loading import load_run
from nmt.train import train
from nmt.translate import Translator

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "data" / "fra-eng.zip"


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.is_file(), reason="needs ../shared/data/fra-eng.zip")
@pytest.mark.parametrize("preset", ["d2l-gru", "d2l-transformer"])
def test_recipe_presets_translate_the_check_sentences(
    preset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NMT_DATA_MIRROR", str(CORPUS))
    cfg = load_config(ROOT / "configs" / f"{preset}.toml")
    run = tmp_path / preset
    result = train(cfg, run, data_dir=tmp_path / "data", log=lambda s: None)
    # The recipe reports loss 0.020 / 0.029 as per-token CE / 10 over the whole run; ours is
    # true per-token CE, averaged over all epochs as the recipe does.
    assert result.train_loss < 1.0
    rows = run_examples(Translator.from_run(load_run(run, "last", "cpu")))
    exact = [r["src"] for r in rows if r["hyp"] == r["ref"]]
    assert len(exact) >= 3, rows
