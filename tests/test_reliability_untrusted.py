"""Files someone else made: checkpoints meeting another tokenizer, weights that are not what
their shapes say, zip archives that list a record many times, damaged data caches and run
files, and vocabulary sizes SentencePiece cannot train.

Each test crafts the file small (a zip listing one small record many times stands for one
listing a gigabyte record 200 times) and checks the one-line refusal, or the rebuild."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import struct
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import invoke, reseal_cache, tiny_corpus_sides
from test_decode import make_run
from test_train import tiny_config

import nmt.runs.loading as loading
from nmt.config import DataConfig, from_dict
from nmt.data.prepare import prepare
from nmt.data.tokenizers import SentencePieceTokenizer, Tokenizer, WordTokenizer, load_tokenizer
from nmt.errors import CheckpointError
from nmt.models.build import build_model
from nmt.runs.checkpoint import load_checkpoint, save_checkpoint, vocab_entry
from nmt.runs.directory import MetricsLog, read_metrics
from nmt.runs.loading import load_run, shapes_only
from nmt.runs.table import list_runs
from nmt.training.loop import train


def one_line_error(code: int, err: str) -> str:
    """The CLI failed with exactly one line on stderr and no traceback; returns that line."""
    assert code != 0
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    return err.strip()


def quiet(message: str) -> None:
    pass


def permuted(tok: Tokenizer) -> WordTokenizer:
    """A word tokenizer of the same size as ``tok`` whose words have other ids."""
    assert isinstance(tok, WordTokenizer) and tok.joint
    itos = tok.src_itos
    return WordTokenizer(itos[:4] + itos[4:][::-1])


# --- a checkpoint carries the identity of its tokenizer ----------------------------------------


def test_the_digest_names_what_the_ids_mean(tmp_path: Path) -> None:
    src, tgt = tiny_corpus_sides()
    sp = SentencePieceTokenizer.train(src, tgt, vocab_size=60, model_type="unigram", joint=True)
    other = SentencePieceTokenizer.train(tgt, src, vocab_size=60, model_type="bpe", joint=True)
    assert sp.src_vocab_size == other.src_vocab_size == 60
    assert sp.pieces("src") != other.pieces("src")
    assert sp.digest() != other.digest()  # the same size, other pieces
    sp.save(tmp_path / "sp")
    assert load_tokenizer(tmp_path / "sp").digest() == sp.digest()  # saved and read back

    word = WordTokenizer.train(src, tgt, min_freq=1, joint=True)
    word.save(tmp_path / "word")
    assert load_tokenizer(tmp_path / "word").digest() == word.digest()
    assert permuted(word).digest() != word.digest()
    assert permuted(word).src_vocab_size == word.src_vocab_size


@pytest.fixture()
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Run A, whose checkpoint records its tokenizer; run B, the same but for a tokenizer of
    the same size whose words have other ids."""
    a = make_run(tmp_path / "a", trained=False)
    last = a / "checkpoints" / "last.pt"
    payload = load_checkpoint(last)
    payload["vocab"] = vocab_entry(load_tokenizer(a / "tokenizer"))
    save_checkpoint(last, payload)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    shutil.rmtree(b / "tokenizer")
    permuted(load_tokenizer(a / "tokenizer")).save(b / "tokenizer")
    return a, b


@pytest.mark.parametrize("command", [
    ["translate", "a b"],
    ["bleu", "--src", "SRC", "--ref", "SRC"],
    ["attention", "a b", "--output", "OUT/att.png"],
    ["export", "--no-score", "--to", "ctranslate2", "--output", "OUT/export"],
], ids=["translate", "bleu", "attention", "export"])
def test_a_checkpoint_is_refused_with_another_runs_tokenizer(
    two_runs: tuple[Path, Path], tmp_path: Path, command: list[str]
) -> None:
    a, b = two_runs
    (tmp_path / "src.txt").write_text("a b\n")
    args = [str(tmp_path / "src.txt") if x == "SRC" else x.replace("OUT", str(tmp_path))
            for x in command]
    ckpt = a / "checkpoints" / "last.pt"
    code, out, err = invoke(*args, "--run", str(b), "--checkpoint", str(ckpt))
    line = one_line_error(code, err)
    assert line.startswith(f"error: {ckpt}: incompatible with {b}/tokenizer (trained with "
                           "another tokenizer of the same size: vocabulary digest "), line
    assert out == "" and not (tmp_path / "att.png").exists()
    assert not (tmp_path / "export").exists()
    code, out, err = invoke(*args, "--run", str(a), "--checkpoint", str(ckpt))  # its own: fine
    assert code == 0, err


