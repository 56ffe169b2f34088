"""Several processes preparing the same data at once: the one that finishes second finds the
first's cache in place and uses it, instead of failing; a TSV whose lines have another number of
fields than most (a quoted field holding a tab) is said once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import nmt.data.cache as cache
from nmt.config import DataConfig
from nmt.data.prepare import prepare

REPO = Path(__file__).resolve().parents[1]


def corpus(tmp_path: Path, n: int = 300) -> str:
    (tmp_path / "c").mkdir(exist_ok=True)
    (tmp_path / "c" / "t.en").write_text("".join(f"I see {i} dogs.\n" for i in range(n)))
    (tmp_path / "c" / "t.fr").write_text("".join(f"Je vois {i} chiens.\n" for i in range(n)))
    return str(tmp_path / "c" / "t")


def test_a_cache_another_process_put_in_place_first_is_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race, made to happen every time: another process renames its cache into place
    between this one's check and its own rename."""
    cfg = DataConfig(corpus=corpus(tmp_path), vocab_size=40, langid=False)
    first = prepare(cfg, tmp_path / "a", log=lambda m: None)
    real = os.replace
    raced: list[Path] = []

    def other_process_first(src: os.PathLike[str], dst: os.PathLike[str]) -> None:
        if Path(dst).name == first.cache_dir.name and not raced:
            raced.append(Path(dst))
            import shutil

            shutil.copytree(first.cache_dir, dst)  # the winner's, complete
        real(src, dst)

    monkeypatch.setattr(cache.os, "replace", other_process_first)
    second = prepare(cfg, tmp_path / "b", log=lambda m: None)
    assert raced and (second.cache_dir / "meta.json").is_file()
    again = prepare(cfg, tmp_path / "b", log=lambda m: None)
    assert again.splits["train"].src_text == first.splits["train"].src_text
    assert not [p for p in (tmp_path / "b" / "cache").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("round_", range(3))
def test_three_prepares_at_once_all_succeed(tmp_path: Path, round_: int) -> None:
    """Real processes: three `nmt data prepare` on a fresh config at once, three times."""
    spec = corpus(tmp_path, 2000)
    args = [sys.executable, "-m", "nmt", "data", "prepare", "--data-dir", str(tmp_path / "d"),
            "--set", f"data.corpus={spec}", "--set", "data.vocab_size=60",
            "--set", "data.langid=false", "--set", f"data.split_seed={round_ + 1}"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, cwd=tmp_path) for _ in range(3)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in results]
    caches = [p for p in (tmp_path / "d" / "cache").iterdir()]
    assert len(caches) == 1 and (caches[0] / "meta.json").is_file()


def test_a_tsv_with_quoted_fields_is_said_once(tmp_path: Path) -> None:
    rows = [f"Sentence {i}.\tPhrase {i}." for i in range(50)]
    rows[7] = '"Go\tnow."\tVa !'  # a quoted field holding a tab: three fields
    rows[30] = '"Stop\there."\tArrête !'
    (tmp_path / "p.tsv").write_text("\n".join(rows) + "\n")
    cfg = DataConfig(corpus=str(tmp_path / "p.tsv"), columns="en,fr", tokenizer="word",
                     min_freq=1, langid=False, valid_frac=0.0, test_frac=0.0)
    said: list[str] = []
    prepare(cfg, tmp_path / "d", log=said.append)
    warned = [m for m in said if "tab-separated fields" in m]
    assert warned == [f"warning: {tmp_path / 'p.tsv'}: 2 lines of 50 have another number of "
                      "tab-separated fields than the 2 of most (first: line 8): a quoted field "
                      "holding a tab, or a stray tab? Such lines are read by their first "
                      "columns"]
