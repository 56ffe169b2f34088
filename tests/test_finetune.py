"""nmt train --from RUN: the parent's model and tokenizer on new data, its weights as the start,
a new optimizer and step count, the parent recorded; what would change the model or the
tokenizer is refused in one line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from conftest import invoke
from test_train import tiny_config

from nmt.runs.checkpoint import load_checkpoint
from nmt.runs.loading import load_run, run_tokenizer
from nmt.training.loop import train


@pytest.fixture()
def parent(tiny_data_dir: Path, tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "parent"
    train(tiny_config("transformer", "train.max_steps=4", "train.eval_every=2"), run,
          data_dir=tiny_data_dir, log=lambda s: None)
    return run


def new_corpus(tmp_path: Path) -> str:
    """In-domain pairs the parent never saw, with words its vocabulary does not have."""
    pairs = [(f"The zebra number {i} runs.", f"Le zèbre numéro {i} court.") for i in range(60)]
    (tmp_path / "new.en").write_text("".join(s + "\n" for s, _ in pairs))
    (tmp_path / "new.fr").write_text("".join(t + "\n" for _, t in pairs))
    return str(tmp_path / "new")


def continue_(parent: Path, tmp_path: Path, tiny_data_dir: Path, *sets: str,
              name: str = "child") -> tuple[int, str, str]:
    args = [x for s in ("train.eval_sentences=-1", f"data.corpus={new_corpus(tmp_path)}",
                        "data.langid=false", *sets) for x in ("--set", s)]
    return invoke("train", "--from", str(parent), "--runs-dir", str(tmp_path / "runs"),
                  "--run-name", name, "--data-dir", str(tiny_data_dir), *args)


def test_the_child_starts_from_the_parents_model_on_its_tokenizer(
        parent: Path, tmp_path: Path, tiny_data_dir: Path) -> None:
    code, _, err = continue_(parent, tmp_path, tiny_data_dir, "train.lr=0",
                             "train.max_steps=3", "train.eval_every=3")
    assert code == 0, err
    child = tmp_path / "runs" / "child"
    # the new corpus is encoded with the parent's tokenizer (its own would be other words)
    assert run_tokenizer(child).digest() == run_tokenizer(parent).digest()
    # lr 0: the child's weights are the parent's, so it started from them
    theirs = load_run(parent, "best").model.state_dict()
    mine = load_checkpoint(child / "checkpoints" / "last.pt")["model"]
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    # a new optimizer and step count
    assert load_checkpoint(child / "checkpoints" / "last.pt")["progress"]["step"] == 3
    record = json.loads((child / "parent.json").read_text())
    best = parent / "checkpoints" / "best.pt"
    ancestors = record.pop("ancestors")  # what the child's card inherits: the parent alone
    assert [a["run"] for a in ancestors] == ["parent"] and ancestors[0]["data"][0]["name"]
    assert record == {"run": "parent", "checkpoint": "best.pt",
                      "step": load_checkpoint(best)["progress"]["step"],
                      "sha256": hashlib.sha256(best.read_bytes()).hexdigest(),
                      "data": load_run(parent).config.to_dict()["data"]}
    # validated on the new data and on the parent's (logged, not what chooses best.pt)
    records = [json.loads(line) for line in (child / "metrics.jsonl").read_text().splitlines()]
    scored = [r for r in records if "valid_loss" in r]
    assert scored and all(r["parent_valid_loss"] > 0 and r["valid_loss"] > 0 for r in scored)
    assert all("parent_valid_bleu" in r for r in scored)
    # it learns the new data from there, and resumes on the parent's tokenizer
    code, _, err = invoke("train", "--resume", "--run-name", "child", "--runs-dir",
                          str(tmp_path / "runs"), "--data-dir", str(tiny_data_dir),
                          "--set", "train.max_steps=5", "--set", "train.lr=0.003")
    assert code == 0, err
    assert load_checkpoint(child / "checkpoints" / "last.pt")["progress"]["step"] == 5
    assert run_tokenizer(child).digest() == run_tokenizer(parent).digest()
    last = json.loads((child / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 5 and last["parent_valid_loss"] > 0  # the resume validates it too


@pytest.mark.parametrize(("setting", "says"), [
    ("data.min_freq=3", "data.min_freq: 3 would change the tokenizer of --from"),
    ("data.tokenizer=sentencepiece", "data.tokenizer: 'sentencepiece' would change the "
                                     "tokenizer"),
    ("data.source=de", "data.source: 'de' would change the tokenizer"),
    ("model.d_model=32", "model.d_model: 32 would change the model of --from"),
    ("model.arch=gru", "model.arch: 'gru' would change the model"),
])
def test_what_would_change_the_model_or_tokenizer_is_refused(
        parent: Path, tmp_path: Path, tiny_data_dir: Path, setting: str, says: str) -> None:
    code, out, err = continue_(parent, tmp_path, tiny_data_dir, setting, name="refused")
    assert code == 2 and says in " ".join(err.split()) and err.startswith("error: "), err
    assert not (tmp_path / "runs" / "refused").exists()


def test_from_and_resume_together_and_a_missing_parent_are_one_line(
        parent: Path, tmp_path: Path, tiny_data_dir: Path) -> None:
    code, _, err = invoke("train", "--from", str(parent), "--resume", "--runs-dir",
                          str(tmp_path / "runs"))
    assert code == 2 and "--from: a resumed run continues from its own checkpoint" in " ".join(
        err.split())
    code, _, err = invoke("train", "--from", str(tmp_path / "nope"), "--runs-dir",
                          str(tmp_path / "runs"))
    said = " ".join(err.split())
    assert code != 0 and said.startswith(f"error: --from {tmp_path / 'nope'}: run directory, "
                                         "export or package not found; expected a run "
                                         "directory, an export directory made with nmt export "
                                         "--with-checkpoint, or its .argosmodel package"), said


ctranslate2 = pytest.importorskip("ctranslate2")


@pytest.fixture()
def sp_parent(tiny_data_dir: Path, tmp_path: Path) -> Path:
    """A parent Argos Translate can package: one SentencePiece model for both sides."""
    run = tmp_path / "runs" / "parent"
    train(tiny_config("transformer", "train.max_steps=4", "train.eval_every=2",
                      "data.tokenizer=sentencepiece", "data.vocab_size=96",
                      "data.joint_vocab=true"), run, data_dir=tiny_data_dir, log=lambda s: None)
    return run


@pytest.mark.parametrize("shared", ["export directory", "unpacked package", "package file"])
def test_an_export_with_its_checkpoint_is_continued_like_the_run(
        sp_parent: Path, tmp_path: Path, tiny_data_dir: Path, shared: str) -> None:
    parent = sp_parent
    """``nmt export --with-checkpoint`` (both targets) holds what ``--from`` needs: the child
    starts from the exported weights on the exported tokenizer and records the exported run."""
    import zipfile

    to, out = (("ctranslate2", tmp_path / "ct2") if shared == "export directory" else
               ("argos", tmp_path / "model.argosmodel"))
    code, _, err = invoke("export", "--run", str(parent), "--to", to, "--output", str(out),
                          "--no-score", "--with-checkpoint")
    assert code == 0, err
    given = out
    if shared == "unpacked package":
        with zipfile.ZipFile(out) as z:
            z.extractall(tmp_path / "unpacked")
        given = tmp_path / "unpacked"
    code, _, err = continue_(given, tmp_path, tiny_data_dir, "train.lr=0", "train.max_steps=2",
                             "train.eval_every=2")
    assert code == 0, err
    child = tmp_path / "runs" / "child"
    assert run_tokenizer(child).digest() == run_tokenizer(parent).digest()
    theirs = load_run(parent, "best").model.state_dict()
    mine = load_checkpoint(child / "checkpoints" / "last.pt")["model"]
    assert all(torch.equal(mine[k], theirs[k]) for k in theirs)
    best = parent / "checkpoints" / "best.pt"
    record = json.loads((child / "parent.json").read_text())
    assert record["run"] == "parent" and record["checkpoint"] == "best.pt"
    assert record["sha256"] == hashlib.sha256(best.read_bytes()).hexdigest()


def test_an_export_without_its_checkpoint_says_how_to_make_one(
        sp_parent: Path, tmp_path: Path, tiny_data_dir: Path) -> None:
    parent = sp_parent
    code, _, err = invoke("export", "--run", str(parent), "--output", str(tmp_path / "ct2"),
                          "--no-score")
    assert code == 0, err
    code, _, err = continue_(tmp_path / "ct2", tmp_path, tiny_data_dir)
    said = " ".join(err.split())
    assert code == 1 and "an export without its checkpoint (nmt-run/); export the run again " \
        "with nmt export --with-checkpoint" in said, said
    code, _, err = invoke("export", "--run", str(parent), "--to", "argos", "--output",
                          str(tmp_path / "p.argosmodel"), "--no-score")
    code, _, err = continue_(tmp_path / "p.argosmodel", tmp_path, tiny_data_dir)
    assert code == 1 and "this package holds no checkpoint" in " ".join(err.split())
    # an export with its checkpoint is still replaced by --overwrite (its nmt-run/ is its own)
    code, _, err = invoke("export", "--run", str(parent), "--output", str(tmp_path / "ct2"),
                          "--no-score", "--with-checkpoint", "--overwrite")
    assert code == 0, err
    assert (tmp_path / "ct2" / "nmt-run" / "checkpoints" / "best.pt").is_file()
    code, _, err = invoke("export", "--run", str(parent), "--output", str(tmp_path / "ct2"),
                          "--no-score", "--overwrite")
    assert code == 0 and not (tmp_path / "ct2" / "nmt-run").exists(), err


@pytest.mark.parametrize("kept", ["", "optimizer", "schedule", "step", "optimizer,schedule,step"])
def test_keep_from_keeps_what_it_names_of_the_parents_training(
        parent: Path, tmp_path: Path, tiny_data_dir: Path, kept: str) -> None:
    """Afresh by default (Adam's step count, the schedule's place and the run's step start at
    0); ``train.keep_from`` carries each on from the parent's, with the child's own lr."""
    code, _, err = continue_(parent, tmp_path, tiny_data_dir, f"train.keep_from={kept}",
                             "train.max_steps=7", "train.eval_every=100", "train.lr=0.002")
    assert code == 0, err
    was = load_checkpoint(parent / "checkpoints" / "best.pt")
    now = load_checkpoint(tmp_path / "runs" / "child" / "checkpoints" / "last.pt")
    born = was["progress"]["step"]
    steps_trained = now["progress"]["step"] - (born if "step" in kept else 0)
    assert steps_trained == (7 - born if "step" in kept else 7)
    adam = {int(s["step"]) for s in now["optimizer"]["state"].values()}
    assert adam == {steps_trained + (born if "optimizer" in kept else 0)}
    assert now["scheduler"]["last_epoch"] == steps_trained + (born if "schedule" in kept else 0)
    assert {g["lr"] for g in now["optimizer"]["param_groups"]} <= {0.002}  # constant schedule


def test_keep_from_names_only_what_it_knows() -> None:
    from nmt.config import load_config
    from nmt.errors import ConfigError

    assert load_config(None, ["train.keep_from=step,optimizer"]).train.keep_from == \
        "step,optimizer"
    with pytest.raises(ConfigError, match="train.keep_from: expected a list of optimizer, "
                       "schedule, step"):
        load_config(None, ["train.keep_from=moments"])


def test_fine_tuning_on_in_domain_pairs_lowers_their_loss_well_below_the_parents(
        parent: Path, tmp_path: Path, tiny_data_dir: Path) -> None:
    """In-domain pairs the parent never saw the like of (two of its sentences on a line): the
    same continuation at lr 0 (the parent as it is) and at a working lr, validated on the same
    in-domain split. Judged by the loss, with a wide margin, not by a tiny model's BLEU."""
    from conftest import tiny_corpus_lines

    lines = [line.split("\t")[:2] for line in tiny_corpus_lines()]
    pairs = [(f"{a[0]} {b[0]}", f"{a[1]} {b[1]}") for a, b in zip(lines[::2], lines[1::2],
                                                                   strict=False)]
    (tmp_path / "in.en").write_text("".join(e + "\n" for e, _ in pairs))
    (tmp_path / "in.fr").write_text("".join(f + "\n" for _, f in pairs))
    losses = {}
    for lr in ("0", "0.003"):
        code, _, err = invoke(
            "train", "--from", str(parent), "--runs-dir", str(tmp_path / "runs"), "--run-name",
            f"lr{lr}", "--data-dir", str(tiny_data_dir), "--set", f"data.corpus={tmp_path / 'in'}",
            "--set", "data.langid=false", "--set", "data.filters=none", "--set",
            "train.max_steps=120", "--set", "train.eval_every=120", "--set", f"train.lr={lr}",
            "--set", "train.eval_sentences=-1")
        assert code == 0, err
        records = [json.loads(line) for line in
                   (tmp_path / "runs" / f"lr{lr}" / "metrics.jsonl").read_text().splitlines()]
        losses[lr] = [r["valid_loss"] for r in records if r.get("valid_loss")][-1]
    assert losses["0.003"] < 0.7 * losses["0"], losses


