"""A run's own data is read where the run was trained from: ``nmt bleu``, ``nmt export``'s
scoring and ``nmt train --resume`` without ``--data-dir`` load the cache of the data directory
the run recorded, instead of building the whole cache again in ``data/`` (hours for a large
corpus); the recorded directory never leaves the machine in an export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import invoke

from nmt.config import DataConfig, SourceConfig
from nmt.data.corpus_specs import anchored
from nmt.runs.layout import CORPUS_FILE, EXCLUDED_FILE
from nmt.runs.records import data_dir_for, write_corpus_record, write_portable_records

TINY = ["data.tokenizer=sentencepiece", "data.vocab_size=40", "data.langid=false",
        "data.valid_frac=0.1", "data.test_frac=0.1", "model.d_model=16", "model.n_layers=1",
        "model.d_ff=32", "model.n_heads=2", "train.batch_size=32", "train.max_steps=2",
        "train.eval_every=2", "train.eval_sentences=-1", "train.device=cpu", "decode.beam=1"]


def corpus(root: Path) -> Path:
    words = ["zebra", "cat", "house", "river"]
    pairs = [(f"The {w} number {i} runs.", f"Le {w} numéro {i} court.")
             for i in range(40) for w in words]
    (root / "mine.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (root / "mine.fr").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return root / "mine"


def test_the_data_directory_given_then_the_environments_then_the_runs_then_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NMT_DATA_DIR", raising=False)
    run, trained_from = tmp_path / "run", tmp_path / "big-disk" / "data"
    run.mkdir()
    trained_from.mkdir(parents=True)
    assert data_dir_for(run, None) == Path("data")  # a run made before it recorded one
    write_corpus_record(run, {"corpus": {"sha256": "x"}}, trained_from)
    assert data_dir_for(run, None) == trained_from.resolve()
    assert data_dir_for(run, tmp_path / "given") == tmp_path / "given"
    assert data_dir_for(None, None) == Path("data")  # not a run's own data
    monkeypatch.setenv("NMT_DATA_DIR", str(tmp_path / "env"))
    assert data_dir_for(run, None) == tmp_path / "env"
    monkeypatch.delenv("NMT_DATA_DIR")
    trained_from.rmdir()  # moved away since: the default, where it will be built
    assert data_dir_for(run, None) == Path("data")


def test_a_run_is_scored_resumed_and_used_from_any_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trained in its folder with relative paths (as the README shows) and ``--data-dir``
    elsewhere; then used from another folder without either: each command reads the files and
    the cache it was trained on (before: ``mine.en: file not found``, ``data.glossary
    terms.txt: file not found``, or the whole cache built again in ``data/``)."""
    monkeypatch.delenv("NMT_DATA_DIR", raising=False)
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    corpus(home)
    (home / "terms.txt").write_text("Zebra\n", encoding="utf-8")
    config = Path("configs/demo.toml").resolve()
    sets = [x for s in TINY for x in ("--set", s)]
    monkeypatch.chdir(home)
    code, _, err = invoke("train", "--config", str(config), "--runs-dir", "runs", "--run-name",
                          "r", "--data-dir", str(tmp_path / "cache-dir"), "--set",
                          'data.corpus="mine"', "--set", 'data.glossary="terms.txt"', *sets)
    assert code == 0, err
    monkeypatch.chdir(elsewhere)  # no data/, no mine.en, no terms.txt here
    run = str(home / "runs" / "r")
    code, out, err = invoke("bleu", "--run", run)
    assert code == 0, err
    assert f"loaded cache {tmp_path / 'cache-dir' / 'cache'}" in out + err
    code, out, err = invoke("translate", "--run", run, "The Zebra runs.")
    assert code == 0, err
    code, out, err = invoke("train", "--resume", "--runs-dir", str(home / "runs"),
                            "--run-name", "r", "--set", "train.max_steps=3")
    assert code == 0, err
    assert f"loaded cache {tmp_path / 'cache-dir' / 'cache'}" in out + err
    assert not (elsewhere / "data").exists()
    saved = (home / "runs" / "r" / "config.toml").read_text()  # as the user wrote it
    assert 'corpus = "mine"' in saved and 'glossary = "terms.txt"' in saved


def test_a_child_keeps_its_parents_held_out_sentences_from_any_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``nmt train --from PARENT`` from another folder than the parent's: the parent's data
    (relative paths) is found where it was trained, so its valid and test sentences stay out of
    the child's training split (before: "the parent's data cannot be prepared here", and they
    went into it)."""
    monkeypatch.delenv("NMT_DATA_DIR", raising=False)
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    corpus(home)
    config = Path("configs/demo.toml").resolve()
    sets = [x for s in TINY for x in ("--set", s)]
    monkeypatch.chdir(home)
    code, _, err = invoke("train", "--config", str(config), "--runs-dir", "runs", "--run-name",
                          "parent", "--data-dir", "cache-dir", "--set", 'data.corpus="mine"',
                          *sets)
    assert code == 0, err
    monkeypatch.chdir(elsewhere)
    code, out, err = invoke("train", "--from", str(home / "runs" / "parent"), "--runs-dir",
                            "runs", "--run-name", "child", "--set",
                            f'data.corpus="{home / "mine"}"', *sets)
    assert code == 0, err
    assert "cannot be prepared here" not in out + err
    assert (elsewhere / "runs" / "child" / EXCLUDED_FILE).is_file()


def test_relative_paths_are_anchored_where_they_name_something(tmp_path: Path) -> None:
    (tmp_path / "mydata").mkdir()
    for name in ("mydata/train.en.gz", "mydata/train.fr", "pairs.tsv", "terms.txt",
                 "valid.tmx"):
        (tmp_path / name).write_text("x")
    data = DataConfig(corpus="mydata/train", valid="valid.tmx", test="missing.tmx",
                      glossary="terms.txt",
                      sources=(SourceConfig(corpus="pairs.tsv"), SourceConfig(corpus="deu-eng"),
                               SourceConfig(corpus="fra-eng"), SourceConfig(corpus="/abs/x"),
                               SourceConfig(corpus="https://example.org/d-en_fr.argosdata")))
    out = anchored(data, tmp_path)
    assert out.corpus == str(tmp_path / "mydata" / "train")  # aligned files by prefix
    assert (out.valid, out.glossary) == (str(tmp_path / "valid.tmx"),
                                         str(tmp_path / "terms.txt"))
    assert out.test == "missing.tmx"  # names nothing there: its error says so, as before
    assert [s.corpus for s in out.sources] == [  # names and addresses stay as written
        str(tmp_path / "pairs.tsv"), "deu-eng", "fra-eng", "/abs/x",
        "https://example.org/d-en_fr.argosdata"]
    (tmp_path / "deu-eng.en").write_text("x")  # a pair name is read as one all the same
    assert anchored(DataConfig(corpus="deu-eng"), tmp_path).corpus == "deu-eng"


def test_an_exported_run_copy_records_no_data_directory(tmp_path: Path) -> None:
    run, dest = tmp_path / "run", tmp_path / "copy"
    run.mkdir()
    dest.mkdir()
    write_corpus_record(run, {"corpus": {"sha256": "x"}}, tmp_path / "secret-data")
    write_portable_records(run, "best.pt", dest)
    record = json.loads((dest / CORPUS_FILE).read_text())
    assert "data_dir" not in record and "secret-data" not in json.dumps(record)
