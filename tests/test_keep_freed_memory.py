"""nmt.training.keep_freed_memory: a training process reuses the large blocks it frees
instead of mapping fresh, zeroed pages for each (the trick), computes the same losses with it
as without (the equivalence), and leaves a malloc the user tuned as the user tuned it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

glibc_only = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="the trick applies to glibc's malloc on Linux only")

# A few training steps of a small Transformer whose logits (64 x 40 x 4,000 floats, 41 MB) are
# above glibc's largest mmap threshold, with the trick or without: the page faults of the
# steps after the first two, and every step's loss.
CHILD = """
import resource, sys, torch
from nmt.training.keep_freed_memory import keep_freed_memory
done = keep_freed_memory() if sys.argv[1] == "on" else False

from nmt.config import ModelConfig
from nmt.models.build import build_model
torch.manual_seed(0)
torch.set_num_threads(1)
cfg = ModelConfig(arch="transformer", d_model=32, n_heads=2, d_ff=64, n_layers=1)
model = build_model(cfg, 4000, 4000)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
losses = []
for step in range(10):
    if step == 2:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    src = torch.randint(4, 4000, (64, 40))
    tgt = torch.randint(4, 4000, (64, 41))
    logits = model(src, torch.full((64,), 40), tgt[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item().hex())
print(done, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print("\\n".join(losses))
"""


def _child(mode: str, **env: str) -> tuple[str, int, list[str]]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env={**clean, "PYTHONPATH": str(REPO), **env})
    assert done.returncode == 0, done.stderr
    first, *losses = done.stdout.split("\n")
    applied, faults = first.split()
    return applied, int(faults), [line for line in losses if line]


@glibc_only
def test_freed_blocks_are_reused_and_the_losses_are_the_same() -> None:
    applied, faults, losses = _child("on")
    default_applied, default_faults, default_losses = _child("off")
    assert (applied, default_applied) == ("True", "False")
    # without it the logits, their gradient and the like are fresh mappings at every step:
    # 40,000 pages of 4 KiB a step to fault in (fewer where transparent huge pages back them);
    # with it the steps after the first two reuse the heap's blocks, but for the heap's growth
    # while it settles (0-4,000 faults a step here, as the addresses fall)
    assert faults * 4 < default_faults or default_faults < 2_000, (faults, default_faults)
    assert len(losses) == 10 and losses == default_losses


@glibc_only
def test_a_malloc_the_user_tuned_is_left_as_tuned() -> None:
    applied, _, _ = _child("on", MALLOC_MMAP_MAX_="65536")
    assert applied == "False"
    applied, _, _ = _child("on", GLIBC_TUNABLES="glibc.malloc.mmap_threshold=1048576")
    assert applied == "False"


def test_training_keeps_freed_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The training process applies it as it sets its threads, before any step."""
    import nmt.training.loop as loop
    from nmt.config import TrainConfig
    from nmt.training.distributed import Dist

    calls: list[bool] = []

    def kept() -> bool:
        calls.append(True)
        return True

    monkeypatch.setattr(loop, "keep_freed_memory", kept)
    loop.training_device(TrainConfig(device="cpu", threads=1), Dist(), print)
    assert calls == [True]