def test_a_checkpoint_without_a_digest_still_loads(two_runs: tuple[Path, Path],
                                                   tmp_path: Path) -> None:
    """Checkpoints written before they recorded their tokenizer are compared by size only."""
    a, b = two_runs
    old = tmp_path / "old.pt"
    payload = load_checkpoint(a / "checkpoints" / "last.pt")
    del payload["vocab"]["digest"]
    save_checkpoint(old, payload)
    assert load_run(a, str(old)).step == load_run(b, str(old)).step == 200
    payload["vocab"]["src"] += 1
    save_checkpoint(old, payload)
    with pytest.raises(CheckpointError, match=r"incompatible with .*/tokenizer \(vocabulary "
                                              r"sizes 15/14 vs 14/14\)"):
        load_run(a, str(old))


@pytest.mark.parametrize("digest", [12, "xyz", "A" * 64])
def test_a_malformed_digest_is_refused(two_runs: tuple[Path, Path], tmp_path: Path,
                                       digest: Any) -> None:
    a, _ = two_runs
    crafted = tmp_path / "crafted.pt"
    payload = load_checkpoint(a / "checkpoints" / "last.pt")
    payload["vocab"]["digest"] = digest
    torch.save(payload, crafted)
    with pytest.raises(CheckpointError, match=r"\(vocab: digest: expected 64 hexadecimal"):
        load_checkpoint(crafted)


def test_resume_refuses_a_replaced_tokenizer(tiny_data_dir: Path, tmp_path: Path) -> None:
    """Replacing RUN/tokenizer, or the data cache's tokenizer, with one of the same size is
    refused on --resume before any step: training would go on with ids meaning other words."""
    run = tmp_path / "r"
    cfg = tiny_config("gru", "train.max_steps=2")
    train(cfg, run, data_dir=tiny_data_dir, log=quiet)
    last = run / "checkpoints" / "last.pt"
    assert "digest" in load_checkpoint(last)["vocab"]
    before = last.read_bytes()
    original = load_tokenizer(run / "tokenizer")
    more = tiny_config("gru", "train.max_steps=4")

    shutil.rmtree(run / "tokenizer")
    permuted(original).save(run / "tokenizer")
    with pytest.raises(CheckpointError, match=rf"^{last}: incompatible with {run}/tokenizer "
                                              r"\(trained with another tokenizer"):
        train(more, run, data_dir=tiny_data_dir, resume=True, log=quiet)
    assert last.read_bytes() == before

    shutil.rmtree(run / "tokenizer")
    original.save(run / "tokenizer")
    (cache,) = (tiny_data_dir / "cache").iterdir()
    permuted(original).save(cache)  # the cache's ids now mean other words
    reseal_cache(cache)  # whole but wrong: its digests agree (else it is simply rebuilt)
    with pytest.raises(CheckpointError, match=rf"incompatible with the data cache {cache} "
                                              r"\(trained with another tokenizer"):
        train(more, run, data_dir=tiny_data_dir, resume=True, log=quiet)
    assert last.read_bytes() == before

    original.save(cache)
    result = train(more, run, data_dir=tiny_data_dir, resume=True, log=quiet)
    assert result.progress.step == 4


