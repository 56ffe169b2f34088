"""The data a training reads: the prepared cache (built by rank 0), the batches of each epoch
in an order that depends only on the seed and the epoch (so a resumed run sees the same ones),
and the held-out sets validation scores (:class:`ValidSet`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nmt.config import Config, DataConfig, TrainConfig
from nmt.data.batching import Batch, collate, make_batches
from nmt.data.cache import Split
from nmt.data.prepare import Prepared, prepare
from nmt.data.split import HeldOutSources
from nmt.data.tokenizers import Tokenizer
from nmt.errors import NmtError, first_line
from nmt.training.distributed import Dist, barrier

# the sources a run's training split leaves out, found with the data directory (None: none)
Excluded = Callable[[Path, Callable[[str], None]], HeldOutSources | None]


def prepare_data(cfg: Config, data_dir: Path, dist: Dist, log: Callable[[str], None],
                 tokenizer: Tokenizer | None = None,
                 excluded: Excluded | None = None) -> tuple[Prepared, HeldOutSources | None]:
    """The cached, encoded splits: rank 0 builds the cache, the others load it afterwards.
    ``tokenizer``: encode with it (a continued model's) instead of training one; ``excluded``
    finds the sources the training split leaves out (returned second)."""
    if dist.main:
        held = excluded(data_dir, log) if excluded is not None else None
        prepared = prepare(cfg.data, data_dir, log=log, tokenizer=tokenizer, excluded=held)
    barrier(dist)
    if not dist.main:
        held = excluded(data_dir, quiet) if excluded is not None else None
        prepared = prepare(cfg.data, data_dir, log=quiet, tokenizer=tokenizer, excluded=held)
    if len(prepared.splits["train"]) == 0:
        raise NmtError("data: the training split is empty (check data.max_pairs and the fractions)")
    return prepared, held


def quiet(line: str) -> None:
    """What the other ranks than the first say while they load the data: nothing."""
def epoch_batches(prepared: Prepared, t: TrainConfig, dist: Dist,
                  epoch: int) -> list[np.ndarray]:
    """This rank's batches (arrays of sentence indices) of ``epoch``, in training order. The
    order depends only on the seed and the epoch, so a resumed run sees the same batches."""
    split = prepared.splits["train"]
    return make_batches(split.src_lengths(), split.tgt_lengths(), batch_size=t.batch_size,
                        by=t.batch_by, shuffle=True, seed=t.seed, epoch=epoch,
                        rank=dist.rank, world_size=dist.world_size,
                        pad_to_multiple=t.pad_to_multiple)


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


RUN_SET = "valid"  # the name of the run's own valid split among the sets validation scores


@dataclass(frozen=True)
class ValidSet:
    """A held-out split validation scores: its loss over ``batches`` (all of it), its greedy
    BLEU over the first sources of ``split``. Empty: nothing to score."""

    split: Split | None
    batches: list[Batch]


def valid_set(split: Split | None, cfg: Config) -> ValidSet:
    """``split`` (a prepared ``valid`` split) in batches of ``decode.batch_size`` sentences."""
    if split is None or len(split) == 0:
        return ValidSet(None, [])
    idx = make_batches(split.src_lengths(), split.tgt_lengths(), batch_size=cfg.decode.batch_size,
                       by="sentences", shuffle=False, seed=0, epoch=0)
    return ValidSet(split, [collate(split, i, truncate=cfg.data.truncate) for i in idx])


def valid_sets(cfg: Config, prepared: Prepared, others: dict[str, DataConfig], data_dir: Path,
               dist: Dist, log: Callable[[str], None]) -> dict[str, ValidSet]:
    """The held-out sets validation scores, by name: the run's own valid split
    (:data:`RUN_SET`), and on rank 0 the valid split of each of ``others``' data, encoded with
    the run's tokenizer, where it can be prepared."""
    sets = {RUN_SET: valid_set(prepared.splits.get("valid"), cfg)}
    if dist.main:
        for name, data in others.items():
            other = _other_valid_set(name, data, data_dir, prepared.tokenizer, cfg, log)
            if other is not None:
                sets[name] = other
    return sets


def _other_valid_set(name: str, data: DataConfig, data_dir: Path, tokenizer: Tokenizer,
                    cfg: Config, log: Callable[[str], None]) -> ValidSet | None:
    """The valid split of other data than the run's, encoded with the run's ``tokenizer``, to
    be validated on as ``name``; None, said once, where it cannot be prepared here (data on
    another machine) or holds no valid split."""
    try:
        split = prepare(data, data_dir, log=lambda s: None, tokenizer=tokenizer).splits.get(
            "valid")
    except NmtError as e:
        log(f"note: the data of {name} cannot be prepared here ({first_line(e, 160)}); "
            f"validating without {name}")
        return None
    if split is None or len(split) == 0:
        log(f"note: the data of {name} holds no valid split; validating without {name}")
        return None
    log(f"validating on {name} too ({len(split):,} pairs)")
    return valid_set(split, cfg)
