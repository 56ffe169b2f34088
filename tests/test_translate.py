"""`nmt translate` and the text pipeline: normalisation, empty and long lines, streaming,
invalid input, run/checkpoint errors, attention weights for pictures."""

from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from conftest import invoke
from test_decode import TOKENIZER, make_run, random_model, train_toy, trained_toy
from ties import assert_greedy_equal_up_to_ties, sources_of

from nmt.api import translate_lines
from nmt.config import DecodeConfig
from nmt.errors import DataError
from nmt.files import read_lines
from nmt.runs.loading import load_run
from nmt.translation.translator import (
    Translator,
    output_limit,
    source_ids,
    source_limit,
    translate_normalized,
    translate_with_attention,
)

ROOT = Path(__file__).resolve().parent.parent
TEXTBOOK = {"lowercase": True, "policy": "full"}  # the toy tokenizer's lower-cased, spaced text

@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "toy")


@pytest.fixture(scope="module")
def translator(run_dir: Path) -> Translator:
    return Translator.from_run(load_run(run_dir, "best", "cpu"))


def assert_same_text(translator: Translator, texts: list[str], expected: list[str],
                     got: list[str]) -> None:
    """Two computations' translations of ``texts`` with the toy run (word-level, so text gives
    back its ids): equal up to ties (ties.py)."""
    sources = sources_of(translator, texts)
    limits = [output_limit(len(s), translator.cfg, translator.model.max_positions)
              for s in sources]
    assert_greedy_equal_up_to_ties(translator.model, sources,
                                   [TOKENIZER.encode_tgt(t) for t in expected],
                                   [TOKENIZER.encode_tgt(t) for t in got], limits)


# --- the library ---------------------------------------------------------------------------------


def test_toy_run_translates_like_the_model(translator: Translator) -> None:
    """The pipeline gives the model what training gave it (the source's ids and <eos>) and
    gives back the text of the model's own search: asserted on the pipeline, not on what the
    tiny model happened to learn, which differs between CPUs (test_decode.py checks that)."""
    from nmt.data.tokenizers import EOS_ID
    from nmt.translation.search import search_ids

    texts = ["a b c", "D e", "  h ", "g f e d c b a"]
    out = translator.translate(texts)
    ids = [TOKENIZER.encode_src(" ".join(t.lower().split())) + [EOS_ID] for t in texts]
    assert [len(i) for i in ids] == [4, 3, 2, 8] and EOS_ID not in ids[0][:-1]
    hyps = search_ids(translator.model, ids, translator.cfg)  # the same batch, so the same sums
    assert out == [TOKENIZER.decode_tgt(h.tokens) for h in hyps]


def test_input_is_normalised_like_training(translator: Translator) -> None:
    variants = ["A B C", "  a   b\tc ", "a\u00a0b c", "a b c"]
    assert len({translator.translate([v])[0] for v in variants}) == 1  # each alone: one input
    assert translator.translate(["I'm home."]) == translator.translate(["i'm home ."])


def test_empty_lines_give_empty_lines(translator: Translator) -> None:
    out = translator.translate(["a b", "", "   ", "\u200b", "c"])
    assert out[1:4] == ["", "", ""]
    assert out[0] and out[4]


def test_source_ids_end_in_eos_and_are_cut_to_the_limit() -> None:
    assert source_ids(TOKENIZER, "a b c", 10) == (TOKENIZER.encode_src("a b c") + [3], 4)
    ids, n = source_ids(TOKENIZER, "a b c d e", 3)
    assert n == 6 and len(ids) == 3 and ids[-1] == 3
    assert source_ids(TOKENIZER, "", 3) == ([], 0)
    assert source_limit(random_model("transformer")) == 64  # the position table
    assert source_limit(random_model("gru")) == 1024
    assert source_limit(random_model("transformer"), 8) == 8
    assert source_limit(random_model("gru"), None, 10) == 10  # the run's data.truncate
    assert source_limit(random_model("gru"), 20, 10) == 20  # the option wins
    assert source_limit(random_model("transformer"), None, 100) == 64
    assert source_ids(TOKENIZER, "a b c d e", 3, keep_eos=False) == (
        TOKENIZER.encode_src("a b c"), 6)


