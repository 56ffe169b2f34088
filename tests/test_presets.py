"""The d2l presets reproduce the textbook recipe on the real corpus (slow: ~1 minute each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nmt.config import load_config
from nmt.data.prepare import prepare
from nmt.evaluate import run_examples
from nmt.runs.loading import load_run
from nmt.training.loop import train
from nmt.translation.translator import Translator

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
    loaded = load_run(run, "last", "cpu")
    translator = Translator.from_run(loaded)
    # Four check sentences are too few to judge a tiny model by: which of several right answers
    # it gives ("go ." -> "va !" or "va doucement !") flips with the CPU's rounding (an AVX-512
    # machine got 4 of 4 from the Transformer preset, an AVX2 one 1 of 4, same code). What the
    # recipe's training does, it must do here: learn its pairs, judged on all of them (measured
    # on AVX2: 42% of the 332 distinct sources word for word, GRU, and 45%, Transformer).
    sources, references = prepare(loaded.config.data, tmp_path / "data",
                                  log=lambda s: None).splits["train"].grouped()
    hyps = translator.translate(sources)
    learned = sum(h in refs for h, refs in zip(hyps, references, strict=True)) / len(sources)
    assert learned >= 0.3, learned
    rows = run_examples(translator)
    assert any(r["hyp"] == r["ref"] for r in rows), rows
