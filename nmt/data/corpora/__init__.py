"""Corpus forms: each a module with one reader behind one interface (:mod:`.base`), chosen by
the registry :data:`FORMS`, first claim wins.

- :mod:`.builtin`: ``"fra-eng"``, the built-in corpus (pinned digest);
- :mod:`.tatoeba`: a Tatoeba pair name (``"deu-eng"``, downloaded) or its ``.zip`` / ``.txt``;
- :mod:`.aligned`: aligned text files by prefix (``mydata/train`` -> ``train.fr``, ``train.en``);
- :mod:`.tsv`: a tab-separated file with ``data.columns`` naming its languages.

Adding a form is one module with a ``FORM`` (``name``, ``claims(spec, ctx)``, ``open(spec, ctx)``
returning a :class:`Corpus`) and its line below.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nmt.config import DataConfig
from nmt.data.corpora import aligned, builtin, tatoeba, tsv
from nmt.data.corpora.base import Context, Corpus, Form, Identity
from nmt.errors import DataError

FORMS: dict[str, Form] = {
    builtin.FORM.name: builtin.FORM,
    tatoeba.FORM.name: tatoeba.FORM,
    aligned.FORM.name: aligned.FORM,
    tsv.FORM.name: tsv.FORM,
}

__all__ = ["FORMS", "Context", "Corpus", "Data", "Form", "Identity", "open_corpus", "open_data"]


def open_corpus(spec: str, ctx: Context) -> Corpus:
    """The corpus ``spec`` (a value of ``data.corpus``, ``data.valid`` or ``data.test``)."""
    for form in FORMS.values():
        if form.claims(spec, ctx):
            return form.open(spec, ctx)
    cfg = ctx.cfg
    raise DataError(f"{ctx.option} = {spec!r}: not the built-in corpus ({builtin.NAME}), a "
                    f"Tatoeba pair name (deu-eng) or .zip/.txt file, a .tsv file, or aligned "
                    f"files {spec}.{cfg.source} and {spec}.{cfg.target} (none found)")


@dataclass(frozen=True)
class Data:
    """The corpus and the held-out sets a data config declares."""

    corpus: Corpus
    valid: Corpus | None  # None: held out from the corpus
    test: Corpus | None

    def held_out_digests(self) -> dict[str, str]:
        return {name: c.identity.sha256 for name, c in (("valid", self.valid),
                                                         ("test", self.test)) if c is not None}

    def identity(self) -> dict[str, Any]:
        """What a run records as the data it was trained on (``corpus.json``)."""
        out: dict[str, Any] = {"corpus": self.corpus.identity.to_dict()}
        for name, c in (("valid", self.valid), ("test", self.test)):
            if c is not None:
                out[name] = c.identity.to_dict()
        return out


def open_data(cfg: DataConfig, data_dir: Path, *, source: str | None = None,
              log: Any = print) -> Data:
    ctx = Context(cfg, Path(data_dir), source, log)
    held = {name: open_corpus(spec, replace(ctx, option=f"data.{name}")) if spec else None
            for name, spec in (("valid", cfg.valid), ("test", cfg.test))}
    return Data(open_corpus(cfg.corpus, ctx), held["valid"], held["test"])
