"""Search invariants on both model families: cached == uncached, batched == one by one,
beam 1 == greedy, beam >= greedy, scores == teacher-forced rescoring, limits respected.

Models are tiny (d_model 16) and either random (fixed seed) or trained for a few hundred steps
on a toy task (reverse a sequence of letters), where output distributions are peaked enough
for beam search to matter.
"""

from __future__ import annotations

import functools
import os
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from conftest import step_by_step_logits
from hypothesis import given, settings
from hypothesis import strategies as st
from ties import TIE, BeamReplay, assert_greedy_equal_up_to_ties, replay_beam

import nmt.device
from nmt.config import DecodeConfig, ModelConfig
from nmt.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, WordTokenizer
from nmt.models.base import EncoderDecoder
from nmt.models.build import build_model
from nmt.translation.limits import output_limit
from nmt.translation.search import (
    Hypothesis,
    _best,
    _best_unscored,
    beam_search,
    forced_attention,
    greedy,
    greedy_uncached,
    greedy_with_weights,
    in_precision,
    length_penalty,
    pad_batch,
    search_ids,
)
from nmt.translation.translator import Translator

ARCHS = ("transformer", "gru")
WORDS = "a b c d e f g h".split()
TOKENIZER = WordTokenizer.train(WORDS + [".", "!"], WORDS, min_freq=1, joint=True)
CPU = torch.device("cpu")


