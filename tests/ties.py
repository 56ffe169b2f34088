"""Comparing the outputs of two computations of the same model without depending on ties.

Two computations of one model (cached and uncached, batched and alone, nmt and CTranslate2, this
CPU and one with other vector instructions, the code now and the code a golden file was written
with) agree on every log-probability to about 1e-5, not bit for bit. Where two candidate tokens
are closer than that, either may win, so an exact comparison of their outputs holds by luck.
These helpers compare exactly wherever the model prefers one output by at least :data:`TIE`
(far above float noise, far below a real preference), and where it does not they check that the
two outputs part at a tie and not elsewhere.

- :func:`step_gaps`: for each step of an output, how far its token is above the best other one;
- :func:`assert_greedy_equal_up_to_ties`: two greedy outputs are equal, or part at a tie;
- :func:`greedy_tie_free`: which sources' greedy outputs no tie can change (to pick inputs for
  comparisons of scores computed from whole outputs, such as BLEU);
- :func:`log_prob`: the model's log-probability of an output;
- :func:`replay_beam`: nmt's beam search of one source, with the smallest gap between two
  scores whose order it decided, for comparisons of beam search outputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch

from nmt.config import DecodeConfig
from nmt.data.normalize import normalize
from nmt.data.tokenizers import BOS_ID, EOS_ID, PAD_ID
from nmt.models.base import EncoderDecoder
from nmt.translation.search import length_penalty, pad_batch, search_ids
from nmt.translation.translator import Translator, source_cut, source_ids

TIE = 1e-3  # log-probability gap under which two candidates count as tied
CPU = torch.device("cpu")


@torch.no_grad()
def _log_probs(model: EncoderDecoder, src: Sequence[int], prefixes: list[list[int]],
               renormalised: bool = False) -> torch.Tensor:
    """``(len(prefixes), t + 1, V)`` log-probabilities after ``<bos> + prefix[:i]`` for each
    position ``i`` of the (equally long) prefixes, one full pass; ``<pad>``/``<bos>`` at -inf as
    the search has them (``renormalised``: left out of the softmax too, as in an export)."""
    src_t, lengths = pad_batch([src] * len(prefixes), CPU)
    tgt_in = torch.tensor([[BOS_ID, *p] for p in prefixes])
    logits = model.decode(tgt_in, model.encode(src_t, lengths)).logits.double()
    if renormalised:
        logits[..., [PAD_ID, BOS_ID]] = -math.inf
    logp = torch.log_softmax(logits, dim=-1)
    logp[..., PAD_ID] = -math.inf
    logp[..., BOS_ID] = -math.inf
    return logp


def step_gaps(model: EncoderDecoder, src: Sequence[int], tokens: Sequence[int],
              finished: bool) -> list[float]:
    """For each step of the output ``tokens`` (and its ``<eos>`` step when ``finished``): the
    log-probability of the token taken minus that of the best other token. Positive everywhere:
    greedy's output, with that margin; a step below ``-TIE``: not greedy's output."""
    target = list(tokens) + ([EOS_ID] if finished else [])
    if not target:
        return []
    logp = _log_probs(model, src, [target[:-1]])[0]
    index = torch.tensor(target)[:, None]
    chosen = logp.gather(1, index).squeeze(1)
    others = logp.scatter(1, index, -math.inf).amax(dim=1)
    return (chosen - others).tolist()


def log_prob(model: EncoderDecoder, src: Sequence[int], tokens: Sequence[int],
             finished: bool, renormalised: bool = False) -> float:
    """The model's log-probability of the output ``tokens`` (``<eos>`` too when finished);
    ``renormalised``: with ``<pad>`` and ``<bos>`` left out of the softmax (an export's)."""
    target = list(tokens) + ([EOS_ID] if finished else [])
    if not target:
        return 0.0
    logp = _log_probs(model, src, [target[:-1]], renormalised)[0]
    return float(logp.gather(1, torch.tensor(target)[:, None]).sum())


def assert_greedy_equal_up_to_ties(model: EncoderDecoder, sources: Sequence[Sequence[int]],
                                   expected: Sequence[Sequence[int]],
                                   got: Sequence[Sequence[int]], limits: Sequence[int]) -> None:
    """Greedy outputs (ids without ``<eos>``) of two computations of ``model``, per source with
    its output limit: each pair is equal, or the two part at a step where the model's
    log-probabilities of their two tokens (``<eos>`` where one ends) are within :data:`TIE`.
    Both are cut at the limit, as the search cuts them."""
    assert len(sources) == len(expected) == len(got) == len(limits)
    for src, a, b, limit in zip(sources, expected, got, limits, strict=True):
        a, b = list(a), list(b)
        assert len(a) <= limit and len(b) <= limit, (src, a, b, limit)
        if a == b:
            continue
        t = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                 min(len(a), len(b)))
        assert t < limit
        logp = _log_probs(model, src, [a[:t]])[0, t]
        x = a[t] if t < len(a) else EOS_ID
        y = b[t] if t < len(b) else EOS_ID
        gap = abs(float(logp[x] - logp[y]))
        assert gap <= TIE, (f"source {list(src)}: outputs part at step {t + 1} ({x} vs {y}), "
                            f"log-probabilities {gap:.2g} apart, not a tie:\n{a}\n{b}")