def test_runs_trained_on_cut_sources_cut_them_alike(translator: Translator) -> None:
    """data.truncate (the d2l presets) cuts translation inputs as training cut its sources: the
    first N tokens, <eos> and all (the recipe's predict does the same), with a warning."""
    from dataclasses import replace

    from nmt.data.tokenizers import EOS_ID
    from nmt.translation.search import search_ids

    cut = replace(translator, truncate=3)
    seen: list[tuple[int, int, int]] = []
    out = cut.translate(["a b", "c d e f g"], on_truncate=lambda *a: seen.append(a))
    assert seen == [(1, 6, 3)]
    # short sources are untouched (the same batch, so the same computation)
    hyps = search_ids(cut.model, [TOKENIZER.encode_src("a b") + [EOS_ID],
                                  TOKENIZER.encode_src("c d e")], cut.cfg)
    assert out == [TOKENIZER.decode_tgt(h.tokens) for h in hyps]
    # an explicit --max-src-tokens wins, and keeps <eos> at the end of the cut source
    hyp = search_ids(cut.model, [TOKENIZER.encode_src("c d e") + [EOS_ID]], cut.cfg)[0]
    assert replace(cut, max_src_tokens=4).translate(["c d e f g"]) == [
        TOKENIZER.decode_tgt(hyp.tokens)]


def test_long_lines_are_truncated_with_a_report(translator: Translator) -> None:
    seen: list[tuple[int, int, int]] = []
    long_line = " ".join(["a"] * 200)  # 201 tokens with <eos>, past the 64 positions
    out = translator.translate(["b", long_line], on_truncate=lambda *a: seen.append(a))
    assert seen == [(1, 201, 64)]
    assert len(out) == 2


def test_streaming_matches_one_shot_and_is_lazy(translator: Translator) -> None:
    lines = [" ".join("abcdefgh"[(i * 7 + j) % 8] for j in range(1 + i % 5)) for i in range(50)]
    lines[10] = ""
    pulled = 0

    def source() -> Iterator[str]:
        nonlocal pulled
        for line in lines:
            pulled += 1
            yield line

    written: list[tuple[str, int]] = []
    n = translator.translate_stream(source(), lambda s: written.append((s, pulled)),
                                    chunk_lines=8)
    assert n == 50
    assert_same_text(translator, lines, translator.translate(lines), [w for w, _ in written])
    assert written[0][1] <= 9  # the first chunk was written before the rest was read


def test_stream_reports_truncation_with_global_line_numbers(translator: Translator) -> None:
    seen: list[int] = []
    lines = ["a"] * 9 + [" ".join(["b"] * 100)]
    translator.translate_stream(iter(lines), lambda s: None,
                                on_truncate=lambda i, n, limit: seen.append(i), chunk_lines=4)
    assert seen == [9]


def test_read_lines_names_the_bad_line_and_handles_nul() -> None:
    stream = io.BytesIO(b"a b\r\nc\x00d\n\xe9t\xe9\n")
    lines = read_lines(stream, "in.txt")
    assert next(lines) == "a b"
    assert next(lines) == "c d"
    with pytest.raises(DataError, match=r"in\.txt: line 3: not valid UTF-8"):
        next(lines)


def test_translate_normalized_is_what_validation_calls(translator: Translator) -> None:
    """The training loop's validation calls it with beam=1 on normalised text."""
    out = translate_normalized(translator.model, TOKENIZER, ["a b c", ""],
                               DecodeConfig(beam=4), torch.device("cpu"), beam=1)
    assert out == translator.translate(["a b c", ""])


def test_translation_equals_the_uncached_reference(translator: Translator) -> None:
    """The cached search translation uses gives the text of the recipe's uncached greedy
    search, which re-runs the decoder over the whole prefix at every step."""
    from nmt.translation.search import search_ids

    sources = ["a b c", "d e f g", "h"]
    cached = translate_normalized(translator.model, TOKENIZER, sources, DecodeConfig())
    ids = [source_ids(TOKENIZER, s, 1024)[0] for s in sources]
    hyps = search_ids(translator.model, ids, DecodeConfig(), method="uncached")
    uncached = [TOKENIZER.decode_tgt(h.tokens) for h in hyps]
    assert_same_text(translator, sources, uncached, cached)