def toy_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """Sentences of 1-6 letters and their reversal."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 6))]
        pairs.append((" ".join(words), " ".join(reversed(words))))
    return pairs


def tiny_config(arch: str) -> ModelConfig:
    own = dict(hidden=16) if arch == "gru" else dict(n_heads=2, d_ff=32, max_positions=64)
    return ModelConfig(arch, d_model=16, n_layers=2, dropout=0.0, **own)


def src_ids(text: str) -> list[int]:
    return TOKENIZER.encode_src(text) + [EOS_ID]


def random_model(arch: str, seed: int = 0) -> EncoderDecoder:
    torch.manual_seed(seed)
    vocab = TOKENIZER.src_vocab_size
    return build_model(tiny_config(arch), vocab, vocab, joint_vocab=True).eval()


# Adam steps and learning rate that teach each tiny model the reversal task well (about 70% of
# TEXTS exactly right), so the invariants below are about a real model rather than one whose
# outputs flip with the rounding of a kernel. The Transformer learns it more slowly.
TOY_TRAINING = {"transformer": (400, 0.005), "gru": (200, 0.01)}


def train_toy(arch: str, seed: int = 0, steps: int = 0) -> EncoderDecoder:
    """A few hundred Adam steps on the reversal task (a few seconds on one thread);
    ``steps`` > 0 overrides the number."""
    default_steps, lr = TOY_TRAINING[arch]
    steps = steps or default_steps
    model = random_model(arch, seed).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    pairs = toy_pairs(steps * 32, seed)
    for step in range(steps):
        batch = pairs[step * 32 : (step + 1) * 32]
        src, lengths = pad_batch([src_ids(s) for s, _ in batch], CPU)
        tgt = [TOKENIZER.encode_tgt(t) for _, t in batch]
        tgt_in, _ = pad_batch([[BOS_ID] + t for t in tgt], CPU)
        tgt_out, _ = pad_batch([t + [EOS_ID] for t in tgt], CPU)
        logits = model(src, lengths, tgt_in)
        loss = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), tgt_out, ignore_index=PAD_ID)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@functools.cache
def trained_toy(arch: str) -> EncoderDecoder:
    """Trained once per test session and shared (tests only read it)."""
    return train_toy(arch)


@pytest.fixture(params=ARCHS)
def trained(request: pytest.FixtureRequest) -> EncoderDecoder:
    return trained_toy(request.param)


@pytest.fixture(params=ARCHS)
def untrained(request: pytest.FixtureRequest) -> EncoderDecoder:
    return random_model(request.param)


@pytest.fixture(params=[(kind, arch) for kind in ("trained", "untrained") for arch in ARCHS],
                ids=lambda p: "-".join(p))
def model(request: pytest.FixtureRequest) -> EncoderDecoder:
    kind, arch = request.param
    return trained_toy(arch) if kind == "trained" else random_model(arch)


def batch_of(texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    return pad_batch([src_ids(t) for t in texts], CPU)


TEXTS = [s for s, _ in toy_pairs(40, seed=99)]


def rescore(model: EncoderDecoder, text: str, hyp: Hypothesis) -> float:
    """Sum of log-probabilities of ``hyp`` (``<eos>`` too when finished) in one full pass."""
    src, lengths = batch_of([text])
    target = hyp.tokens + ([EOS_ID] if hyp.finished else [])
    tgt_in = torch.tensor([[BOS_ID] + target[:-1]]) if target else torch.tensor([[BOS_ID]])
    with torch.no_grad():
        logits = model.decode(tgt_in, model.encode(src, lengths)).logits[0]
    logp = torch.log_softmax(logits.float(), dim=-1)
    return float(sum(logp[i, t] for i, t in enumerate(target)))


# --- the toy task is learnt (so the trained invariants are about a real model) ----------------


def test_trained_toy_model_reverses_sentences(trained: EncoderDecoder) -> None:
    """Judged with a margin over what CPUs differ by: the held-out loss (0.29 GRU, 0.55-0.74
    Transformer on AVX-512, AVX2 and plain CPUs; chance is ln 12 = 2.5) and exact reversals
    (76 GRU, 39-47 Transformer of 100 on the same three)."""
    pairs = toy_pairs(100, seed=7)
    src, lengths = batch_of([s for s, _ in pairs])
    tgt = [TOKENIZER.encode_tgt(t) for _, t in pairs]
    tgt_in, _ = pad_batch([[BOS_ID] + t for t in tgt], CPU)
    tgt_out, _ = pad_batch([t + [EOS_ID] for t in tgt], CPU)
    with torch.no_grad():
        logits = trained(src, lengths, tgt_in)
    loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt_out,
                                             ignore_index=PAD_ID)
    assert float(loss) < 1.2, float(loss)
    hyps = search_ids(trained, [src_ids(s) for s, _ in pairs], DecodeConfig())
    outputs = [TOKENIZER.decode_tgt(h.tokens) for h in hyps]
    correct = sum(out == tgt for out, (_, tgt) in zip(outputs, pairs, strict=True))
    assert correct >= 25  # random guessing gets ~0


# --- cached == uncached --------------------------------------------------------------------------


def test_incremental_logits_equal_full_pass(model: EncoderDecoder) -> None:
    """One position at a time through the state gives the full causal pass's logits."""
    src, lengths = batch_of(TEXTS[:5])
    tgt = torch.randint(4, TOKENIZER.tgt_vocab_size, (5, 7))
    with torch.no_grad():
        memory = model.encode(src, lengths)
        full = model.decode(tgt, memory).logits
        steps = step_by_step_logits(model, memory, tgt)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-4)


def assert_same_greedy(model: EncoderDecoder, texts: list[str], expected: list[Hypothesis],
                       got: list[Hypothesis], limit: int) -> None:
    """Two greedy searches of ``texts`` (two computations of ``model``): the same outputs up
    to ties (see ties.py), and where equal the same flags and scores."""
    assert_greedy_equal_up_to_ties(model, [src_ids(t) for t in texts],
                                   [h.tokens for h in expected], [h.tokens for h in got],
                                   [limit] * len(texts))
    for a, b in zip(expected, got, strict=True):
        if a.tokens == b.tokens:
            assert a.finished == b.finished
            assert a.score == pytest.approx(b.score, abs=1e-4)
            assert a.token_scores == pytest.approx(b.token_scores, abs=1e-5)


def test_cached_greedy_equals_uncached(model: EncoderDecoder) -> None:
    src, lengths = batch_of(TEXTS)
    cached = greedy(model, src, lengths, 12)
    uncached = greedy_uncached(model, src, lengths, 12)
    assert_same_greedy(model, TEXTS, uncached, cached, 12)


