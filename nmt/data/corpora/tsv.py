"""A tab-separated file of the user's own, its columns named by language in the config:
``data.corpus = "pairs.tsv"``, ``data.columns = ["en", "fr"]`` (more columns are allowed, and
ignored unless ``data.source`` or ``data.target`` names them); ``pairs.tsv.gz`` (``.bz2``,
``.xz``) is read as the file it holds."""

from __future__ import annotations

from nmt.data.compressed import plain_name
from nmt.data.corpora.base import (
    Context,
    Corpus,
    Identity,
    Lazy,
    given_columns,
    opener,
    resolve,
    tab_pairs,
)
from nmt.data.download import sha256_file


class Tsv:
    name = "tsv"

    def claims(self, spec: str, ctx: Context) -> bool:
        return bool(ctx.cfg.columns) or plain_name(spec).lower().endswith(".tsv")

    def open(self, spec: str, ctx: Context) -> Corpus:
        path = resolve(spec, ctx.option)
        columns, _ = given_columns(ctx, path)  # a language the file lacks: before reading it
        open_ = opener(path, str(path))
        identity = Identity(self.name, spec, sha256_file(path), ctx.cfg.source,
                            ctx.cfg.target, files=[str(path)])
        return Lazy(identity, tab_pairs(open_, str(path), columns, ctx.cfg, ctx.log))


FORM = Tsv()