@pytest.mark.parametrize("arch", ["transformer", "gru"])
def test_translate_with_attention(arch: str) -> None:
    model = trained_toy(arch)
    tokens, src_tokens, weights = translate_with_attention(model, TOKENIZER, "A b c", **TEXTBOOK)
    assert src_tokens == ["a", "b", "c", "<eos>"]
    t, s = len(tokens), len(src_tokens)
    assert weights["cross"].shape[2:] == (t, s)
    if arch == "transformer":
        assert weights["enc"].shape[2:] == (s, s)
        assert weights["self"].shape[2:] == (t, t)
    with pytest.raises(DataError):
        translate_with_attention(model, TOKENIZER, " \u200b ", **TEXTBOOK)
    _, src_tokens, weights = translate_with_attention(model, TOKENIZER, "a b c d e", truncate=3,
                                                     **TEXTBOOK)
    assert src_tokens == ["a", "b", "c"] and weights["cross"].shape[3] == 3  # cut as in training


# --- the command ---------------------------------------------------------------------------------


def test_cli_translates_arguments(run_dir: Path, translator: Translator) -> None:
    code, out, _ = invoke("translate", "--run", str(run_dir), "--device", "cpu",
                          "A B C.", "", "d e")
    assert code == 0
    assert out.split("\n")[:-1] == translator.translate(["A B C.", "", "d e"])


def test_cli_stdin_to_output_file(run_dir: Path, translator: Translator, tmp_path: Path) -> None:
    target = tmp_path / "out.fr"
    code, out, err = invoke("translate", "--run", str(run_dir), "--output", str(target),
                            "--batch-size", "2", input=b"a b\n\nc d e\r\nf\x00g\n")
    assert code == 0 and out == ""
    two = Translator.from_run(load_run(run_dir, "best", "cpu"), batch_size=2)  # the same batches
    translations = two.translate(["a b", "", "c d e", "f g"])
    # each line ends as its source did: CRLF stays CRLF (a Windows file is not turned Unix)
    assert target.read_bytes() == "".join(
        line + end for line, end in zip(translations, ["\n", "\n", "\r\n", "\n"],
                                        strict=True)).encode()


def test_cli_a_file_of_crlf_lines_comes_back_so(run_dir: Path, translator: Translator,
                                                tmp_path: Path) -> None:
    source, target = tmp_path / "in.en", tmp_path / "out.fr"
    source.write_bytes(b"a b\r\n\r\nc d\r\ne")  # the last line without an end
    code, out, _ = invoke("translate", "--run", str(run_dir), "--input", str(source),
                          "--output", str(target))
    assert code == 0
    lines = translator.translate(["a b", "", "c d", "e"])
    assert target.read_bytes() == "\r\n".join(lines[:3]).encode() + b"\r\n" + \
        lines[3].encode() + b"\n"  # a file ends with a line end
    stream = io.StringIO()
    translate_lines(translator, input=source, stream=stream)  # standard output, say
    assert stream.getvalue() == target.read_bytes().decode()


def test_cli_input_file_with_beam(run_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.en"
    source.write_text("a b c\nd\n", encoding="utf-8")
    code, out, _ = invoke("translate", "--run", str(run_dir), "--input", str(source),
                          "--beam", "3")
    assert code == 0
    assert len(out.split("\n")[:-1]) == 2


def test_cli_warns_about_long_lines(run_dir: Path) -> None:
    code, out, err = invoke("translate", "--run", str(run_dir), "--max-src-tokens", "3",
                            input="a\na b c d e\n")
    assert code == 0
    assert len(out.split("\n")[:-1]) == 2
    assert "stdin: line 2: 6 source tokens, cut to the first 3" in err


def test_cli_invalid_utf8_is_a_one_line_error(run_dir: Path) -> None:
    code, _, err = invoke("translate", "--run", str(run_dir), input=b"a b\n\xff\xfe c\n")
    assert code != 0
    assert err.strip().count("\n") == 0
    assert "stdin: line 2: not valid UTF-8" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--run", "no/such/run"], "run directory not found"),
        (["--checkpoint", "nope.pt"], "expected best, last or a checkpoint file"),
        (["--input", "no-such-file.txt"], "--input no-such-file.txt: file not found"),
        (["--output", "no/such/dir/out.txt"], "--output no/such/dir/out.txt: cannot write"),
    ],
)
def test_cli_errors_are_one_line(run_dir: Path, args: list[str], message: str) -> None:
    if "--run" not in args:
        args = ["--run", str(run_dir), *args]
    code, _, err = invoke("translate", *args, *([] if "--input" in args else ["a"]))
    assert code != 0
    assert message in err and err.strip().count("\n") == 0