@pytest.mark.parametrize("prune_at", [0.0, 0.2, 0.5])
def test_pruning_finished_rows_equals_masking_them(model: EncoderDecoder, prune_at: float) -> None:
    src, lengths = batch_of(TEXTS)
    pruned = greedy(model, src, lengths, 12, prune_at=prune_at)
    masked = greedy(model, src, lengths, 12, prune_at=1.0)
    assert_same_greedy(model, TEXTS, masked, pruned, 12)


# --- batched == one by one -----------------------------------------------------------------------


@pytest.mark.parametrize("beam", [1, 3])
def test_batched_equals_one_by_one(model: EncoderDecoder, beam: int) -> None:
    """Length-sorted, padded batches give each sentence what it gets alone, in input order."""
    ids = [src_ids(t) for t in TEXTS[:20]]
    cfg = DecodeConfig(beam=beam, max_len_a=1.0, max_len_b=4)
    batched = search_ids(model, ids, replace(cfg, batch_size=8))
    alone = []
    for one in ids:  # straight to the search functions: no sorting, no padding
        src, lengths = pad_batch([one], CPU)
        limit = output_limit(len(one), cfg, model.max_positions)
        alone.append(greedy(model, src, lengths, limit)[0] if beam == 1 else
                     beam_search(model, src, lengths, limit, beam, cfg.length_penalty)[0][0])
    limits = [output_limit(len(one), cfg, model.max_positions) for one in ids]
    if beam == 1:
        assert_greedy_equal_up_to_ties(model, ids, [h.tokens for h in alone],
                                       [h.tokens for h in batched], limits)
    else:  # where no two scores the search compares are within a tie
        decided = [replay_beam(model, one, n, beam, cfg.length_penalty).margin > TIE
                   for one, n in zip(ids, limits, strict=True)]
        assert sum(decided) >= len(ids) // 2
        alone = [h for h, d in zip(alone, decided, strict=True) if d]
        batched = [h for h, d in zip(batched, decided, strict=True) if d]
        assert [h.tokens for h in batched] == [h.tokens for h in alone]
    same = [(a, b) for a, b in zip(alone, batched, strict=True) if a.tokens == b.tokens]
    assert [b.score for _, b in same] == pytest.approx([a.score for a, _ in same], abs=1e-4)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 4), vocab=st.integers(5, 30), seed=st.integers(0, 2**31 - 1),
       bf16=st.booleans())
