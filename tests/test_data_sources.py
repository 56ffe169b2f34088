"""Several sources ([[data.sources]]): mixed by weight, each with its own filters and licence,
recorded with their counts; data.corpus stays the one-source shorthand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.config import SourceConfig, load_config
from nmt.data.cache import cache_key
from nmt.data.prepare import prepare, weighted_shares
from nmt.errors import ConfigError, DataError

ADJ = [("red", "rouge"), ("big", "grand"), ("small", "petit"), ("old", "vieux"),
       ("new", "neuf"), ("blue", "bleu"), ("green", "vert"), ("black", "noir")]
EN = ["I see the {} dog.", "We like the {} house.", "She reads a {} book.", "They want a {} car."]
FR = ["Je vois le chien {}.", "Nous aimons la maison {}.", "Elle lit un livre {}.",
      "Ils veulent une voiture {}."]


def write(prefix: Path, n: int, offset: int, noise: list[tuple[str, str]] = ()) -> str:
    pairs = [(EN[i % 4].format(ADJ[i // 4 % 8][0]) + f" {i + offset}",
              FR[i % 4].format(ADJ[i // 4 % 8][1]) + f" {i + offset}") for i in range(n)]
    pairs += list(noise)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{prefix}.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    Path(f"{prefix}.fr").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return str(prefix)


def config(tmp_path: Path, sources: str, extra: str = "") -> Path:
    path = tmp_path / "mix.toml"
    path.write_text("[data]\nvocab_size = 60\nvalid_frac = 0.1\ntest_frac = 0.1\n"
                    f"langid = false\n{extra}\n{sources}", encoding="utf-8")
    return path


NOISE = [(f"Room {i}.", f"Chambre {i + 1}.") for i in range(10)]  # the digits filter's


def two_sources(tmp_path: Path, weight_b: float) -> Path:
    a = write(tmp_path / "a" / "train", 400, 0, NOISE)
    b = write(tmp_path / "b" / "train", 100, 1000, NOISE[:5])
    return config(tmp_path, f'[[data.sources]]\ncorpus = "{a}"\nlicence = "CC0"\n\n'
                            f'[[data.sources]]\ncorpus = "{b}"\nweight = {weight_b}\n'
                            'name = "bee"\nfilters = "none"\nlicence = "CC BY 4.0"\n',
                  "span_augment = 0.0")  # the pairs counted are the weighted ones only


@pytest.mark.parametrize("weight_b", [3.0, 0.5, 1.0, 2.5])
def test_two_weighted_sources_give_the_intended_proportions(weight_b: float,
                                                             tmp_path: Path) -> None:
    cfg = load_config(two_sources(tmp_path, weight_b))
    p = prepare(cfg.data, tmp_path / "data", log=lambda m: None)
    a, b = p.meta["sources"]
    assert (a["name"], b["name"]) == (str(tmp_path / "a" / "train"), "bee")
    # a's noise went (its filters), b's stayed (filters = "none")
    assert (a["read"], a["kept"], a["filtered"]["digits"]) == (410, 400, 10)
    assert (b["read"], b["kept"], b["filtered"]) == (105, 105, {})
    assert a["train_pairs_weighted"] == a["train_pairs"]
    assert b["train_pairs_weighted"] == round(weight_b * b["train_pairs"])
    train = p.splits["train"]
    assert len(train) == a["train_pairs_weighted"] + b["train_pairs_weighted"]
    numbers = [int(re.findall(r"\d+", x)[0]) for x in train.src_text]
    from_b = sum(n >= 1000 or x.startswith("Room") for n, x in zip(numbers, train.src_text,
                                                                     strict=True))
    assert from_b == b["train_pairs_weighted"]  # b's own pairs, and its noise a filtered out
    # held-out splits are never weighted: each pair once
    for k in ("valid", "test"):
        assert len(set(p.splits[k].src_text)) == len(p.splits[k])
    assert p.identity["sources"][1]["train_pairs_weighted"] == b["train_pairs_weighted"]
    assert p.identity["corpus"]["licence"] == (f"{tmp_path / 'a' / 'train'}: CC0; bee: CC BY 4.0")


def test_the_weighted_sample_is_exact_and_seeded() -> None:
    (whole_a, sample_a), (whole_b, sample_b) = weighted_shares([60, 40], [1.0, 2.5], seed=1)
    assert (whole_a, len(sample_a)) == (1, 0)  # 60 pairs once
    assert whole_b == 2 and len(sample_b) == 20  # 40 twice, then 20 of them once more
    assert len(set(sample_b.tolist())) == 20 and sorted(sample_b) == sample_b.tolist()
    assert 0 <= sample_b.min() and sample_b.max() < 40
    again = weighted_shares([60, 40], [1.0, 2.5], seed=1)
    assert np.array_equal(again[1][1], sample_b)
    assert not np.array_equal(weighted_shares([60, 40], [1.0, 2.5], seed=2)[1][1], sample_b)
    (whole, half), _ = weighted_shares([60, 40], [0.5, 1.0], seed=1)
    assert whole == 0 and len(set(half.tolist())) == 30
    assert weighted_shares([0, 5], [3.0, 1.0], seed=1)[0][0] == 0  # an empty source: nothing


def test_a_pair_in_two_sources_is_kept_once(tmp_path: Path) -> None:
    a = write(tmp_path / "a" / "train", 200, 0)
    b = write(tmp_path / "b" / "train", 50, 0, [("A new one.", "Une nouvelle.")])
    path = config(tmp_path, f'[[data.sources]]\ncorpus = "{a}"\n\n[[data.sources]]\n'
                            f'corpus = "{b}"\nweight = 2\nname = "copy"\n')
    p = prepare(load_config(path).data, tmp_path / "data", log=lambda m: None)
    assert [(s["read"], s["kept"]) for s in p.meta["sources"]] == [(200, 200), (51, 1)]
    assert p.meta["counts"]["duplicates"] == 50
    only = write(tmp_path / "c" / "train", 50, 0)  # nothing but pairs of a: one line
    path = config(tmp_path, f'[[data.sources]]\ncorpus = "{a}"\n\n[[data.sources]]\n'
                            f'corpus = "{only}"\nname = "only"\n')
    with pytest.raises(DataError, match=r"c/train\.en, .*c/train\.fr: no usable en-fr pairs in "
                                        r"50 read \(.*50 duplicates"):
        prepare(load_config(path).data, tmp_path / "data", log=lambda m: None)


def test_the_run_records_its_sources(tmp_path: Path, tiny_data_dir: Path) -> None:
    from conftest import invoke

    path = two_sources(tmp_path, 2.0)
    runs = tmp_path / "runs"
    code, out, err = invoke("train", "--config", str(path), "--runs-dir", str(runs),
                            "--run-name", "mix", "--data-dir", str(tmp_path / "data"),
                            "--set", "model.d_model=16", "--set", "model.d_ff=32",
                            "--set", "model.n_layers=1", "--set", "train.max_steps=2",
                            "--set", "train.eval_sentences=-1", "--set", "train.device=cpu")
    assert code == 0, err
    record = json.loads((runs / "mix" / "corpus.json").read_text())
    assert [s["name"] for s in record["sources"]][1] == "bee"
    assert record["sources"][1]["weight"] == 2.0 and "read" in record["sources"][0]
    saved = load_config(runs / "mix" / "config.toml", saved=True)
    assert saved.data.sources == load_config(path).data.sources


def test_the_cache_key_follows_the_mix_not_the_names() -> None:
    one = load_config(None, ['data.sources=[{corpus="a", weight=2}, {corpus="b"}]']).data
    renamed = load_config(None, ['data.sources=[{corpus="x/a", weight=2, name="A"}, '
                                 '{corpus="b", licence="CC0"}]']).data
    heavier = load_config(None, ['data.sources=[{corpus="a", weight=3}, {corpus="b"}]']).data
    assert cache_key(one, "d") == cache_key(renamed, "d") != cache_key(heavier, "d")
    assert cache_key(load_config(None, []).data, "d") != cache_key(one, "d")


def test_data_corpus_and_data_sources_are_exclusive(tmp_path: Path) -> None:
    path = config(tmp_path, '[[data.sources]]\ncorpus = "a"\n', extra='corpus = "b"')
    with pytest.raises(ConfigError, match="data.corpus and data.sources: expected one"):
        load_config(path)


FIELDS = [f for f in SourceConfig.__dataclass_fields__]
BAD = st.one_of(st.none(), st.just([]), st.just([1]), st.just({"a": 1}), st.integers(-10**20,
                10**20), st.floats(), st.text(max_size=10), st.booleans())


@settings(max_examples=200, deadline=None)
@given(field=st.sampled_from(FIELDS), value=BAD, index=st.sampled_from([0, 1]))
def test_any_value_of_any_source_field_is_a_config_or_one_line(field: str, value: object,
                                                               index: int) -> None:
    """Every field of a source mutated to any type: a config, or one line naming the source's
    field (data.sources[N].KEY), never a traceback."""
    import tomllib

    sources = [{"corpus": "a", "weight": 2.0}, {"corpus": "b", "name": "bee"}]
    if value is None:
        sources[index].pop(field, None)
    else:
        sources[index][field] = value
    try:
        cfg = load_config(None, [f"data.sources={_toml(sources)}"])
    except ConfigError as e:
        msg = str(e)
        assert "\n" not in msg
        assert f"data.sources[{index + 1}]" in msg or "data.sources:" in msg or "--set" in msg
    else:
        assert cfg.data.sources[index].corpus
        assert 0 < cfg.data.sources[index].weight <= 1000
        again = load_config(None, [f"data.sources={_toml([_plain(s) for s in cfg.data.sources])}"])
        assert again.data.sources == cfg.data.sources
        assert tomllib.loads(cfg.to_toml())["data"]["sources"]


def _plain(s: SourceConfig) -> dict[str, object]:
    import dataclasses

    return dataclasses.asdict(s)


def _toml(sources: list[dict[str, object]]) -> str:
    from nmt.toml_files import toml_value as _toml_value

    return _toml_value(sources)


def test_a_weight_that_keeps_no_training_pair_is_refused_naming_the_smallest(
        tmp_path: Path) -> None:
    """weight = 1e-300 would leave the source only in valid and test, its licence listed for a
    model that never saw it: refused, naming the smallest weight that keeps a pair, which
    does."""
    cfg = load_config(two_sources(tmp_path, 1e-300))
    with pytest.raises(ConfigError) as e:
        prepare(cfg.data, tmp_path / "data", log=lambda m: None)
    message = str(e.value)
    found = re.fullmatch(r"data\.sources\[2\]\.weight: 1e-300 x (\d+) training pairs of bee "
                         r"leaves none; expected at least (\S+), which keeps one", message)
    assert found, message
    assert not list((tmp_path / "data").glob("cache/*"))  # nothing left
    smallest = float(found[2])
    assert smallest >= 1 / int(found[1]) and smallest < 1.01 / int(found[1])
    kept = prepare(load_config(two_sources(tmp_path, smallest)).data, tmp_path / "data",
                   log=lambda m: None)
    assert kept.meta["sources"][1]["train_pairs_weighted"] == 1


def test_the_disk_a_training_split_needs_is_said_and_checked_before_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """weight = 1000 (the largest) on a disk that cannot hold the result: refused before the
    split is written, nothing left; the size is said whatever the disk."""
    import shutil

    import nmt.data.prepare as prepare_module

    said: list[str] = []
    cfg = load_config(two_sources(tmp_path, 1000)).data
    real = shutil.disk_usage

    def small_disk(path: str | Path) -> object:
        return real(path)._replace(free=10_000_000)  # 10 MB

    monkeypatch.setattr(prepare_module.shutil, "disk_usage", small_disk)
    with pytest.raises(DataError, match=r"cache/\w+: the cache needs about (\d+(\.\d+)?) MB "
                                        r"\([\d,]+ training pairs\), but 10 MB is free on its "
                                        r"disk; lower the weights of data.sources"):
        prepare(cfg, tmp_path / "data", log=said.append)
    assert not list((tmp_path / "data").glob("cache/*"))
    line = next(m for m in said if m.startswith("training split: "))
    n = int(re.findall(r"[\d,]+", line)[0].replace(",", ""))
    assert n > 80_000  # bee's 80-odd training pairs a thousand times
    monkeypatch.undo()
    said.clear()
    p = prepare(load_config(two_sources(tmp_path, 1.0)).data, tmp_path / "data",
                log=said.append)
    line = next(m for m in said if m.startswith("training split: "))
    size = sum(f.stat().st_size for f in p.cache_dir.iterdir())
    estimate = float(re.findall(r"about ([\d.]+) kB", line)[0]) * 1000
    assert size <= estimate < 3 * size  # conservative, not wildly so
