"""Augmentation: a share of the training pairs written again, changed.

- Case augmentation: the source in another letter case (``data.case_augment``,
  ``data.case_forms``), so that a model trained on cased text also reads the textbook's
  lower-cased, spaced input (:func:`nmt.data.normalize.textbook_form`) or title case.
- Span augmentation: what both sides share written as a placeholder or a tag on both sides
  (``data.span_augment``; :mod:`nmt.data.span_augment`), so that a model trained on prose learns
  to carry them.

The build writes them after the training split's own pairs (:func:`nmt.data.prepare.augment`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from nmt.config import CASE_FORM_NAMES
from nmt.data.cache import SplitWriter
from nmt.data.normalize import textbook_form, upper
from nmt.data.span_augment import augment_pair
from nmt.data.spans import SpanRules


def title_case(text: str, lang: str | None = None) -> str:
    """Each space-separated word with a capital first letter (``"I'm Home."``; ``str.title``
    would write ``"I'M Home."``), in ``lang``'s capitals (Turkish ``istanbul`` -> ``İstanbul``)."""
    return " ".join(upper(w[:1], lang) + w[1:] for w in text.split(" "))


# The forms case augmentation can write a source in (data.case_forms names them, in turn):
# each takes the sentence and its language
CASE_FORMS: dict[str, Callable[[str, str | None], str]] = dict(
    zip(CASE_FORM_NAMES, (textbook_form, upper, title_case), strict=True))


def case_picks(n: int, share: float, seed: int) -> np.ndarray:
    """Which of ``n`` training pairs case augmentation writes again (ascending): a random
    ``share`` of them, seeded."""
    if share <= 0 or not n:
        return np.zeros(0, np.int64)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=round(share * n), replace=False))


def in_case_form(src: str, k: int, forms: Sequence[str], lang: str | None) -> str | None:
    """The ``k``-th picked source written in the ``k``-th of ``forms`` in turn (names of
    :data:`CASE_FORMS`; ``lang``: the source's language, for its capitals); None where it is
    already in that form (it is not repeated)."""
    noisy = CASE_FORMS[forms[k % len(forms)]](src, lang)
    return None if noisy == src else noisy


def add_case_forms(writer: SplitWriter, picked: Iterable[tuple[str, str, str]],
                   forms: Sequence[str], lang: str) -> int:
    """The ``picked`` training pairs added to ``writer`` again, the source in the case forms
    ``forms`` in turn (:func:`in_case_form`; one already in its form is not); how many."""
    added = 0
    for nth, (s, t, r) in enumerate(picked):
        noisy = in_case_form(s, nth, forms, lang)
        if noisy is not None:
            writer.add(noisy, t, r)
            added += 1
    return added


def add_span_forms(writer: SplitWriter, pairs: Iterable[tuple[str, str, str]], share: float,
                   seed: int, rules: SpanRules) -> int:
    """The training ``pairs`` that span augmentation draws (``share`` of them, each by its
    position and ``seed``: :func:`nmt.data.span_augment.augment_pair`) and can rewrite, added
    to ``writer`` again with their shared words as placeholders or tags; how many."""
    added = 0
    if share <= 0:
        return added
    for index, (s, t, _) in enumerate(pairs):
        rewritten = augment_pair(s, t, index, share, seed, rules=rules)
        if rewritten is not None:
            writer.add(rewritten[0], rewritten[1], rewritten[1])
            added += 1
    return added
