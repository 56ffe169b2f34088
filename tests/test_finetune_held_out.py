"""A continued model is measured honestly: its training split holds no source of its parent's
valid or test split (nor of its own), the parent's scores on those sets before training stand
in its log beside its own, and it is scored with its own tokenizer on its own cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import invoke
from test_train import tiny_config

import nmt.data.prepare
from nmt.data.prepare import prepare
from nmt.runs.loading import load_run, run_tokenizer
from nmt.runs.records import read_excluded
from nmt.training.loop import train


@pytest.fixture()
def parent(tiny_data_dir: Path, tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "parent"
    train(tiny_config("transformer", "train.max_steps=4", "train.eval_every=2"), run,
          data_dir=tiny_data_dir, log=lambda s: None)
    return run


def parent_held_out(parent: Path, data_dir: Path) -> tuple[set[str], set[str]]:
    """The sources of the parent's valid split, and of its valid and test splits."""
    prepared = prepare(load_run(parent).config.data, data_dir, log=lambda s: None,
                       tokenizer=run_tokenizer(parent))
    valid, test = (prepared.splits[n] for n in ("valid", "test"))
    return set(valid.src_text), set(valid.src_text) | set(test.src_text)


def overlapping_child(parent: Path, data_dir: Path, tmp_path: Path, *sets: str,
                      name: str = "child", from_: Path | None = None) -> tuple[int, str, str]:
    """A child trained on a corpus that holds every held-out pair of its parent, a share of
    the parent's training pairs and new pairs (``from_``: continuing that, the parent's
    export, instead)."""
    prepared = prepare(load_run(parent).config.data, data_dir, log=lambda s: None,
                       tokenizer=run_tokenizer(parent))
    pairs = [(s, t) for n in ("valid", "test", "train")
             for s, t in zip(prepared.splits[n].src_text, prepared.splits[n].tgt_text,
                             strict=True)][:300]
    pairs += [(f"The zebra number {i} runs.", f"Le zèbre numéro {i} court.") for i in range(60)]
    (tmp_path / "new.en").write_text("".join(s + "\n" for s, _ in pairs))
    (tmp_path / "new.fr").write_text("".join(t + "\n" for _, t in pairs))
    args = [x for s in (f"data.corpus={tmp_path / 'new'}", "data.langid=false",
                        "data.span_augment=0",  # the training pairs counted are the split's
                        "train.max_steps=2", "train.eval_every=2", *sets)
            for x in ("--set", s)]
    return invoke("train", "--from", str(from_ or parent), "--runs-dir", str(tmp_path / "runs"),
                  "--run-name", name, "--data-dir", str(data_dir), *args)


def test_a_child_never_trains_on_what_measures_it(
        parent: Path, tmp_path: Path, tiny_data_dir: Path) -> None:
    code, out, err = overlapping_child(parent, tiny_data_dir, tmp_path)
    assert code == 0, err
    child = tmp_path / "runs" / "child"
    parent_valid, parent_held = parent_held_out(parent, tiny_data_dir)
    cfg, tok = load_run(child).config.data, run_tokenizer(child)
    # the corpus overlaps heavily: a split of it that leaves nothing out trains on them
    plain = prepare(cfg, tiny_data_dir, log=lambda s: None, tokenizer=tok)
    assert len(set(plain.splits["train"].src_text) & parent_held) > 50
    # the child's own cache: the one its training built, keyed apart from the plain one
    said: list[str] = []
    mine = prepare(cfg, tiny_data_dir, log=said.append, tokenizer=tok,
                   excluded=read_excluded(child))
    assert said == [f"loaded cache {mine.cache_dir}"] and mine.cache_dir != plain.cache_dir
    trained = set(mine.splits["train"].src_text)
    own_held = set(mine.splits["valid"].src_text) | set(mine.splits["test"].src_text)
    assert trained and not trained & parent_held and not trained & own_held
    assert not parent_valid & trained  # the parent_valid set the log scores
    # the held-out splits are those of the same data with nothing left out
    assert own_held == set(plain.splits["valid"].src_text) | set(plain.splits["test"].src_text)
    # said, and recorded in the run's corpus record
    dropped = len(plain.splits["train"]) - len(mine.splits["train"])
    assert (f"{dropped:,} training pairs whose source is in the parent's valid or test split "
            "dropped from training") in out + err
    record = json.loads((child / "corpus.json").read_text())["excluded"]
    assert record["sources"] == len(parent_held) and record["training_pairs"] == dropped > 0
    # the parent's own scores on both sets before training, beside the child's
    records = [json.loads(line) for line in (child / "metrics.jsonl").read_text().splitlines()]
    start = [r for r in records if "at_start" in r]
    assert len(start) == 1 and start[0]["step"] == 0
    assert set(start[0]["at_start"]) == {"valid_loss", "valid_bleu", "parent_valid_loss",
                                         "parent_valid_bleu"}
    assert "before training: valid loss" in (child / "train.log").read_text()
    scored = [r for r in records if "parent_valid_bleu" in r]
    code, table, err = invoke("runs", "--runs-dir", str(tmp_path / "runs"))
    assert code == 0, err
    shown = " ".join(table.split())
    assert (f"child continues parent: BLEU on its valid split "
            f"{start[0]['at_start']['parent_valid_bleu']:.2f} before training, "
            f"{scored[-1]['parent_valid_bleu']:.2f} at step 2") in shown


