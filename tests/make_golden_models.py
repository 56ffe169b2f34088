"""Write ``tests/data/golden_models.pt``: what tiny seeded models compute, for
``tests/test_models_golden.py``.

The file pins the numbers of both model families so that a rewrite of their code can be shown to
change nothing: for each variant below it holds the model's config and weights, fixed padded
inputs (sources of different lengths in one batch), and what the model gave for them when the
file was made:

- ``logits``: the teacher-forced pass ``decode(tgt, memory)`` in eval mode;
- ``step_logits``: the same positions decoded one at a time through the incremental state;
- ``weights``: the attention weights of the teacher-forced pass (``need_weights=True``), and
  the encoder's (``enc``) for the Transformer;
- ``greedy`` and ``beam``: :func:`nmt.translation.search.greedy` and
:func:`nmt.translation.search.beam_search`
  (beam 4, all 4 hypotheses) as token lists, scores and finished flags;
- ``grads``: gradients of the token-level cross-entropy of the teacher-forced pass w.r.t. every
  parameter, in training mode with dropout 0 (so deterministic).

Weights come from ``build_model`` with a fixed seed; ``<eos>`` gets a raised output bias so
that some outputs finish before their length limit. Run it again only on purpose (the point is
that the numbers stay those of the code that made them)::

    PYTHONPATH=$PWD python tests/make_golden_models.py
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from conftest import step_by_step_logits

from nmt.config import ModelConfig
from nmt.data.tokenizers import BOS_ID as BOS
from nmt.data.tokenizers import EOS_ID as EOS
from nmt.data.tokenizers import PAD_ID as PAD
from nmt.models.base import EncoderDecoder
from nmt.models.build import build_model
from nmt.translation.search import Hypothesis, beam_search, greedy

PATH = Path(__file__).parent / "data" / "golden_models.pt"
VOCAB = 23  # target vocabulary (and source, when joint)
SRC_VOCAB = 19  # source vocabulary of the variants without a joint one
MAX_LEN = 8  # output limit of the searches
BEAM = 4

# name -> (ModelConfig fields, joint vocabulary, what is added to the <eos> output bias so
# that some greedy outputs end before the length limit and some do not)
VARIANTS: dict[str, tuple[dict[str, Any], bool, float]] = {
    "gru-2-bi-tied": (dict(arch="gru", n_layers=2, d_model=16, hidden=16, bidirectional=True,
                           tie_embeddings=True), True, 0.0),
    "gru-1": (dict(arch="gru", n_layers=1, d_model=16, hidden=12), False, 1.0),
    "transformer-postnorm": (dict(arch="transformer", n_layers=2, d_model=16, n_heads=2,
                                  d_ff=32, max_positions=32), False, 2.0),
    "transformer-prenorm-tied-bias": (dict(arch="transformer", n_layers=2, d_model=16,
                                           n_heads=2, d_ff=32, norm_first=True,
                                           tie_embeddings=True, attn_bias=True,
                                           max_positions=32), True, 3.0),
}


def model_config(fields: dict[str, Any], dropout: float = 0.1) -> ModelConfig:
    return ModelConfig(**{**fields, "dropout": dropout})


def inputs(src_vocab: int) -> dict[str, torch.Tensor]:
    """Sources of lengths 6, 2, 4 and 5 (``<eos>`` last, padded to 6) and targets ``(4, 5)``:
    ``tgt_in`` starts with ``<bos>``, ``tgt_out`` is it shifted by one."""
    g = torch.Generator().manual_seed(7)
    lengths = torch.tensor([6, 2, 4, 5])
    src = torch.randint(4, src_vocab, (4, 6), generator=g)
    src[torch.arange(4), lengths - 1] = EOS
    src[torch.arange(6)[None, :] >= lengths[:, None]] = PAD
    tgt_out = torch.randint(4, VOCAB, (4, 5), generator=g)
    tgt_out[0, 4], tgt_out[1, 2], tgt_out[1, 3:] = EOS, EOS, PAD
    tgt_in = torch.cat([torch.full((4, 1), BOS), tgt_out[:, :-1]], dim=1)
    return {"src": src, "lengths": lengths, "tgt_in": tgt_in, "tgt_out": tgt_out}


def hypotheses(hyps: list[Hypothesis]) -> list[dict[str, Any]]:
    return [{"tokens": h.tokens, "score": h.score, "finished": h.finished} for h in hyps]


@torch.no_grad()
def eval_outputs(model: EncoderDecoder, x: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Everything but the gradients, with ``model`` in eval mode."""
    model.eval()
    src, lengths, tgt = x["src"], x["lengths"], x["tgt_in"]
    memory = model.encode(src, lengths, need_weights=True)
    full = model.decode(tgt, memory, need_weights=True)
    weights = {name: w for name, w in full.weights.items()}
    if "attn_enc" in memory:
        weights["enc"] = memory["attn_enc"]
    return {
        "logits": full.logits,
        "step_logits": step_by_step_logits(model, memory, tgt),
        "weights": weights,
        "greedy": hypotheses(greedy(model, src, lengths, MAX_LEN)),
        "beam": [hypotheses(h) for h in beam_search(model, src, lengths, MAX_LEN, BEAM,
                                                     alpha=1.0)],
    }


def loss_gradients(model: EncoderDecoder, x: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Gradients of the summed token cross-entropy (``<pad>`` ignored), in training mode."""
    model.train()
    model.zero_grad()
    logits = model(x["src"], x["lengths"], x["tgt_in"])
    loss = F.cross_entropy(logits.flatten(0, 1), x["tgt_out"].flatten(), ignore_index=PAD,
                           reduction="sum")
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()
             if p.grad is not None}
    model.zero_grad()
    return grads


def build(fields: dict[str, Any], joint: bool, dropout: float = 0.1) -> EncoderDecoder:
    src_vocab = VOCAB if joint else SRC_VOCAB
    return build_model(model_config(fields, dropout), src_vocab, VOCAB, joint_vocab=joint)


def make() -> dict[str, Any]:
    golden: dict[str, Any] = {}
    for i, (name, (fields, joint, eos_bias)) in enumerate(VARIANTS.items()):
        torch.manual_seed(100 + i)
        model = build(fields, joint)
        with torch.no_grad():
            model.out.bias[EOS] += eos_bias
        x = inputs(VOCAB if joint else SRC_VOCAB)
        record = {"fields": fields, "joint": joint, "inputs": x,
                  "state_dict": {k: v.clone() for k, v in model.state_dict().items()}}
        record.update(eval_outputs(model, x))
        no_dropout = build(fields, joint, dropout=0.0)
        no_dropout.load_state_dict(record["state_dict"])
        record["grads"] = loss_gradients(no_dropout, x)
        golden[name] = record
    return golden


def main() -> None:
    golden = make()
    PATH.parent.mkdir(parents=True, exist_ok=True)
    torch.save(golden, PATH)
    print(f"wrote {PATH} ({PATH.stat().st_size} bytes): {', '.join(golden)}")
    for name, record in golden.items():
        finished = sum(h["finished"] for h in record["greedy"])
        print(f"  {name}: greedy {[h['tokens'] for h in record['greedy']]} "
              f"({finished} finished)")


if __name__ == "__main__":
    main()

