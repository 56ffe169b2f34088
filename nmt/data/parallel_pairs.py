"""A speed trick, fenced here: a large corpus' pairs are judged on every usable CPU.

Normalising, filtering and identifying the language of a pair (``PairRules.verdicts`` in
:mod:`nmt.data.prepare`) is pure Python and depends on that pair alone, so chunks of pairs go to
worker processes and come back in order; what depends on the pairs before (duplicates, counts,
the language tallies) stays in the calling process. The first :data:`SERIAL_PAIRS` pairs are
judged in the calling process, so a small corpus never starts a worker; the workers are spawned
(not forked: the caller may hold torch's threads), and at most :data:`IN_FLIGHT` chunks per
worker are read ahead, so memory stays bounded by the chunks, not the corpus.

The workers leave Ctrl-C to the caller, which shuts the pool down (:mod:`nmt.held_signals`).

Measured in docs/BENCHMARKS.md ("Preparing data"); tests/test_data_filters.py checks that the
pairs, counts and removals are those of the one-process path.
"""

from __future__ import annotations

import collections
import itertools
import multiprocessing
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol, TypeVar

from nmt import held_signals
from nmt.device import usable_cpus
from nmt.errors import DataError

V = TypeVar("V", covariant=True)


class Rules(Protocol[V]):
    """What judges each pair alone (``PairRules``), a chunk of pairs at a time; picklable, as
    workers get a copy."""

    def verdicts(self, pairs: Sequence[tuple[str, str]]) -> Sequence[V]: ...

SERIAL_PAIRS = 20_000  # judged in the calling process before any worker starts
CHUNK = 4096  # pairs per task
IN_FLIGHT = 4  # chunks read ahead per worker
MAX_WORKERS = 8

_rules: Any = None  # a worker's copy of the rules


def _start(rules: Rules[Any]) -> None:
    global _rules
    _rules = rules
    held_signals.ignore_ctrl_c()


def _judge(chunk: list[tuple[str, str]]) -> list[Any]:
    return list(_rules.verdicts(chunk))


def _chunks(pairs: Iterator[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    return iter(lambda: list(itertools.islice(pairs, size)), [])


def judged_pairs(rules: Rules[V], pairs: Iterable[tuple[str, str]],
                 workers: int | None = None) -> Iterator[V]:
    """The verdict of every pair (``rules.verdicts``, :data:`CHUNK` pairs at a time), in
    order: the first :data:`SERIAL_PAIRS` here, the rest in ``workers`` processes (by default
    one per usable CPU, at most :data:`MAX_WORKERS`; 1: all here)."""
    pairs = iter(pairs)
    for chunk in _chunks(itertools.islice(pairs, SERIAL_PAIRS), CHUNK):
        yield from rules.verdicts(chunk)
    if workers is None:
        workers = min(usable_cpus(), MAX_WORKERS)
    first = list(itertools.islice(pairs, CHUNK))
    if workers <= 1 or len(first) < CHUNK:  # one CPU, or the corpus ended: no pool for it
        for chunk in itertools.chain([first], _chunks(pairs, CHUNK)):
            yield from rules.verdicts(chunk)
        return
    chunks = itertools.chain([first], _chunks(pairs, CHUNK))
    context = multiprocessing.get_context("spawn")
    # concurrent.futures, not multiprocessing.Pool: a worker that dies (out of memory, killed)
    # breaks the pool with an error here, where Pool would start another and wait forever
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start,
                               initargs=(rules,))
    pending: collections.deque[Future[list[Any]]] = collections.deque()
    try:
        for chunk in chunks:
            with held_signals.children_ignore_ctrl_c():  # submit starts a worker when none is idle
                pending.append(pool.submit(_judge, chunk))
            if len(pending) >= IN_FLIGHT * workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
    except BrokenProcessPool:
        raise DataError("preparing the data: a worker process judging pairs ended abruptly "
                        "(out of memory, or killed)") from None
    finally:  # also when the caller stops early: what is queued is dropped, not judged
        pool.shutdown(wait=True, cancel_futures=True)
