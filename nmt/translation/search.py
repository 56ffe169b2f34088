"""Search: greedy (cached and uncached) and beam search, written once against the model contract.

Long for a reason: the searches share the contract's calls, the length limits and the pruning.

Every function takes token ids and returns token ids; text in and out lives in
:mod:`nmt.translation.translator`. The model contract is in :mod:`nmt.models.base`:

- the cached paths call ``encode`` once, ``init_state`` once, then ``decode`` on *one new
  position* per step, so a step costs O(1) projections per layer;
- :func:`greedy_uncached` re-runs the whole prefix at every step (``decode(prefix, memory,
  None)``), the recipe's way; tests and benchmarks compare the two.

Finished sentences are fed ``<pad>`` until they make up a fifth of the live batch, then dropped
from it with :func:`~nmt.models.base.select_rows` (``prune_at``: 0 drops each at once, 1 never;
the benchmark compares them). Scores are sums of log-probabilities under the model, ``<eos>``
included when it was produced.

The searches run under ``torch.inference_mode()`` (not merely ``no_grad``): no tensor they make
is ever differentiated, and autograd's bookkeeping is dropped (what it saves:
docs/BENCHMARKS.md, "Decoding the test split").
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from nmt.config import DecodeConfig
from nmt.data.tokenizers import BOS_ID, EOS_ID, PAD_ID
from nmt.device import bound_kernel_cache, decode_dtype
from nmt.models.base import EncoderDecoder, select_rows
from nmt.translation import blocked_argmax
from nmt.translation.limits import output_limit
from nmt.translation.rules import decode_batches, length_penalty  # noqa: F401 - used here and re-exported


@dataclass
class Hypothesis:
    """One output sentence: token ids without ``<bos>``/``<eos>``, and its model scores."""

    tokens: list[int]
    score: float  # sum of log-probabilities (the <eos> step included when produced); NaN
    # where the search was asked for no scores (search_ids' scores=False)
    finished: bool = True  # False when cut at the length limit before <eos>
    token_scores: list[float] = field(default_factory=list)  # per-step log-probabilities

    def normalized(self, alpha: float) -> float:
        """The GNMT length-normalised score ``score / ((5 + len) / 6) ** alpha``."""
        return self.score / length_penalty(self.steps, alpha)

    @property
    def steps(self) -> int:
        """Decoder steps taken: the tokens plus the ``<eos>`` step when there was one."""
        return len(self.tokens) + int(self.finished)




NEVER_OUTPUT = (PAD_ID, BOS_ID)  # tokens a search never writes


def _never_special(x: Tensor, never: Sequence[int] = NEVER_OUTPUT) -> Tensor:
    """``(n, V)`` scores with ``never`` (:data:`NEVER_OUTPUT`) at -inf, in place."""
    x[:, list(never)] = -math.inf
    return x


def _log_probs(logits: Tensor) -> Tensor:
    """``(n, t, V)`` logits -> ``(n, V)`` log-probabilities of the last position, in fp32.

    ``<pad>`` and ``<bos>`` get -inf *after* the softmax (:func:`_never_special`), so the scores
    of the other tokens stay the model's true log-probabilities.
    """
    return _never_special(torch.log_softmax(logits[:, -1].float(), dim=-1))


def _argmax(scores: Tensor, never: Sequence[int] = ()) -> Tensor:
    """``(n, V)`` scores -> each row's best index ``(n,)``, never one of ``never``: the
    argmax (on the CPU by blocks, :mod:`nmt.translation.blocked_argmax`)."""
    if blocked_argmax.applies(scores):
        return blocked_argmax.argmax_rows(scores, never)
    return (_never_special(scores.clone(), never) if never else scores).argmax(dim=1)


def _best(logits: Tensor) -> tuple[Tensor, Tensor]:
    """``(n, t, V)`` logits -> the last position's best token ``(n,)`` (never ``<pad>`` or
    ``<bos>``) and its log-probability ``(n,)``: what greedy search needs."""
    logp = _log_probs(logits)
    token = _argmax(logp)
    return logp.gather(1, token[:, None]).squeeze(1), token


def _best_unscored(logits: Tensor) -> tuple[Tensor, Tensor]:
    """What :func:`_best` picks, without its log-probability (NaN in its place): the best logit
    is the best log-probability, so no log-softmax over the vocabulary is taken. What greedy
    search uses where nothing reads its scores (``nmt translate``, ``nmt bleu``, validation;
    measured in docs/BENCHMARKS.md, "Decoding the test split")."""
    token = _argmax(logits[:, -1], never=NEVER_OUTPUT)
    return torch.full(token.shape, math.nan, device=token.device), token


@dataclass(frozen=True)
class Sampling:
    """Sampling instead of search, for back-translation (Edunov et al. 2018: sampled synthetic
    sources train better models than beam's where the pair has enough data): each token is
    drawn from the model's distribution over its ``top_k`` most likely tokens (0: all of
    them), by a generator seeded with ``seed``, so the same input in the same batches gives
    the same output."""

    top_k: int = 10
    seed: int = 1


def _sampler(sampling: Sampling, device: torch.device) -> Callable[[Tensor], tuple[Tensor, Tensor]]:
    """What :func:`greedy` picks a token with when it samples: ``(n, t, V)`` logits -> a drawn
    token ``(n,)`` and its log-probability ``(n,)`` (never ``<pad>`` or ``<bos>``)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(sampling.seed)

    def pick(logits: Tensor) -> tuple[Tensor, Tensor]:
        logp = _log_probs(logits)
        allowed = logp
        if 0 < sampling.top_k < logp.size(1):
            kth = logp.topk(sampling.top_k, dim=1).values[:, -1:]
            allowed = logp.masked_fill(logp < kth, -math.inf)
        token = torch.multinomial(allowed.exp(), 1, generator=generator).squeeze(1)
        return logp.gather(1, token[:, None]).squeeze(1), token

    return pick


