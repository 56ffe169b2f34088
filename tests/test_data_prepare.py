"""prepare(): cleaning counts, grouped splits, the cache (hit, rebuild), d2l exactness."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from nmt.config import DataConfig
from nmt.data.batching import collate
from nmt.data.download import CORPUS_SHA256, sha256_file
from nmt.data.prepare import Prepared, cache_key, prepare
from nmt.data.tokenizers import UNK_ID

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
RECIPE = SHARED / "baselines" / "d2l_recipe.py"
CORPUS_ZIP = SHARED / "data" / "fra-eng.zip"
D2L = DataConfig(max_pairs=601, normalization="recipe", lowercase=True, tokenizer="word",
                 joint_vocab=False,
                 min_freq=2, dedup=False, max_words=0, valid_frac=0.0, test_frac=0.0, truncate=10,
                 filters="none", langid=False)


def quiet(msg: str) -> None:
    pass


def check_consistent(p: Prepared) -> None:
    for split in p.splits.values():
        n = len(split)
        assert len(split.src_text) == len(split.tgt_text) == n
        assert split.src_offsets[0] == 0 and split.src_offsets[-1] == len(split.src_ids)
        assert split.src_ids.dtype == np.int32 and split.src_offsets.dtype == np.int64
        for i in range(0, n, max(1, n // 20)):
            assert split.src(i).tolist() == p.tokenizer.encode_src(split.src_text[i])
            assert split.tgt(i).tolist() == p.tokenizer.encode_tgt(split.tgt_text[i])


def test_prepare_counts_splits_and_grouping(tiny_data_dir: Path,
                                            tiny_data_config: DataConfig) -> None:
    messages: list[str] = []
    p = prepare(tiny_data_config, tiny_data_dir, log=messages.append)
    counts = p.meta["counts"]
    # the fake corpus repeats "Go.\tVa !" (a duplicate) and writes "J’ai gagné." both ways
    # (two pairs: the target keeps its apostrophes as written, data.target_apostrophes)
    assert counts["read"] == 970 and counts["duplicates"] == 1 and counts["kept"] == 969
    assert any("dropped 1 duplicate (0.10%)" in m for m in messages)
    assert sum(len(s) for s in p.splits.values()) == 969
    assert p.digest == sha256_file(tiny_data_dir / "fra-eng" / "fra.txt")
    sources = {k: set(s.src_text) for k, s in p.splits.items()}
    assert not (sources["train"] & sources["valid"] or sources["train"] & sources["test"]
                or sources["valid"] & sources["test"])
    assert len(sources["valid"]) == len(sources["test"]) == round(0.1 * 727)
    srcs, refs = p.splits["test"].grouped()
    assert sum(map(len, refs)) == len(p.splits["test"]) and len(srcs) == len(sources["test"])
    assert any(len(r) > 1 for r in refs)  # tu/vous, ils/elles
    check_consistent(p)
    assert p.tokenizer.src_vocab_size == 64


def test_cache_hit_and_changed_config_rebuild(tiny_data_dir: Path,
                                              tiny_data_config: DataConfig) -> None:
    first = prepare(tiny_data_config, tiny_data_dir, log=quiet)
    messages: list[str] = []
    again = prepare(tiny_data_config, tiny_data_dir, log=messages.append)
    assert again.cache_dir == first.cache_dir and messages[-1].startswith("loaded cache")
    for k, split in first.splits.items():
        assert np.array_equal(split.tgt_ids, again.splits[k].tgt_ids)
        assert split.src_text == again.splits[k].src_text
    check_consistent(again)
    # truncation happens at batching time: same cache
    same = dataclasses.replace(tiny_data_config, truncate=5)
    assert prepare(same, tiny_data_dir, log=quiet).cache_dir == first.cache_dir
    changed = dataclasses.replace(tiny_data_config, sp_model_type="bpe")
    rebuilt = prepare(changed, tiny_data_dir, log=messages.append)
    assert rebuilt.cache_dir != first.cache_dir and messages[-1].startswith("prepared in")
    assert sorted(p.name for p in (tiny_data_dir / "cache").iterdir()) == sorted(
        [first.cache_dir.name, rebuilt.cache_dir.name])  # no temporary directories left
    # rebuild=True replaces the cache in place
    forced = prepare(tiny_data_config, tiny_data_dir, log=messages.append, rebuild=True)
    assert forced.cache_dir == first.cache_dir and messages[-1].startswith("prepared in")


def test_cache_key_depends_on_what_changes_the_arrays() -> None:
    cfg = DataConfig()
    assert cache_key(cfg, "a") != cache_key(cfg, "b")
    assert cache_key(cfg, "a") != cache_key(dataclasses.replace(cfg, vocab_size=4000), "a")
    assert cache_key(cfg, "a") == cache_key(dataclasses.replace(cfg, min_freq=5), "a")
    word = dataclasses.replace(cfg, tokenizer="word")
    assert cache_key(word, "a") == cache_key(dataclasses.replace(word, vocab_size=3), "a")
    assert cache_key(word, "a") != cache_key(dataclasses.replace(word, min_freq=5), "a")
    # SentencePiece's sample: in the key, but not for the word tokenizer
    assert cache_key(cfg, "a") != cache_key(dataclasses.replace(cfg, sp_sentences=5 * 10**5), "a")
    assert cache_key(word, "a") == cache_key(dataclasses.replace(word, sp_sentences=5 * 10**5),
                                             "a")
    assert cache_key(cfg, "a") != cache_key(dataclasses.replace(cfg, sp_characters=10**6), "a")
    assert cache_key(word, "a") == cache_key(dataclasses.replace(word, sp_characters=10**6),
                                             "a")
    # every setting that changes the arrays is in the key at every value, its default included
    for changed in (dict(filters="none"), dict(langid=False), dict(valid_size=0),
                    dict(case_forms="upper"), dict(target_apostrophes="straight"),
                    dict(span_augment=0.0)):
        assert dataclasses.replace(cfg, **changed) != cfg, changed  # not the default itself
        assert cache_key(cfg, "a") != cache_key(dataclasses.replace(cfg, **changed), "a"), changed


@pytest.mark.parametrize(("config", "key"), [
    ("configs/demo.toml", "d4bd280621de9f14"),
    ("configs/d2l-gru.toml", "835d23b442841114"),
])
def test_shipped_configs_keep_their_keys(config: str, key: str) -> None:
    """A golden key per shipped config: a change to the key's rule (which rebuilds every cache
    on people's disks) is made on purpose, with KEY_VERSION, and shows here."""
    from nmt.config import load_config

    root = Path(__file__).resolve().parents[1]
    assert cache_key(load_config(root / config).data, "a" * 64) == key