@pytest.mark.parametrize("case", ["missing input", "output is the input", "stdin closed",
                                  "stdin a terminal"])
def test_cli_input_errors_come_before_the_model_loads(tmp_path: Path, case: str) -> None:
    """The run does not exist, so loading it would fail: the error is the input's all the same
    (checked before anything heavy is loaded)."""
    source = tmp_path / "in.txt"
    source.write_text("a b\n")
    args = [sys.executable, "-m", "nmt", "translate", "--run", str(tmp_path / "no-such-run")]
    stdin: int | None = subprocess.DEVNULL
    terminal = None
    if case == "missing input":
        args += ["--input", str(tmp_path / "nope.txt")]
        message = f"--input {tmp_path / 'nope.txt'}: file not found"
    elif case == "output is the input":
        args += ["--input", str(source), "--output", str(source)]
        message = f"--output {source}: is the same file as --input {source}"
    elif case == "stdin closed":
        args = ["bash", "-c", shlex.join(args) + " <&-"]
        message = "stdin: closed"
    else:
        import pty

        stdin, terminal = pty.openpty()[::-1]  # the child reads from the terminal's end
        message = "nothing to translate"
    env = dict(os.environ, OMP_NUM_THREADS="1", COLUMNS="500",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        proc = subprocess.run(args, stdin=stdin, capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=120)
    finally:
        for fd in (stdin, terminal):
            if isinstance(fd, int) and fd >= 0:
                os.close(fd)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr and "run directory" not in proc.stderr
    assert source.read_text() == "a b\n"


def test_cli_missing_and_incompatible_checkpoints(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", trained=False)
    (run / "checkpoints" / "last.pt").rename(run / "checkpoints" / "old.pt")
    code, _, err = invoke("translate", "--run", str(run), "a")
    assert code != 0 and "no checkpoint" in err
    (run / "checkpoints" / "old.pt").rename(run / "checkpoints" / "last.pt")
    (run / "tokenizer" / "vocab.txt").write_text(
        "\n".join(["<unk>", "<pad>", "<bos>", "<eos>", "x"]) + "\n", encoding="utf-8")
    code, _, err = invoke("translate", "--run", str(run), "a")
    assert code != 0 and "incompatible" in err and err.strip().count("\n") == 0


def test_cli_uses_the_latest_run_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_run(tmp_path / "runs" / "old", trained=False)
    newest = make_run(tmp_path / "runs" / "new")
    os.utime(newest / "checkpoints" / "last.pt", (2e9, 2e9))
    monkeypatch.chdir(tmp_path)
    code, out, _ = invoke("translate", "a b c")
    expected = Translator.from_run(load_run(newest)).translate(["a b c"])
    assert code == 0 and out == expected[0] + "\n"
    monkeypatch.chdir(tmp_path / "runs")
    code, _, err = invoke("translate", "a")
    assert code != 0 and "no trained run found" in err


def test_no_run_error_exits_nonzero_from_a_real_process(tmp_path: Path) -> None:
    """Through ``main()``: the exit code and the one-line message, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "nmt", "translate", "--run", str(tmp_path / "none"), "a"],
        capture_output=True, text=True, cwd=Path(__file__).parent.parent, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"error: --run {tmp_path / 'none'}: run directory not found"


def test_train_toy_is_deterministic() -> None:
    """The shared toy models are a pure function of (arch, steps, seed)."""
    a, b = train_toy("transformer", steps=5), train_toy("transformer", steps=5)
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("arch", ["transformer", "gru"])
def test_loading_a_run_stays_off_the_compiler_stack(tmp_path: Path, arch: str) -> None:
    """`nmt translate` start-up: checking a checkpoint's shapes on the meta device must not
    import torch._dynamo (about a second), and leaves torch.nn.init as it found it."""
    run = make_run(tmp_path / arch, arch=arch, trained=False)
    code = (
        "import sys, torch\n"
        "init = dict(vars(torch.nn.init))\n"
        "from nmt.runs.loading import load_run\n"
        "from nmt.translation.translator import Translator\n"
        f"t = Translator.from_run(load_run({str(run)!r}, 'best', 'cpu'))\n"
        "t.translate(['a b c'])\n"
        "assert 'torch._dynamo' not in sys.modules, 'torch._dynamo was imported'\n"
        "assert dict(vars(torch.nn.init)) == init\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).parent.parent, timeout=120)
    assert proc.returncode == 0, proc.stderr[-500:]


def test_translators_normalise_sources_by_the_runs_source_language() -> None:
    """The French rule of the `full` policy (guillemets stand apart from the quoted words) is
    applied to a source as training applied it: to French sources, not to a German run's."""
    from nmt.data.normalize import normalize

    text = "Er sagte «ja»."
    model = random_model("gru")
    for lang in ("de", "fr"):
        translator = Translator(model, TOKENIZER, DecodeConfig(), lowercase=False,
                                normalization="full", source_lang=lang)
        assert translator.normalize_source(text) == normalize(text, False, "full", lang)
    assert Translator(model, TOKENIZER, DecodeConfig(), normalization="full",
                      source_lang="de").normalize_source(text) == "Er sagte «ja» ."
    assert Translator(model, TOKENIZER, DecodeConfig(), normalization="full",
                      source_lang="fr").normalize_source(text) == "Er sagte « ja » ."


# what `nmt` runs, with the end of the interpreter's teardown switched on or off
ENTRY = """
import sys
import nmt.fast_exit
if sys.argv.pop(1) == "teardown":
    nmt.fast_exit.allow = lambda: None
from nmt.cli import main
sys.argv[0] = "nmt"
main()
"""


def test_ending_without_teardown_gives_what_the_ordinary_exit_gives(
        run_dir: Path, tmp_path: Path) -> None:
    """nmt.fast_exit: a translating command that skips the interpreter's teardown writes the
    same stdout, stderr, files and exit status as one that does not (a success, a file of
    translations, a long piped stdout, a failure)."""
    (tmp_path / "in.txt").write_text("a b\n" * 3000, encoding="utf-8")
    cases = [["translate", "--run", str(run_dir), "--device", "cpu", "a b", "b a"],
             ["translate", "--run", str(run_dir), "--device", "cpu", "-i", "in.txt",
              "-o", "OUT"],
             ["translate", "--run", str(run_dir), "--device", "cpu", "-i", "in.txt"],
             ["translate", "--run", str(tmp_path / "no-such-run"), "a b"],
             ["bleu", "--run", str(run_dir), "--src", "in.txt", "--ref", "in.txt"]]
    env = dict(os.environ, OMP_NUM_THREADS="1", COLUMNS="500",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for args in cases:
        seen = []
        for mode in ("teardown", "fast"):
            argv = [a.replace("OUT", f"out-{mode}.txt") for a in args]
            proc = subprocess.run([sys.executable, "-c", ENTRY, mode, *argv], env=env,
                                  capture_output=True, text=True, cwd=tmp_path, timeout=300)
            out = tmp_path / f"out-{mode}.txt"
            written = out.read_text(encoding="utf-8") if out.exists() else None
            out.unlink(missing_ok=True)
            speed = re.compile(r"[\d.,]+ sentences/s")  # the one figure that differs run to run
            seen.append((proc.returncode, speed.sub("", proc.stdout), proc.stderr, written))
        assert seen[0] == seen[1], args
    assert seen[0][0] == 0 and "BLEU" in seen[0][1] + seen[0][2]