PRUNE_AT = 0.2
"""Default of :func:`greedy`'s ``prune_at``: on the CPU, dropping finished rows beats keeping them
to the end, and waiting until they are a fifth of the batch beats dropping each at once
(docs/BENCHMARKS.md, "Decoding the test split", has the figures)."""


def _as_limits(max_len: Tensor | int, batch: int, device: torch.device) -> Tensor:
    if isinstance(max_len, int):
        return torch.full((batch,), max_len, dtype=torch.long, device=device)
    return max_len.to(device=device, dtype=torch.long)


@torch.inference_mode()
def greedy(
    model: EncoderDecoder,
    src: Tensor,
    src_lengths: Tensor,
    max_len: Tensor | int,
    prune_at: float = PRUNE_AT,
    pick: Callable[[Tensor], tuple[Tensor, Tensor]] = _best,
) -> list[Hypothesis]:
    """Greedy search with the incremental state, one new position per step (``pick`` chooses
    each token: the best, or a sample, :func:`_sampler`).

    Args:
        src: ``(B, S)`` padded source ids; src_lengths: ``(B,)``.
        max_len: ``(B,)`` or one int: most output tokens per sentence (``<eos>`` not counted).
        prune_at: finished rows are fed ``<pad>`` until they make up this fraction of the live
            batch, then dropped from it (0: at once; 1: never, the batch runs until all
            are done). Dropping rows copies the whole state, so waiting for a few saves copies.
    Returns:
        B hypotheses, in batch order.
    """
    device = src.device
    b = src.size(0)
    limits = _as_limits(max_len, b, device)
    memory = model.encode(src, src_lengths)
    state = model.init_state(memory)
    rows = torch.arange(b, device=device)  # original row of each live batch row (n,)
    live_limits = limits  # (n,)
    steps_left = int(limits.max())  # the batch ends when its longest limit is reached
    last = torch.full((b, 1), BOS_ID, dtype=torch.long, device=device)  # (n, 1)
    done = torch.zeros(b, dtype=torch.bool, device=device)  # (n,) finished, still in the batch
    history: list[tuple[Tensor, Tensor, Tensor]] = []  # per step: rows, tokens, scores (n,)
    step = 0
    while step < steps_left:
        output = model.decode(last, memory, state)
        assert output.state is not None
        state = output.state
        score, token = pick(output.logits)  # (n,)
        token = token.masked_fill(done, PAD_ID)
        history.append((rows, token, score))
        step += 1
        done |= (token == EOS_ID) | (live_limits <= step)
        n_done = int(done.sum())
        if n_done == rows.numel():
            break
        if n_done > 0 and n_done >= prune_at * rows.numel():
            keep = (~done).nonzero().squeeze(1)
            rows, token, live_limits = rows[keep], token[keep], live_limits[keep]
            memory, state = select_rows(memory, keep), select_rows(state, keep)
            done = done[keep]
            steps_left = int(live_limits.max())
        last = token[:, None]
    return _collect(history, b, device)