def test_the_loop_validates_on_every_named_set_and_records_each_by_its_name(
        tiny_data_dir: Path, tmp_path: Path) -> None:
    """The loop is given other data's valid split under a name (no parent here): each set is
    scored, recorded as NAME_loss and NAME_bleu and logged by its name; the run's own ("valid")
    keeps its keys and alone chooses best.pt."""
    from nmt.config import load_config
    from nmt.training.finetune import Start

    other = load_config(None, [f"data.corpus={new_corpus(tmp_path)}", "data.langid=false"]).data
    run = tmp_path / "runs" / "two-sets"
    train(tiny_config("transformer", "train.max_steps=4", "train.eval_every=2"), run,
          data_dir=tiny_data_dir, log=lambda s: None,
          start=Start(valid_data={"zebra_valid": other}))
    scored = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()
              if "valid_loss" in line]
    assert [r["step"] for r in scored] == [2, 4]
    assert all(set(r) == {"step", "epoch", "valid_loss", "valid_bleu", "zebra_valid_loss",
                          "zebra_valid_bleu"} for r in scored)
    # two sets scored apart: the zebras are words the run's tokenizer never saw
    assert all(r["zebra_valid_loss"] > r["valid_loss"] > 0 for r in scored)
    lines = [line for line in (run / "train.log").read_text().splitlines() if "BLEU" in line]
    assert len(lines) == 2 and "step 2: valid loss" in lines[0] and "step 4: valid loss" in lines[1]
    assert all("valid BLEU" in line and "; zebra_valid loss" in line and "zebra_valid BLEU" in line
               for line in lines)
    assert not (run / "parent.json").exists()
    best = load_checkpoint(run / "checkpoints" / "best.pt")["progress"]
    assert best["best_loss"] == next(r["valid_loss"] for r in scored
                                     if r["step"] == best["best_step"])


