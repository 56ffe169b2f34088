"""Memory and input streams of translation: decoding batches bounded in tokens (a long line, a
big beam), lines read to a bound (a stream without a line end), failing reads, closed standard
streams, FIFOs as input, attention pictures of long sentences."""

from __future__ import annotations

import io
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import invoke
from hypothesis import given
from hypothesis import strategies as st
from test_decode import TEXTS, make_run, src_ids, trained_toy

import nmt.pictures.attention
import nmt.translation.search
from nmt.config import DecodeConfig
from nmt.errors import DataError
from nmt.files import read_lines
from nmt.models.base import EncoderDecoder
from nmt.runs.loading import load_run
from nmt.translation.search import decode_batches, search_ids
from nmt.translation.translator import Translator

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

    monkeypatch.setattr(nmt.translation.search, "decode_batches", batches)
    code, out, _ = invoke("translate", "--run", str(run_dir), "--device", "cpu",
                          "--max-tokens", "8", "--beam", "2", *TEXTS[:5])
    assert code == 0 and out.splitlines() == unbounded[:5] and seen == [8]


@pytest.mark.parametrize("beam", [1, 3])
def test_ctranslate2_batches_are_bounded_alike(run_dir: Path, tmp_path: Path, beam: int) -> None:
    pytest.importorskip("ctranslate2")
    from nmt.export.ct2_convert import export_run
    from nmt.export.ct2_translate import CT2Translator

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


# --- lines read to a bound -----------------------------------------------------------------------


def test_read_lines_cuts_a_long_line_and_reads_on() -> None:
    cut: list[tuple[int, int]] = []
    data = b"a b\n" + "é".encode() * 6 + b"xyz\r\n" + b"12345678\r\nend"
    lines = list(read_lines(io.BytesIO(data), "in", on_long=lambda *a: cut.append(a),
                            max_bytes=8))
    # the 15-byte line is cut to 8 bytes: 4 characters; "12345678\r\n" is 8 bytes and its end
    assert lines == ["a b", "éééé", "12345678", "end"]
    assert cut == [(2, 8)]


def test_read_lines_without_a_hook_refuses_a_long_line() -> None:
    with pytest.raises(DataError, match=r"^in: line 2: longer than 8 bytes; expected one "
                                        r"sentence per line$"):
        list(read_lines(io.BytesIO(b"a\n" + b"x" * 100), "in", max_bytes=8))


def test_read_lines_reads_a_long_line_a_bounded_piece_at_a_time() -> None:
    class Stream(io.BytesIO):
        most = 0

        def readline(self, size: int | None = -1) -> bytes:
            assert size is not None and 0 < size <= 9, size  # never the whole line
            piece = super().readline(size)
            Stream.most = max(Stream.most, len(piece))
            return piece

    lines = list(read_lines(Stream(b"\x00" * 10_000 + b"\nb"), "in", on_long=lambda *a: None,
                            max_bytes=8))
    assert lines == ["", "b"] and Stream.most == 9  # NULs are no text: an empty line


@given(st.lists(st.tuples(st.text("ab\r ", max_size=20).map(lambda t: t.rstrip("\r")),
                          st.sampled_from(["\n", "\r\n"])), max_size=6),
       st.booleans(), st.integers(1, 12))
def test_read_lines_gives_each_lines_end_as_written(lines: list[tuple[str, str]],
                                                    last_unended: bool, max_bytes: int) -> None:
    if last_unended and lines and lines[-1][0]:
        lines[-1] = (lines[-1][0], "")  # a last line without an end
    data = "".join(text + end for text, end in lines).encode()
    ends: list[str] = []
    read = list(read_lines(io.BytesIO(data), "in", on_long=lambda *a: None,
                           max_bytes=max_bytes, on_end=ends.append))
    assert ends == [end for _, end in lines]
    assert read == [text if len(text) + (end == "\r\n") <= max_bytes
                    else text[:max_bytes].rstrip("\r") for text, end in lines]


def test_a_failing_read_is_one_line_naming_the_input_and_line() -> None:
    class Failing(io.BytesIO):
        def readline(self, size: int | None = -1) -> bytes:
            if self.tell() > 0:
                raise OSError(5, "Input/output error")
            return super().readline(size)

    with pytest.raises(DataError, match=r"^stdin: line 2: cannot read \(Input/output error\)$"):
        list(read_lines(Failing(b"a\nb\n"), "stdin"))


def _shell(command: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    """``command`` in bash, ``nmt`` being this checkout's: as a user's shell runs it."""
    env = dict(os.environ, OMP_NUM_THREADS="1", COLUMNS="500",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["NMT"] = f"{shlex.quote(sys.executable)} -m nmt"
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=timeout)


# Runs nmt as its only child and prints that child's peak resident memory in MiB.
PEAK = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=False); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, "
        "file=sys.stderr)")


def test_a_stream_without_a_line_end_is_read_in_bounded_memory(run_dir: Path) -> None:
    """`head -c 64M /dev/zero | nmt translate`: before, the whole stream was one line held in
    memory (twice, as bytes and text); now 1 MiB of it is read, the rest skipped."""
    nmt = (f"{shlex.quote(sys.executable)} -c {shlex.quote(PEAK)} {shlex.quote(sys.executable)} "
           f"-m nmt translate --run {shlex.quote(str(run_dir))} --device cpu")
    small = _shell(f"printf 'a b' | {nmt}")
    big = _shell(f"head -c 64M /dev/zero | {nmt}")
    assert big.returncode == 0 and big.stdout == "\n", big.stderr  # NUL is blank: an empty line
    warning, peak = big.stderr.splitlines()
    assert warning == "warning: stdin: line 1: longer than 1,048,576 bytes; only the first are read"
    assert int(peak) < int(small.stderr.split()[-1]) + 32  # MiB; reading it whole took 128+