def test_cache_key_has_the_spans_where_the_filters_judge_around_them() -> None:
    cfg = DataConfig()
    assert cache_key(cfg, "a") != cache_key(dataclasses.replace(cfg, spans="none"), "a")
    unfiltered = dataclasses.replace(cfg, filters="none")
    assert cache_key(unfiltered, "a") == cache_key(
        dataclasses.replace(unfiltered, spans="none"), "a")
    word = dataclasses.replace(unfiltered, tokenizer="word")  # SentencePiece settings are moot
    assert cache_key(word, "a") == cache_key(
        dataclasses.replace(word, byte_fallback=False, span_pieces=False), "a")
    assert cache_key(cfg, "a") != cache_key(dataclasses.replace(cfg, byte_fallback=False), "a")


def test_cache_key_has_the_direction_and_the_held_out_files() -> None:
    cfg = DataConfig()
    turned = dataclasses.replace(cfg, source="fr", target="en")
    assert cache_key(turned, "a") != cache_key(cfg, "a")  # fr->en never loads the en->fr cache
    assert cache_key(cfg, "a", {"test": "t"}) != cache_key(cfg, "a")
    assert cache_key(cfg, "a", {"test": "t"}) != cache_key(cfg, "a", {"test": "u"})
    # where the files are is not in the key (their digests are): a moved file keeps its cache
    moved = dataclasses.replace(cfg, corpus="elsewhere/fra-eng.zip")
    assert cache_key(moved, "a") == cache_key(cfg, "a")
    assert cache_key(dataclasses.replace(cfg, character_coverage=0.9995), "a") != cache_key(
        cfg, "a")


def test_damaged_cache_is_rebuilt(tiny_data_dir: Path, tiny_data_config: DataConfig) -> None:
    first = prepare(tiny_data_config, tiny_data_dir, log=quiet)
    array = first.cache_dir / "valid.src_ids.npy"
    (first.cache_dir / "new").write_bytes(array.read_bytes()[:150])  # a truncated array,
    os.replace(first.cache_dir / "new", array)  # replaced: the test has the file mapped
    messages: list[str] = []
    again = prepare(tiny_data_config, tiny_data_dir, log=messages.append)
    assert any("unreadable" in m for m in messages)
    assert np.array_equal(again.splits["valid"].src_ids, first.splits["valid"].src_ids)


def test_word_level_without_held_out_splits(tiny_data_dir: Path) -> None:
    cfg = DataConfig(tokenizer="word", valid_frac=0.0, test_frac=0.0, max_pairs=100,
                     dedup=False, min_freq=2)
    p = prepare(cfg, tiny_data_dir, log=quiet)
    assert len(p.splits["train"]) == 100 and len(p.splits["valid"]) == len(p.splits["test"]) == 0
    assert p.splits["valid"].grouped() == ([], [])
    train = p.splits["train"]
    assert (train.src_ids == UNK_ID).any()  # min_freq 2 on 100 lines leaves rare words out
    check_consistent(p)