@torch.inference_mode()
def greedy_uncached(
    model: EncoderDecoder, src: Tensor, src_lengths: Tensor, max_len: Tensor | int
) -> list[Hypothesis]:
    """Greedy search that re-runs the decoder over the whole prefix at every step.

    The recipe's (and JoeyNMT's) way, O(T^2) decoder work per sentence; kept as the reference
    the cached path is tested and benchmarked against. Shapes as in :func:`greedy`.
    """
    device = src.device
    b = src.size(0)
    limits = _as_limits(max_len, b, device)
    memory = model.encode(src, src_lengths)
    rows = torch.arange(b, device=device)
    prefix = torch.full((b, 1), BOS_ID, dtype=torch.long, device=device)  # (n, t)
    history: list[tuple[Tensor, Tensor, Tensor]] = []
    step = 0
    while rows.numel() > 0 and step < int(limits[rows].max()):
        score, token = _best(model.decode(prefix, memory, None).logits)  # (n,)
        history.append((rows, token, score))
        step += 1
        keep = (~((token == EOS_ID) | (limits[rows] <= step))).nonzero().squeeze(1)
        rows, memory = rows[keep], select_rows(memory, keep)
        prefix = torch.cat([prefix[keep], token[keep, None]], dim=1)
    return _collect(history, b, device)


def _collect(
    history: list[tuple[Tensor, Tensor, Tensor]], b: int, device: torch.device
) -> list[Hypothesis]:
    """Per-step (rows, tokens, scores) of the live rows -> B hypotheses, each cut at its first
    ``<eos>`` (rows no longer live hold ``<pad>``, which search never outputs)."""
    t = len(history)
    tokens = torch.full((b, t), PAD_ID, dtype=torch.long, device=device)
    scores = torch.zeros((b, t), device=device)
    for i, (rows, token, score) in enumerate(history):
        tokens[rows, i] = token
        scores[rows, i] = score
    hyps = []
    for row_tokens, row_scores in zip(tokens.tolist(), scores.tolist(), strict=True):
        n = len(row_tokens)
        for i, tok in enumerate(row_tokens):
            if tok == EOS_ID or tok == PAD_ID:
                n = i
                break
        finished = n < t and row_tokens[n] == EOS_ID
        steps = n + int(finished)
        hyps.append(
            Hypothesis(row_tokens[:n], float(sum(row_scores[:steps])), finished, row_scores[:steps])
        )
    return hyps


