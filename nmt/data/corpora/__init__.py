"""Corpus forms: each a module with one reader behind one interface (:mod:`.base`), chosen by
the registry :data:`FORMS`, first claim wins.

- :mod:`.builtin`: ``"fra-eng"``, the built-in corpus (pinned digest);
- :mod:`.opus`: an OPUS corpus in Moses format (``en-fr.txt.zip``);
- :mod:`.argos_data`: an Argos Translate data package (``data-europarl-en_de.argosdata``);
- :mod:`.tatoeba`: a Tatoeba pair name (``"deu-eng"``, downloaded) or its ``.zip`` / ``.txt``;
- :mod:`.aligned`: aligned text files by prefix (``mydata/train`` -> ``train.fr``, ``train.en``);
- :mod:`.tmx`: a translation memory (``memory.tmx``);
- :mod:`.xliff`: a bilingual XLIFF file, 1.2 or 2 (``project.xlf``, ``.sdlxliff``);
- :mod:`.catalogues`: a gettext catalogue (``po/de.po``, ``de.mo``);
- :mod:`.csv_file`: a spreadsheet's CSV with ``data.columns`` naming its languages;
- :mod:`.tsv`: a tab-separated file with ``data.columns`` naming its languages.

The file forms read their files compressed too (``train.en.gz``, ``memory.tmx.gz``:
:mod:`nmt.data.compressed`).

Adding a form is one module with a ``FORM`` (``name``, ``claims(spec, ctx)``, ``open(spec, ctx)``
returning a :class:`Corpus`) and its line below.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nmt.config import DataConfig, SourceConfig
from nmt.data.corpora import (
    aligned,
    argos_data,
    builtin,
    catalogues,
    csv_file,
    opus,
    tatoeba,
    tmx,
    tsv,
    xliff,
)
from nmt.data.corpora.base import Context, Corpus, Form, Identity, Lazy, combined_sha256
from nmt.data.corpus_specs import URL_SCHEMES
from nmt.errors import DataError

FORMS: dict[str, Form] = {
    builtin.FORM.name: builtin.FORM,
    opus.FORM.name: opus.FORM,  # before tatoeba, which takes any other .zip
    argos_data.FORM.name: argos_data.FORM,
    tatoeba.FORM.name: tatoeba.FORM,
    aligned.FORM.name: aligned.FORM,
    tmx.FORM.name: tmx.FORM,
    xliff.FORM.name: xliff.FORM,
    catalogues.FORM.name: catalogues.FORM,
    csv_file.FORM.name: csv_file.FORM,  # before tsv, which takes any file given columns
    tsv.FORM.name: tsv.FORM,
}

__all__ = ["FORMS", "Context", "Corpus", "Data", "Form", "Identity", "Part", "open_corpus",
           "open_data"]


def open_corpus(spec: str, ctx: Context) -> Corpus:
    """The corpus ``spec`` (a value of ``data.corpus``, ``data.valid`` or ``data.test``); an
    http(s) URL is the file it serves, downloaded into the data directory once
    (:func:`nmt.data.download.fetch_url`) and read as any file of its name."""
    if spec.startswith(URL_SCHEMES):
        from nmt.data.download import fetch_url

        local = open_corpus(str(fetch_url(spec, ctx.data_dir, log=ctx.log)), ctx)
        return Lazy(replace(local.identity, corpus=spec), local.pairs)
    for form in FORMS.values():
        if form.claims(spec, ctx):
            return form.open(spec, ctx)
    cfg = ctx.cfg
    raise DataError(f"{ctx.option} = {spec!r}: not the built-in corpus ({builtin.NAME}), a "
                    f"Tatoeba pair name (deu-eng) or .zip/.txt file, an OPUS .txt.zip, an "
                    f".argosdata package, a .tmx, "
                    f".po, .mo, .csv or .tsv file, or aligned files {spec}.{cfg.source} and "
                    f"{spec}.{cfg.target} (none found; .gz, .bz2 and .xz are read too)")


@dataclass(frozen=True)
class Part:
    """One of several sources (``[[data.sources]]``) and its corpus."""

    source: SourceConfig
    corpus: Corpus

    def identity(self) -> dict[str, Any]:
        """Its corpus' identity, with its name, weight, and the licence it states (or its
        form knows)."""
        out = self.corpus.identity.to_dict()
        out.update(name=self.source.label, weight=self.source.weight,
                   licence=self.source.licence or out.get("licence", ""))
        return out


@dataclass
class Mixed:
    """Several sources as one corpus: one identity (its digest is that of every source's, in
    order) and their pairs one source after another."""

    identity: Identity
    parts: tuple[Part, ...]

    def pairs(self) -> Iterator[tuple[str, str]]:
        return itertools.chain.from_iterable(p.corpus.pairs() for p in self.parts)


def mixed(parts: tuple[Part, ...], cfg: DataConfig) -> Mixed:
    ids = [p.identity() for p in parts]
    licences = [i["licence"] for i in ids]
    licence = ("; ".join(f"{i['name']}: {i['licence']}" for i in ids)
               if all(licences) else "")  # one source without a licence: none is stated
    digest = combined_sha256({str(n): i["sha256"] for n, i in enumerate(ids)})  # in order
    identity = Identity("sources", " + ".join(i["name"] for i in ids), digest, cfg.source,
                        cfg.target, licence, [f for i in ids for f in i["files"]])
    return Mixed(identity, parts)


@dataclass(frozen=True)
class Data:
    """The corpus and the held-out sets a data config declares."""

    corpus: Corpus  # data.corpus, or the sources as one (:class:`Mixed`)
    valid: Corpus | None  # None: held out from the corpus
    test: Corpus | None
    parts: tuple[Part, ...] = ()  # data.sources, each opened; () for data.corpus

    def held_out_digests(self) -> dict[str, str]:
        return {name: c.identity.sha256 for name, c in (("valid", self.valid),
                                                         ("test", self.test)) if c is not None}

    def identity(self) -> dict[str, Any]:
        """What a run records as the data it was trained on (``corpus.json``)."""
        out: dict[str, Any] = {"corpus": self.corpus.identity.to_dict()}
        if self.parts:
            out["sources"] = [p.identity() for p in self.parts]
        for name, c in (("valid", self.valid), ("test", self.test)):
            if c is not None:
                out[name] = c.identity.to_dict()
        return out


def open_data(cfg: DataConfig, data_dir: Path, *, source: str | None = None,
              log: Any = print) -> Data:
    ctx = Context(cfg, Path(data_dir), source, log)
    held = {name: open_corpus(spec, replace(ctx, option=f"data.{name}")) if spec else None
            for name, spec in (("valid", cfg.valid), ("test", cfg.test))}
    if not cfg.sources:
        return Data(open_corpus(cfg.corpus, ctx), held["valid"], held["test"])
    parts = tuple(Part(s, open_corpus(s.corpus, replace(ctx, option=f"data.sources[{i}].corpus")))
                  for i, s in enumerate(cfg.sources, 1))
    return Data(mixed(parts, cfg), held["valid"], held["test"], parts)
