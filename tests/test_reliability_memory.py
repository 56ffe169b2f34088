"""Memory of translation: decoding batches bounded in tokens (a long line, a big beam)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import invoke
from test_decode import TEXTS, make_run, src_ids, trained_toy

import nmt.decode
from nmt.config import DecodeConfig
from nmt.decode import decode_batches, search_ids
from nmt.loading import load_run
from nmt.models.base import EncoderDecoder
from nmt.translate import Translator

ROOT = Path(__file__).resolve().parent.parent
LONG = " ".join("abcdefgh"[i % 8] for i in range(60))  # 61 tokens with <eos>, under 64 positions


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "toy")


def _one_line(code: int, err: str) -> str:
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


# --- batches bounded in tokens: a long line, a big beam ------------------------------------------


@pytest.mark.parametrize("beam", [1, 4, 1000])
def test_decode_batches_bound_sentences_and_tokens_times_the_beam(beam: int) -> None:
    rng = random.Random(beam)
    lengths = [rng.choice([0, 2, 3, 5, 8, 13]) for _ in range(300)] + [1024, 700]
    rng.shuffle(lengths)
    cfg = DecodeConfig(beam=beam, batch_size=32, max_tokens=512)
    batches = decode_batches(lengths, cfg)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == [i for i, n in enumerate(lengths) if n]  # each non-empty one once
    assert [lengths[i] for i in flat] == sorted((n for n in lengths if n), reverse=True)
    for batch in batches:
        padded = len(batch) * max(lengths[i] for i in batch) * beam
        assert len(batch) <= 32
        assert padded <= 512 or len(batch) == 1  # a sentence over the budget goes alone
    if beam == 1:  # short lines still fill whole batches of sentences
        assert max(len(b) for b in batches) == 32


class _Recorder:
    """Wraps a model's ``encode``: the ``(sentences, padded source width)`` of every batch."""

    def __init__(self, model: EncoderDecoder, monkeypatch: pytest.MonkeyPatch) -> None:
        self.shapes: list[tuple[int, int]] = []
        encode = model.encode

        def recording(src: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            self.shapes.append((src.size(0), src.size(1)))
            return encode(src, *args, **kwargs)

        monkeypatch.setattr(model, "encode", recording)


@pytest.mark.parametrize("arch", ["transformer", "gru"])
@pytest.mark.parametrize("beam", [1, 3])
def test_the_decoder_gets_bounded_batches_with_the_unbounded_outputs(
        arch: str, beam: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """One long line among short ones no longer pads a whole batch to its length; the beam
    divides the sentences per batch. What the model is given is recorded."""
    model = trained_toy(arch)
    ids = [src_ids(t) for t in TEXTS[:20]] + [src_ids(LONG)] + [src_ids(t) for t in TEXTS[20:]]
    unbounded = search_ids(model, ids, DecodeConfig(beam=beam, max_tokens=10**9))
    recorder = _Recorder(model, monkeypatch)
    budget = 96
    bounded = search_ids(model, ids, DecodeConfig(beam=beam, max_tokens=budget))
    assert [h.tokens for h in bounded] == [h.tokens for h in unbounded]
    assert [h.finished for h in bounded] == [h.finished for h in unbounded]
    assert sum(b for b, _ in recorder.shapes) == len(ids)
    for sentences, width in recorder.shapes:
        assert sentences * width * beam <= budget or sentences == 1
    assert (1, 61) in recorder.shapes  # the long line went alone
    assert len(recorder.shapes) > 2  # and the short ones were cut into several batches


def test_translation_streams_use_the_bound_and_the_option(run_dir: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    translator = Translator.from_run(load_run(run_dir, "best", "cpu"), beam=2, max_tokens=64)
    assert translator.cfg.max_tokens == 64 and translator.cfg.beam == 2
    lines = TEXTS[:10] + [LONG] + TEXTS[10:]
    unbounded = Translator.from_run(load_run(run_dir, "best", "cpu"), beam=2,
                                    max_tokens=10**9).translate(lines)
    recorder = _Recorder(translator.model, monkeypatch)
    written: list[str] = []
    translator.translate_stream(iter(lines), written.append)
    assert written == unbounded
    assert all(b * w * 2 <= 64 or b == 1 for b, w in recorder.shapes)
    seen: list[int] = []

    def batches(lengths: list[int], cfg: DecodeConfig) -> list[list[int]]:
        seen.append(cfg.max_tokens)
        return decode_batches(lengths, cfg)

    monkeypatch.setattr(nmt.decode, "decode_batches", batches)
    code, out, _ = invoke("translate", "--run", str(run_dir), "--device", "cpu",
                          "--max-tokens", "8", "--beam", "2", *TEXTS[:5])
    assert code == 0 and out.splitlines() == unbounded[:5] and seen == [8]


@pytest.mark.parametrize("beam", [1, 3])
def test_ctranslate2_batches_are_bounded_alike(run_dir: Path, tmp_path: Path, beam: int) -> None:
    pytest.importorskip("ctranslate2")
    from nmt.export.ct2 import CT2Translator, export_run

    export = export_run(load_run(run_dir, "best", "cpu"), tmp_path / "ct2")
    ids = [src_ids(t) for t in TEXTS[:15]] + [src_ids(LONG)] + [src_ids(t) for t in TEXTS[15:]]
    expected = CT2Translator.from_export(export, beam=beam, max_tokens=10**9).translate_ids(ids)
    bounded = CT2Translator.from_export(export, beam=beam, max_tokens=80)
    calls: list[tuple[int, int]] = []
    engine = bounded.translator

    class Recording:
        def translate_batch(self, tokens: list[list[str]], **kw: Any) -> Any:
            calls.append((len(tokens), max(len(t) for t in tokens) + 1))  # + <eos>
            return engine.translate_batch(tokens, **kw)

    bounded.translator = Recording()
    assert bounded.translate_ids(ids) == expected
    assert sum(n for n, _ in calls) == len(ids)
    assert all(n * width * beam <= 80 or n == 1 for n, width in calls), calls
    assert (1, 61) in calls  # the long line went alone