@torch.inference_mode()
def beam_search(
    model: EncoderDecoder,
    src: Tensor,
    src_lengths: Tensor,
    max_len: Tensor | int,
    beam: int,
    alpha: float = 1.0,
) -> list[list[Hypothesis]]:
    """Batched beam search over ``B * beam`` rows with GNMT length normalisation.

    Each step scores all ``beam * V`` extensions of a sentence's live hypotheses and keeps the
    best ``2 * beam``: those ending in ``<eos>`` among the top ``beam`` become finished
    hypotheses, the best ``beam`` others stay live (so a sentence never runs out of live beams).
    A sentence is done once it holds ``beam`` finished hypotheses that its best live beam does
    not beat (see below), or at its length limit (live beams then count as unfinished
    hypotheses); done sentences leave the batch. With ``beam = 1`` this is exactly greedy.

    Args:
        src: ``(B, S)``; src_lengths: ``(B,)``; max_len: ``(B,)`` or one int.
        alpha: length-penalty exponent (0: raw log-probabilities).
    Returns:
        for each sentence its finished hypotheses (at most ``beam``), best first by normalised
        score; translation takes the first.
    """
    device = src.device
    b, k = src.size(0), beam
    limits = _as_limits(max_len, b, device)
    memory = model.encode(src, src_lengths)
    expand = torch.arange(b, device=device).repeat_interleave(k)  # (B*k,)
    memory = select_rows(memory, expand)
    state = model.init_state(memory)
    sent = torch.arange(b, device=device)  # original sentence of each live sentence (n,)
    # Only the first beam of each sentence starts live, so step 1 does not pick k copies.
    beam_scores = torch.full((b, k), -math.inf, device=device)
    beam_scores[:, 0] = 0.0  # (n, k)
    history = torch.full((b * k, 0), BOS_ID, dtype=torch.long, device=device)  # (n*k, t)
    step_logp = torch.zeros((b * k, 0), device=device)  # per-token log-probs (n*k, t)
    last = torch.full((b * k, 1), BOS_ID, dtype=torch.long, device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]  # best k so far, best first
    # Normalised score of each sentence's k-th best finished hypothesis (-inf until it has k).
    worst = torch.full((b,), -math.inf, dtype=torch.float64, device=device)
    step = 0
    while sent.numel() > 0:
        n = sent.numel()
        output = model.decode(last, memory, state)
        assert output.state is not None
        state = output.state
        logp = _log_probs(output.logits)  # (n*k, V)
        v = logp.size(-1)
        cand = (beam_scores[:, :, None] + logp.view(n, k, v)).view(n, k * v)
        top_scores, top_idx = cand.topk(min(2 * k, k * v), dim=-1)  # (n, 2k)
        top_beam, top_token = top_idx // v, top_idx % v
        step += 1
        # Finished candidates: <eos> within the top k ranks.
        is_eos = top_token == EOS_ID
        eos_hits = (is_eos[:, :k] & torch.isfinite(top_scores[:, :k])).nonzero().tolist()
        for i, r in eos_hits:
            row = i * k + int(top_beam[i, r])
            hyp = Hypothesis(history[row].tolist(), float(top_scores[i, r]), True,
                             step_logp[row].tolist() + [float(logp[row, EOS_ID])])
            _keep_best(finished, worst, int(sent[i]), hyp, k, alpha)
        # Live candidates: the best k that do not end in <eos> (stable order by rank).
        rank = torch.arange(top_idx.size(1), device=device).expand_as(top_idx)
        order = (is_eos.long() * top_idx.size(1) + rank).argsort(dim=-1)[:, :k]  # (n, k)
        beam_scores = top_scores.gather(1, order)
        live_beam, live_token = top_beam.gather(1, order), top_token.gather(1, order)
        src_rows = (torch.arange(n, device=device)[:, None] * k + live_beam).view(-1)  # (n*k,)
        token_logp = logp[src_rows, live_token.view(-1)]
        history = torch.cat([history[src_rows], live_token.view(-1, 1)], dim=1)
        step_logp = torch.cat([step_logp[src_rows], token_logp[:, None]], dim=1)
        # A sentence is done when no live beam is expected to beat its k kept hypotheses. Log-
        # probabilities only fall, so with alpha = 0 the live beam's score now is a bound and
        # the test is exact; with alpha > 0 longer outputs are divided by more, and comparing at
        # the current length is a heuristic (as in Hugging Face's default) that keeps beam 1
        # identical to greedy.
        bound = beam_scores[:, 0].double() / length_penalty(step, alpha)
        at_limit = limits[sent] <= step
        done = at_limit | (bound <= worst[sent])
        for i in at_limit.nonzero().squeeze(1).tolist():
            # Out of length: the live beams become unfinished hypotheses.
            for j in range(k):
                row = i * k + j
                if math.isfinite(float(beam_scores[i, j])):
                    hyp = Hypothesis(history[row].tolist(), float(beam_scores[i, j]), False,
                                     step_logp[row].tolist())
                    _keep_best(finished, worst, int(sent[i]), hyp, k, alpha)
        keep_sent = ~done
        if not bool(keep_sent.any()):
            break
        # Rows follow their chosen parents, without the rows of done sentences.
        keep_rows = src_rows.view(n, k)[keep_sent].reshape(-1)
        memory, state = select_rows(memory, keep_rows), select_rows(state, keep_rows)
        live = keep_sent.repeat_interleave(k)
        history, step_logp = history[live], step_logp[live]
        beam_scores = beam_scores[keep_sent]
        sent = sent[keep_sent]
        last = history[:, -1:]
    return finished


