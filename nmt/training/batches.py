"""The data a training reads: the prepared cache (built by rank 0), the batches of each epoch
in an order that depends only on the seed and the epoch (so a resumed run sees the same ones),
and the validation batches."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from nmt.config import Config, TrainConfig
from nmt.data.batching import Batch, collate, make_batches
from nmt.data.prepare import Prepared, prepare
from nmt.data.tokenizers import Tokenizer
from nmt.errors import NmtError
from nmt.training.distributed import Dist, barrier


def prepare_data(cfg: Config, data_dir: Path, dist: Dist, log: Callable[[str], None],
                 tokenizer: Tokenizer | None = None) -> Prepared:
    """The cached, encoded splits: rank 0 builds the cache, the others load it afterwards.
    ``tokenizer``: encode with it (a continued model's) instead of training one."""
    if dist.main:
        prepared = prepare(cfg.data, data_dir, log=log, tokenizer=tokenizer)
    barrier(dist)
    if not dist.main:
        prepared = prepare(cfg.data, data_dir, log=lambda s: None, tokenizer=tokenizer)
    if len(prepared.splits["train"]) == 0:
        raise NmtError("data: the training split is empty (check data.max_pairs and the fractions)")
    return prepared


def epoch_batches(prepared: Prepared, t: TrainConfig, dist: Dist,
                  epoch: int) -> list[np.ndarray]:
    """This rank's batches (arrays of sentence indices) of ``epoch``, in training order. The
    order depends only on the seed and the epoch, so a resumed run sees the same batches."""
    split = prepared.splits["train"]
    return make_batches(split.src_lengths(), split.tgt_lengths(), batch_size=t.batch_size,
                        by=t.batch_by, shuffle=True, seed=t.seed, epoch=epoch,
                        rank=dist.rank, world_size=dist.world_size)


def batch_groups(prepared: Prepared, t: TrainConfig, dist: Dist, epoch: int,
                 start: int) -> Iterator[tuple[int, int, int, list[np.ndarray]]]:
    """The batches of one optimizer step after another, from batch ``start`` of ``epoch`` on:
    ``(epoch, batches of the epoch done after this step, batches in the epoch, the step's
    batches)``. ``accum_steps`` batches a step; an epoch's last step takes what is left."""
    while True:
        batches = epoch_batches(prepared, t, dist, epoch)
        if not batches:
            raise NmtError(
                f"train.batch_size={t.batch_size}: the training split makes no batch for "
                f"each of {dist.world_size} processes; use fewer processes or smaller batches")
        for i in range(start, len(batches), t.accum_steps):
            group = batches[i: i + t.accum_steps]
            yield epoch, i + len(group), len(batches), group
        epoch, start = epoch + 1, 0


def valid_batches(prepared: Prepared, cfg: Config) -> list[Batch]:
    split = prepared.splits.get("valid")
    if split is None or len(split) == 0:
        return []
    idx = make_batches(split.src_lengths(), split.tgt_lengths(), batch_size=cfg.decode.batch_size,
                       by="sentences", shuffle=False, seed=0, epoch=0)
    return [collate(split, i, truncate=cfg.data.truncate) for i in idx]
