"""Tatoeba's format, as ManyThings.org publishes it (https://www.manythings.org/anki/): a zip
``deu-eng.zip`` holding ``deu.txt``, or the text file itself; one pair a line, English, a tab,
the other language, and in newer copies a tab and an attribution.

``data.corpus`` is a pair name (``"deu-eng"``: downloaded into the data directory under the
mirror and offline rules of :mod:`nmt.data.download`, its digest recorded, not pinned), or the
path of such a zip or ``.txt`` file. The other language comes from the file name's 3-letter code
(``deu`` -> ``de``), or from the config when the name is not one.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from nmt.data.compressed import plain_name
from nmt.data.corpora.base import (
    TATOEBA_LICENCE,
    Context,
    Corpus,
    Identity,
    Lazy,
    Opener,
    opener,
    resolve,
    sha256,
    tab_pairs,
)
from nmt.data.corpus_specs import PAIR_NAME
from nmt.data.download import ensure_corpus, sha256_file, tatoeba_archive
from nmt.data.languages import from_tatoeba
from nmt.errors import DataError, named

_CODE = re.compile(r"([a-z]{3})(?:-eng)?")  # deu.txt, deu-eng.zip, deu-eng/deu.txt


def other_language(file_name: str, ctx: Context, where: str) -> str:
    """The non-English language of a Tatoeba file, from its name or else from the config."""
    stem = Path(file_name).name.split(".")[0].lower()
    if _CODE.fullmatch(stem):
        return from_tatoeba(stem[:3], where)
    cfg = ctx.cfg
    if "en" not in (cfg.source, cfg.target):
        raise DataError(f"{where}: a Tatoeba file has English in its first column, but "
                        f"data.source = {cfg.source!r} and data.target = {cfg.target!r}")
    return cfg.target if cfg.source == "en" else cfg.source


def tatoeba_corpus(open_: Opener, where: str, other: str, ctx: Context, *,
                   form: str, spec: str, digest: str, files: list[str]) -> Corpus:
    """The pairs of a Tatoeba text file, which ``open_`` opens when they are read."""
    return Lazy(Identity(form, spec, digest, ctx.cfg.source, ctx.cfg.target, TATOEBA_LICENCE,
                         files), tab_pairs(open_, where, ("en", other), ctx.cfg, ctx.log))


class Tatoeba:
    name = "tatoeba"

    def claims(self, spec: str, ctx: Context) -> bool:
        if spec.lower().endswith(".zip"):
            return True
        if plain_name(spec).lower().endswith(".txt"):
            return not ctx.cfg.columns  # with columns, a .txt is the user's own TSV
        return bool(PAIR_NAME.fullmatch(spec)) and not resolve(spec, ctx.option).exists()

    def open(self, spec: str, ctx: Context) -> Corpus:
        where = f"{ctx.option} = {spec!r}"
        if PAIR_NAME.fullmatch(spec):
            other = from_tatoeba(spec[:3], where)
            path = ensure_corpus(ctx.data_dir, ctx.source, log=ctx.log,
                                 archive=tatoeba_archive(spec))
            return tatoeba_corpus(opener(path, str(path)), str(path), other, ctx, form=self.name,
                                  spec=spec, digest=sha256_file(path),
                                  files=[str(path)])
        path = resolve(spec, ctx.option)
        if not spec.lower().endswith(".zip"):
            open_, label = opener(path, str(path)), str(path)
            return tatoeba_corpus(open_, label, other_language(path.name, ctx, label), ctx,
                                  form=self.name, spec=spec, digest=sha256_file(path),
                                  files=[str(path)])
        opener(path, str(path))  # file not found, a directory
        from nmt.data.download import read_archive

        # the text of a Tatoeba archive (tens of MB at most) is held, as extracting it is checked
        data, _, entry = read_archive(path, str(path))
        label = f"{path}:{named(entry)}"
        other = other_language(entry if _CODE.fullmatch(
            Path(entry).name.split(".")[0]) else path.name, ctx, label)
        return tatoeba_corpus(lambda: io.BytesIO(data), label, other, ctx, form=self.name,
                              spec=spec, digest=sha256(data), files=[str(path)])


FORM = Tatoeba()