def test_from_alone_decides_the_parent_and_its_valid_set(parent: Path, tmp_path: Path) -> None:
    """What a run starts from is decided once, by run_start: from scratch without --from (also
    resumed); from the parent's weights, tokenizer and valid split with it; and, resumed, a run
    that recorded a parent goes on with its tokenizer and the recorded valid split."""
    import shutil

    from nmt.training.finetune import PARENT_FILE, Start, open_parent, run_start

    cfg = load_run(parent).config
    assert run_start(cfg, None, tmp_path / "new", resume=False) == Start()
    assert run_start(cfg, None, parent, resume=True) == Start()

    child = tmp_path / "runs" / "child"
    start = run_start(cfg, open_parent(parent), child, resume=False)
    assert start.tokenizer is not None
    assert start.tokenizer.digest() == run_tokenizer(parent).digest()
    assert start.valid_data == {"parent_valid": cfg.data}
    assert start.weights is not None and start.keep is None  # train.keep_from is empty
    theirs = load_run(parent, "best").model.state_dict()
    assert all(torch.equal(w, theirs[k]) for k, w in start.weights().items())
    assert json.loads(start.files[PARENT_FILE])["run"] == "parent"

    shutil.copytree(parent, child)  # a child's directory as it was saved: its parent recorded
    (child / PARENT_FILE).write_text(start.files[PARENT_FILE])
    resumed = run_start(cfg, None, child, resume=True)
    assert resumed.valid_data == {"parent_valid": cfg.data}
    assert resumed.tokenizer is not None
    assert resumed.tokenizer.digest() == run_tokenizer(parent).digest()
    assert (resumed.weights, resumed.keep, resumed.files) == (None, None, {})
