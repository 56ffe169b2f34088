"""What the process is given: paths with ~ where no shell expanded them, and the CPUs it may
use (its affinity, not the machine's count)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.errors import NmtError
from nmt.files import user_path

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("value", ["~nosuchuser/train", "~nosuchuser", "~no-such-user-42/a/b"])
def test_a_tilde_without_a_home_is_one_line_naming_the_key(value: str) -> None:
    with pytest.raises(NmtError, match=rf"^data\.corpus: {value}: cannot expand ~ \(") as e:
        user_path(value, "data.corpus")
    assert "\n" not in str(e.value)


def test_a_tilde_is_expanded_and_other_paths_are_left_alone(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert user_path("~/x/train", "k") == tmp_path / "x" / "train"
    assert user_path("a/~b", "k") == Path("a/~b") and user_path("", "k") == Path("")


def test_every_corpus_key_and_the_mirror_expand_in_one_place(tiny_data_dir: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             ) -> None:
    from conftest import invoke

    for key in ("data.corpus", "data.valid", "data.test"):
        code, _, err = invoke("data", "prepare", "--set", f"{key}=~nosuchuser/train")
        assert code == 1 and err.startswith(f"error: {key}: ~nosuchuser/train"), err
    monkeypatch.setenv("NMT_DATA_MIRROR", "~nosuchuser/mirror")
    code, _, err = invoke("data", "download", "--data-dir", str(tiny_data_dir / "elsewhere"))
    assert code == 1 and "NMT_DATA_MIRROR: ~nosuchuser/mirror: cannot expand ~" in err, err


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_threads_are_counted_against_the_cpus_the_process_may_use() -> None:
    """Under taskset -c 0 (one usable CPU) train.threads=2 is lowered to 1 with a note, and the
    default keeps torch within that CPU, however many the machine has."""
    code = ("import os, torch; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]});"
            "torch.set_num_threads(4);"
            "from nmt.device import set_threads, usable_cpus;"
            "print(set_threads(2), torch.get_num_threads());"
            "print(set_threads(1), torch.get_num_threads());"
            "torch.set_num_threads(4);"
            "set_threads(0); print(usable_cpus(), torch.get_num_threads())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    lowered, exact, counts = done.stdout.splitlines()
    assert lowered == ("train.threads = 2, but this process may use 1 CPU: training with 1 "
                       "thread 1")
    assert exact == "None 1"
    assert counts == "1 1"
