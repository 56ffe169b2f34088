"""Export to CTranslate2 and Argos Translate: the converted model decodes as `nmt` does.

Tiny Transformers trained in the test (a few seconds each): the toy reversal task of
test_decode.py with a word vocabulary (post-norm, separate embeddings; and pre-norm with tied
embeddings and attention biases), and a SentencePiece run on the fake fra-eng corpus.
"""

from __future__ import annotations

import inspect
import json
import os
import random
import re
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import invoke, tiny_corpus_sides
from test_decode import CPU, TEXTS, TOKENIZER, make_run, src_ids, toy_pairs
from ties import (
    TIE,
    assert_greedy_equal_up_to_ties,
    greedy_tie_free,
    log_prob,
    replay_beam,
    sources_of,
)

from nmt.config import Config, DataConfig, DecodeConfig, ModelConfig, from_dict
from nmt.data.normalize import normalize
from nmt.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, SentencePieceTokenizer, Tokenizer
from nmt.errors import ConfigError
from nmt.files import atomic_write_text
from nmt.models.build import build_model
from nmt.runs.checkpoint import save_checkpoint
from nmt.runs.loading import load_run
from nmt.translation.limits import output_cap, output_length, output_limit
from nmt.translation.search import Hypothesis, pad_batch, search_ids
from nmt.translation.translator import Translator

ct2 = pytest.importorskip("ctranslate2")

from nmt.export.ct2_convert import export_run, run_export_dir  # noqa: E402
from nmt.export.ct2_translate import SEARCH_PENALTY, CT2Translator  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
INPUTS = TEXTS + ["", "a", "h g f e d c b a h g f e d c b a", "A  B\tC!"]


