"""The output layer and the loss by chunks against the layer and the fused loss, in fp32 on the
CPU, alternated in one process: ``python -m bench.chunked_loss [--threads 2] [--rounds 9]
[--block 15] [--warmup 5] [--config configs/demo.toml] [--set KEY=VALUE ...]``.

Builds the config's model twice, identically seeded (:mod:`bench.steps`), and trains one with
:mod:`nmt.training.chunked_output_loss` switched off (A: the model's output layer, then
:mod:`nmt.training.fused_cross_entropy`) and one with it on (B), on the same batches in
alternated blocks of steps, as :mod:`bench.ab` does. Prints each round's target tokens/s and
ratio B / A, then the median of the ratios. Pin it to one CPU (``taskset -c 1``) for one
thread, and run it on a quiet machine; the config's data must be prepared.
"""

from __future__ import annotations

from typing import Any


def main(argv: list[str] | None = None) -> None:
    from bench.ab import checked, options

    p = options("python -m bench.chunked_loss", __doc__)
    p.set_defaults(threads=2, rounds=9)
    args = checked(p, argv)
    import torch

    import nmt.training.chunked_output_loss as chunked
    from bench import CONFIGS
    from bench.ab import Step, compare
    from bench.machine import machine
    from bench.steps import training_steps
    from nmt.config import load_config
    from nmt.data.download import default_data_dir
    from nmt.errors import NmtError

    torch.set_num_threads(args.threads)
    config = args.config or CONFIGS / "demo.toml"
    overrides = ["train.device=cpu", f"train.threads={args.threads}", "train.precision=fp32",
                 *args.set]
    try:
        cfg = load_config(config, overrides)
        trainers = {side: training_steps(cfg, args.data_dir or default_data_dir(),
                                         torch.device("cpu")) for side in "AB"}
    except NmtError as e:
        raise SystemExit(f"error: {e}") from None
    info: dict[str, Any] = machine()
    print(f"{info.get('cpu')}; torch {torch.__version__}, {args.threads} thread(s); commit "
          f"{info.get('commit')}; {config.name} in fp32; A: the output layer, then the fused "
          f"loss; B: both by chunks of {chunked.ROWS} rows", flush=True)
    output_layer = chunked.output_layer

    def stepper(side: str) -> Step:
        def step(batch: Any) -> int:
            if side == "A":
                chunked.output_layer = lambda *a, **k: None  # type: ignore[assignment]
            try:
                return int(trainers[side].step(batch)[1])
            finally:
                chunked.output_layer = output_layer  # type: ignore[assignment]
        return step

    compare({"A": stepper("A"), "B": stepper("B")}, trainers["A"].batches(cfg.train.batch_size),
            args)


if __name__ == "__main__":
    main()