def test_an_export_refuses_tokenizer_files_it_was_not_made_with(tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    from nmt.export.ct2_convert import META_FILE, export_run
    from nmt.export.ct2_translate import CT2Translator

    run = make_run(tmp_path / "run", trained=False)
    out = export_run(load_run(run, "last"), tmp_path / "export")
    tok = load_tokenizer(out)
    assert json.loads((out / META_FILE).read_text())["tokenizer"]["digest"] == tok.digest()
    assert CT2Translator.from_export(out).translate(["a b"])  # as exported: fine
    permuted(tok).save(out)
    with pytest.raises(CheckpointError, match=r"its tokenizer files are not the ones it was "
                                              r"exported with"):
        CT2Translator.from_export(out)


# --- weights that are not what their shapes say ------------------------------------------------


def _expected_shapes(config: dict[str, Any], vocab: dict[str, Any]) -> dict[str, torch.Size]:
    cfg = from_dict(config)
    with shapes_only():
        model = build_model(cfg.model, vocab["src"], vocab["tgt"], joint_vocab=vocab["joint"])
    return {k: v.shape for k, v in model.state_dict().items()}


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "toy", trained=False)


def test_zero_stride_weights_of_a_huge_model_are_refused(toy_run: Path, tmp_path: Path) -> None:
    """A file of a few KB whose config asks for d_ff = 2**21 (a model of 2 GiB) and whose
    feed-forward weights are views of one zero: refused before the model is built."""
    payload = load_checkpoint(toy_run / "checkpoints" / "last.pt")
    payload["config"]["model"]["d_ff"] = 2**21
    for name, shape in _expected_shapes(payload["config"], payload["vocab"]).items():
        if payload["model"][name].shape != shape:
            payload["model"][name] = torch.zeros(1).expand(shape)
    crafted = tmp_path / "crafted.pt"
    torch.save(payload, crafted)
    assert crafted.stat().st_size < 100_000
    started = time.perf_counter()
    code, out, err = invoke("translate", "--run", str(toy_run), "--checkpoint", str(crafted),
                            "a b")
    line = one_line_error(code, err)
    assert time.perf_counter() - started < 10
    assert f"{crafted}: incompatible checkpoint (weight " in line
    assert "holds only 4 bytes: saved tensors hold every element)" in line