def test_unscored_pick_is_the_scored_pick(n: int, vocab: int, seed: int, bf16: bool) -> None:
    """The best logit is the best log-probability: the same token, never <pad> or <bos>, the
    first of exact ties, and NaN for its score. Logits on a grid of quarters (exact in bf16)
    tie often; <pad> and <bos> are often the largest."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randint(-12, 13, (n, 2, vocab), generator=g).float() / 4
    boosted = torch.rand(n, generator=g) < 0.5
    logits[boosted, -1, PAD_ID] = logits[boosted, -1, BOS_ID] = 10.0
    if bf16:
        logits = logits.bfloat16()
    before = logits.clone()
    score, token = _best(logits)
    nan_scores, same_token = _best_unscored(logits)
    assert torch.equal(same_token, token)
    assert not ({PAD_ID, BOS_ID} & set(token.tolist()))
    assert torch.isnan(nan_scores).all() and nan_scores.shape == score.shape
    assert torch.equal(logits, before)  # the model's logits are not written to
    expected = torch.log_softmax(logits[:, -1].double(), -1).gather(1, token[:, None])[:, 0]
    torch.testing.assert_close(score.double(), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_greedy_without_scores_finds_the_same_outputs(model: EncoderDecoder,
                                                      precision: str) -> None:
    ids = [src_ids(t) for t in TEXTS]
    cfg = DecodeConfig(beam=1, precision=precision, batch_size=8)
    scored = search_ids(model, ids, cfg)
    unscored = search_ids(model, ids, cfg, scores=False)
    limits = [output_limit(len(one), cfg, model.max_positions) for one in ids]
    assert_greedy_equal_up_to_ties(model, ids, [h.tokens for h in scored],
                                   [h.tokens for h in unscored], limits)
    assert all(h.score == h.score for h in scored)
    assert all(h.score != h.score for h in unscored)  # NaN: not computed


def test_a_bf16_search_runs_on_a_bf16_copy(model: EncoderDecoder,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller's model is not changed; a translator makes its copy once; oneDNN's kernel
    cache is bounded before the first bf16 product (nmt.device.bound_kernel_cache)."""
    monkeypatch.delenv(nmt.device.ONEDNN_CACHE, raising=False)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ids = [src_ids(t) for t in TEXTS[:8]]
    bf16 = search_ids(model, ids, DecodeConfig(precision="bf16"), scores=False)
    assert os.environ.get(nmt.device.ONEDNN_CACHE) == nmt.device.CPU_BF16_KERNELS
    after = model.state_dict()
    assert all(torch.equal(after[k], v) and after[k].dtype == v.dtype for k, v in before.items())
    translator = Translator(model, TOKENIZER, DecodeConfig(precision="bf16"))
    assert {p.dtype for p in translator.model.parameters()} == {torch.bfloat16}
    assert not any(p.is_inference() for p in translator.model.parameters())  # an ordinary model
    assert in_precision(translator.model, torch.bfloat16) is translator.model
    assert in_precision(model, None) is model
    again = search_ids(translator.model, ids, DecodeConfig(precision="bf16"), scores=False)
    assert [h.tokens for h in again] == [h.tokens for h in bf16]
    fp32 = Translator(model, TOKENIZER, DecodeConfig(precision="fp32"))
    assert fp32.model is model


def test_empty_sources_give_empty_hypotheses(untrained: EncoderDecoder) -> None:
    hyps = search_ids(untrained, [src_ids("a b"), [], src_ids("c")], DecodeConfig())
    assert hyps[1].tokens == [] and hyps[1].score == 0.0
    assert hyps[0].tokens == search_ids(untrained, [src_ids("a b")], DecodeConfig())[0].tokens


# --- beam search ---------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_one_equals_greedy(model: EncoderDecoder, alpha: float) -> None:
    src, lengths = batch_of(TEXTS)
    beams = beam_search(model, src, lengths, 12, beam=1, alpha=alpha)
    greedy_hyps = greedy(model, src, lengths, 12)
    assert_same_greedy(model, TEXTS, greedy_hyps, [b[0] for b in beams], 12)


def stays_in_beam(hyp: Hypothesis, replay: BeamReplay) -> bool:
    """Whether every prefix of ``hyp`` was live in the replayed search while it ran, and ``hyp``
    was kept as a finished output if the search ran to its ``<eos>``."""
    n, ran = len(hyp.tokens), len(replay.live)
    live = all(tuple(hyp.tokens[:t]) in replay.live[t - 1] for t in range(1, min(n, ran) + 1))
    return live and (ran <= n or not hyp.finished or tuple(hyp.tokens) in replay.finished)


