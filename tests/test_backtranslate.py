"""Back-translation: ``nmt backtranslate`` writes aligned files (the monolingual text exactly as
read, and its translation), sampling from the top token is greedy search, and a source declared
``back_translated`` trains with its synthetic side tagged, never held out, never emitted."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from conftest import invoke
from test_train import tiny_config

from nmt.config import DataConfig, SourceConfig
from nmt.data.prepare import prepare
from nmt.data.tokenizers import BT_TAG
from nmt.runs.loading import load_run
from nmt.training.loop import train
from nmt.translation.search import Sampling, search_ids
from nmt.translation.translator import Translator, source_ids

MONO = ["Go.", "", "I won!", "  spaced  out  ", "He ran.", "Hi."] * 3


@pytest.fixture()
def reverse(tiny_data_dir: Path, tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "reverse"
    train(tiny_config("transformer", "train.max_steps=30", "train.eval_every=30"), run,
          data_dir=tiny_data_dir, log=lambda s: None)
    return run


@pytest.mark.parametrize("search", ["greedy", "beam", "sample"])
def test_backtranslate_writes_the_text_as_read_and_its_translation(
        reverse: Path, tmp_path: Path, search: str) -> None:
    mono = tmp_path / "mono.txt"
    mono.write_text("".join(line + "\n" for line in MONO), encoding="utf-8")
    (tmp_path / "bt").mkdir()
    code, out, err = invoke("backtranslate", "--run", str(reverse), "--input", str(mono),
                            "--output", str(tmp_path / "bt" / "news"), "--search", search,
                            "--beam", "3")
    assert code == 0, err
    as_read = (tmp_path / "bt" / "news.en").read_text(encoding="utf-8").split("\n")[:-1]
    synthetic = (tmp_path / "bt" / "news.fr").read_text(encoding="utf-8").split("\n")[:-1]
    assert as_read == MONO  # line for line, exactly as given
    assert len(synthetic) == len(MONO)
    assert all(s == "" for s, m in zip(synthetic, MONO, strict=True) if not m.strip())
    assert f"{len(MONO)} lines" in out
    translator = Translator.from_run(load_run(reverse), beam=3 if search == "beam" else 1)
    if search != "sample":  # what nmt translate gives, line for line
        assert synthetic == translator.translate(MONO)


def test_sampling_from_the_top_token_is_greedy_search_and_a_seed_repeats(reverse: Path) -> None:
    loaded = load_run(reverse)
    cfg = loaded.config.decode
    ids = [source_ids(loaded.tokenizer, s, 100, True)[0] for s in MONO if s.strip()]
    greedy = [h.tokens for h in search_ids(loaded.model, ids, cfg)]
    top1 = [h.tokens for h in search_ids(loaded.model, ids, cfg, sampling=Sampling(1, 7))]
    assert top1 == greedy
    first = [h.tokens for h in search_ids(loaded.model, ids, cfg, sampling=Sampling(0, 3))]
    again = [h.tokens for h in search_ids(loaded.model, ids, cfg, sampling=Sampling(0, 3))]
    assert first == again
    torch.manual_seed(0)  # the global generator plays no part
    assert [h.tokens for h in search_ids(loaded.model, ids, cfg,
                                         sampling=Sampling(0, 3))] == first


@pytest.mark.parametrize(("args", "says"), [
    (["--search", "topk"], "search: expected one of greedy, beam, sample, got 'topk'"),
    (["--input", "missing.txt"], "--input missing.txt: file not found"),
    (["--output", "."], "expected DIR/PREFIX"),
])
def test_bad_backtranslate_options_are_one_line(reverse: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                args: list[str], says: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mono.txt").write_text("Hi.\n")
    given = {"--input": "mono.txt", "--output": "bt", args[0]: args[1]}
    code, _, err = invoke("backtranslate", "--run", str(reverse),
                          *[x for kv in given.items() for x in kv])
    assert code != 0 and says in " ".join(err.split()) and len(err.strip().splitlines()) == 1


def test_seed_and_beam_have_the_bounds_of_the_api_and_of_nmt_translate(reverse: Path) -> None:
    from nmt.config import int_limit

    for args, says in ((["--seed", str(int_limit("train.seed") + 1)], "'--seed'"),
                       (["--beam", "0"], "'--beam'"),
                       (["--beam", str(int_limit("decode.beam") + 1)], "'--beam'")):
        code, _, err = invoke("backtranslate", "--run", str(reverse), "--input", "x",
                              "--output", "bt", *args)
        assert code == 2 and f"Invalid value for {says}" in err, err


@pytest.mark.parametrize("tokenizer", ["word", "sentencepiece"])
def test_a_back_translated_source_is_tagged_in_training_only(tiny_data_dir: Path,
                                                             tmp_path: Path,
                                                             tokenizer: str) -> None:
    synthetic = [(f"Synthetic line {i}.", f"Ligne réelle {i}.") for i in range(80)]
    (tmp_path / "bt.en").write_text("".join(s + "\n" for s, _ in synthetic))
    (tmp_path / "bt.fr").write_text("".join(t + "\n" for _, t in synthetic))
    cfg = DataConfig(tokenizer=tokenizer, vocab_size=120, min_freq=1, valid_frac=0.1,
                     test_frac=0.1, filters="none", langid=False, sources=(
                         SourceConfig(corpus="fra-eng"),
                         SourceConfig(corpus=str(tmp_path / "bt"), back_translated=True)))
    p = prepare(cfg, tiny_data_dir, log=lambda s: None)
    train_src = p.splits["train"].src_text
    tagged = [s for s in train_src if s.startswith(f"{BT_TAG} ")]
    assert sorted(tagged) == sorted(f"{BT_TAG} {s}" for s, _ in synthetic)
    for k in ("valid", "test"):  # synthetic sources are never scored against
        assert not any(BT_TAG in s or s.startswith("Synthetic") for s in p.splits[k].src_text)
    assert not any(BT_TAG in t for split in p.splits.values() for t in split.tgt_text)
    tok = p.tokenizer
    assert BT_TAG in tok.src_tokens(f"{BT_TAG} Synthetic line 3.")  # one piece of its own
    # translation never emits it, whatever the model outputs
    tag = [i for i in tok.encode_tgt(BT_TAG) if tok.tgt_tokens([i]) == [BT_TAG]]
    french = tok.encode_tgt("Ligne réelle 3.")
    assert len(tag) == 1 and tok.decode_tgt(tag + french + tag) == tok.decode_tgt(french)
    # the same sources without the flag: another cache, untagged
    plain = dataclasses.replace(cfg, sources=(cfg.sources[0], dataclasses.replace(
        cfg.sources[1], back_translated=False)))
    q = prepare(plain, tiny_data_dir, log=lambda s: None)
    assert q.cache_dir != p.cache_dir
    assert not any(BT_TAG in s for s in q.splits["train"].src_text)