@pytest.mark.skipif(not (RECIPE.is_file() and CORPUS_ZIP.is_file()),
                    reason="needs ../shared (the recipe script and the corpus)")
def test_d2l_preset_data_is_the_recipes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("d2l_recipe", RECIPE)
    assert spec and spec.loader
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    # the recipe preprocesses the whole text character by character (seconds); its first 700
    # lines give the same first 601 pairs
    head = "\n".join(recipe.read_text(CORPUS_ZIP).split("\n")[:700])
    src, tgt = recipe.tokenize(recipe.preprocess(head))
    src_vocab, tgt_vocab = recipe.Vocab(src), recipe.Vocab(tgt)
    monkeypatch.delenv("NMT_CORPUS_SHA256", raising=False)
    p = prepare(D2L, tmp_path, source=str(CORPUS_ZIP), log=quiet)
    assert p.digest == CORPUS_SHA256
    tok = p.tokenizer
    assert (tok.src_vocab_size, tok.tgt_vocab_size) == (len(src_vocab), len(tgt_vocab))
    assert (tok.src_vocab_size, tok.tgt_vocab_size) == (184, 201)  # pinned: the recipe's sizes
    assert tok.src_itos == src_vocab.itos and tok.tgt_itos == tgt_vocab.itos
    train = p.splits["train"]
    assert len(train) == len(src) == 601
    batch = collate(train, np.arange(len(train)), truncate=10)
    src_arr, src_len = recipe.build_array(src, src_vocab, 10)
    tgt_arr, tgt_len = recipe.build_array(tgt, tgt_vocab, 10)
    width = batch.src.shape[1]  # padded to the batch's longest, not always to 10
    assert (batch.src == src_arr[:, :width]).all() and (src_arr[:, width:] == 1).all()
    assert (batch.src_lengths == src_len).all() and (batch.tgt_lengths == tgt_len).all()
    assert (batch.tgt_out == tgt_arr[:, :batch.tgt_out.shape[1]]).all()
    # the full policy merges j’ai into j'ai on the target side too where asked: one target
    # word fewer; by default the target keeps its apostrophes as written
    full = prepare(dataclasses.replace(D2L, normalization="full",
                                       target_apostrophes="straight"), tmp_path, log=quiet)
    assert full.tokenizer.tgt_vocab_size == 200
    kept = prepare(dataclasses.replace(D2L, normalization="full"), tmp_path, log=quiet)
    assert kept.tokenizer.tgt_vocab_size == 201


def test_no_stray_files_in_data_dir(tiny_data_dir: Path, tiny_data_config: DataConfig) -> None:
    prepare(tiny_data_config, tiny_data_dir, log=quiet)
    names = {str(p.relative_to(tiny_data_dir)) for p in tiny_data_dir.rglob("*")
             if p.is_file() and "cache" not in p.parts}
    assert names == {os.path.join("fra-eng", "fra.txt"), os.path.join("fra-eng", "_about.txt")}


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS_ZIP.is_file(), reason="needs ../shared/data/fra-eng.zip")
def test_whole_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NMT_CORPUS_SHA256", raising=False)
    p = prepare(DataConfig(), tmp_path, source=str(CORPUS_ZIP), log=quiet)
    counts = p.meta["counts"]
    assert counts["read"] == 167_130
    # every kept pair is in a split, and the training split adds the augmented ones
    added = counts.get("case_augmented", 0) + counts.get("span_augmented", 0)
    assert counts["kept"] + added == sum(len(s) for s in p.splits.values())
    sources = {k: set(s.src_text) for k, s in p.splits.items()}
    n = sum(map(len, sources.values()))
    assert not (sources["train"] & sources["valid"] or sources["train"] & sources["test"]
                or sources["valid"] & sources["test"])
    # 2% of the distinct sources each, counted before augmentation added its new sources
    assert len(sources["valid"]) == len(sources["test"])
    assert abs(len(sources["valid"]) - 0.02 * n) <= 0.02 * added + 1
    tok = p.tokenizer
    assert tok.joint and tok.src_vocab_size == 8000
    test = p.splits["test"]
    for i in range(0, len(test), 7):  # SentencePiece round trip on unseen real text
        assert tok.decode_tgt(test.tgt(i).tolist()) == test.tgt_text[i]
    assert np.count_nonzero(test.tgt_ids == UNK_ID) / len(test.tgt_ids) < 1e-3
    check_consistent(p)
    messages: list[str] = []
    again = prepare(DataConfig(), tmp_path, log=messages.append)
    assert messages[-1].startswith("loaded cache") and len(again.splits["train"]) == len(
        p.splits["train"])
