"""The names of everything in a run directory, in one place (no torch, no I/O).

``runs/NAME/`` holds:

- ``config.toml`` (:data:`CONFIG_FILE`): the resolved config;
- ``tokenizer/`` (:data:`TOKENIZER_DIR`) and ``checkpoints/{last,best}.pt``
  (:data:`CHECKPOINTS_DIR`, :data:`CHECKPOINT_NAMES`);
- ``metrics.jsonl`` (:data:`METRICS_FILE`): one JSON object a line (training lines with
  ``train_loss``, validation lines with ``valid_loss``, and a ``hardware`` line at each start
  or resume) and ``train.log`` (:data:`LOG_FILE`), for people;
- ``corpus.json`` (:data:`CORPUS_FILE`): the data it was trained on; ``parent.json``
  (:data:`PARENT_FILE`): the run it continues (``nmt train --from``) and that run's ancestry;
  ``excluded_sources.txt`` (:data:`EXCLUDED_FILE`): a continued run's parent's held-out
  sources, which its training split left out;
- ``hyp.NAME.txt`` and ``scores.NAME.json`` (:func:`hypotheses_file`, :func:`scores_file`):
  what ``nmt bleu`` translated and scored;
- ``curves.png`` and ``attention.png`` (``nmt plot``, ``nmt attention``) and ``ctranslate2/``
  (:data:`EXPORTS_DIR`: its exports made on the fly for ``--engine ctranslate2``);
- ``.previous-run/`` (:data:`PREVIOUS_RUN_DIR`), only while ``nmt train --overwrite`` starts
  over it: the run being replaced, kept until the new one has a checkpoint.

Every other module names these files through this one; ``tests/test_architecture.py`` fails
naming a module outside ``nmt/runs/`` that spells one of them.
"""

from __future__ import annotations

from pathlib import Path

from nmt.arguments import option
from nmt.errors import NmtError

CONFIG_FILE = "config.toml"
TOKENIZER_DIR = "tokenizer"
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_NAMES = ("last", "best")  # checkpoints/last.pt, checkpoints/best.pt
METRICS_FILE = "metrics.jsonl"
LOG_FILE = "train.log"
CORPUS_FILE = "corpus.json"
PARENT_FILE = "parent.json"
# the sources a run's training split left out (a continued model's parent's valid and test
# sources), as nmt.data.split.HeldOutSources writes them: what its cache's key holds of them
EXCLUDED_FILE = "excluded_sources.txt"
CURVES_FILE = "curves.png"
ATTENTION_FILE = "attention.png"
EXPORTS_DIR = "ctranslate2"
PREVIOUS_RUN_DIR = ".previous-run"
HYPOTHESES_FILES = "hyp.*.txt"
SCORES_FILES = "scores.*.json"
TEST_SCORES_FILES = "scores.test*.json"  # the test split's, by every engine and search

# The run's files and folders, as names or glob patterns (what the architecture test greps for)
FILE_NAMES = (CONFIG_FILE, METRICS_FILE, LOG_FILE, CORPUS_FILE, PARENT_FILE, EXCLUDED_FILE,
              CURVES_FILE,
              ATTENTION_FILE, HYPOTHESES_FILES, SCORES_FILES,
              *(f"{name}.pt" for name in CHECKPOINT_NAMES))
FOLDER_NAMES = (TOKENIZER_DIR, CHECKPOINTS_DIR, EXPORTS_DIR, PREVIOUS_RUN_DIR)


def hypotheses_file(run_dir: Path, name: str) -> Path:
    """``run_dir/hyp.NAME.txt``: the translations ``nmt bleu`` scored as ``NAME``."""
    return Path(run_dir) / HYPOTHESES_FILES.replace("*", name)


def scores_file(run_dir: Path, name: str) -> Path:
    """``run_dir/scores.NAME.json``: the scores ``nmt bleu`` recorded as ``NAME``."""
    return Path(run_dir) / SCORES_FILES.replace("*", name)


def split_scores_files(run_dir: Path) -> list[Path]:
    """The run's test-split score files, oldest first (the newest last)."""
    return sorted(Path(run_dir).glob(TEST_SCORES_FILES), key=lambda p: p.stat().st_mtime)


def scores_engine(path: Path) -> str:
    """What made the test scores in ``path``: ``nmt``, or its file's tag (``ct2``,
    ``ct2-int8``, ``beam5``, ...)."""
    return path.name[len("scores.test"):-len(".json")].strip(".") or "nmt"


def check_run_name(name: str) -> str:
    """A run name is one directory name under the runs directory."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or not name.isprintable():
        raise NmtError(f"{option('run_name')} {name!r}: expected a directory name (no '/', not "
                       "'.' or '..'), e.g. demo-2")
    return name
