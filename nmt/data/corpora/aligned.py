"""Aligned plain-text files by prefix (the fairseq / Sockeye / OpenNMT convention):
``data.corpus = "mydata/train"`` with ``source = "fr"``, ``target = "en"`` reads
``mydata/train.fr`` and ``mydata/train.en``, one sentence a line, line ``i`` of one the
translation of line ``i`` of the other. Relative paths resolve against the working directory."""

from __future__ import annotations

from collections.abc import Iterator

from nmt.data.corpora.base import (
    Context,
    Corpus,
    Identity,
    Lazy,
    combined_sha256,
    decode_lines,
    read_bytes,
    resolve,
    sha256,
)
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
        data = [read_bytes(p, str(p)) for p in paths]
        digest = combined_sha256({"source": sha256(data[0]), "target": sha256(data[1])})

        def read() -> Iterator[tuple[str, str]]:
            src, tgt = (decode_lines(d, str(p), ctx.log)
                        for d, p in zip(data, paths, strict=True))
            if len(src) != len(tgt):
                short, long = (0, 1) if len(src) < len(tgt) else (1, 0)
                raise DataError(f"{paths[short]}: ends at line {min(len(src), len(tgt))}, but "
                                f"{paths[long]} has {max(len(src), len(tgt))} lines; expected "
                                "one sentence a line in each, aligned")
            return zip(src, tgt, strict=True)

        identity = Identity(self.name, spec, digest, ctx.cfg.source, ctx.cfg.target,
                            files=[str(p) for p in paths])
        return Lazy(identity, read)


FORM = Aligned()