def test_a_resumed_child_keeps_its_cache(parent: Path, tmp_path: Path,
                                         tiny_data_dir: Path) -> None:
    code, _, err = overlapping_child(parent, tiny_data_dir, tmp_path)
    assert code == 0, err
    code, out, err = invoke("train", "--resume", "--run-name", "child", "--runs-dir",
                            str(tmp_path / "runs"), "--data-dir", str(tiny_data_dir),
                            "--set", "train.max_steps=3")
    assert code == 0, err
    assert "loaded cache" in out + err and "prepared in" not in out + err
    records = (tmp_path / "runs" / "child" / "metrics.jsonl").read_text()
    assert records.count("at_start") == 1  # the parent's scores are recorded once


def test_a_child_is_scored_with_its_own_tokenizer_and_cache(
        parent: Path, tmp_path: Path, tiny_data_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = overlapping_child(parent, tiny_data_dir, tmp_path)
    assert code == 0, err
    child = tmp_path / "runs" / "child"

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a tokenizer was trained")

    monkeypatch.setattr(nmt.data.prepare, "train_tokenizer", refused)
    bleu = ("bleu", "--run", str(child), "--data-dir", str(tiny_data_dir))
    outputs = []
    for _ in range(2):
        code, out, err = invoke(*bleu)
        assert code == 0, err
        assert "loaded cache" in err and "prepared in" not in out + err
        outputs.append(json.loads((child / "scores.test.json").read_text())["multi"])
    assert outputs[0] == outputs[1]
    # the cache gone: built again with the run's tokenizer, said, the same scores
    cache = prepare(load_run(child).config.data, tiny_data_dir, log=lambda s: None,
                    tokenizer=run_tokenizer(child), excluded=read_excluded(child)).cache_dir
    shutil.rmtree(cache)
    code, out, err = invoke(*bleu)
    assert code == 0, err
    assert "building it with the run's tokenizer" in err and "prepared in" in err
    assert json.loads((child / "scores.test.json").read_text())["multi"] == outputs[0]
    code, out, err = invoke(*bleu)
    assert code == 0 and "prepared in" not in out + err, err


def test_a_damaged_record_of_left_out_sources_is_one_line(
        parent: Path, tmp_path: Path, tiny_data_dir: Path) -> None:
    code, _, err = overlapping_child(parent, tiny_data_dir, tmp_path)
    assert code == 0, err
    child = tmp_path / "runs" / "child"
    (child / "excluded_sources.txt").write_text("# the parent's split\nnot a hash\n")
    code, _, err = invoke("bleu", "--run", str(child), "--data-dir", str(tiny_data_dir))
    said = " ".join(err.split())
    assert code != 0 and "Traceback" not in err and len(err.strip().splitlines()) <= 3
    assert f"{child / 'excluded_sources.txt'}: unreadable" in said


@pytest.mark.parametrize("through", ["run", "export"])
def test_no_generation_trains_on_what_measured_an_earlier_one(
        parent: Path, tmp_path: Path, tiny_data_dir: Path, through: str) -> None:
    """A grandchild's training split holds no source its grandparent held out either: a child
    records what it left out, passes it on, and an export with its checkpoint carries it."""
    code, _, err = overlapping_child(parent, tiny_data_dir, tmp_path)
    assert code == 0, err
    child = tmp_path / "runs" / "child"
    _, grandparent_held = parent_held_out(parent, tiny_data_dir)
    inherited = read_excluded(child)
    assert inherited is not None
    given = child
    if through == "export":
        given = tmp_path / "child-ct2"
        code, _, err = invoke("export", "--run", str(child), "--to", "ctranslate2", "--output",
                              str(given), "--no-score", "--with-checkpoint")
        assert code == 0, err
        copied = read_excluded(given / "nmt-run")
        assert copied is not None and (copied.hashes == inherited.hashes).all()
    # the grandparent's held-out pairs in the grandchild's corpus again
    code, out, err = overlapping_child(parent, tiny_data_dir, tmp_path, name="grandchild",
                                       from_=given)
    assert code == 0, err
    grandchild = tmp_path / "runs" / "grandchild"
    excluded = read_excluded(grandchild)
    assert excluded is not None and "ancestors" in excluded.what
    assert set(inherited.hashes) <= set(excluded.hashes)  # the grandparent's, passed down
    mine = prepare(load_run(grandchild).config.data, tiny_data_dir, log=lambda s: None,
                   tokenizer=run_tokenizer(grandchild), excluded=excluded)
    assert not set(mine.splits["train"].src_text) & grandparent_held
