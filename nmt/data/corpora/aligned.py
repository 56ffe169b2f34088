"""Aligned plain-text files by prefix (the fairseq / Sockeye / OpenNMT convention):
``data.corpus = "mydata/train"`` with ``source = "fr"``, ``target = "en"`` reads
``mydata/train.fr`` and ``mydata/train.en``, one sentence a line, line ``i`` of one the
translation of line ``i`` of the other. Relative paths resolve against the working directory."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from nmt.data.corpora.base import (
    Context,
    Corpus,
    Identity,
    Lazy,
    combined_sha256,
    opener,
    resolve,
    text_lines,
)
from nmt.data.download import sha256_file
from nmt.errors import DataError
from nmt.files import path_problem


class Aligned:
    name = "aligned"

    def claims(self, spec: str, ctx: Context) -> bool:
        return any(resolve(f"{spec}.{code}", ctx.option).is_file()
                   for code in (ctx.cfg.source, ctx.cfg.target))

    def open(self, spec: str, ctx: Context) -> Corpus:
        paths = [resolve(f"{spec}.{code}", ctx.option) for code in (ctx.cfg.source, ctx.cfg.target)]
        for path, other in ((paths[0], paths[1]), (paths[1], paths[0])):
            problem = path_problem(path)
            if problem:
                there = f"; {other} is there" if other.is_file() else ""
                raise DataError(f"{path}: {problem} ({ctx.option} = {spec!r} reads aligned "
                                f"files {paths[0]} and {paths[1]}{there})")
        opened = [opener(p, str(p)) for p in paths]
        digest = combined_sha256({"source": sha256_file(paths[0]),
                                  "target": sha256_file(paths[1])})

        def read() -> Iterator[tuple[str, str]]:
            src, tgt = (text_lines(o, str(p), ctx.log) for o, p in zip(opened, paths, strict=True))
            for n, (s, t) in enumerate(itertools.zip_longest(src, tgt), 1):
                if s is None or t is None:
                    short, long = (0, 1) if s is None else (1, 0)
                    lines = n + sum(1 for _ in (tgt if s is None else src))
                    raise DataError(f"{paths[short]}: ends at line {n - 1}, but {paths[long]} "
                                    f"has {lines} lines; expected one sentence a line in each, "
                                    "aligned")
                yield s, t

        identity = Identity(self.name, spec, digest, ctx.cfg.source, ctx.cfg.target,
                            files=[str(p) for p in paths])
        return Lazy(identity, read)


FORM = Aligned()
