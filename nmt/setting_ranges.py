"""The values each numeric setting may take: one :class:`Range` per setting (by default ``a
value >= 0``) and, for integers, a largest value (:func:`int_limit`), checked when a config is
read (:mod:`nmt.config`) and by the API and the command line's options alike."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MAX_WEIGHT = 1000.0  # data.sources weights: above this a source would fill the disk, not a mix

# The largest value of each integer setting; the rest go up to INT_MAX. Checked when a config
# is parsed, so a huge number is one line naming the key rather than an overflow in torch,
# numpy or the allocator later (the smallest values: see _check_value and _check_consistency).
INT_MAX = 2**31 - 1
INT_LIMITS: dict[str, int] = {
    "data.split_seed": 2**32 - 1,  # numpy's seeds are 32-bit
    "train.seed": 2**32 - 1,
    "decode.beam": 1000,
    # SentencePiece's trainer spins without end near 2**31; the largest vocabularies in use are
    # a few hundred thousand pieces
    "data.vocab_size": 2**20,
}


@dataclass(frozen=True)
class Range:
    """The values a numeric setting may take: from ``low`` to ``high``, each bound included or
    not; ``said``: the range in words, where the bounds alone do not say it."""

    low: float = 0.0
    high: float = math.inf
    low_included: bool = True
    high_included: bool = True
    said: str = ""

    def admits(self, value: float) -> bool:
        above = value >= self.low if self.low_included else value > self.low
        below = value <= self.high if self.high_included else value < self.high
        return above and below

    def expected(self) -> str:
        """The range as a message says it: ``a value >= 1``, ``0 < value <= 1000``."""
        if self.said:
            return self.said
        low = f"{self.low:g} {'<=' if self.low_included else '<'} value"
        if self.high == math.inf:
            return f"a value {'>=' if self.low_included else '>'} {self.low:g}"
        return f"{low} {'<=' if self.high_included else '<'} {self.high:g}"


BELOW_ONE = Range(0.0, 1.0, high_included=False)  # a share or a rate that 1 would make void
# The range of each numeric setting that is not "a value >= 0" (the default; integers also go
# up to int_limit). Checked when a value is read, so a message states the real range; the
# rules between settings (valid_frac + test_frac, SentencePiece's smallest vocabulary) are
# checked once the config is whole. A [[data.sources]] setting is "data.sources.NAME".
RANGES: dict[str, Range] = {
    "data.sources.weight": Range(0.0, MAX_WEIGHT, low_included=False),
    "data.case_augment": Range(0.0, 1.0),
    "data.span_augment": Range(0.0, 1.0),
    "data.valid_frac": Range(0.0, 0.5, high_included=False),
    "data.test_frac": Range(0.0, 0.5, high_included=False),
    "data.vocab_size": Range(1),
    "data.min_freq": Range(1),  # a word seen once is seen: 0 would mean the same as 1
    "data.character_coverage": Range(0.98, 1.0),  # SentencePiece's own bounds
    "model.d_model": Range(1),
    "model.n_layers": Range(1),
    "model.dropout": BELOW_ONE,
    "train.batch_size": Range(1),
    "train.beta1": BELOW_ONE,
    "train.beta2": BELOW_ONE,
    "train.label_smoothing": BELOW_ONE,
    "train.accum_steps": Range(1),
    "train.pad_to_multiple": Range(0),
    "train.eval_sentences": Range(-1, said="-1 (no BLEU), 0 (all) or a count"),
    "train.ema_decay": Range(0.0, 1.0, high_included=False,
                             said="0 (off) or 0 < value < 1"),
    "train.log_every": Range(1),
    "decode.beam": Range(1),
    "decode.batch_size": Range(1),
    "decode.max_tokens": Range(1),
    "decode.max_len_cap": Range(1),  # 0 would translate every sentence as nothing
}


def range_of(key: str) -> Range:
    """The values the numeric setting ``key`` (``section.name``, or ``data.sources[N].name``)
    may take."""
    return RANGES.get(re.sub(r"\[\d+\]", "", key), Range())


def int_limit(key: str) -> int:
    """The largest value the integer setting ``key`` (``section.name``) may take."""
    return INT_LIMITS.get(key, INT_MAX)
