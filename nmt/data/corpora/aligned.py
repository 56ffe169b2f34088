"""Aligned plain-text files by prefix (the fairseq / Sockeye / OpenNMT convention):
``data.corpus = "mydata/train"`` with ``source = "fr"``, ``target = "en"`` reads
``mydata/train.fr`` and ``mydata/train.en``, one sentence a line, line ``i`` of one the
translation of line ``i`` of the other; either may be compressed (``mydata/train.fr.gz``,
``.bz2``, ``.xz``: :mod:`nmt.data.compressed`). Relative paths resolve against the working
directory."""

from __future__ import annotations

import itertools
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from nmt.data.compressed import compressed_names
from nmt.data.corpora.base import (
    Context,
    Corpus,
    Identity,
    Lazy,
    Opener,
    combined_sha256,
    member_opener,
    opener,
    resolve,
    text_lines,
)
from nmt.data.download import sha256_file
from nmt.errors import DataError, named
from nmt.files import path_problem


def _side(spec: str, code: str, ctx: Context) -> Path:
    """``SPEC.CODE``, or the first of ``SPEC.CODE.gz``, ``.bz2``, ``.xz`` there is."""
    names = [resolve(name, ctx.option) for name in compressed_names(f"{spec}.{code}")]
    return next((path for path in names if path.is_file()), names[0])


class Aligned:
    name = "aligned"

    def claims(self, spec: str, ctx: Context) -> bool:
        return any(_side(spec, code, ctx).is_file() for code in (ctx.cfg.source, ctx.cfg.target))

    def open(self, spec: str, ctx: Context) -> Corpus:
        paths = [_side(spec, code, ctx) for code in (ctx.cfg.source, ctx.cfg.target)]
        for path, other in ((paths[0], paths[1]), (paths[1], paths[0])):
            problem = path_problem(path)
            if problem:
                there = f"; {other} is there" if other.is_file() else ""
                raise DataError(f"{path}: {problem} ({ctx.option} = {spec!r} reads aligned "
                                f"files {paths[0]} and {paths[1]}{there})")
        return aligned_files(self.name, spec, (paths[0], paths[1]), ctx)


def aligned_files(form: str, spec: str, paths: tuple[Path, Path], ctx: Context) -> Corpus:
    """The files ``paths`` (source, target), aligned, as a corpus of the form ``form``: its
    identity holds the digests of both."""
    opened = [opener(p, str(p)) for p in paths]
    digest = combined_sha256({"source": sha256_file(paths[0]), "target": sha256_file(paths[1])})
    identity = Identity(form, spec, digest, ctx.cfg.source, ctx.cfg.target,
                        files=[str(p) for p in paths])
    labels = (str(paths[0]), str(paths[1]))
    return Lazy(identity, lambda: aligned_pairs(opened, labels, ctx.log))


def aligned_members(form: str, spec: str, path: Path,
                    members: tuple[zipfile.ZipInfo, zipfile.ZipInfo], ctx: Context) -> Corpus:
    """The members ``members`` (source, target) of the zip archive ``path``, aligned and read
    in place (:func:`~nmt.data.corpora.base.member_opener`), as a corpus of the form ``form``:
    its identity is the archive's digest."""
    labels = [f"{path}:{named(m.filename)}" for m in members]
    opened = [member_opener(path, m, where) for m, where in zip(members, labels, strict=True)]
    identity = Identity(form, spec, sha256_file(path), ctx.cfg.source, ctx.cfg.target,
                        files=[str(path)])
    return Lazy(identity, lambda: aligned_pairs(opened, labels, ctx.log))


def aligned_pairs(opened: Sequence[Opener], labels: Sequence[str],
                  log: Callable[[str], None]) -> Iterator[tuple[str, str]]:
    """The pairs of two aligned files (source, target), line ``i`` with line ``i``; files of
    different lengths are an error naming both."""
    src, tgt = (text_lines(o, label, log) for o, label in zip(opened, labels, strict=True))
    for n, (s, t) in enumerate(itertools.zip_longest(src, tgt), 1):
        if s is None or t is None:
            short, long = (0, 1) if s is None else (1, 0)
            lines = n + sum(1 for _ in (tgt if s is None else src))
            raise DataError(f"{labels[short]}: ends at line {n - 1}, but {labels[long]} "
                            f"has {lines} lines; expected one sentence a line in each, aligned")
        yield s, t


FORM = Aligned()
