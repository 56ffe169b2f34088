"""CPU benchmarks of nmt, kept beside the package rather than in it (``make bench``).

``python -m bench`` (:mod:`bench.run`) runs every part and writes ``bench/out/``; each part is
also a module of its own: :mod:`bench.training` (against the textbook recipe, and the
full-corpus configs), :mod:`bench.decoding`, :mod:`bench.export` (CTranslate2) and
:mod:`bench.data` (``nmt data prepare``). Paths to the repository's configs resolve against
:data:`ROOT`, so the benchmarks run from any working directory; whatever lives outside the
repository (the recipe script, the corpus zip) comes in as an option.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository: configs/, nmt/, bench/
CONFIGS = ROOT / "configs"