def train_pairs(model: torch.nn.Module, pairs: list[tuple[list[int], list[int]]], steps: int,
                lr: float, seed: int = 0) -> torch.nn.Module:
    """Adam on (source ids with <eos>, target ids) pairs, 32 a batch."""
    rng = random.Random(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        batch = [pairs[rng.randrange(len(pairs))] for _ in range(32)]
        src, lengths = pad_batch([s for s, _ in batch], CPU)
        tgt_in, _ = pad_batch([[BOS_ID] + t for _, t in batch], CPU)
        tgt_out, _ = pad_batch([t + [EOS_ID] for _, t in batch], CPU)
        loss = torch.nn.functional.cross_entropy(
            model(src, lengths, tgt_in).transpose(1, 2), tgt_out, ignore_index=PAD_ID)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def save_run(run_dir: Path, cfg: Config, tokenizer: Tokenizer, model: torch.nn.Module) -> Path:
    """A run directory as training leaves it: config, tokenizer, checkpoint."""
    atomic_write_text(run_dir / "config.toml", cfg.to_toml())
    tokenizer.save(run_dir / "tokenizer")
    vocab = {"src": tokenizer.src_vocab_size, "tgt": tokenizer.tgt_vocab_size,
             "joint": tokenizer.joint}
    save_checkpoint(run_dir / "checkpoints" / "best.pt",
                    {"config": cfg.to_dict(), "vocab": vocab, "model": model.state_dict(),
                     "progress": {"step": 300}})
    return run_dir


def prenorm_config(d: int, max_positions: int = 64) -> ModelConfig:
    return ModelConfig(d_model=d, n_heads=2, d_ff=2 * d, n_layers=2, dropout=0.0,
                       norm_first=True, tie_embeddings=True, attn_bias=True,
                       max_positions=max_positions)


def word_prenorm_run(run_dir: Path) -> Path:
    """The reversal task, pre-norm, one embedding for source, target and output, biases."""
    torch.manual_seed(1)
    cfg = prenorm_config(16)
    v = TOKENIZER.src_vocab_size
    model = build_model(cfg, v, v, joint_vocab=True)
    pairs = [(src_ids(s), TOKENIZER.encode_tgt(t)) for s, t in toy_pairs(2000, 1)]
    train_pairs(model, pairs, 400, 0.005)
    return save_run(run_dir, Config(data=DataConfig(tokenizer="word", min_freq=1), model=cfg),
                    TOKENIZER, model)


def sentencepiece_run(run_dir: Path) -> Path:
    """English -> French on the fake corpus with a joint SentencePiece vocabulary (what the
    demo and Argos Translate use), pre-norm and tied."""
    en, fr = tiny_corpus_sides()
    tok = SentencePieceTokenizer.train(en, fr, vocab_size=64, model_type="unigram", joint=True,
                                       threads=1)
    torch.manual_seed(2)
    cfg = prenorm_config(32, max_positions=1024)  # as the demo's
    model = build_model(cfg, tok.src_vocab_size, tok.tgt_vocab_size, joint_vocab=True)
    pairs = [(tok.encode_src(s) + [EOS_ID], tok.encode_tgt(t)) for s, t in zip(en, fr,
                                                                               strict=True)]
    train_pairs(model, pairs, 300, 0.005)
    return save_run(run_dir, Config(data=DataConfig(vocab_size=64), model=cfg), tok, model)


def word_truncate_run(run_dir: Path) -> Path:
    """As the d2l presets: sources cut to data.truncate tokens (<eos> and all), the recipe's
    normalisation, a fixed output limit."""
    from test_decode import tiny_config, trained_toy

    cfg = Config(data=DataConfig(tokenizer="word", min_freq=1, truncate=4,
                                 normalization="recipe"),
                 model=tiny_config("transformer"),
                 decode=DecodeConfig(max_len_a=0.0, max_len_b=10, max_len_cap=10))
    return save_run(run_dir, cfg, TOKENIZER, trained_toy("transformer"))


RUNS = {"word-postnorm": lambda d: make_run(d), "word-prenorm-tied": word_prenorm_run,
        "word-truncate": word_truncate_run, "sentencepiece": sentencepiece_run}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    torch.set_num_threads(1)
    return {name: make(root / name) for name, make in RUNS.items()}


@pytest.fixture(scope="module")
def exports(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("exports")
    return {name: export_run(load_run(run, "best"), root / name) for name, run in runs.items()}


def sp_inputs() -> list[str]:
    en, _ = tiny_corpus_sides()
    return en[:60] + ["", "He likes the big dog.", "we want the small cake ."]


@dataclass
class Both:
    """The same inputs decoded by nmt and by CTranslate2, as ids without ``<eos>``."""

    ours: Translator
    sources: list[list[int]]
    expected: list[list[int]]  # nmt's
    got: list[list[int]]  # CTranslate2's
    limits: list[int]  # nmt's output limit of each source


def both(run: Path, export: Path, beam: int = 1, alpha: float | None = None,
         texts: list[str] | None = None) -> Both:
    """The same inputs through nmt and through CTranslate2; the text each engine writes is its
    ids detokenized (checked here, so that the tests compare ids)."""
    texts = texts if texts is not None else (sp_inputs() if "sentencepiece" in str(run)
                                             else INPUTS)
    ours = Translator.from_run(load_run(run, "best"), beam=beam)
    theirs = CT2Translator.from_export(export, beam=beam, threads=1)
    if alpha is not None:
        ours.cfg = replace(ours.cfg, length_penalty=alpha)
        theirs.cfg = replace(theirs.cfg, length_penalty=alpha)
    sources = sources_of(ours, texts)
    expected = [h.tokens for h in search_ids(ours.model, sources, ours.cfg)]
    got = theirs.translate_ids(sources)
    detok = ours.tokenizer.decode_tgt
    # (translate_as_written: translate() also reads a sentence in capitals in sentence case)
    assert ours.translate_as_written(texts) == [detok(t) if s else "" for t, s in zip(
        expected, sources, strict=True)]
    assert theirs.translate_as_written(texts) == [detok(t) if s else "" for t, s in zip(
        got, sources, strict=True)]
    limits = [output_limit(len(s), ours.cfg, ours.model.max_positions) for s in sources]
    return Both(ours, sources, expected, got, limits)


def assert_beam_equal_where_no_tie(b: Both, beam: int, alpha: float) -> None:
    """nmt's and CTranslate2's beam search outputs are equal on every source where no two
    scores the search compares are within ties.TIE (most of them)."""
    decided = [bool(s) and replay_beam(b.ours.model, s, n, beam, alpha).margin > TIE
               for s, n in zip(b.sources, b.limits, strict=True)]
    assert sum(decided) >= len(decided) // 2
    assert ([g for g, d in zip(b.got, decided, strict=True) if d]
            == [e for e, d in zip(b.expected, decided, strict=True) if d])


# --- the converted model decodes as nmt does ----------------------------------------------------


@pytest.mark.parametrize("name", list(RUNS))
def test_fp32_greedy_equals_nmt_greedy_on_every_line(name: str, runs: dict[str, Path],
                                                     exports: dict[str, Path]) -> None:
    b = both(runs[name], exports[name])
    assert_greedy_equal_up_to_ties(b.ours.model, b.sources, b.expected, b.got, b.limits)
    assert sum(bool(o) for o in b.got) >= len(b.got) - 2  # real output, not empty lines


@pytest.mark.parametrize("name", ["word-postnorm", "sentencepiece"])
@pytest.mark.parametrize("beam", [2, 4])
def test_beam_equals_nmt_beam_without_length_penalty(name: str, beam: int,
                                                     runs: dict[str, Path],
                                                     exports: dict[str, Path]) -> None:
    """Without a length penalty CTranslate2's beam search is nmt's (see
    nmt.export.ct2_translate): the same outputs wherever the search's decisions are not ties."""
    b = both(runs[name], exports[name], beam=beam, alpha=0.0)
    assert_beam_equal_where_no_tie(b, beam, 0.0)


@pytest.mark.parametrize("name", ["word-postnorm", "sentencepiece"])
def test_beam_with_length_penalty_ranks_by_nmt_penalty(name: str, runs: dict[str, Path],
                                                       exports: dict[str, Path]) -> None:
    """With a length penalty the two searches stop by different rules (so a line may differ,
    see nmt.export.ct2_translate): CTranslate2's hypotheses score what nmt's model gives them,
    and the one translated is the best of them under nmt's GNMT penalty (where none ties)."""
    beam, alpha = 4, 1.0
    b = both(runs[name], exports[name], beam=beam, alpha=alpha)
    theirs = CT2Translator.from_export(exports[name], beam=beam, threads=1)
    theirs.cfg = replace(theirs.cfg, length_penalty=alpha)
    calls = record_calls(theirs)
    got = theirs.translate_ids(b.sources)
    index = {tuple(s): i for i, s in enumerate(b.sources)}
    checked = 0
    for tokens, kwargs, results in calls:
        assert kwargs["length_penalty"] == SEARCH_PENALTY  # undone on the scores below
        limit = kwargs["max_decoding_length"]  # one limit per call with beam search
        for source_tokens, result in zip(tokens, results, strict=True):
            i = index[tuple(theirs._src_tokens.index(t) for t in source_tokens) + (EOS_ID,)]
            assert b.limits[i] == limit
            hyps = []
            for pieces, score in zip(result.hypotheses, result.scores, strict=True):
                ids = [theirs._tgt_index[t] for t in pieces]
                raw = float(score) * max(len(ids), 1) ** SEARCH_PENALTY
                finished = len(ids) < limit
                # the export's scores leave <pad> and <bos> out of the softmax
                assert raw == pytest.approx(log_prob(b.ours.model, b.sources[i], ids, finished,
                                                     renormalised=True), abs=1e-4)
                hyps.append(Hypothesis(ids, raw, finished))
            best = max(h.normalized(alpha) for h in hyps)
            chosen = [h for h in hyps if h.tokens == got[i]]
            assert chosen and chosen[0].normalized(alpha) >= best - TIE
            checked += 1
    assert checked == sum(bool(s) for s in b.sources) and got == b.got


def record_calls(translator: CT2Translator) -> list[tuple[list[list[str]], dict[str, Any], Any]]:
    """Every ``translate_batch`` call of ``translator`` from now on: its tokens, keyword
    arguments and results."""
    calls: list[tuple[list[list[str]], dict[str, Any], Any]] = []
    inner = translator.translator

    class Recording:
        def translate_batch(self, tokens: list[list[str]], **kwargs: Any) -> Any:
            results = inner.translate_batch(tokens, **kwargs)
            calls.append((tokens, kwargs, results))
            return results

    translator.translator = Recording()
    return calls


def test_outputs_stop_at_nmt_limit_per_sentence(tmp_path: Path) -> None:
    """An untrained model runs every output to its limit, a * source length + b, which differs
    by sentence within a batch: CTranslate2's outputs stop at the same token."""
    run = make_run(tmp_path / "random", trained=False)
    export = export_run(load_run(run, "best"), tmp_path / "export")
    texts = ["a", "a b c d e f", "b c", "h h h h h h h h h h h h"]
    b = both(run, export, beam=1, alpha=0.0, texts=texts)
    assert_greedy_equal_up_to_ties(b.ours.model, b.sources, b.expected, b.got, b.limits)
    assert len({len(t) for t in b.got}) > 1
    b = both(run, export, beam=3, alpha=0.0, texts=texts)
    assert all(len(t) <= n for t, n in zip(b.got, b.limits, strict=True))
    assert_beam_equal_where_no_tie(b, 3, 0.0)


def test_int8_export_runs_and_is_smaller(runs: dict[str, Path], exports: dict[str, Path],
                                         tmp_path: Path) -> None:
    run = runs["sentencepiece"]
    int8 = export_run(load_run(run, "best"), tmp_path / "int8", quantization="int8")
    meta = json.loads((int8 / "nmt-export.json").read_text())
    assert meta["quantization"] == "int8"
    assert (int8 / "model.bin").stat().st_size < 0.8 * (  # the position table stays float
        exports["sentencepiece"] / "model.bin").stat().st_size
    texts = sp_inputs()
    out = CT2Translator.from_export(int8, threads=1).translate(texts)
    assert len(out) == len(texts) and all(o for o, t in zip(out, texts, strict=True) if t)
    # the quantization worked on copies: the PyTorch model it was exported from is unchanged
    loaded_run = load_run(run, "best")
    before = {k: v.clone() for k, v in loaded_run.model.state_dict().items()}
    export_run(loaded_run, tmp_path / "int8-again", quantization="int8")
    after = loaded_run.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    # and a float32 export converted at load time runs too
    loaded = CT2Translator.from_export(exports["sentencepiece"], compute_type="int8", threads=1)
    assert len(loaded.translate(texts[:5])) == 5


def test_never_outputs_pad_or_bos(exports: dict[str, Path]) -> None:
    translator = ctranslate2_translator(exports["word-postnorm"])
    results = translator.translate_batch([["a", "b"]], beam_size=4, num_hypotheses=4,
                                         max_decoding_length=8, min_decoding_length=0)
    assert not {"<pad>", "<bos>"} & {t for h in results[0].hypotheses for t in h}


def ctranslate2_translator(path: Path) -> object:
    return ct2.Translator(str(path), device="cpu", intra_threads=1)


# --- the exported directory stands alone ---------------------------------------------------------


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


BLOCK_NMT = "import sys\nsys.modules['nmt'] = None  # any import of nmt now fails\n"


def test_export_readme_lines_translate_without_nmt(runs: dict[str, Path],
                                                   exports: dict[str, Path]) -> None:
    """The README's lines, run from the exported directory by a process that cannot import nmt,
    translate its two sentences as `nmt translate --engine ctranslate2` does (the same engine
    and settings, so the same output whatever ties the tiny models hold; that engine decodes as
    nmt does is tested above)."""
    for name in ("sentencepiece", "word-postnorm", "word-truncate"):
        export = exports[name]
        [code] = python_blocks((export / "README.md").read_text(encoding="utf-8"))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        done = subprocess.run([sys.executable, "-c", BLOCK_NMT + code], cwd=export, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        sentences = re.search(r"sentences = (\[.*\])", code)
        assert sentences is not None
        expected = CT2Translator.from_export(export).translate(eval(sentences.group(1)))
        assert done.stdout.strip() == repr(expected)


def test_export_readme_limits_are_nmts_on_every_length(exports: dict[str, Path],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's lines compute nmt's output limit (nmt.translation.limits.output_limit) for
    sources of every length, past the cap and, cut or not, as the run cuts its sources."""
    import types

    for name in ("word-postnorm", "word-truncate"):
        export = exports[name]
        meta = json.loads((export / "nmt-export.json").read_text(encoding="utf-8"))
        [code] = python_blocks((export / "README.md").read_text(encoding="utf-8"))
        assert inspect.getsource(output_length) in code
        sentences = [" ".join(["a"] * n) for n in range(1, 300, 7)]
        code = re.sub(r"sentences = \[.*\]", f"sentences = {sentences!r}", code)
        fake = types.ModuleType("ctranslate2")

        class FakeTranslator:
            def __init__(self, *args: object, **kwargs: object) -> None:
                pass

            def translate_batch(self, pieces: list[list[str]], **kwargs: object) -> list[object]:
                return [types.SimpleNamespace(hypotheses=[[]]) for _ in pieces]

        fake.Translator = FakeTranslator  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "ctranslate2", fake)
        monkeypatch.syspath_prepend(str(export))
        monkeypatch.delitem(sys.modules, "normalize", raising=False)
        namespace: dict[str, object] = {}
        exec(compile(code, str(export / "README.md"), "exec"), namespace)
        cfg = from_dict({"decode": meta["decode"]}).decode
        cut = meta["data"]["truncate"] if not meta.get("add_source_eos", True) else None
        n_src = [min(n + 1, cut) if cut else n + 1 for n in range(1, 300, 7)]
        expected = [output_limit(n, cfg, meta["max_positions"]) for n in n_src]
        assert namespace["limits"] == expected, name
        assert max(expected) == output_cap(cfg, meta["max_positions"]), name  # the cap is met


def test_the_exports_normalize_runs_with_the_standard_library_alone(
        exports: dict[str, Path]) -> None:
    """``normalize.py`` ships in every export for the user's own code: it imports nothing of
    nmt (Python without site-packages runs it) and normalises as nmt does."""
    from nmt.data.languages import base_language
    from nmt.data.normalize import _language, normalize

    path = exports["sentencepiece"] / "normalize.py"
    code = ("import importlib.util as u, json, sys\n"
            f"spec = u.spec_from_file_location('normalize', {str(path)!r})\n"
            "m = u.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "print(json.dumps([m.normalize(t, True, 'full', l) for t, l in json.loads("
            "sys.argv[1])]))")
    cases = [("«IŞIK»", "az-Latn"), ("«Oui» I", "fr"), ("a\u200cb", "fa-Arab"), ("Ja", None)]
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, json.dumps(cases)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [normalize(t, True, "full", lang) for t, lang in cases]
    for code_ in ("sr-Latn", "az", "zh-Hant", "ber-Tfng"):  # one rule, written twice
        assert _language(code_) == base_language(code_)


def test_export_holds_what_a_user_needs(exports: dict[str, Path]) -> None:
    names = {p.name for p in exports["sentencepiece"].iterdir()}
    assert {"model.bin", "config.json", "shared_vocabulary.json", "spm.model", "normalize.py",
            "nmt-export.json", "README.md"} <= names
    config = json.loads((exports["sentencepiece"] / "config.json").read_text())
    assert config["add_source_eos"] and not config["add_source_bos"]
    assert (config["bos_token"], config["eos_token"], config["decoder_start_token"]) == (
        "<bos>", "<eos>", "<bos>")
    assert config["layer_norm_epsilon"] == pytest.approx(1e-5)
    readme = (exports["sentencepiece"] / "README.md").read_text(encoding="utf-8")
    assert "CC-BY 2.0" in readme and "tatoeba.org" in readme


# --- the commands ------------------------------------------------------------------------------


def test_export_command_and_its_refusals(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stdout, _ = invoke("export", "--no-score", "--run", str(runs["sentencepiece"]), "--to",
                             "ctranslate2", "--output", str(out))
    assert code == 0 and stdout.strip() == str(out) and (out / "model.bin").is_file()
    before = (out / "model.bin").read_bytes()
    code, _, err = invoke("export", "--no-score",
                          "--run", str(runs["sentencepiece"]), "--output", str(out),
                          "--quantization", "int8")
    assert code != 0 and "already exists" in err and "--overwrite" in err
    assert (out / "model.bin").read_bytes() == before  # nothing written over
    code, _, _ = invoke("export", "--no-score",
                        "--run", str(runs["sentencepiece"]), "--output", str(out),
                        "--quantization", "int8", "--overwrite")
    assert code == 0 and (out / "model.bin").stat().st_size < len(before)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers
    for args, words in (
        (["--to", "onnx"], "--to onnx: expected one of ctranslate2, argos"),
        (["--quantization", "int3"], "--quantization int3: expected one of int8"),
    ):
        code, _, err = invoke("export", "--no-score",
                              "--run", str(runs["sentencepiece"]), "--output",
                              str(tmp_path / "x"), *args)
        assert code != 0 and words in err and len(err.strip().splitlines()) == 1


def test_gru_run_is_refused_in_one_line(tmp_path: Path) -> None:
    run = make_run(tmp_path / "gru", "gru", trained=False)
    for to in ("ctranslate2", "argos"):
        code, out, err = invoke("export", "--no-score", "--run", str(run), "--to", to, "--output",
                                str(tmp_path / "out"))
        assert code != 0 and out == ""
        assert err.strip() == (f"error: --run {run}: a GRU model cannot be exported to "
                               "CTranslate2, which has no recurrent decoder; only Transformer "
                               "runs export")
        assert not (tmp_path / "out").exists()
    code, _, err = invoke("translate", "--run", str(run), "--engine", "ctranslate2", "a b")
    assert code != 0 and "no recurrent decoder" in err and "Traceback" not in err


def test_translate_engine_ctranslate2_matches_nmt(runs: dict[str, Path], tmp_path: Path) -> None:
    run = runs["word-prenorm-tied"]
    lines = "\n".join(INPUTS) + "\n"
    code, ours, _ = invoke("translate", "--run", str(run), "--input", "-", input=lines)
    assert code == 0
    code, theirs, _ = invoke("translate", "--run", str(run), "--engine", "ctranslate2",
                             "--input", "-", input=lines)
    assert code == 0 and len(ours.split("\n")) == len(theirs.split("\n")) == len(INPUTS) + 1
    translator = Translator.from_run(load_run(run, "best"))
    sources = sources_of(translator, INPUTS)
    assert_greedy_equal_up_to_ties(
        translator.model, sources, [TOKENIZER.encode_tgt(t) for t in ours.split("\n")[:-1]],
        [TOKENIZER.encode_tgt(t) for t in theirs.split("\n")[:-1]],
        [output_limit(len(s), translator.cfg, translator.model.max_positions) for s in sources])
    # exported on the fly into the run directory, and reused while the checkpoint is the same
    made = run / "ctranslate2" / "best" / "model.bin"
    stamp = made.stat().st_mtime_ns
    assert run_export_dir(run) == made.parent and made.stat().st_mtime_ns == stamp
    ckpt = run / "checkpoints" / "best.pt"
    os.utime(ckpt, ns=(ckpt.stat().st_atime_ns, ckpt.stat().st_mtime_ns + 10**9))
    run_export_dir(run)  # a newer checkpoint: exported again
    assert made.stat().st_mtime_ns != stamp
    # a damaged or edited export of the run is made again, as a damaged data cache is
    for damage in ("[]", "{}", "not json", '{"format": 5}'):
        (made.parent / "nmt-export.json").write_text(damage)
        code, again, err = invoke("translate", "--run", str(run), "--engine", "ctranslate2",
                                  "--input", "-", input=lines)
        assert code == 0 and again == theirs, (damage, err)
    # but a file nmt did not write there is never removed: refused, as before
    (made.parent / "nmt-export.json").write_text("[]")
    (made.parent / "mine.txt").write_text("notes")
    code, _, err = invoke("translate", "--run", str(run), "--engine", "ctranslate2", "a")
    assert code != 0 and "only an earlier export (or an empty directory) is replaced" in err
    assert (made.parent / "mine.txt").read_text() == "notes"
    (made.parent / "mine.txt").unlink()
    # --model DIR, with beam and an output file
    export = export_run(load_run(run, "best"), tmp_path / "exp")
    code, _, _ = invoke("translate", "--model", str(export), "--beam", "3", "a b c", "d e",
                        "--output", str(tmp_path / "fr.txt"))
    assert code == 0 and len((tmp_path / "fr.txt").read_text().splitlines()) == 2
    code, _, err = invoke("translate", "--model", str(tmp_path), "a")
    assert code != 0 and "not an nmt export" in err
    code, _, err = invoke("translate", "--model", str(export), "--engine", "nmt", "a")
    assert code != 0 and "--engine ctranslate2" in err
    code, _, err = invoke("translate", "--run", str(run), "--engine", "marian", "a")
    assert code != 0 and "--engine marian: expected nmt or ctranslate2" in err


def test_bleu_engine_ctranslate2_scores_as_nmt(runs: dict[str, Path], tmp_path: Path) -> None:
    run = runs["word-postnorm"]
    src, ref = tmp_path / "t.en", tmp_path / "t.fr"
    pairs = toy_pairs(30, seed=7)
    translator = Translator.from_run(load_run(run, "best"))  # lines no tie can change
    decided = greedy_tie_free(translator.model, sources_of(translator, [s for s, _ in pairs]),
                              translator.cfg)
    pairs = [p for p, d in zip(pairs, decided, strict=True) if d]
    assert len(pairs) >= 20
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    ref.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    reports = []
    for engine in ("nmt", "ctranslate2"):
        code, out, _ = invoke("bleu", "--run", str(run), "--src", str(src), "--ref", str(ref),
                              "--engine", engine, "--json")
        assert code == 0
        reports.append(json.loads(out))
    ours, theirs = reports
    assert theirs["multi"]["bleu"] == ours["multi"]["bleu"] and ours["multi"]["bleu"] > 0
    assert (ours["engine"], theirs["engine"]) == ("nmt", "ct2")
    assert Path(theirs["hypotheses"]).name == "hyp.file-t.en.ct2.txt"
    assert Path(theirs["hypotheses"]).read_text() == Path(ours["hypotheses"]).read_text()


def test_runs_table_keeps_nmt_test_scores(tmp_path: Path) -> None:
    """`nmt runs` shows the run's own test BLEU, not that of a newer scoring of an export."""
    from nmt.runs.table import run_info

    run = make_run(tmp_path / "run", trained=False)
    for name, bleu, t in (("scores.test.json", 20.0, 1000), ("scores.test.ct2-int8.json", 19.0,
                                                               2000)):
        (run / name).write_text(json.dumps({"beam": 1, "multi": {"bleu": bleu}}))
        os.utime(run / name, (t, t))
    assert run_info(run).test_bleu == 20.0


def test_missing_ctranslate2_is_one_line(runs: dict[str, Path],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    for args in (["translate", "--engine", "ctranslate2", "a"], ["bleu", "--engine",
                 "ctranslate2"], ["export", "--no-score", "--to", "argos"]):
        code, out, err = invoke(*args, "--run", str(runs["word-postnorm"]))
        assert code == 1 and out == ""
        assert "the ctranslate2 package is not installed; pip install 'nmt[ctranslate2]'" in err
        assert len(err.strip().splitlines()) == 1


def test_cuda_that_ctranslate2_cannot_use_falls_back_or_is_one_line(
        runs: dict[str, Path], exports: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """CTranslate2's wheels load cuBLAS at the first product: on a machine whose CUDA is of
    another major release (CUDA 13 only, as on the GPU check's H200) the model loads on CUDA and
    the first sentence fails. ``auto`` says so and translates on the CPU; ``cuda`` is one line."""
    import ctranslate2

    import nmt.export.ct2_translate as ct2

    real = ctranslate2.Translator

    class NoCublas:
        def __init__(self, path: str, device: str = "cpu", **kwargs: Any) -> None:
            self.device, self.inner = device, real(path, device="cpu", **kwargs)

        def translate_batch(self, *args: Any, **kwargs: Any) -> Any:
            if self.device == "cuda":
                raise RuntimeError("Library libcublas.so.12 is not found or cannot be loaded")
            return self.inner.translate_batch(*args, **kwargs)

    monkeypatch.setattr(ctranslate2, "Translator", NoCublas)
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 1)
    export = exports["word-postnorm"]
    want = CT2Translator.from_export(export, device="cpu").translate(["a b c"])
    capsys.readouterr()
    chosen = CT2Translator.from_export(export, device="auto")
    assert chosen.translator.device == "cpu" and chosen.translate(["a b c"]) == want
    note = capsys.readouterr().err
    assert note.startswith("note: CTranslate2 cannot run on CUDA here (Library libcublas.so.12")
    # from Python, the message names the parameter (device), as the caller spelled it
    with pytest.raises(ConfigError, match=r"^device cuda: CTranslate2 cannot run on CUDA here "
                       r"\(Library libcublas.so.12 .*\): install the CUDA libraries its wheel "
                       "was built for, or use device cpu$"):
        CT2Translator.from_export(export, device="cuda")
    assert ct2._cuda_unusable(real(str(export), device="cpu")) == ""


# --- Argos Translate -----------------------------------------------------------------------------


def test_argos_package(runs: dict[str, Path], tmp_path: Path) -> None:
    """The package layout Argos Translate reads, and its way of calling CTranslate2 (bare
    SentencePiece pieces, no <eos>) translating as nmt does."""
    import sentencepiece as spm

    path = tmp_path / "en_fr.argosmodel"
    code, out, _ = invoke("export", "--no-score",
                          "--run", str(runs["sentencepiece"]), "--to", "argos",
                          "--output", str(path))
    assert code == 0 and out.strip() == str(path)
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        top = {n.split("/")[0] for n in names}
        assert top == {"nmt-en_fr-sentencepiece"}
        z.extractall(tmp_path / "installed")
    root = tmp_path / "installed" / "nmt-en_fr-sentencepiece"
    # wherever an export is accepted: the unpacked package is one; the zip says what to pass
    code, out, err = invoke("translate", "--model", str(path), "He likes the big dog.")
    assert code != 0 and not out and len(err.strip().splitlines()) == 1
    assert "an Argos Translate package (a zip file); unpack it (unzip en_fr.argosmodel) and " \
           "pass the export inside it: --model nmt-en_fr-sentencepiece/model" in \
           " ".join(err.split())
    code, unpacked, err = invoke("translate", "--model", str(root), "He likes the big dog.")
    code2, inner, _ = invoke("translate", "--model", str(root / "model"),
                             "He likes the big dog.")
    assert code == code2 == 0 and unpacked == inner and unpacked.strip(), err
    meta = json.loads((root / "metadata.json").read_text())
    assert (meta["from_code"], meta["to_code"], meta["type"]) == ("en", "fr", "translate")
    assert meta["package_version"] and meta["argos_version"]
    assert "CC-BY 2.0" in (root / "README.md").read_text()
    sp = spm.SentencePieceProcessor(model_file=str(root / "sentencepiece.model"))
    translator = ct2.Translator(str(root / "model"), device="cpu", intra_threads=1)
    ours = Translator.from_run(load_run(runs["sentencepiece"], "best"))
    texts = [t for t in sp_inputs() if t]
    pieces = [sp.encode(normalize(t, ours.lowercase, ours.normalization), out_type=str)
              for t in texts]
    # nmt's output limit per sentence (pieces + <eos>), as the package's README computes it:
    # an output that loops runs to its limit, so the two must stop at the same one
    limits = [output_limit(len(p) + 1, ours.cfg, ours.model.max_positions) for p in pieces]
    results = translator.translate_batch(pieces, beam_size=1, min_decoding_length=0,
                                         max_decoding_length=max(limits), replace_unknowns=True)
    got = [[sp.piece_to_id(t) for t in r.hypotheses[0][:n]] for r, n in zip(results, limits,
                                                                            strict=True)]
    sources = sources_of(ours, texts)
    assert sources == [[sp.piece_to_id(t) for t in p] + [EOS_ID] for p in pieces]
    expected = [h.tokens for h in search_ids(ours.model, sources, ours.cfg)]
    assert_greedy_equal_up_to_ties(ours.model, sources, expected, got, limits)
    code, _, err = invoke("export", "--no-score",
                          "--run", str(runs["word-postnorm"]), "--to", "argos",
                          "--output", str(tmp_path / "w.argosmodel"))
    assert code != 0 and "one SentencePiece model" in err


def test_argos_readme_says_how_the_run_wrote_its_text(runs: dict[str, Path],
                                                     tmp_path: Path) -> None:
    """The package's README asks for lower-cased, spaced input only when the run was trained on
    such text (DataConfig.natural_text), not for a natural-text run."""
    from nmt.export.argos import package_run

    natural = load_run(runs["sentencepiece"], "best")
    assert natural.config.data.natural_text
    textbook_cfg = replace(natural.config, data=replace(natural.config.data, lowercase=True,
                                                        normalization="full"))
    textbook = load_run(save_run(tmp_path / "textbook", textbook_cfg, natural.tokenizer,
                                 natural.model), "best")
    readmes = {}
    for name, run in (("natural", natural), ("textbook", textbook)):
        path = package_run(run, tmp_path / f"{name}.argosmodel")
        with zipfile.ZipFile(path) as z:
            [readme] = [n for n in z.namelist() if n.count("/") == 1 and
                        n.endswith("/README.md")]  # the package's (its model/ has the export's)
            readmes[name] = z.read(readme).decode("utf-8")
    assert "lower-cased" not in readmes["natural"]
    assert "trained on lower-cased text" in readmes["textbook"]


# --- the README's Python lines -------------------------------------------------------------------


def readme_python_api() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    return python_blocks(section)


def test_readme_python_api_lines_run(runs: dict[str, Path], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's lines, exactly, in a directory where runs/demo is a small SentencePiece
    run: from Python with nmt, then the export from a process that cannot import nmt."""
    import shutil

    shutil.copytree(runs["sentencepiece"], tmp_path / "runs" / "demo",
                    ignore=shutil.ignore_patterns("ctranslate2"))
    monkeypatch.chdir(tmp_path)
    # scored already, so that export() puts the score in its model card instead of scoring
    (tmp_path / "runs" / "demo" / "scores.test.json").write_text(json.dumps(
        {"checkpoint": "best.pt", "multi": {"bleu": 1.0, "chrf": 2.0}}))
    pairs = toy_pairs(5, seed=3)
    (tmp_path / "news.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (tmp_path / "news.fr").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    with_nmt, without_nmt = readme_python_api()
    assert inspect.getsource(output_length) in without_nmt  # the one definition, not a variant
    exec(compile(with_nmt, "README.md", "exec"), {})
    assert (tmp_path / "runs" / "demo" / "scores.file-news.en.json").is_file()  # score() saved
    export = tmp_path / "exports" / "demo-ct2"
    assert (export / "model.bin").is_file()
    done = subprocess.run([sys.executable, "-c", BLOCK_NMT + without_nmt], cwd=export,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    sentences = re.search(r"sentences = (\[.*\])", without_nmt)
    assert sentences is not None
    expected = CT2Translator.from_export(export).translate(eval(sentences.group(1)))
    assert done.stdout.strip() == repr(expected)


# --- the real Argos Translate (slow: builds its own virtual environment) -------------------------

ARGOS_SCRIPT = """
import json, sys
import ctranslate2, sentencepiece, spacy
made = []  # every CTranslate2 translator Argos Translate opens: its arguments and itself
real = ctranslate2.Translator
def recorded(*args, **kwargs):
    made.append((args, kwargs, real(*args, **kwargs)))
    return made[-1][2]
ctranslate2.Translator = recorded
import argostranslate.package, argostranslate.translate
argostranslate.package.install_from_path(sys.argv[1])
[pkg] = [p for p in argostranslate.package.get_installed_packages() if p.from_code == "en"]
# offline: a rule-based spaCy sentencizer in place of the MiniSBD model Argos would download
spacy.blank("en").to_disk(pkg.package_path / "spacy")
sentences = json.loads(sys.argv[2])
argos = [argostranslate.translate.translate(s, "en", "fr") for s in sentences]
[(args, kwargs, used)] = made
# CTranslate2 called directly as Argos Translate calls it, one sentence a call: the same library,
# the compute type Argos's translator resolved to, the same threads
direct = real(*args, **{**kwargs, "compute_type": used.compute_type})
sp = sentencepiece.SentencePieceProcessor(model_file=str(pkg.package_path / "sentencepiece.model"))
ct2 = [sp.decode(direct.translate_batch([sp.encode(s, out_type=str)], beam_size=4,
                                        num_hypotheses=1, length_penalty=0.2,
                                        replace_unknowns=True)[0].hypotheses[0])
       for s in sentences]
print(json.dumps({"argos": argos, "ct2": ct2, "compute_type": used.compute_type,
                  "supported": sorted(ctranslate2.get_supported_compute_types("cpu"))}))
"""


@pytest.mark.slow
def test_argostranslate_installs_and_translates_the_package(runs: dict[str, Path],
                                                           tmp_path: Path) -> None:
    """argostranslate, in a virtual environment of its own (build/argos-venv, made on first use:
    a few minutes; CPU torch pinned so its Stanza dependency does not pull a CUDA build),
    installs the package with install_from_path and translates with it as CTranslate2 does
    when called the way Argos Translate calls it (beam 4, length penalty 0.2), with the
    compute type Argos chose: by default (ARGOS_COMPUTE_TYPE "auto", which argostranslate 1.11
    passes on) what CTranslate2 finds fastest on the CPU; the export's float32 when pinned."""
    venv = Path(os.environ.get("NMT_ARGOS_VENV", REPO / "build" / "argos-venv"))
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pins = tmp_path / "constraints.txt"
        pins.write_text("torch==2.13.0\n")
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "argostranslate", "spacy",
                        "-c", str(pins)], check=True, timeout=3000)
    package = tmp_path / "en_fr.argosmodel"
    code, _, _ = invoke("export", "--no-score",
                        "--run", str(runs["sentencepiece"]), "--to", "argos",
                        "--output", str(package))
    assert code == 0
    sentences = ["he likes the big dog .", "we want the small cake .", "they see the car ."]
    for compute_type in (None, "float32"):
        home = tmp_path / f"home-{compute_type}"
        env = {**{k: v for k, v in os.environ.items()
                  if k != "PYTHONPATH" and not k.startswith("ARGOS_")},
               "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
               "XDG_CACHE_HOME": str(home / "cache"), "XDG_CONFIG_HOME": str(home / "config"),
               "ARGOS_CHUNK_TYPE": "SPACY", "ARGOS_INTRA_THREADS": "1",
               **({"ARGOS_COMPUTE_TYPE": compute_type} if compute_type else {})}
        done = subprocess.run([str(python), "-c", ARGOS_SCRIPT, str(package),
                               json.dumps(sentences)],
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["argos"] == out["ct2"] and all(out["argos"]), out
        if compute_type is not None:
            assert out["compute_type"] == compute_type, out
        print(f"ARGOS_COMPUTE_TYPE={compute_type or '(unset)'}: {out['compute_type']}")


LIBRETRANSLATE_SCRIPT = """
import json, sys
import ctranslate2, spacy
made = []  # the CTranslate2 translators Argos Translate opens
real = ctranslate2.Translator
def recorded(*args, **kwargs):
    made.append(real(*args, **kwargs))
    return made[-1]
ctranslate2.Translator = recorded
import argostranslate.translate
from libretranslate.language import improve_translation_formatting
sentences = json.loads(sys.argv[1])
translation = argostranslate.translate.get_translation_from_codes("en", "fr")
# what LibreTranslate's /translate does with one text and no alternatives
expected = [improve_translation_formatting(s, translation.hypotheses(s, 1)[0].value)
            for s in sentences]
print(json.dumps({"expected": expected, "compute_type": made[0].compute_type}))
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 60) -> Any:
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_libretranslate_serves_the_package(runs: dict[str, Path], tmp_path: Path) -> None:
    """The README's LibreTranslate recipe: LibreTranslate, in a virtual environment of its own
    (build/libretranslate-venv, made on first use: about a minute; it brings its own build of
    Argos Translate, argos-translate-lt), installs the package, starts on 127.0.0.1 offline,
    lists en -> fr at GET /languages and translates at POST /translate what its Argos Translate
    gives in the same settings, with the export's float32 (its default). Stopped at the end."""
    venv = Path(os.environ.get("NMT_LIBRETRANSLATE_VENV", REPO / "build" / "libretranslate-venv"))
    python = venv / "bin" / "python"
    if not (venv / "bin" / "libretranslate").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pins = tmp_path / "constraints.txt"
        pins.write_text("torch==2.13.0\n")
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "libretranslate",
                               "spacy", "-c", str(pins)], capture_output=True, text=True,
                              timeout=3000)
        if done.returncode != 0:
            lines = [x for x in done.stderr.splitlines() if x.startswith("ERROR")] or [
                done.stderr.strip()[-300:]]
            pytest.skip(f"libretranslate could not be installed from PyPI: {lines[-1]}")
    package = tmp_path / "en_fr.argosmodel"
    code, _, _ = invoke("export", "--no-score",
                        "--run", str(runs["sentencepiece"]), "--to", "argos",
                        "--output", str(package))
    assert code == 0
    home = tmp_path / "home"
    index = tmp_path / "index"  # offline: an empty package index, read from a file
    index.mkdir()
    (index / "index.json").write_text("[]\n")
    env = {**{k: v for k, v in os.environ.items()
              if k != "PYTHONPATH" and not k.startswith("ARGOS_")},
           "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CACHE_HOME": str(home / "cache"), "XDG_CONFIG_HOME": str(home / "config"),
           "ARGOS_CHUNK_TYPE": "SPACY", "ARGOS_PACKAGE_INDEX": index.as_uri() + "/",
           "ARGOS_INTRA_THREADS": "1"}
    install = ("import sys, spacy, argostranslate.package as p\n"
               "p.install_from_path(sys.argv[1])\n"
               "[pkg] = p.get_installed_packages()\n"
               "spacy.blank('en').to_disk(pkg.package_path / 'spacy')  # offline sentencizer\n")
    done = subprocess.run([str(python), "-c", install, str(package)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    sentences = ["he likes the big dog .", "we want the small cake .", "they see the car ."]
    done = subprocess.run([str(python), "-c", LIBRETRANSLATE_SCRIPT, json.dumps(sentences)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    reference = json.loads(done.stdout.strip().splitlines()[-1])
    assert reference["compute_type"] == "float32" and all(reference["expected"]), reference
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "libretranslate.log"
    with open(log, "wb") as out:
        server = subprocess.Popen([str(venv / "bin" / "libretranslate"), "--host", "127.0.0.1",
                                   "--port", str(port), "--load-only", "en,fr"],
                                  env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        languages = None
        for _ in range(240):  # up to two minutes to start
            assert server.poll() is None, log.read_text(errors="replace")[-2000:]
            try:
                languages = http_json(f"{url}/languages", timeout=5)
                break
            except OSError:
                time.sleep(0.5)
        assert languages is not None, log.read_text(errors="replace")[-2000:]
        codes = {lang["code"]: lang["targets"] for lang in languages}
        assert "fr" in codes["en"] and "fr" in codes
        got = [http_json(f"{url}/translate", {"q": s, "source": "en", "target": "fr"})[
            "translatedText"] for s in sentences]
        assert got == reference["expected"]
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.mark.parametrize("bf16_units", ["0", "1"])
def test_export_benchmark_runs_end_to_end(bf16_units: str, tmp_path: Path, tiny_data_dir: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          cpu_bf16: Callable[[str | None], None]) -> None:
    """`make bench`'s export part: a row per engine, search and thread count (nmt in bf16 too
    where the CPU has bf16 units, as it then decodes by default), sizes, and every greedy
    difference explained."""
    import nmt.device
    from bench.export import bench_export, markdown

    cpu_bf16(bf16_units)
    monkeypatch.delenv(nmt.device.ONEDNN_CACHE, raising=False)  # a bf16 search sets it
    import nmt.export.ct2_translate
    import nmt.translation.search
    from nmt.translation.rules import decode_batches

    batch_sizes = set()  # what every engine batches with: --batch-size

    def recorded(lengths: list[int], cfg: DecodeConfig) -> list[list[int]]:
        batch_sizes.add(cfg.batch_size)
        return decode_batches(lengths, cfg)

    for module in (nmt.translation.search, nmt.export.ct2_translate):
        monkeypatch.setattr(module, "decode_batches", recorded)
    run = make_run(tmp_path / "run")
    result = bench_export(run, tmp_path / "out", threads=(1,), searches=(1, 2),
                          data_dir=tiny_data_dir, log=lambda s: None, batch_size=3)
    assert json.loads((tmp_path / "out" / "export.json").read_text()) == result
    assert batch_sizes == {3} and result["batch_size"] == 3
    assert "in batches of at most 3," in markdown(result)
    ours = ("nmt", "nmt bf16") if bf16_units == "1" else ("nmt",)
    assert [(r["beam"], r["engine"]) for r in result["rows"]] == [
        (b, e) for b in (1, 2) for e in (*ours, "ct2 float32", "ct2 int8")]
    greedy = {r["engine"]: r for r in result["rows"] if r["beam"] == 1}
    assert greedy["nmt"]["identical_share"] == 1.0 and greedy["nmt"]["speedup_vs_nmt"] == 1.0
    assert greedy["ct2 float32"]["identical_to_nmt"] == result["sentences"] - len(
        result["greedy_fp32_differences"])
    assert result["sizes"]["export_int8_model_bin_mb"] < result["sizes"][
        "export_float32_model_bin_mb"]
    assert "| 1 | greedy | ct2 int8 |" in markdown(result)


@pytest.mark.parametrize("size", ["0", "-3"])
def test_export_benchmark_refuses_a_batch_size_below_one(
        size: str, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.export import main

    with pytest.raises(SystemExit) as e:
        main(["--run", "runs/none", "--batch-size", size])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        f"--batch-size: expected a positive number of sentences, got {size}")


# --- no torch on the CTranslate2 path ------------------------------------------------------------

NO_TORCH = """
import sys
import nmt.fast_exit
nmt.fast_exit.allow = lambda: None  # the checks below run after the command
from nmt.cli import main
sys.argv = ["nmt", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    assert e.code in (0, None), e.code
assert "torch" not in sys.modules, "torch imported"
print("numpy imported" if "numpy" in sys.modules else "no numpy")
print("no torch")
"""


def test_ctranslate2_path_imports_no_torch(runs: dict[str, Path], tmp_path: Path) -> None:
    """`nmt translate --engine ctranslate2`, `--model DIR`, `nmt bleu --engine ctranslate2` and
    `nmt --help` run without importing torch (its import is most of a cold start); translating
    and --help without numpy either (a tenth of a second more)."""
    run = runs["word-postnorm"]
    export = run_export_dir(run)  # the run's export exists: reading it needs no torch
    src, ref = tmp_path / "t.en", tmp_path / "t.fr"
    src.write_text("i see the dog .\n", encoding="utf-8")
    ref.write_text("je vois le chien .\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for args in (["translate", "--run", str(run), "--engine", "ctranslate2", "a b c"],
                 ["translate", "--model", str(export), "a b c"],
                 ["bleu", "--run", str(run), "--engine", "ctranslate2", "--src", str(src),
                  "--ref", str(ref)],
                 ["--help"], ["export", "--help"]):
        done = subprocess.run([sys.executable, "-c", NO_TORCH, *args], capture_output=True,
                              text=True, timeout=120, env=env, cwd=tmp_path)
        assert done.returncode == 0 and done.stdout.endswith("no torch\n"), (args, done.stderr)
        if args[0] != "bleu":  # sacrebleu may use numpy
            assert done.stdout.endswith("no numpy\nno torch\n"), (args, done.stdout)
    # the PyTorch engine does import it: the check can fail
    done = subprocess.run([sys.executable, "-c", NO_TORCH, "translate", "--run", str(run),
                           "a b c"], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert "torch imported" in done.stderr


def test_both_engines_default_to_the_configs_text_form() -> None:
    """A translator made without a run's [data] normalises input as a config's defaults do
    (natural text), whichever engine decodes."""
    from dataclasses import fields

    default = DataConfig()
    for translator in (CT2Translator, Translator):
        given = {f.name: f.default for f in fields(translator)}
        assert (given["lowercase"], given["normalization"]) == (default.lowercase,
                                                                default.normalization)


def test_startup_benchmark_times_each_command_and_checks_the_engines_agree(
        runs: dict[str, Path], tmp_path: Path) -> None:
    """`python -m bench.startup`: every command ran (it stops at a failing one), the figures
    and the table are written, and both CTranslate2 commands give the same translation."""
    from bench.startup import AIMS, bench_startup, markdown

    result = bench_startup(runs["word-postnorm"], tmp_path, repeat=1, sentence="a b c")
    rows = {r["what"]: r for r in result["rows"]}
    assert set(AIMS) <= set(rows) and all(r["median_s"] > 0 for r in rows.values())
    ct2 = [rows[w]["output"] for w in rows if "CTranslate2" in w]
    assert len(ct2) == 2 and ct2[0] == ct2[1]
    assert (tmp_path / "startup.json").is_file()
    assert "| nmt --help |" in (tmp_path / "startup.md").read_text(encoding="utf-8")
    assert markdown(result).count("\n| ") == len(rows) + 1  # header and one line a command


# --- an export's files, damaged or crafted: one line or a correct result --------------------------

META_MUTATIONS = {"deleted": ..., "null": None, "a list": [1], "text": "x", "huge": 10**30,
                  "negative": -5, "NaN": float("nan"), "a table": {"a": 1}, "true": True}


def _meta_fields(meta: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in meta.items():
        out.append(prefix + key)
        if isinstance(value, dict):
            out += _meta_fields(value, f"{prefix}{key}.")
    return out


def _mutated(meta: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    import copy

    meta = copy.deepcopy(meta)
    *parents, last = field.split(".")
    table = meta
    for part in parents:
        table = table[part]
    if value is ...:
        del table[last]
    else:
        table[last] = value
    return meta


def _translate_with(export: Path) -> tuple[int, str, str]:
    # on the CPU: a machine whose CUDA CTranslate2 cannot use adds a note line (tested apart)
    return invoke("translate", "--model", str(export), "--device", "cpu", "a b c", "d e")


def test_every_field_of_an_exports_metadata_mutated_is_one_line_or_a_translation(
        exports: dict[str, Path], tmp_path: Path) -> None:
    """Each field of nmt-export.json (nested ones too) deleted, null, a list, text, a huge or
    negative number, NaN, a table or true: `nmt translate --model` gives a one-line error or a
    translation, never a traceback and never a silent empty line."""
    import shutil

    source = exports["word-postnorm"]
    meta = json.loads((source / "nmt-export.json").read_text())
    code, good, _ = _translate_with(source)
    assert code == 0 and all(good.splitlines())
    export = tmp_path / "crafted"
    shutil.copytree(source, export)
    tried = 0
    for field in _meta_fields(meta):
        for name, value in META_MUTATIONS.items():
            (export / "nmt-export.json").write_text(
                json.dumps(_mutated(meta, field, value), allow_nan=True))
            code, out, err = _translate_with(export)  # a traceback would raise here
            tried += 1
            if code == 0:
                assert len(out.splitlines()) == 2 and all(out.splitlines()), (field, name, out)
            else:
                lines = err.strip().splitlines()
                assert len(lines) == 1 and lines[0].startswith("error: "), (field, name, err)
    assert tried > 100


def test_files_of_another_export_put_beside_one_are_refused(exports: dict[str, Path],
                                                            tmp_path: Path) -> None:
    import shutil

    sp, word = exports["sentencepiece"], exports["word-postnorm"]
    mixed = tmp_path / "vocabulary"  # the model's vocabulary of another export
    shutil.copytree(word, mixed)
    shutil.copyfile(sp / "shared_vocabulary.json", mixed / "shared_vocabulary.json")
    code, out, err = _translate_with(mixed)
    assert code != 0 and "shared_vocabulary.json: not the vocabulary of this export's " \
                         "tokenizer" in " ".join(err.split()) and not out
    swapped = tmp_path / "tokenizer"  # another export's tokenizer files
    shutil.copytree(sp, swapped)
    for name in ("tokenizer.json", "spm.model"):
        (swapped / name).unlink()
    for f in word.iterdir():
        if f.name == "tokenizer.json" or f.name.endswith("vocab.txt"):
            shutil.copyfile(f, swapped / f.name)
    code, out, err = _translate_with(swapped)
    assert code != 0 and len(err.strip().splitlines()) == 1 and not out, err
