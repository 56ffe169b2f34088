"""One measurement of one revision of nmt, for :mod:`bench.revisions`.

Run as ``PYTHONPATH=<checkout of the revision> python bench/revision_probe.py SPEC_JSON``: the
``nmt`` imported is the revision's. It uses only what every revision from aa0d4c0 on offers
(``train`` with a ``StopFlag``, ``load_run``, ``translate_normalized``, found wherever the
revision keeps them: :func:`from_revision`), and prints one JSON object.

- ``{"workload": "train", "config": PATH, "steps": N, "set": [...], "data_dir": PATH}``: train
  N steps without validation; the seconds of every optimizer step (the loop asks its StopFlag
  after each one), and the target tokens trained on.
- ``{"workload": "decode", "run": PATH, "beam": B, "sentences": N, "data_dir": PATH}``: decode
  the first N distinct sources of the run's test split (0: all), batched as the run's
  ``[decode]`` says; the seconds and a digest of the outputs (equal digests: same translations).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from nmt.config import load_config
from nmt.data.prepare import prepare


def train_steps(spec: dict[str, Any]) -> dict[str, Any]:
    stop_flag: type[Any] = from_revision("StopFlag", "nmt.train", "nmt.training.loop")
    train = from_revision("train", "nmt.train", "nmt.training.loop")

    stamps: list[float] = []

    class Clock(stop_flag):  # type: ignore[valid-type,misc]  # the revision's own class
        def check(self, step: int) -> bool:
            stamps.append(time.perf_counter())
            return super().check(step)

    overrides = [f"train.max_steps={spec['steps']}", "train.eval_every=0",
                 "train.eval_sentences=-1", "train.ema_decay=0.0", *spec.get("set", [])]
    cfg = load_config(Path(spec["config"]), overrides)
    with tempfile.TemporaryDirectory() as tmp:
        result = train(cfg, Path(tmp) / "run", data_dir=Path(spec["data_dir"]),
                       log=lambda s: None, stop=Clock())
    steps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return {"step_seconds": steps, "tokens": result.progress.tokens,
            "steps": result.progress.step, "threads": torch.get_num_threads()}


def from_revision(name: str, *modules: str) -> Any:
    """``name`` from the first of ``modules`` that this revision has: the oldest home first, as
    an editable install of a newer checkout may still answer for the newer names."""
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise SystemExit(f"this revision has no {name} (looked in {', '.join(modules)})")


def decode_split(spec: dict[str, Any]) -> dict[str, Any]:
    translate_normalized = from_revision("translate_normalized", "nmt.translate",
                                         "nmt.translation.translator")
    load_run = from_revision("load_run", "nmt.loading", "nmt.checkpoint", "nmt.runs.loading")
    run = load_run(Path(spec["run"]), "best", "cpu")
    torch.set_num_threads(spec.get("threads", 2))
    prepared = prepare(run.config.data, Path(spec["data_dir"]), log=lambda s: None)
    sources, _ = prepared.splits["test"].grouped()
    if spec.get("sentences"):
        sources = sources[: spec["sentences"]]
    times = []
    for _ in range(spec.get("repeat", 3)):  # the least disturbed of a few passes
        start = time.perf_counter()
        with torch.inference_mode():
            outputs = translate_normalized(run.model, run.tokenizer, sources, run.config.decode,
                                           run.device, beam=spec["beam"],
                                           truncate=run.config.data.truncate)
        times.append(time.perf_counter() - start)
    seconds = min(times)
    digest = hashlib.sha256("\n".join(outputs).encode()).hexdigest()[:16]
    return {"seconds": seconds, "pass_seconds": times, "sentences": len(sources), "digest": digest}


def main() -> None:
    spec = json.loads(sys.argv[1])
    work = {"train": train_steps, "decode": decode_split}[spec["workload"]]
    print(json.dumps(work(spec)))


if __name__ == "__main__":
    main()
