"""A run's record of the data it was trained on (``corpus.json`` in the run directory), and the
check that ``nmt bleu`` scores it on a split of that data and no other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt.errors import DataError, first_line

if TYPE_CHECKING:
    from nmt.data.split import HeldOutSources

RUN_FILE = "corpus.json"
# the sources a run's training split left out (a continued model's parent's valid and test
# sources), as nmt.data.split.HeldOutSources writes them: what its cache's key holds of them
EXCLUDED_FILE = "excluded_sources.txt"


def write_record(run_dir: Path, identity: dict[str, Any]) -> None:
    from nmt.files import atomic_write_text

    atomic_write_text(Path(run_dir) / RUN_FILE, json.dumps(identity, indent=1) + "\n")


def read_record(run_dir: Path) -> dict[str, Any] | None:
    """The identity a run recorded; None for a run made before runs recorded it."""
    from nmt.files import read_json

    path = Path(run_dir) / RUN_FILE
    expected = "the corpus identity an nmt run records"
    record = read_json(path, DataError, expected)
    if record is not None and not (isinstance(record, dict)
                                   and isinstance(record.get("corpus"), dict)):
        raise DataError(f"{path}: expected {expected}")
    return record


def write_excluded(run_dir: Path, excluded: HeldOutSources) -> None:
    from nmt.files import atomic_write_text

    atomic_write_text(Path(run_dir) / EXCLUDED_FILE, excluded.to_text())


def read_excluded(run_dir: Path) -> HeldOutSources | None:
    """The sources a run's training split left out (None: it left none out)."""
    from nmt.data.split import HeldOutSources

    path = Path(run_dir) / EXCLUDED_FILE
    try:
        return HeldOutSources.from_text(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise DataError(f"{path}: unreadable ({first_line(e, 120)}); expected the sources "
                        "the run's training split left out, as nmt train writes them") from None


def _what(identity: dict[str, Any]) -> str:
    return (f"{identity.get('corpus')} ({identity.get('source')}->{identity.get('target')}, "
            f"sha256 {str(identity.get('sha256'))[:12]}...)")


def check_same_data(run_dir: Path, prepared: dict[str, Any], split: str) -> None:
    """A one-line error when ``split`` of the prepared data does not come from the data the run
    in ``run_dir`` was trained on (an old run without a record is not checked)."""
    record = read_record(run_dir)
    if record is None:
        return
    for part in ("corpus", split if split in ("valid", "test") else "corpus"):
        was, now = record.get(part, record["corpus"]), prepared.get(part, prepared["corpus"])
        if any(was.get(k) != now.get(k) for k in ("sha256", "source", "target")):
            raise DataError(f"--split {split}: {run_dir} was trained on {_what(was)}, but the "
                            f"data prepared now is {_what(now)}; score it on the data it was "
                            "trained on (--data-dir), or on files with --src and --ref")