@pytest.mark.parametrize("beam", [2, 4])
def test_beam_score_is_at_least_greedy(trained: EncoderDecoder, beam: int) -> None:
    """Under raw log-probability (alpha 0) a wider beam never ends below greedy's output where
    that output stayed among its beams (the search then keeps it, or stops only once nothing
    live beats what it kept); it does not always, as a search can drop greedy's prefix. And
    beam search finds strictly better outputs for some sentences (so the test can tell search
    apart)."""
    src, lengths = batch_of(TEXTS)
    greedy_hyps = greedy(trained, src, lengths, 12)
    beams = beam_search(trained, src, lengths, 12, beam=beam, alpha=0.0)
    gains = [b[0].score - g.score for b, g in zip(beams, greedy_hyps, strict=True)]
    kept = [stays_in_beam(g, replay_beam(trained, src_ids(t), 12, beam, 0.0))
            for t, g in zip(TEXTS, greedy_hyps, strict=True)]
    assert sum(kept) >= len(TEXTS) // 2
    assert min(g for g, k in zip(gains, kept, strict=True) if k) >= -1e-4
    assert any(g > 1e-3 for g in gains)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_scores_equal_teacher_forced_rescoring(model: EncoderDecoder, alpha: float) -> None:
    """Every n-best hypothesis's score is the model's log-probability of its tokens: a wrong
    row reordering of the state would score tokens under another hypothesis's prefix."""
    texts = TEXTS[:12]
    src, lengths = batch_of(texts)
    nbest = beam_search(model, src, lengths, 10, beam=4, alpha=alpha)
    for text, hyps in zip(texts, nbest, strict=True):
        assert 1 <= len(hyps) <= 4
        for h in hyps:
            assert h.score == pytest.approx(rescore(model, text, h), abs=1e-4)
            assert h.score == pytest.approx(sum(h.token_scores), abs=1e-4)
        normalized = [h.normalized(alpha) for h in hyps]
        assert normalized == sorted(normalized, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == len(hyps)


def test_greedy_scores_equal_teacher_forced_rescoring(model: EncoderDecoder) -> None:
    src, lengths = batch_of(TEXTS[:12])
    for text, h in zip(TEXTS[:12], greedy(model, src, lengths, 10), strict=True):
        assert h.score == pytest.approx(rescore(model, text, h), abs=1e-4)


def test_length_penalty_golden_values() -> None:
    assert length_penalty(1, 1.0) == pytest.approx(1.0)
    assert length_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert length_penalty(100, 0.0) == 1.0
    assert Hypothesis([5, 6], -3.0, finished=True).normalized(1.0) == pytest.approx(-3.0 / (8 / 6))


# --- limits and special tokens -------------------------------------------------------------------


def test_outputs_respect_per_sentence_limits(untrained: EncoderDecoder) -> None:
    src, lengths = batch_of(TEXTS[:6])
    limits = torch.tensor([1, 2, 3, 4, 5, 6])
    for hyps in (greedy(untrained, src, lengths, limits),
                 greedy_uncached(untrained, src, lengths, limits),
                 [b[0] for b in beam_search(untrained, src, lengths, limits, beam=3)]):
        for h, limit in zip(hyps, limits.tolist(), strict=True):
            assert len(h.tokens) <= limit
            assert h.finished or len(h.tokens) == limit
            assert not {EOS_ID, PAD_ID, BOS_ID} & set(h.tokens)


def test_output_limit() -> None:
    """a * source length + b, capped by max_len_cap and by the position table after <bos>."""
    transformer = random_model("transformer")  # max_positions 64: <bos> + 63 outputs
    cfg = DecodeConfig(max_len_a=1.5, max_len_b=10, max_len_cap=50)
    assert [output_limit(n, cfg, transformer.max_positions) for n in (1, 4, 100)] == [11, 16, 50]
    assert output_limit(100, DecodeConfig(max_len_cap=500), transformer.max_positions) == 63
    gru = random_model("gru")  # no position table
    assert output_limit(100, DecodeConfig(max_len_cap=500), gru.max_positions) == 160
    assert output_limit(0, DecodeConfig(max_len_a=0.0, max_len_b=0), None) == 1  # never below 1


# --- attention weights for pictures --------------------------------------------------------------


def test_greedy_with_weights_shapes_and_tokens(untrained: EncoderDecoder) -> None:
    src, lengths = batch_of(["a b c d"])
    hyp, weights = greedy_with_weights(untrained, src, 9)
    assert_greedy_equal_up_to_ties(untrained, [src_ids("a b c d")],
                                   [greedy(untrained, src, lengths, 9)[0].tokens], [hyp.tokens],
                                   [9])
    t, s = len(hyp.tokens) + int(hyp.finished), src.size(1)
    cross = weights["cross"]
    assert cross.shape[2:] == (t, s)
    torch.testing.assert_close(cross.sum(-1), torch.ones(cross.shape[:3]))
    if untrained.max_positions is not None:  # the Transformer
        assert weights["enc"].shape == (2, 2, s, s)
        assert weights["self"].shape == (2, 2, t, t)
        assert cross.shape[:2] == (2, 2)
        assert torch.all(weights["self"].triu(diagonal=1) == 0)
        torch.testing.assert_close(weights["self"].sum(-1), torch.ones(2, 2, t))
    else:
        assert set(weights) == {"cross"} and cross.shape[:2] == (1, 1)


def test_forced_attention_is_the_greedy_searchs_own(model: EncoderDecoder) -> None:
    """The weights tags are placed by (:mod:`nmt.translation.alignment`), read by forcing the
    greedy output through the model in one pass, are those the search saw producing it step
    by step: the last layer's, its heads averaged."""
    checked = 0
    for text in TEXTS[:8]:
        ids = src_ids(text)
        hyp, weights = greedy_with_weights(model, torch.tensor([ids]), 9)
        if not hyp.tokens:
            continue
        searched = weights["cross"][-1].mean(dim=0)[: len(hyp.tokens)]
        forced = torch.tensor(forced_attention(model, [ids], [hyp.tokens])[0])
        torch.testing.assert_close(forced, searched, atol=1e-5, rtol=1e-4)
        checked += 1
    assert checked


def test_forced_attention_batched_is_one_by_one(model: EncoderDecoder) -> None:
    sources = [src_ids(t) for t in TEXTS[:6]]
    targets = [[4 + (i + j) % 7 for j in range(1 + 3 * i % 8)] for i in range(6)]
    batched = forced_attention(model, sources, targets)
    for s, t, rows in zip(sources, targets, batched, strict=True):
        alone = forced_attention(model, [s], [t])[0]
        assert len(rows) == len(t) and all(len(r) == len(s) for r in rows)
        torch.testing.assert_close(torch.tensor(rows), torch.tensor(alone), atol=1e-5,
                                   rtol=1e-4)


def make_run(run_dir: Path, arch: str = "transformer", trained: bool = True) -> Path:
    """A run directory as training leaves it (config, tokenizer, checkpoint) holding a toy model;
    the CLI tests in test_translate.py and test_bleu.py use it."""
    from nmt.config import Config, DataConfig
    from nmt.files import atomic_write_text
    from nmt.runs.checkpoint import save_checkpoint

    model = trained_toy(arch) if trained else random_model(arch)
    data = DataConfig(tokenizer="word", min_freq=1, lowercase=True, normalization="full")
    cfg = Config(data=data, model=tiny_config(arch))
    atomic_write_text(run_dir / "config.toml", cfg.to_toml())
    TOKENIZER.save(run_dir / "tokenizer")
    vocab = {"src": TOKENIZER.src_vocab_size, "tgt": TOKENIZER.tgt_vocab_size, "joint": True}
    save_checkpoint(run_dir / "checkpoints" / "last.pt",
                    {"config": cfg.to_dict(), "vocab": vocab, "model": model.state_dict(),
                     "progress": {"step": 200}})
    return run_dir


def test_decoding_benchmark_runs_end_to_end(tmp_path: Path, tiny_data_dir: Path) -> None:
    """``make bench`` calls it: every method row, the summary and the JSON file are there."""
    import json

    from bench.decoding import bench_decode, markdown

    run = make_run(tmp_path / "run", trained=False)
    result = bench_decode(run, tmp_path / "out", sample=4, data_dir=tiny_data_dir,
                          log=lambda s: None, cli_repeat=0, forced_lengths=(2, 4))
    assert json.loads((tmp_path / "out" / "decode.json").read_text()) == result
    methods = [r["method"] for r in result["sample_rows"]]
    assert methods[0] == "recipe: 1 at a time, uncached" and len(methods) == 7
    assert len(result["full_rows"]) == 3 and set(result["summary"]) >= {
        "batched_cached_vs_recipe", "test_split_batched_cached_vs_recipe_rate"}
    assert all(r["sentences"] == 4 for r in result["sample_rows"])
    assert [r["output_tokens"] for r in result["by_output_length"]] == [2, 4]
    table = markdown(result)
    assert all(f"| {m} |" in table for m in methods)
