"""What a value of ``data.corpus`` (``valid``, ``test``, a source's ``corpus``,
``glossary``) names: the built-in corpus, a Tatoeba pair name, a URL, or a path; and those
paths anchored where a run was trained (:func:`anchored`). Kept apart from the corpus forms
(:mod:`nmt.data.corpora`), which import their readers: a command on a run (``nmt translate``)
anchors its config's paths without them."""

from __future__ import annotations

import glob
import re
from dataclasses import replace
from pathlib import Path

from nmt.config import DataConfig

BUILTIN = "fra-eng"  # the built-in corpus (nmt.data.corpora.builtin)
PAIR_NAME = re.compile(r"[a-z]{3}-eng")  # a Tatoeba pair, downloaded (nmt.data.corpora.tatoeba)
URL_SCHEMES = ("http://", "https://")  # a file downloaded (nmt.data.download.fetch_url)


def anchored(data: DataConfig, base: Path) -> DataConfig:
    """``data`` with each relative path it names (``corpus``, ``valid``, ``test``, ``glossary``,
    each source's ``corpus``) made absolute against ``base``, the folder a run was trained in,
    where it names something there: the run is then scored, resumed and used from any folder.
    What is not a path there (the built-in corpus, a Tatoeba pair name, a URL) stays as
    written."""
    sources = tuple(replace(s, corpus=_anchored(s.corpus, base)) for s in data.sources)
    return replace(data, corpus=_anchored(data.corpus, base), valid=_anchored(data.valid, base),
                   test=_anchored(data.test, base), glossary=_anchored(data.glossary, base),
                   sources=sources)


def _anchored(spec: str, base: Path) -> str:
    if not spec or spec == BUILTIN or spec.startswith(URL_SCHEMES) or \
            Path(spec).expanduser().is_absolute():
        return spec
    there = base / Path(spec).expanduser()
    if there.exists():
        return str(there)
    if PAIR_NAME.fullmatch(spec):  # a pair name, downloaded: its form's own rule
        return spec
    # aligned files by prefix (train -> train.en, train.fr.gz)
    if there.parent.is_dir() and any(there.parent.glob(glob.escape(there.name) + ".*")):
        return str(there)
    return spec