def greedy_tie_free(model: EncoderDecoder, sources: Sequence[Sequence[int]],
                    cfg: DecodeConfig) -> list[bool]:
    """Per source: whether every step of its greedy output under ``cfg``'s limits wins by more
    than :data:`TIE`, so that any computation of ``model`` gives the same output."""
    hyps = search_ids(model, sources, replace(cfg, beam=1))
    return [not src or min(step_gaps(model, src, h.tokens, h.finished), default=math.inf) > TIE
            for src, h in zip(sources, hyps, strict=True)]


def sources_of(translator: Translator, texts: Sequence[str]) -> list[list[int]]:
    """The encoder ids ``translator`` decodes for ``texts`` (normalised, cut, ``<eos>``)."""
    cut = source_cut(translator.model, translator.max_src_tokens, translator.truncate)
    return [source_ids(translator.tokenizer, normalize(t, translator.lowercase,
                                                       translator.normalization), *cut)[0]
            for t in texts]


@dataclass
class BeamReplay:
    """What :func:`replay_beam` found."""

    margin: float  # the smallest gap between two scores whose order decided the result
    best: list[int]  # the best output
    live: list[set[tuple[int, ...]]] = field(default_factory=list)  # live prefixes per step
    finished: set[tuple[int, ...]] = field(default_factory=set)  # outputs that took <eos>


@torch.no_grad()
def replay_beam(model: EncoderDecoder, src: Sequence[int], limit: int, beam: int,
                alpha: float, n_best: int = 1) -> BeamReplay:
    """Beam search of one source by :func:`nmt.translation.search.beam_search`'s rules, one full
    pass per step, noting the smallest gap between two scores whose order decided the result. The
    decisions: which ``beam`` candidates not ending in ``<eos>`` stay live, whether an ``<eos>``
    candidate ranks among the best ``beam`` (and so finishes), which ``beam`` finished outputs
    are kept, when the search stops, and the order of the first ``n_best``. Two computations
    whose scores differ by less than half of the margin give the same output."""
    k = beam
    live: list[tuple[list[int], float]] = [([], 0.0)]
    done: list[tuple[float, list[int]]] = []  # (normalised score, tokens), best first
    replay = BeamReplay(math.inf, [])
    margin = math.inf
    for step in range(1, limit + 1):
        logp = _log_probs(model, src, [t for t, _ in live])[:, -1]  # (live, V)
        scores = torch.tensor([score for _, score in live], dtype=logp.dtype)[:, None] + logp
        values, order = scores.flatten().sort(descending=True)
        n = min(int(torch.isfinite(values).sum()), 3 * k + 1)  # all that can matter
        v_size = logp.size(1)
        cand = [(float(x), int(j) // v_size, int(j) % v_size)
                for x, j in zip(values[:n], order[:n], strict=True)]
        rest = [c for c in cand if c[2] != EOS_ID]
        if len(rest) > k:  # the last one kept live and the first one dropped
            margin = min(margin, rest[k - 1][0] - rest[k][0])
        for r, (score, i, v) in enumerate(cand):
            if v == EOS_ID and len(cand) > k:  # finishes or not: against rank k / k + 1
                margin = min(margin, score - cand[k][0] if r < k else cand[k - 1][0] - score)
                if r < k:
                    done.append((score / length_penalty(step, alpha), live[i][0]))
                    replay.finished.add(tuple(live[i][0]))
        live = [(live[i][0] + [v], score) for score, i, v in rest[:k]]
        replay.live.append({tuple(t) for t, _ in live})
        if step == limit:
            done += [(s / length_penalty(step, alpha), t) for t, s in live]
        done.sort(key=lambda d: -d[0])
        if len(done) > k:  # the k-th kept and the first dropped
            margin = min(margin, done[k - 1][0] - done[k][0])
        if step == limit:
            break
        if len(done) >= k:
            bound = live[0][1] / length_penalty(step, alpha)
            margin = min(margin, abs(bound - done[k - 1][0]))
            if bound <= done[k - 1][0]:
                break
    ranked = [d[0] for d in done[: n_best + 1]]
    replay.margin = min([margin] + [a - b for a, b in zip(ranked, ranked[1:], strict=False)])
    replay.best = done[0][1]
    return replay
