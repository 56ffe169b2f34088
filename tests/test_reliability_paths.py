"""Paths nmt writes, replaces or deletes: `--overwrite` of an export, a package or a run replaces
only what nmt wrote, under every spelling of a path (another name, a trailing slash, `..`, a
symbolic link); links planted in a run directory; messages name what the user gave; a start
that fails leaves no empty run directory."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import invoke, tiny_corpus_sides
from test_decode import make_run, tiny_config
from test_train import TINY
from test_train import tiny_config as tiny_train_config

from nmt.errors import NmtError
from nmt.runs.directory import check_run_path, foreign_entry, run_lock
from nmt.training.loop import train


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file, folder and link under ``root`` (links not followed): what must not change."""
    out: dict[str, bytes | str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(folder) / name
            rel = str(p.relative_to(root))
            out[rel] = ("link " + os.readlink(p) if p.is_symlink() else
                        "dir" if p.is_dir() else p.read_bytes())
    return out


def one_line(code: int, err: str, exit_code: int = 1) -> str:
    assert code == exit_code, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.fixture()
def ct2() -> object:
    return pytest.importorskip("ctranslate2")


@pytest.fixture()
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory: runs/demo (a run), exports/, home/work (a folder of one's own),
    link-to-run -> runs/demo."""
    monkeypatch.chdir(tmp_path)
    make_run(tmp_path / "runs" / "demo", trained=False)
    (tmp_path / "home" / "work").mkdir(parents=True)
    (tmp_path / "home" / "work" / "notes.txt").write_text("mine\n")
    (tmp_path / "link-to-run").symlink_to(tmp_path / "runs" / "demo")
    return tmp_path


# --- nmt export --to ctranslate2 --overwrite -----------------------------------------------------


@pytest.mark.parametrize(("output", "why"), [
    ("runs/demo", "is a run directory, not an export"),
    ("runs/demo/", "is a run directory, not an export"),
    ("./runs/../runs/demo", "is a run directory, not an export"),
    ("ABSOLUTE/runs/demo", "is a run directory, not an export"),
    ("link-to-run", "is a symbolic link"),
    ("runs", "holds the run directory demo"),
    ("home/work", "is not an nmt export (no nmt-export.json"),
    ("runs/demo/checkpoints", "is not an nmt export"),
    (".", "is the current directory"),
    ("..", "only an earlier export (or an empty directory) is replaced"),
])
def test_export_overwrite_refuses_what_is_not_an_export(layout: Path, ct2: object, output: str,
                                                        why: str) -> None:
    output = output.replace("ABSOLUTE", str(layout))
    before = tree(layout)
    code, out, err = invoke("export", "--no-score",
                            "--run", "runs/demo", "--output", output, "--overwrite")
    line = one_line(code, err)
    assert line.startswith(f"error: --output {Path(output)}: ") and why in line, line
    assert out == "" and tree(layout) == before  # nothing deleted, nothing left beside it


def test_export_overwrite_replaces_an_earlier_export_or_an_empty_directory(
    layout: Path, ct2: object
) -> None:
    code, out, err = invoke("export", "--no-score", "--run", "runs/demo", "--output", "exports/e")
    assert code == 0 and out.strip() == "exports/e", err
    meta = json.loads(Path("exports/e/nmt-export.json").read_text())
    code, _, err = invoke("export", "--no-score", "--run", "runs/demo", "--output", "exports/e")
    assert "already exists; choose another name or pass --overwrite" in one_line(code, err)
    for spelling in ("exports/e", "./exports/e/", f"{layout}/exports/../exports/e"):
        code, _, err = invoke("export", "--no-score", "--run", "runs/demo", "--output", spelling,
                              "--quantization", "int8", "--overwrite")
        assert code == 0, err
        assert json.loads(Path("exports/e/nmt-export.json").read_text())["quantization"] == "int8"
    assert sorted(p.name for p in Path("exports").iterdir()) == ["e"]  # nothing left aside
    Path("exports/empty").mkdir()
    code, _, err = invoke("export", "--no-score", "--run", "runs/demo", "--output", "exports/empty",
                          "--overwrite")
    assert code == 0 and Path("exports/empty/model.bin").is_file(), err
    # an export holding a file nmt did not write is not replaced
    Path("exports/e/notes.txt").write_text("mine\n")
    code, _, err = invoke("export", "--no-score",
                          "--run", "runs/demo", "--output", "exports/e", "--overwrite")
    assert "holds notes.txt, which nmt export did not write" in one_line(code, err)
    assert Path("exports/e/notes.txt").read_text() == "mine\n"
    assert json.loads(Path("exports/e/nmt-export.json").read_text())["run"] == meta["run"]


def test_export_output_dot_without_overwrite_is_one_line(layout: Path, ct2: object) -> None:
    for output in (".", ".."):
        code, _, err = invoke("export", "--no-score", "--run", "runs/demo", "--output", output)
        assert f"--output {output}: already exists" in one_line(code, err)


def test_export_default_output_is_named_as_such(layout: Path, ct2: object) -> None:
    """Without --output, a refusal names the default path, not an option the user never gave."""
    Path("exports/demo-ctranslate2").mkdir(parents=True)
    Path("exports/demo-ctranslate2/notes.txt").write_text("mine\n")
    code, _, err = invoke("export", "--no-score", "--run", "runs/demo", "--overwrite")
    line = one_line(code, err)
    assert line.startswith("error: exports/demo-ctranslate2: is not an nmt export"), line
    assert Path("exports/demo-ctranslate2/notes.txt").read_text() == "mine\n"


# --- nmt export --to argos --overwrite -----------------------------------------------------------


@pytest.fixture()
def sp_run(tmp_path: Path) -> Path:
    """A run with a joint SentencePiece vocabulary (what Argos packages), untrained weights."""
    from nmt.config import Config, DataConfig
    from nmt.data.tokenizers import SentencePieceTokenizer
    from nmt.files import atomic_write_text
    from nmt.models.build import build_model
    from nmt.runs.checkpoint import save_checkpoint

    en, fr = tiny_corpus_sides()
    tok = SentencePieceTokenizer.train(en, fr, vocab_size=64, model_type="unigram", joint=True,
                                       threads=1)
    cfg = Config(data=DataConfig(vocab_size=64), model=tiny_config("transformer"))
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, joint_vocab=True)
    run = tmp_path / "runs" / "sp"
    atomic_write_text(run / "config.toml", cfg.to_toml())
    tok.save(run / "tokenizer")
    save_checkpoint(run / "checkpoints" / "best.pt",
                    {"config": cfg.to_dict(), "model": model.state_dict(),
                     "vocab": {"src": tok.src_vocab_size, "tgt": tok.tgt_vocab_size,
                               "joint": True},
                     "progress": {"step": 1}})
    return run


def test_argos_overwrite_replaces_only_a_package_nmt_wrote(sp_run: Path, tmp_path: Path,
                                                           ct2: object) -> None:
    package = tmp_path / "p.argosmodel"
    args = ["export", "--no-score", "--run", str(sp_run), "--to", "argos", "--output"]
    code, _, err = invoke(*args, str(package))
    assert code == 0 and zipfile.is_zipfile(package), err
    code, _, err = invoke(*args, str(package), "--overwrite")  # nmt's own package: replaced
    assert code == 0, err

    plain = tmp_path / "plain.argosmodel"
    plain.write_bytes(b"mine")
    foreign = tmp_path / "foreign.argosmodel"
    with zipfile.ZipFile(foreign, "w") as z:
        z.writestr("pkg/metadata.json", json.dumps({"type": "translate"}))
    damaged = tmp_path / "damaged.argosmodel"  # its metadata.json's deflate stream spoiled
    with zipfile.ZipFile(damaged, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("pkg/metadata.json", json.dumps({"nmt": {"x": "y" * 200}, "type": "t"}))
    data = bytearray(damaged.read_bytes())
    data[data.find(b"metadata.json") + 13: data.find(b"metadata.json") + 17] = b"\xff" * 4
    damaged.write_bytes(bytes(data))
    folder = tmp_path / "folder.argosmodel"
    folder.mkdir()
    link = tmp_path / "link.argosmodel"
    link.symlink_to(package)
    for output, why in ((plain, "is not an Argos package written by nmt"),
                        (foreign, "is not an Argos package written by nmt"),
                        (damaged, "is not an Argos package written by nmt"),
                        (folder, "exists and is not a file"),
                        (link, "is a symbolic link")):
        before = tree(tmp_path)
        code, _, err = invoke(*args, str(output), "--overwrite")
        line = one_line(code, err)
        assert line.startswith(f"error: --output {output}: {why}"), line
        assert tree(tmp_path) == before


# --- nmt train --overwrite -----------------------------------------------------------------------


def _train_args(runs: Path, data: Path, name: str, *extra: str) -> list[str]:
    sets = [x for s in [*TINY, "model.arch=transformer", *extra] for x in ("--set", s)]
    return ["train", "--runs-dir", str(runs), "--data-dir", str(data), "--run-name", name,
            "--config", "configs/demo.toml", *sets]


def test_train_overwrite_refuses_a_folder_that_is_not_a_run(tiny_data_dir: Path,
                                                            tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    (runs / "mine").mkdir(parents=True)
    (runs / "mine" / "notes.txt").write_text("mine\n")
    (runs / "up").symlink_to(runs)  # the runs directory by another name
    home = tmp_path / "home"  # a folder of one's own that happens to hold a config.toml
    home.mkdir()
    (home / "config.toml").write_text("[data]\n")
    (home / "notes.txt").write_text("mine\n")
    (runs / "home").symlink_to(home)
    def unlocked() -> dict[str, bytes | str]:  # the lock files beside runs are made and kept
        return {k: v for k, v in tree(tmp_path).items() if not k.endswith(".lock")}

    before = unlocked()
    for name, why in (("mine", "not a run directory"), ("up", "not a run directory"),
                      ("home", "holds notes.txt, which nmt did not write")):
        code, _, err = invoke(*_train_args(runs, tiny_data_dir, name), "--overwrite")
        line = one_line(code, err)
        assert line.startswith(f"error: {runs / name}: {why}") and "--overwrite" in line, line
        assert unlocked() == before


def test_train_overwrite_replaces_a_run_with_everything_nmt_writes_in_it(
    tiny_data_dir: Path, tmp_path: Path, ct2: object
) -> None:
    """A run trained, plotted, scored, drawn and exported on the fly holds only what nmt writes
    (:data:`RUN_ENTRIES` is complete), so --overwrite replaces it, also under another name; a
    file of one's own in it stops --overwrite."""
    runs = tmp_path / "runs"
    run = runs / "r"
    code, _, err = invoke(*_train_args(runs, tiny_data_dir, "r", "train.max_steps=1",
                                       "train.eval_sentences=4"))
    assert code == 0, err
    src, ref = tmp_path / "t.en", tmp_path / "t.fr"
    src.write_text("i see the dog .\n")
    ref.write_text("je vois le chien .\n")
    for args in (["bleu", "--src", str(src), "--ref", str(ref)],
                 ["bleu", "--src", str(src), "--ref", str(ref), "--engine", "ctranslate2"],
                 ["attention", "i see ."], ["translate", "--engine", "ctranslate2", "a"]):
        code, _, err = invoke(*args, "--run", str(run), *(["--device", "cpu"]
                                                           if args[0] == "attention" else []))
        assert code == 0, err
    names = {p.name for p in run.iterdir()}
    assert {"curves.png", "attention.png", "ctranslate2", "train.log"} <= names
    assert any(n.startswith("hyp.") for n in names) and any(n.startswith("scores.")
                                                            for n in names)
    assert foreign_entry(run) is None

    (run / "notes.txt").write_text("mine\n")
    code, _, err = invoke(*_train_args(runs, tiny_data_dir, "r"), "--overwrite")
    assert "holds notes.txt, which nmt did not write" in one_line(code, err)
    assert (run / "checkpoints" / "last.pt").is_file()
    (run / "notes.txt").unlink()

    (runs / "alias").symlink_to(run)
    code, _, err = invoke(*_train_args(runs, tiny_data_dir, "alias", "train.max_steps=1"),
                          "--overwrite")
    assert code == 0, err
    assert (runs / "alias").is_symlink()  # the link is kept, the run it names replaced
    assert not (run / "attention.png").exists()
    assert not list(run.glob("hyp.*")) and not (run / "ctranslate2").exists()
    from nmt.runs.checkpoint import load_checkpoint

    assert load_checkpoint(run / "checkpoints" / "last.pt")["progress"]["step"] == 1


def test_train_overwrite_replaces_a_start_that_failed(tiny_data_dir: Path,
                                                      tmp_path: Path) -> None:
    """A start that failed before its first checkpoint (config.toml, tokenizer, logs, no
    checkpoint) is a run: --overwrite replaces it."""
    run = tmp_path / "r"
    with pytest.raises(NmtError, match="non-finite loss"):
        train(tiny_train_config("gru", "train.lr=1e308", "train.clip_norm=0"), run,
              data_dir=tiny_data_dir, log=lambda s: None)
    assert (run / "config.toml").is_file() and not (run / "checkpoints").exists()
    train(tiny_train_config("gru", "train.max_steps=1"), run, data_dir=tiny_data_dir,
          overwrite=True, log=lambda s: None)
    assert (run / "checkpoints" / "last.pt").is_file()


def _one_step_run(run: Path, data: Path) -> dict[str, bytes | str]:
    train(tiny_train_config("transformer", "train.max_steps=1"), run, data_dir=data,
          log=lambda s: None)
    return tree(run)


def _fails_reading_its_corpus(run: Path, data: Path) -> None:
    train(tiny_train_config("transformer", "data.corpus=missing.tsv", "data.columns=['en','fr']"),
          run, data_dir=data, overwrite=True, log=lambda s: None)


def _fails_at_its_first_step(run: Path, data: Path) -> None:  # written: config, tokenizer, logs
    train(tiny_train_config("transformer", "train.lr=1e308", "train.clip_norm=0"), run,
          data_dir=data, overwrite=True, log=lambda s: None)


def _interrupted_preparing_its_data(run: Path, data: Path) -> None:
    import nmt.training.loop

    def ctrl_c(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as m:
        m.setattr(nmt.training.loop, "prepare_data", ctrl_c)
        train(tiny_train_config("transformer"), run, data_dir=data, overwrite=True,
              log=lambda s: None)


@pytest.mark.parametrize("start", [_fails_reading_its_corpus, _fails_at_its_first_step,
                                   _interrupted_preparing_its_data],
                         ids=lambda f: f.__name__.strip("_"))
def test_an_overwrite_that_stops_before_its_first_checkpoint_keeps_the_run(
    tiny_data_dir: Path, tmp_path: Path, start: Any
) -> None:
    """--overwrite moves the old run aside and deletes it only once the new run has a
    checkpoint: a start that stops before (its corpus unreadable, a non-finite first step,
    Ctrl-C while its data is prepared) leaves the old run as it was (before: deleted first,
    so a typo in the new config lost a trained run)."""
    run = tmp_path / "r"
    before = _one_step_run(run, tiny_data_dir)
    with pytest.raises((NmtError, KeyboardInterrupt)):
        start(run, tiny_data_dir)
    assert tree(run) == before


def test_an_overwrite_keeps_the_old_run_until_its_first_checkpoint(tiny_data_dir: Path,
                                                                    tmp_path: Path) -> None:
    """Set aside in RUN/.previous-run while the new run starts, gone from its first save."""
    from nmt.training.state import Display

    run = tmp_path / "r"
    _one_step_run(run, tiny_data_dir)
    seen: list[bool] = []

    class Watch(Display):
        def step(self, *args: Any) -> None:
            seen.append((run / ".previous-run" / "checkpoints" / "last.pt").is_file())

    train(tiny_train_config("transformer", "train.max_steps=3", "train.eval_every=2"), run,
          data_dir=tiny_data_dir, overwrite=True, log=lambda s: None, display=Watch())
    assert seen == [True, True, False]  # the validation after step 2 saved best.pt and last.pt
    assert not (run / ".previous-run").exists()
    assert load_step(run) == 3


def load_step(run: Path) -> int:
    from nmt.runs.checkpoint import load_checkpoint

    return int(load_checkpoint(run / "checkpoints" / "last.pt")["progress"]["step"])


def test_an_overwrite_killed_before_its_first_checkpoint_is_recovered(
    tiny_data_dir: Path, tmp_path: Path
) -> None:
    """What a SIGKILL leaves in the middle of an --overwrite's start (the new run's first files
    beside .previous-run): --resume says where the old run is; the next --overwrite still keeps
    it until its own first checkpoint, and deletes the killed start's files."""
    run = tmp_path / "r"
    before = _one_step_run(run, tiny_data_dir)
    (run / ".previous-run").mkdir()
    for entry in list(run.iterdir()):
        if entry.name != ".previous-run":
            entry.rename(run / ".previous-run" / entry.name)
    (run / "config.toml").write_text("[train]\n")  # what the killed start had written
    (run / "metrics.jsonl").write_text("")

    with pytest.raises(NmtError, match=r"nothing to resume \(.*\.previous-run holds the run"):
        train(tiny_train_config("transformer"), run, data_dir=tiny_data_dir, resume=True,
              log=lambda s: None)
    with pytest.raises(NmtError):
        _fails_reading_its_corpus(run, tiny_data_dir)
    assert tree(run) == before  # the old run, back in place; the killed start's files gone

    (run / ".previous-run").mkdir()  # killed after its first checkpoint: the new run stands
    (run / ".previous-run" / "config.toml").write_text("old\n")
    train(tiny_train_config("transformer", "train.max_steps=2"), run, data_dir=tiny_data_dir,
          resume=True, log=lambda s: None)
    assert not (run / ".previous-run").exists() and load_step(run) == 2


def test_an_overwrite_that_cannot_move_the_run_aside_moves_none_of_it(
    tiny_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rename refused at any one of the run's entries: one line, and every entry moved before
    it goes back (nothing of the run left in .previous-run or lost)."""
    import nmt.runs.directory

    run = tmp_path / "r"
    before = _one_step_run(run, tiny_data_dir)
    entries = len(list(run.iterdir()))
    real = os.replace
    for n in range(entries):
        calls = 0

        def refuse_one(a: Any, b: Any, n: int = n) -> None:
            nonlocal calls
            calls += 1
            if calls == n + 1:
                raise PermissionError(13, "Permission denied")
            real(a, b)

        monkeypatch.setattr(nmt.runs.directory.os, "replace", refuse_one)
        with pytest.raises(NmtError, match=r"overwrite: cannot replace the run in .*Permission"):
            _fails_reading_its_corpus(run, tiny_data_dir)
        monkeypatch.setattr(nmt.runs.directory.os, "replace", real)
        assert tree(run) == before, f"refused at entry {n}"


@pytest.mark.parametrize("name", ["r", "alias"])
def test_a_run_continued_into_itself_is_refused_before_anything(
        tiny_data_dir: Path, tmp_path: Path, name: str) -> None:
    """``--from runs/r --run-name r --overwrite`` (or under another name for r): refused in one
    line before the data is read, the run untouched. Before, the run was deleted first (and,
    since --overwrite keeps it aside, the error came after the data was prepared, naming a
    checkpoint path)."""
    runs = tmp_path / "runs"
    before = _one_step_run(runs / "r", tiny_data_dir)
    (runs / "alias").symlink_to(runs / "r")
    code, _, err = invoke(*_train_args(runs, tiny_data_dir, name), "--from", str(runs / "r"),
                          "--overwrite")
    assert "is the run this training would write" in one_line(code, err)
    assert tree(runs / "r") == before


def test_a_start_that_fails_before_writing_leaves_no_run_directory(
    tmp_path: Path, no_network: None
) -> None:
    """The corpus cannot be had (no mirror, no network): no empty runs/NAME is left behind."""
    runs = tmp_path / "runs"
    code, _, err = invoke(*_train_args(runs, tmp_path / "nodata", "r"))
    assert code == 1 and "Traceback" not in err, err
    assert not (runs / "r").exists()


def test_a_run_locked_under_one_name_is_locked_under_another(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (tmp_path / "runs" / "alias").symlink_to(run)
    with run_lock(run), pytest.raises(NmtError, match="another nmt train"):
        with run_lock(tmp_path / "runs" / "alias"):
            pass
    with run_lock(tmp_path / "runs" / "." / "r"), pytest.raises(NmtError, match="another"):
        with run_lock(run):
            pass


# --- links planted in a run directory ------------------------------------------------------------


def test_check_run_path_refuses_every_link_on_the_way(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "a" / "b").mkdir(parents=True)
    assert check_run_path(run, run / "a" / "b" / "c") == run / "a" / "b" / "c"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "b").mkdir(parents=True)
    for link in (run / "a", run / "a" / "b", run / "a" / "b" / "c"):
        target = link.parent / f"{link.name}.real"
        if link.exists():
            link.rename(target)
        link.symlink_to(elsewhere)
        with pytest.raises(NmtError, match=f"^{link}: is a symbolic link"):
            check_run_path(run, run / "a" / "b" / "c")
        link.unlink()
        if target.exists():
            target.rename(link)


@pytest.mark.parametrize("planted", ["ctranslate2", "ctranslate2/last"])
@pytest.mark.parametrize("command", ["translate", "bleu"])
def test_a_link_planted_in_a_run_is_not_replaced_through(tmp_path: Path, ct2: object,
                                                         planted: str, command: str) -> None:
    """`ln -s FOLDER RUN/ctranslate2`: the on-the-fly export refuses instead of replacing
    FOLDER/last with an export."""
    run = make_run(tmp_path / "run", trained=False)
    victim = tmp_path / "victim"
    (victim / "last").mkdir(parents=True)
    (victim / "last" / "precious.txt").write_text("precious\n")
    link = run / planted
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(victim if planted == "ctranslate2" else victim / "last")
    before = tree(tmp_path)
    src = tmp_path / "t.en"
    args = {"translate": ["translate", "a b"],
            "bleu": ["bleu", "--src", str(src), "--ref", str(src)]}[command]
    code, out, err = invoke(*args, "--run", str(run), "--engine", "ctranslate2")
    line = one_line(code, err)
    assert line == (f"error: {link}: is a symbolic link; a run directory writes only into its "
                    "own folders (remove the link)")
    assert tree(tmp_path) == before


# --- messages name what the user gave ------------------------------------------------------------


def test_on_the_fly_export_messages_name_the_run_s_export(tmp_path: Path, ct2: object,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path / "run", trained=False)
    export = run / "ctranslate2" / "last"
    name = f"{export} (the run's export for --engine ctranslate2)"
    args = ["translate", "--run", str(run), "--engine", "ctranslate2"]

    import nmt.files

    def no_permission(*a: object, **kw: object) -> str:
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as m:  # a read-only run directory
        m.setattr(nmt.files.tempfile, "mkdtemp", no_permission)  # the export's folder
        code, _, err = invoke(*args, "a")
    assert one_line(code, err) == f"error: {name}: cannot write (Permission denied)"

    code, _, err = invoke(*args, "--compute-type", "bogus", "a")
    line = one_line(code, err, exit_code=2)  # a bad option value, as --device
    assert line.startswith("error: --compute-type bogus: ") and "--model" not in line
    (export / "notes.txt").write_text("mine\n")
    ckpt = run / "checkpoints" / "last.pt"
    os.utime(ckpt, ns=(ckpt.stat().st_atime_ns, ckpt.stat().st_mtime_ns + 10**9))  # re-export
    code, _, err = invoke(*args, "a")
    line = one_line(code, err)
    assert line.startswith(f"error: {name}: holds notes.txt, which nmt export did not write")
    assert (export / "notes.txt").read_text() == "mine\n"
    (export / "notes.txt").unlink()
    assert invoke(*args, "a")[0] == 0
    (export / "model.bin").write_bytes(b"not a model")  # same checkpoint: the export is reused
    code, _, err = invoke(*args, "a")
    line = one_line(code, err)
    assert line.startswith(f"error: {name}: CTranslate2 cannot load it") and "--model" not in line


def test_default_pictures_are_named_without_an_option(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`nmt plot RUN` and `nmt attention` on a read-only run name RUN/curves.png and
    RUN/attention.png, not an --output the user never gave (as in a read-only run directory,
    injected: the tests may run as root, whom chmod does not stop)."""
    import nmt.files as files

    run = make_run(tmp_path / "run", trained=False)
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "train_loss": 3.0}) + "\n"
                                       + json.dumps({"step": 1, "valid_loss": 3.2}) + "\n")

    def no_permission(*a: object, **kw: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(files.tempfile, "mkstemp", no_permission)
    for args, picture in ((["plot", str(run)], "curves.png"),
                          (["attention", "a b", "--run", str(run), "--device", "cpu"],
                           "attention.png")):
        code, _, err = invoke(*args)
        assert one_line(code, err) == f"error: {run / picture}: cannot write (Permission denied)"
    code, _, err = invoke("plot", str(run), "--output", str(tmp_path / "c.png"))
    assert one_line(code, err) == (f"error: --output {tmp_path / 'c.png'}: cannot write "
                                   "(Permission denied)")


# --- a path that is not the file nmt reads: said for what it is -------------------------------

PATH_KINDS = {
    "missing": ("not found", lambda p, tmp: None),
    "directory": ("is a directory, not a", lambda p, tmp: p.mkdir()),
    "fifo": ("is a named pipe (FIFO), not a", lambda p, tmp: os.mkfifo(p)),
    "device": ("is a character device, not a", lambda p, tmp: p.symlink_to("/dev/zero")),
    "loop": ("a symbolic link that loops", lambda p, tmp: p.symlink_to(p)),
    "broken link": ("which does not exist", lambda p, tmp: p.symlink_to(tmp / "gone")),
}


def _config_site(path: Path, tmp: Path) -> str:
    from nmt.config import load_config
    from nmt.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        load_config(path)
    return str(e.value)


def _aligned_site(path: Path, tmp: Path) -> str:
    """``path`` is the English side of an aligned corpus whose French side is a file."""
    import dataclasses

    from nmt.config import DataConfig
    from nmt.data.prepare import prepare

    Path(f"{tmp / 'corpus'}.fr").write_text("Bonjour.\n", encoding="utf-8")
    cfg = dataclasses.replace(DataConfig(vocab_size=64), corpus=str(tmp / "corpus"))
    with pytest.raises(NmtError) as e:
        prepare(cfg, tmp / "data", log=lambda s: None)
    return str(e.value)


def _checkpoint_site(path: Path, tmp: Path) -> str:
    from nmt.runs.checkpoint import load_checkpoint

    with pytest.raises(NmtError) as e:
        load_checkpoint(path)
    return str(e.value)


@pytest.mark.parametrize("kind", sorted(PATH_KINDS))
@pytest.mark.parametrize("site", [_config_site, _aligned_site, _checkpoint_site],
                         ids=["config", "aligned side", "checkpoint"])
def test_a_path_that_is_not_a_file_is_said_for_what_it_is(kind: str, site: Any,
                                                          tmp_path: Path) -> None:
    """Every kind of path, at every site that reads one named file: one line naming the path and
    what it is (never "file not found" for a directory, never a hang on a FIFO)."""
    said, make = PATH_KINDS[kind]
    path = tmp_path / ("corpus.en" if site is _aligned_site else "target")
    make(path, tmp_path)
    message = site(path, tmp_path)
    assert "\n" not in message and str(path) in message and said in message, message