def _keep_best(
    finished: list[list[Hypothesis]], worst: Tensor, s: int, hyp: Hypothesis, k: int,
    alpha: float,
) -> None:
    """Add ``hyp`` to sentence ``s``'s kept hypotheses, keeping the best ``k``."""
    hyps = finished[s]
    hyps.append(hyp)
    hyps.sort(key=lambda h: h.normalized(alpha), reverse=True)
    del hyps[k:]
    if len(hyps) == k:
        worst[s] = hyps[-1].normalized(alpha)


def pad_batch(seqs: Sequence[Sequence[int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Token-id lists -> ``(B, S)`` ids padded with ``<pad>`` and ``(B,)`` lengths."""
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    src = torch.full((len(seqs), max((len(s) for s in seqs), default=1)), PAD_ID, dtype=torch.long)
    for i, s in enumerate(seqs):
        src[i, : len(s)] = torch.tensor(list(s), dtype=torch.long)
    return src.to(device), lengths.to(device)


def in_precision(model: EncoderDecoder, dtype: torch.dtype | None) -> EncoderDecoder:
    """The model a search runs in ``dtype`` (None: fp32, from :func:`nmt.device.decode_dtype`):
    ``model`` itself where its weights are in ``dtype`` already, else a copy with its weights
    and float buffers in ``dtype``.

    A search in bf16 runs on bf16 weights, as CTranslate2's compute types do, rather than under
    autocast, which casts the input of every matrix product and keeps the residual stream and
    the layer norms in fp32 (speed and BLEU against autocast: docs/BENCHMARKS.md, "Decoding the
    test split"). A copy, so the caller's model (a training
    model under validation, an fp32 translator beside) is never changed;
    :class:`~nmt.translation.translator.Translator` makes it once, not at every call.
    """
    want = dtype if dtype is not None else torch.float32
    if all(p.dtype == want for p in model.parameters()):
        return model
    return copy.deepcopy(model).to(want)


@torch.inference_mode()
def search_ids(
    model: EncoderDecoder,
    src_ids: Sequence[Sequence[int]],
    cfg: DecodeConfig,
    device: torch.device | None = None,
    method: str = "cached",
    prune_at: float = PRUNE_AT,
    sampling: Sampling | None = None,
    scores: bool = True,
) -> list[Hypothesis]:
    """Decode many sources: sorted by length into batches (:func:`decode_batches`), results in
    input order.

    Sorting by length keeps padding (wasted work) low. ``sampling`` draws each token
    (:class:`Sampling`); else ``cfg.beam > 1`` selects beam search; otherwise ``method`` picks
    ``"cached"`` greedy or the ``"uncached"`` reference path, in ``cfg.precision``
    (:func:`nmt.device.decode_dtype`). Empty sources are not decoded (an empty hypothesis).
    ``scores=False`` spares cached greedy search its log-probabilities (CTranslate2's
    ``return_scores``): the same tokens, with NaN scores; beam search and sampling need them.
    """
    if method not in ("cached", "uncached"):
        raise ValueError(f"method: expected cached or uncached, got {method!r}")
    device = device if device is not None else next(model.parameters()).device
    results: list[Hypothesis | None] = [None] * len(src_ids)
    pick = (_sampler(sampling, device) if sampling is not None else
            _best if scores else _best_unscored)
    dtype = decode_dtype(device, cfg.precision)  # BENCHMARKS: "bf16 on the CPU"
    model = in_precision(model, dtype)
    bound_kernel_cache(device, dtype)
    for idx in decode_batches([len(s) for s in src_ids], cfg):
        src, lengths = pad_batch([src_ids[i] for i in idx], device)
        limits = torch.tensor([output_limit(len(src_ids[i]), cfg, model.max_positions)
                               for i in idx], device=device)
        if sampling is None and cfg.beam > 1:
            hyps = [h[0] for h in beam_search(model, src, lengths, limits, cfg.beam,
                                              cfg.length_penalty)]
        elif sampling is None and method == "uncached":
            hyps = greedy_uncached(model, src, lengths, limits)
        else:
            hyps = greedy(model, src, lengths, limits, prune_at=prune_at, pick=pick)
        for i, h in zip(idx, hyps, strict=True):
            results[i] = h
    return [h if h is not None else Hypothesis([], 0.0, finished=False) for h in results]


@torch.inference_mode()
def greedy_with_weights(
    model: EncoderDecoder, src: Tensor, max_len: int
) -> tuple[Hypothesis, dict[str, Tensor]]:
    """Greedy search for ONE sentence ``src`` ``(1, S)``, collecting attention weights.

    Returns the hypothesis and the weights of every step, stacked over queries (one query per
    decoder step, i.e. per produced token, ``<eos>`` included):
    ``"enc"`` ``(L, h, S, S)`` (Transformer only), ``"self"`` ``(L, h, T, T)`` (Transformer
    only; zero above the diagonal, where the causal mask allowed nothing) and ``"cross"``
    ``(L, h, T, S)`` (the GRU's Bahdanau weights as ``(1, 1, T, S)``).
    """
    lengths = torch.tensor([src.size(1)], device=src.device)
    memory = model.encode(src, lengths, need_weights=True)
    state = model.init_state(memory)
    last = torch.full((1, 1), BOS_ID, dtype=torch.long, device=src.device)
    tokens: list[int] = []
    scores: list[float] = []
    steps: dict[str, list[Tensor]] = {"self": [], "cross": []}
    finished = False
    while len(tokens) < max_len:
        output = model.decode(last, memory, state, need_weights=True)
        assert output.state is not None
        state = output.state
        for name, w in output.weights.items():
            steps.setdefault(name, []).append(w[0, :, :, -1])  # (L, h, keys)
        score, token = _log_probs(output.logits).max(dim=-1)
        scores.append(float(score))
        if int(token) == EOS_ID:
            finished = True
            break
        tokens.append(int(token))
        last = token[:, None]
    weights: dict[str, Tensor] = {}
    if "attn_enc" in memory:
        weights["enc"] = memory["attn_enc"][0]
    if steps["cross"]:
        weights["cross"] = torch.stack(steps["cross"], dim=2)  # (L, h, T, S)
    if steps["self"]:
        t = len(steps["self"])
        rows = [torch.nn.functional.pad(w, (0, t - w.size(-1))) for w in steps["self"]]
        weights["self"] = torch.stack(rows, dim=2)  # (L, h, T, T)
    return Hypothesis(tokens, float(sum(scores)), finished, scores), weights


@torch.inference_mode()
def forced_attention(model: EncoderDecoder, src: Sequence[Sequence[int]],
                     tgt: Sequence[Sequence[int]]) -> list[list[list[float]]]:
    """The encoder-decoder attention of the last decoder layer, averaged over its heads, of
    each ``tgt[i]`` (ids without ``<bos>``/``<eos>``) forced through the model as the
    translation of ``src[i]`` (encoder ids, as :func:`~nmt.translation.translator.source_ids`
    makes them), in one padded batch: per sentence, a row per ``tgt[i]`` token and the
    weights it puts on each of the ``src[i]`` tokens (:mod:`nmt.translation.alignment`)."""
    device = next(model.parameters()).device
    source, lengths = pad_batch(src, device)
    fed, _ = pad_batch([[BOS_ID, *t] for t in tgt], device)
    memory = model.encode(source, lengths)
    cross = model.decode(fed, memory, None, need_weights=True, project=False).weights["cross"]
    mean = cross[:, -1].float().mean(dim=1)  # (B, T, S)
    return [mean[i, : len(t), : len(s)].tolist() for i, (s, t) in enumerate(zip(src, tgt,
                                                                                 strict=True))]
