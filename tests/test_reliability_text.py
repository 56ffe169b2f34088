"""Hostile text through `nmt translate` and `nmt bleu`: empty and blank input, invalid UTF-8,
NUL bytes, a 1 MB line, mismatched line counts, emoji, CJK and control characters.

The defined behaviour: one output line per input line (lines end at ``\\n`` only), blank or
invisible-only lines give empty lines, unknown characters become ``<unk>`` (never an error),
NUL bytes are spaces, over-long lines are cut with a warning; input that is not UTF-8 or files
that do not line up are one-line errors naming the file and line. Already covered elsewhere:
invalid UTF-8 and NUL on stdin, empty lines, long-line warnings (test_translate.py), a reference
file shorter than --src (test_bleu.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import invoke
from test_decode import make_run

UNKNOWN = "a 😀 b\n中文字幕\n\x01a\x1b[31mb\x7f\nc\x0cd\u2028e\rf\u0085g\n"  # 4 lines
MEGABYTE_LINE = "a b " * 262_144  # 1 MiB


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "toy")


def translate(run_dir: Path, data: bytes, *args: str) -> tuple[int, str, str]:
    return invoke("translate", "--run", str(run_dir), "--device", "cpu", *args, input=data)


def lines_of(out: str) -> list[str]:
    assert out == "" or out.endswith("\n")
    return out.split("\n")[:-1]


def one_line_error(code: int, err: str) -> str:
    assert code != 0
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    return err.strip()


# --- nmt translate ------------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "expected"), [
    (b"", []),  # nothing in, nothing out, success
    (b"\n\n   \n\t\n", ["", "", "   ", "\t"]),  # spacing comes back as written
    (b"\x00\n\xe2\x80\x8b\xc2\xad\n\x1b\x07\n\xef\xbb\xbf\n", ["", "", "", ""]),  # invisible
], ids=["empty", "blank", "invisible"])
def test_translate_empty_and_blank_input(run_dir: Path, data: bytes, expected: list[str]) -> None:
    code, out, err = translate(run_dir, data)
    assert code == 0, err
    assert lines_of(out) == expected


def test_translate_unknown_characters_give_one_clean_line_each(run_dir: Path) -> None:
    """Emoji, CJK, C0/C1 controls, ESC sequences, form feed, U+2028 and a lone CR inside a
    line: each line is translated (unknown words are <unk>), output is one line per line."""
    code, out, err = translate(run_dir, UNKNOWN.encode("utf-8"))
    assert code == 0, err
    lines = lines_of(out)
    assert len(lines) == 4 and all(lines)
    assert all(ch.isprintable() for line in lines for ch in line)


def test_translate_line_endings_bom_and_nul_do_not_change_the_output(run_dir: Path) -> None:
    _, plain, _ = translate(run_dir, b"a b c\nd e\n")
    for variant in (b"a b c\r\nd e\r\n", b"\xef\xbb\xbfa b c\nd e", b"a b\x00c\nd\x00\x00e\n"):
        code, out, err = translate(run_dir, variant)
        assert code == 0, err
        assert out == plain, variant


def test_translate_a_one_megabyte_line(run_dir: Path) -> None:
    data = f"a b\n{MEGABYTE_LINE}\nc\n".encode()
    code, out, err = translate(run_dir, data)
    assert code == 0
    assert len(lines_of(out)) == 3 and all(lines_of(out))
    assert "stdin: line 2: 524289 source tokens, cut to the first 64" in err


@pytest.mark.parametrize(("data", "needle"), [
    (b"a b\nc d\n\xe9t\xe9\n", "line 3: not valid UTF-8 (byte 1 of the line)"),
    ("a b\nc\n".encode("utf-16"), "line 1: not valid UTF-8"),  # UTF-16 with its BOM
    (b"a b\n\xc3\n", "line 2: not valid UTF-8"),  # a character cut in half
], ids=["latin-1", "utf-16", "cut-character"])
def test_translate_input_file_that_is_not_utf8(run_dir: Path, tmp_path: Path, data: bytes,
                                               needle: str) -> None:
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_bytes(data)
    target.write_text("previous translations\n", encoding="utf-8")
    code, out, err = translate(run_dir, b"", "--input", str(source), "--output", str(target))
    line = one_line_error(code, err)
    assert f"--input {source}: {needle}" in line and "convert the file to UTF-8" in line
    assert out == ""
    # the output file is replaced only by a complete translation
    assert target.read_text(encoding="utf-8") == "previous translations\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.txt"]


def test_translate_output_file_is_complete_or_untouched(run_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    code, _, err = translate(run_dir, b"a b\n\nc\n", "--output", str(target))
    assert code == 0, err
    assert len(lines_of(target.read_text(encoding="utf-8"))) == 3


# --- nmt bleu -----------------------------------------------------------------------------------


def bleu(run_dir: Path, tmp_path: Path, src: bytes, *refs: bytes) -> tuple[int, str, str]:
    args = ["bleu", "--run", str(run_dir), "--device", "cpu", "--json"]
    src_path = tmp_path / "src.en"
    src_path.write_bytes(src)
    args += ["--src", str(src_path)]
    for i, ref in enumerate(refs):
        ref_path = tmp_path / f"ref{i}.fr"
        ref_path.write_bytes(ref)
        args += ["--ref", str(ref_path)]
    return invoke(*args)


def test_bleu_empty_files_are_an_error(run_dir: Path, tmp_path: Path) -> None:
    code, _, err = bleu(run_dir, tmp_path, b"", b"")
    assert "src.en: no sentences to translate" in one_line_error(code, err)


def test_bleu_blank_lines_are_scored_as_sentences(run_dir: Path, tmp_path: Path) -> None:
    code, out, err = bleu(run_dir, tmp_path, b"a b\n\n\n", b"b a\n\n\n")
    assert code == 0, err
    report = json.loads(out)
    assert report["sentences"] == 3
    hyps = lines_of(Path(report["hypotheses"]).read_text(encoding="utf-8"))
    assert len(hyps) == 3 and hyps[1:] == ["", ""]
    assert 0.0 <= report["multi"]["bleu"] <= 100.0


@pytest.mark.parametrize("which", ["src", "ref"])
def test_bleu_invalid_utf8_names_the_file_and_line(run_dir: Path, tmp_path: Path,
                                                   which: str) -> None:
    good, bad = b"a b\nc d\n", b"a b\n\xff\xfe\n"
    code, _, err = bleu(run_dir, tmp_path, *((bad, good) if which == "src" else (good, bad)))
    name = "--src " + str(tmp_path / "src.en") if which == "src" else "--ref " + str(
        tmp_path / "ref0.fr")
    assert f"{name}: line 2: not valid UTF-8" in one_line_error(code, err)


def test_bleu_reference_longer_than_source(run_dir: Path, tmp_path: Path) -> None:
    code, _, err = bleu(run_dir, tmp_path, b"a b\n", b"b a\n", b"b a\nc\n")
    line = one_line_error(code, err)
    assert f"--ref {tmp_path / 'ref1.fr'}: 2 lines, but --src" in line and "has 1" in line


def test_bleu_unknown_characters_nul_and_a_long_line(run_dir: Path, tmp_path: Path) -> None:
    src = (UNKNOWN + "a\x00b\n" + MEGABYTE_LINE + "\n").encode("utf-8")
    ref = "😀 中文\n字\n\x1b[0m\nc d\nb\x00a\nb a\n".encode()
    code, out, err = bleu(run_dir, tmp_path, src, ref)
    assert code == 0, err
    report = json.loads(out)
    assert report["sentences"] == 6
    hyps = lines_of(Path(report["hypotheses"]).read_text(encoding="utf-8"))
    assert len(hyps) == 6 and all(hyps)


def test_bleu_line_endings_and_bom_do_not_change_the_scores(run_dir: Path,
                                                             tmp_path: Path) -> None:
    plain = json.loads(bleu(run_dir, tmp_path, b"a b c\nd e\n", b"c b a\ne d\n")[1])
    variant = json.loads(bleu(run_dir, tmp_path, b"\xef\xbb\xbfa b c\r\nd e",
                              b"\xef\xbb\xbfc b a\r\ne d\r\n")[1])
    assert variant["multi"]["bleu"] == plain["multi"]["bleu"]
    assert variant["multi"]["chrf"] == plain["multi"]["chrf"]


@pytest.mark.slow
def test_translate_into_a_closed_pipe_exits_quietly(run_dir: Path) -> None:
    """`nmt translate < big | head -1`: when the reader goes away, translate stops with exit
    status 1 and no traceback (click's handling of EPIPE)."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "nmt", "translate", "--run", str(run_dir),
                             "--device", "cpu", "--batch-size", "8"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=root)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(b"a b c\n" * 20_000)
    proc.stdin.close()
    assert proc.stdout.readline()  # the first translation arrives ...
    proc.stdout.close()  # ... and the reader leaves, like `head -1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
