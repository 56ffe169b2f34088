"""The OpenNMT-py side of :mod:`bench.peers`, run by the Python of OpenNMT-py's own environment
(``python -m bench.onmt_child CONFIG``): ``onmt_train`` with that config, every optimizer step
timed, then one JSON line of figures on stdout.

A step is :meth:`onmt.trainer.Trainer._gradient_accumulation`: forward, backward and the
optimizer's update of one batch (the batch is built before, by OpenNMT-py's iterator). Its
target tokens are the batch's non-padding tokens after ``<s>`` (``</s>`` counted, as nmt counts
``<eos>``), counted before the clock starts. This file imports nothing from nmt: nmt is not
installed in that environment.

Where the config has validation data, each validation is recorded with the seconds the timed
steps before it took (validation itself is not timed). OpenNMT-py 3.5.1 computes its validation
loss with the training's label smoothing; here it is computed without (the criterion's
smoothing set to 0 for validation), so it is the plain per-token cross-entropy nmt reports.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.onmt_child")
    p.add_argument("config", help="onmt_train's YAML (or JSON) config")
    p.add_argument("--warmup", type=int, default=0, help="leading steps left out of 'steady'")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    import onmt
    import onmt.trainer
    from onmt.bin.train import main as onmt_train
    from onmt.utils.loss import LossCompute

    step_times: list[tuple[float, int]] = []  # (seconds, target tokens) per optimizer step
    validations: list[dict[str, Any]] = []
    inner = onmt.trainer.Trainer._gradient_accumulation
    inner_validate = onmt.trainer.Trainer.validate
    inner_from_opts = LossCompute.from_opts.__func__  # type: ignore[attr-defined]

    def from_opts(cls: Any, opt: Any, model: Any, vocab: Any, train: bool = True) -> Any:
        compute = inner_from_opts(cls, opt, model, vocab, train)
        if not train and isinstance(compute.criterion, torch.nn.CrossEntropyLoss):
            compute.criterion.label_smoothing = 0.0  # plain cross-entropy, as nmt reports
        return compute

    def validate(self: Any, *rest: Any, **kwargs: Any) -> Any:
        stats = inner_validate(self, *rest, **kwargs)
        validations.append({"step": len(step_times), "valid_loss": stats.xent(),
                            "train_s": round(sum(s for s, _ in step_times), 2)})
        return stats

    def timed(self: Any, true_batches: list[Any], *rest: Any) -> Any:
        pad = self.train_loss.padding_idx
        tokens = sum(int(b["tgt"][:, 1:, 0].ne(pad).sum()) for b in true_batches)
        start = time.perf_counter()
        out = inner(self, true_batches, *rest)
        step_times.append((time.perf_counter() - start, tokens))
        return out

    onmt.trainer.Trainer._gradient_accumulation = timed  # type: ignore[method-assign]
    onmt.trainer.Trainer.validate = validate  # type: ignore[method-assign]
    LossCompute.from_opts = classmethod(from_opts)  # type: ignore[method-assign,assignment]
    sys.argv = ["onmt_train", "-config", args.config]
    start = time.perf_counter()
    onmt_train()
    seconds = time.perf_counter() - start
    steady = step_times[args.warmup:]
    steady_seconds = sum(s for s, _ in steady)
    print(json.dumps({
        "steps": len(step_times), "tokens": sum(n for _, n in step_times),
        "steady_tokens_per_sec": (sum(n for _, n in steady) / steady_seconds
                                  if steady_seconds > 0 else None),
        "step_seconds": [round(s, 3) for s, _ in step_times], "warmup_steps": args.warmup,
        "seconds": round(seconds, 1), "threads": torch.get_num_threads(),
        "onmt": getattr(onmt, "__version__", "?"), "torch": torch.__version__,
        "valid": validations,
    }))


if __name__ == "__main__":
    main()