def test_weights_sharing_one_storage_are_refused(toy_run: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Every weight a view of one storage, each of them inside it: the model needs far more
    than the file holds. (The allowance for computed tables is set to 0 to keep the file
    small; the rule is the same at 64 MiB.)"""
    payload = load_checkpoint(toy_run / "checkpoints" / "last.pt")
    model = payload["model"]
    shared = torch.zeros(max(t.numel() for t in model.values()))
    payload["model"] = {k: shared[: t.numel()].view(t.shape) for k, t in model.items()}
    crafted = tmp_path / "shared.pt"
    torch.save(payload, crafted)
    monkeypatch.setattr(loading, "DERIVED_BYTES", 0)
    with pytest.raises(CheckpointError, match=r"incompatible checkpoint \(its config asks for a "
                                              r"model of [0-9.]+ KiB.*, but the file's weights "
                                              r"hold only 3.0 KiB; at most the size of its "
                                              r"weights plus 0 MiB is allowed\)"):
        load_run(toy_run, str(crafted))
    monkeypatch.undo()
    torch.save(dict(payload, model=model), crafted)  # the control: its own weights load
    assert load_run(toy_run, str(crafted)).step == 200


def test_resume_refuses_zero_stride_weights_before_building(tiny_data_dir: Path,
                                                            tmp_path: Path) -> None:
    run = tmp_path / "r"
    train(tiny_config("transformer", "train.max_steps=2"), run, data_dir=tiny_data_dir,
          log=quiet)
    last = run / "checkpoints" / "last.pt"
    payload = load_checkpoint(last)
    payload["config"]["model"]["d_ff"] = 2**21
    for name, shape in _expected_shapes(payload["config"], payload["vocab"]).items():
        if payload["model"][name].shape != shape:
            payload["model"][name] = torch.zeros(1).expand(shape)
    save_checkpoint(last, payload)
    big = tiny_config("transformer", "train.max_steps=4", f"model.d_ff={2**21}")
    with pytest.raises(CheckpointError, match=r"holds only 4 bytes"):
        train(big, run, data_dir=tiny_data_dir, resume=True, log=quiet)


@pytest.mark.parametrize("moment", ["a smaller shape", "a zero-stride view"])
def test_resume_refuses_optimizer_moments_that_do_not_fit_their_weights(
    tiny_data_dir: Path, tmp_path: Path, moment: str
) -> None:
    """torch loads an optimizer state of any shape, and its fused Adam then reads and writes
    past the end of it: before, this resume ended in a segmentation fault."""
    run = tmp_path / "r"
    train(tiny_config("gru", "train.max_steps=2"), run, data_dir=tiny_data_dir, log=quiet)
    last = run / "checkpoints" / "last.pt"
    payload = load_checkpoint(last)
    state = payload["optimizer"]["state"][0]
    shape = state["exp_avg"].shape
    state["exp_avg"] = torch.zeros(1) if moment == "a smaller shape" else torch.zeros(
        1).expand(shape)
    save_checkpoint(last, payload)
    expected = (f"optimizer exp_avg of parameter 0 has shape (1,), expected {tuple(shape)}"
                if moment == "a smaller shape" else
                f"optimizer exp_avg of parameter 0 of shape {tuple(shape)} holds only 4 bytes")
    with pytest.raises(CheckpointError, match=re.escape(f"{last}: incompatible checkpoint "
                                                        f"({expected}")):
        train(tiny_config("gru", "train.max_steps=4"), run, data_dir=tiny_data_dir,
              resume=True, log=quiet)


# --- zip archives whose records are listed more than once ---------------------------------------


def _relisted(good: bytes, record: str, times: int) -> bytes:
    """``good`` (a torch.save zip) with ``record`` listed ``times`` more times in the central
    directory, every copy pointing at the same bytes."""
    z = zipfile.ZipFile(io.BytesIO(good))
    pos, entries, target = z.start_dir, [], b""
    while good[pos:pos + 4] == b"PK\x01\x02":
        name_len, extra_len, comment_len = struct.unpack("<3H", good[pos + 28:pos + 34])
        end = pos + 46 + name_len + extra_len + comment_len
        entries.append(good[pos:end])
        if good[pos + 46:pos + 46 + name_len].decode() == record:
            target = good[pos:end]
        pos = end
    assert target
    entries += [target] * times
    directory = b"".join(entries)
    end_record = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries), len(entries),
                             len(directory), z.start_dir, 0)
    return good[:z.start_dir] + directory + end_record


def _largest_record(good: bytes) -> str:
    return max(zipfile.ZipFile(io.BytesIO(good)).infolist(), key=lambda i: i.file_size).filename


@pytest.mark.parametrize(("how", "needle"), [
    ("the largest record listed 200 times", "records unpack to"),
    ("a small record listed twice", "overlaps record"),
    ("a deflated record unpacking to more than the file", "records unpack to"),
])
def test_records_listed_more_than_once_are_refused_before_the_crc_check(
    toy_run: Path, tmp_path: Path, how: str, needle: str
) -> None:
    good = (toy_run / "checkpoints" / "last.pt").read_bytes()
    if how.startswith("the largest"):
        crafted = _relisted(good, _largest_record(good), 200)
    elif how.startswith("a small"):
        crafted = _relisted(good, "archive/byteorder", 1)
    else:
        out = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(good)) as z, zipfile.ZipFile(out, "w") as w:
            for info in z.infolist():
                w.writestr(info, z.read(info))
            w.writestr("archive/padding", bytes(2 * len(good)), zipfile.ZIP_DEFLATED)
        crafted = out.getvalue()
    path = tmp_path / "crafted.pt"
    path.write_bytes(crafted)
    # Every CRC-32 matches: zipfile before Python 3.11.8 / 3.12.2 reads it as valid (later ones
    # see the overlap themselves, CVE-2024-0450); nmt must refuse it on either.
    code, _, err = invoke("translate", "--run", str(toy_run), "--checkpoint", str(path), "a b")
    line = one_line_error(code, err)
    assert f"{path}: corrupt or truncated checkpoint (" in line and needle in line, line


def test_records_checked_by_nmt_runs_too(tmp_path: Path) -> None:
    """``nmt runs`` reads checkpoints through the same loader (tensors memory-mapped): a
    relisted archive, a progress out of range and a damaged pickle are broken rows."""
    runs = tmp_path / "runs"
    good = make_run(runs / "good", trained=False)
    last = (good / "checkpoints" / "last.pt").read_bytes()
    relisted = make_run(runs / "relisted", trained=False)
    (relisted / "checkpoints" / "last.pt").write_bytes(
        _relisted(last, _largest_record(last), 200))
    progress = make_run(runs / "progress", trained=False)
    payload = load_checkpoint(progress / "checkpoints" / "last.pt")
    payload["progress"]["step"] = -5
    torch.save(payload, progress / "checkpoints" / "last.pt")
    pickled = make_run(runs / "pickle", trained=False)
    with zipfile.ZipFile(io.BytesIO(last)) as z:
        info = z.getinfo("archive/data.pkl")
    damaged = bytearray(last)
    damaged[info.header_offset + 30 + len(info.filename) + info.file_size // 2] ^= 0x01
    (pickled / "checkpoints" / "last.pt").write_bytes(bytes(damaged))
    rows = {i.name: i for i in list_runs(runs)}
    assert rows["good"].ok and rows["good"].steps == 200
    assert rows["relisted"].state == "broken" and "records unpack to" in rows["relisted"].note
    assert rows["progress"].note == ("last.pt: incompatible checkpoint (progress: step: "
                                     "expected at least 0, got -5)")
    assert rows["pickle"].note == ("last.pt: corrupt or truncated checkpoint (record "
                                   "archive/data.pkl fails its CRC-32 check)")


# --- a damaged data cache is rebuilt -----------------------------------------------------------


def _edit_meta(cache: Path, change: Any) -> None:
    path = cache / "meta.json"
    meta = json.loads(path.read_text())
    path.write_text(json.dumps(change(meta)) if callable(change) else change)


def _edit_npz(cache: Path, change: Any) -> None:
    """Change the train split's arrays; each file is replaced, not written over (the cache's
    arrays are memory-mapped by the test, and by nmt)."""
    names = ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets")
    arrays = {name: np.load(cache / f"train.{name}.npy") for name in names}
    change(arrays)
    for name, array in arrays.items():
        np.save(cache / "new.npy", array)
        os.replace(cache / "new.npy", cache / f"train.{name}.npy")


def _set(arrays: dict[str, np.ndarray], name: str, value: np.ndarray) -> None:
    arrays[name] = value


CACHE_DAMAGE: dict[str, Any] = {
    "meta.json is a list": lambda c: _edit_meta(c, "[]\n"),
    "pairs is a list": lambda c: _edit_meta(c, lambda m: dict(m, pairs=[1, 2, 3])),
    "a split's count is text": lambda c: _edit_meta(
        c, lambda m: dict(m, pairs=dict(m["pairs"], valid="9"))),
    "version is true": lambda c: _edit_meta(c, lambda m: dict(m, version=True)),
    "counts holds a float": lambda c: _edit_meta(c, lambda m: dict(m, counts={"kept": 1.5})),
    "meta.json nested 100,000 deep": lambda c: _edit_meta(c, "[" * 100_000),
    "ids beyond the vocabulary": lambda c: _edit_npz(
        c, lambda a: a["tgt_ids"].__setitem__(0, 10**6)),
    "negative ids": lambda c: _edit_npz(c, lambda a: a["src_ids"].__setitem__(-1, -3)),
    "an <eos> inside a sentence": lambda c: _edit_npz(c, lambda a: a["src_ids"].__setitem__(0, 3)),
    "float ids": lambda c: _edit_npz(c, lambda a: _set(a, "src_ids",
                                                          a["src_ids"].astype(np.float64))),
    "offsets past the ids": lambda c: _edit_npz(
        c, lambda a: a["src_offsets"].__setitem__(-1, 10**9)),
    "offsets going backwards": lambda c: _edit_npz(
        c, lambda a: a["tgt_offsets"].__setitem__(1, 10**6)),
    "2-D ids": lambda c: _edit_npz(c, lambda a: _set(a, "tgt_ids", a["tgt_ids"][None])),
    "tokenizer.json nested 100,000 deep": lambda c: (c / "tokenizer.json").write_text(
        "[" * 100_000),
}


@pytest.mark.parametrize("damage", list(CACHE_DAMAGE))
def test_a_damaged_cache_is_rebuilt(tiny_data_dir: Path, tiny_data_config: DataConfig,
                                    damage: str) -> None:
    first = prepare(tiny_data_config, tiny_data_dir, log=quiet)
    CACHE_DAMAGE[damage](first.cache_dir)
    messages: list[str] = []
    again = prepare(tiny_data_config, tiny_data_dir, log=messages.append)
    notes = [m for m in messages if "unreadable" in m]
    assert len(notes) == 1 and notes[0].startswith(f"cache {first.cache_dir} unreadable (")
    assert "\n" not in notes[0]
    for name in ("train", "valid", "test"):
        for field in ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets"):
            assert np.array_equal(getattr(again.splits[name], field),
                                  getattr(first.splits[name], field))
    assert prepare(tiny_data_config, tiny_data_dir, log=quiet).meta == again.meta  # loads again


@pytest.mark.parametrize("shape", [(10**13,), (3,)])
def test_an_array_declaring_another_size_is_rebuilt(tiny_data_dir: Path,
                                                    tiny_data_config: DataConfig,
                                                    shape: tuple[int]) -> None:
    """A header declaring more than the file holds (it would map past the file's end) or less
    (bytes left unexplained) is a damaged cache, said with the file."""
    first = prepare(tiny_data_config, tiny_data_dir, log=quiet)
    path = first.cache_dir / "valid.src_ids.npy"
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<i4", "fortran_order": False, "shape": shape})
    (first.cache_dir / "new").write_bytes(header.getvalue() + bytes(64))
    os.replace(first.cache_dir / "new", path)
    reseal_cache(first.cache_dir)  # past the digests: the header is checked against the file
    messages: list[str] = []
    prepare(tiny_data_config, tiny_data_dir, log=messages.append)
    declared = f"declares {4 * shape[0]:,} bytes"
    assert any("unreadable" in m and str(path) in m and declared in m
               for m in messages), messages


# --- metrics and scores read back from a run ---------------------------------------------------


JUNK_METRICS = ['{"step": true, "valid_bleu": 99.0}', '{"step": -1, "valid_bleu": 98.0}',
                '[' * 100_000, '{"step": 1e400, "valid_bleu": 97.0}', '{"step": "7"}', '5']


def test_metric_lines_that_are_not_records_are_skipped_everywhere(tmp_path: Path) -> None:
    run = make_run(tmp_path / "runs" / "r", trained=False)
    good = ['{"step": 100, "valid_bleu": 20.5}', '{"step": 300, "valid_bleu": 31.25}']
    (run / "metrics.jsonl").write_text("\n".join([good[0], *JUNK_METRICS, good[1]]) + "\n")
    assert [r["step"] for r in read_metrics(run)] == [100, 300]
    (info,) = list_runs(tmp_path / "runs")
    assert info.ok and (info.best_valid_bleu, info.best_valid_step) == (31.25, 300)
    MetricsLog(run, enabled=True).truncate_after(200)  # what --resume does
    assert (run / "metrics.jsonl").read_text() == good[0] + "\n"


@pytest.mark.parametrize("report", [
    '{"multi": {"bleu": 20.0}, "beam": 1e400}', '{"multi": {"bleu": "x"}}',
    '{"multi": {"bleu": NaN}}', '{"multi": [1]}', '[1, 2]', '"text"', '[' * 100_000,
    '{"multi": {"bleu": 20.0}, "beam": true}',
])
def test_a_damaged_scores_file_is_a_note(tmp_path: Path, report: str) -> None:
    run = make_run(tmp_path / "runs" / "r", trained=False)
    (run / "scores.test.json").write_text(report)
    (info,) = list_runs(tmp_path / "runs")
    assert info.state == "unfinished" and info.steps == 200  # the rest of the row is read
    assert (info.test_bleu, info.note) == (None, "scores.test.json unreadable")


# --- vocabulary sizes SentencePiece cannot train -----------------------------------------------


def _prepare_line(data_dir: Path, size: int) -> tuple[int, str]:
    code, _, err = invoke("data", "prepare", "--data-dir", str(data_dir),
                          "--set", f"data.vocab_size={size}", "--set", "data.valid_frac=0.1",
                          "--set", "data.test_frac=0.1")
    assert "Traceback" not in err and "INTERNAL" not in err and "trainer_interface" not in err
    return code, err.strip().splitlines()[-1]  # after the lines that report progress


@pytest.mark.parametrize("size", [1, 4])
def test_a_vocabulary_below_the_specials_is_a_config_error(tiny_data_dir: Path,
                                                           size: int) -> None:
    code, line = _prepare_line(tiny_data_dir, size)
    assert code == 2
    assert line == ("error: defaults (with --set): data.vocab_size: expected at least 5 for "
                    f"SentencePiece (its 4 special tokens and a character), got {size}")


def test_a_vocabulary_below_the_texts_characters_is_a_config_error(tiny_data_dir: Path) -> None:
    """SentencePiece needs a piece for every character of the training text: the error names
    the key and the size needed, and that size trains (the control)."""
    code, line = _prepare_line(tiny_data_dir, 5)
    assert code == 2
    match = re.fullmatch(r"error: data\.vocab_size=5: too small for this training text, "
                         r"expected at least (\d+) \(a piece for each of its characters and "
                         r"the 4 special tokens at data\.character_coverage=1\.0; or lower "
                         r"data\.character_coverage, 0\.9995 for Chinese or Japanese\)", line)
    assert match, line
    needed = int(match.group(1))
    assert _prepare_line(tiny_data_dir, needed - 1) == (2, line.replace("=5", f"={needed - 1}"))
    cfg = DataConfig(vocab_size=needed, valid_frac=0.1, test_frac=0.1)
    assert prepare(cfg, tiny_data_dir, log=quiet).tokenizer.src_vocab_size == needed


@pytest.mark.parametrize("text", ["[" * 100_000, "not json", "[]", "{}", '{"run": 5}',
                                  '{"corpus": []}', "\udcff"])
@pytest.mark.parametrize("kind", ["corpus.json", "parent.json"])
def test_a_runs_records_edited_are_one_line_errors_naming_them(tmp_path: Path, kind: str,
                                                               text: str) -> None:
    """The JSON files a run records of its data and its parent, read through one reader
    (``nmt.files.read_json``): deleted is None, anything else not what nmt wrote is one line
    naming the file (nesting too deep too), never a traceback."""
    from nmt.errors import NmtError
    from nmt.runs.records import read_corpus_record, read_parent

    read = read_corpus_record if kind == "corpus.json" else read_parent
    assert read(tmp_path) is None
    (tmp_path / kind).write_text(text, encoding="utf-8", errors="surrogateescape")
    with pytest.raises(NmtError) as e:
        read(tmp_path)
    message = str(e.value)
    assert message.startswith(f"{tmp_path / kind}: ") and "\n" not in message
    assert "expected the" in message


@pytest.mark.parametrize("text", ["[" * 100_000, "not json", "[]", '{"run": 5}', ""])
def test_an_exports_metadata_beside_a_run_copy_names_no_run_when_damaged(tmp_path: Path,
                                                                          text: str) -> None:
    """``--from`` an export records the exported run's name from its ``nmt-export.json``;
    damaged, the name is left out (the checkpoint's digest still identifies the parent)."""
    from nmt.runs.portable import META_FILE, RUN_COPY, exported_run_name

    (tmp_path / RUN_COPY).mkdir()
    assert exported_run_name(tmp_path / RUN_COPY) == ""
    (tmp_path / META_FILE).write_text(text, encoding="utf-8")
    assert exported_run_name(tmp_path / RUN_COPY) == ""
    (tmp_path / META_FILE).write_text('{"run": "demo"}', encoding="utf-8")
    assert exported_run_name(tmp_path / RUN_COPY) == "demo"