def test_bleu_refuses_a_reference_line_over_the_bound(run_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "src.txt").write_text("a b\nc\n")
    (tmp_path / "ref.txt").write_bytes(b"b a\n" + b"c " * (1 << 20))
    code, _, err = invoke("bleu", "--run", str(run_dir), "--device", "cpu",
                          "--src", str(tmp_path / "src.txt"), "--ref", str(tmp_path / "ref.txt"))
    assert _one_line(code, err) == (f"error: --ref {tmp_path / 'ref.txt'}: line 2: longer than "
                                    "1,048,576 bytes; expected one sentence per line")


# --- closed standard streams, FIFOs ------------------------------------------------------------


@pytest.mark.parametrize(("redirect", "message"), [
    ("<&-", "error: stdin: closed; give sentences, --input FILE, or pipe text in"),
    ("'a b' >&-", "error: standard output: closed; nowhere to write the translations (use "
                  "--output FILE)"),
], ids=["stdin", "stdout"])
def test_translate_with_a_closed_stream_is_one_line(run_dir: Path, redirect: str,
                                                    message: str) -> None:
    proc = _shell(f"$NMT translate --run {shlex.quote(str(run_dir))} --device cpu {redirect}")
    assert _one_line(proc.returncode, proc.stderr) == message


def test_commands_run_with_stdout_closed_and_files_do_not_take_its_place(
        run_dir: Path, tmp_path: Path) -> None:
    """With descriptor 1 closed the next file opened would get it: the translation goes to
    --output, and nothing meant for the terminal lands in a file."""
    out = tmp_path / "out.txt"
    proc = _shell(f"$NMT translate --run {shlex.quote(str(run_dir))} --device cpu "
                  f"--output {shlex.quote(str(out))} 'a b c' >&- && "
                  f"$NMT runs --runs-dir {shlex.quote(str(run_dir.parent))} >&- && $NMT --help >&-")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert out.read_text() == invoke("translate", "--run", str(run_dir), "--device", "cpu",
                                     "a b c")[1]


def test_fifos_and_process_substitution_are_inputs(run_dir: Path, tmp_path: Path) -> None:
    expected = invoke("translate", "--run", str(run_dir), "--device", "cpu", *TEXTS[:3])[1]
    lines = shlex.quote("\n".join(TEXTS[:3]) + "\n")
    run = shlex.quote(str(run_dir))
    proc = _shell(f"$NMT translate --run {run} --device cpu --input <(printf %s {lines}) && "
                  f"printf %s {lines} | $NMT translate --run {run} --device cpu -i /dev/stdin")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected * 2
    proc = _shell(f"$NMT bleu --run {run} --device cpu --json --src <(printf %s {lines}) "
                  f"--ref <(printf %s {lines})")
    assert proc.returncode == 0 and '"sentences": 3' in proc.stdout, proc.stderr


def test_a_directory_as_input_is_one_line(run_dir: Path, tmp_path: Path) -> None:
    code, _, err = invoke("translate", "--run", str(run_dir), "--input", str(tmp_path))
    assert _one_line(code, err) == (f"error: --input {tmp_path}: is a directory; expected a "
                                    "text file")


# --- attention pictures of long sentences --------------------------------------------------------


def test_attention_refuses_a_sentence_too_long_to_draw(run_dir: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nmt.pictures.attention, "MAX_ATTENTION_TOKENS", 5)
    picture = tmp_path / "a.png"
    code, _, err = invoke("attention", "a b c d e", "--run", str(run_dir), "--device", "cpu",
                          "-o", str(picture))
    assert _one_line(code, err) == (f"error: --output {picture}: the sentence has 6 source "
                                    "tokens; attention is drawn for at most 5 (draw a shorter "
                                    "sentence)")
    code, out, err = invoke("translate", "--run", str(run_dir), "--device", "cpu",
                            "--attention", str(picture), "a b c d e")
    assert _one_line(code, err).startswith(f"error: --attention {picture}: the sentence has 6")
    assert out == "" and not picture.exists()  # refused before translating
    code, _, err = invoke("attention", "a b c d", "--run", str(run_dir), "--device", "cpu",
                          "-o", str(picture))
    assert code == 0 and picture.is_file(), err  # 5 tokens: drawn


def test_the_attention_bound_is_on_the_source_the_model_takes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run trained on sources cut to 4 tokens (the d2l presets' kind) sees 4 of a long
    sentence, and draws them."""
    from test_export import word_truncate_run

    monkeypatch.setattr(nmt.pictures.attention, "MAX_ATTENTION_TOKENS", 5)
    run = word_truncate_run(tmp_path / "cut")
    code, _, err = invoke("attention", LONG, "--run", str(run), "--device", "cpu",
                          "-o", str(tmp_path / "a.png"), "--checkpoint", "best")
    assert code == 0, err


def test_sigterm_while_translating_to_a_file_leaves_no_temporary_file(run_dir: Path,
                                                                       tmp_path: Path) -> None:
    """SIGTERM during `nmt translate --input big.txt --output out/fr.txt`: exit status 143,
    `out/fr.txt` as it was (absent here) and no `.fr.txt.XXXX.tmp` left beside it (before: the
    process died with the temporary file in place)."""
    big = tmp_path / "big.txt"
    big.write_text((LONG + "\n") * 200_000, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "nmt", "translate", "--run", str(run_dir),
                             "--input", str(big), "--output", str(out / "fr.txt")],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not list(out.glob(".fr.txt.*.tmp")):  # the translation is being written
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "terminated" and "Traceback" not in err, err
    assert list(out.iterdir()) == []
