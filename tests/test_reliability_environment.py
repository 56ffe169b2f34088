"""What the process is given: paths with ~ where no shell expanded them, and the CPUs it may
use (its affinity, not the machine's count)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# --- every environment variable nmt reads --------------------------------------------------------


def _readers() -> dict[str, Callable[[], object]]:
    """Each variable of nmt.environment.VARIABLES -> the code of nmt that reads it."""
    from nmt import device
    from nmt.data import download
    from nmt.training import command, distributed

    def bf16() -> object:
        device.cpu_bf16_units.cache_clear()
        return device.cpu_bf16_units()

    launcher = {name: (lambda name=name: distributed.launcher_int(name, 1, 0, 64))
                for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_PORT")}
    return {"NMT_CPU_BF16": bf16, "NMT_NO_PROGRESS": lambda: command.TerminalDisplay(print),
            "NMT_DATA_DIR": download.default_data_dir,
            "NMT_DATA_MIRROR": lambda: download.resolve_source(None),
            "NMT_CORPUS_SHA256": download.expected_digest,
            "MASTER_ADDR": lambda: distributed.launcher_variable("MASTER_ADDR"),
            "TORCHINDUCTOR_CACHE_DIR": device.separate_compiled_kernels, **launcher}


def test_nmt_reads_the_environment_in_one_place() -> None:
    """No module of nmt reads an environment variable but nmt/environment.py, and every
    variable it declares has a reader in the test below: a new variable is covered."""
    from nmt.environment import VARIABLES

    reads = re.compile(r"os\.environ\.get|os\.getenv|os\.environ\[|environ\.get\(")
    found = [f"{p}:{n}" for p in (REPO / "nmt").rglob("*.py") if p.name != "environment.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if reads.search(line)]
    assert found == []
    assert set(_readers()) == set(VARIABLES)


TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=70)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(_readers())),
       value=st.one_of(TEXT, st.sampled_from(["0", "1", " 1", "yes", "true", "2", "-1", "",
                                              "a" * 64, "0" * 64 + " ", "~nosuchuser/x"])))
def test_any_value_of_any_variable_is_accepted_or_one_line_naming_it(name: str,
                                                                      value: str) -> None:
    from nmt.environment import VARIABLES
    from nmt.errors import ConfigError

    with mock.patch.dict(os.environ, {name: value}):
        try:
            _readers()[name]()
        except NmtError as e:
            message = str(e)
            assert "\n" not in message and name in message, message
            if isinstance(e, ConfigError) and message.startswith(f"{name}="):
                assert not VARIABLES[name].accepts(value) or VARIABLES[name].expected \
                    not in message
            return
    assert value == "" or VARIABLES[name].accepts(value)


@pytest.mark.parametrize("value", ["yes", "true", "2", " 1", "1 ", "on"])
def test_a_bf16_switch_that_is_neither_0_nor_1_is_refused(value: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from nmt.device import cpu_bf16_units
    from nmt.errors import ConfigError

    monkeypatch.setenv("NMT_CPU_BF16", value)
    cpu_bf16_units.cache_clear()
    with pytest.raises(ConfigError) as e:
        cpu_bf16_units()
    cpu_bf16_units.cache_clear()
    assert str(e.value) == (f"NMT_CPU_BF16={value!r}: expected 0 (compute in fp32 on this CPU) "
                            "or 1 (compute in bf16: it has bf16 units)")


def test_the_log_says_the_users_variable_decided(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from nmt.device import cpu_bf16_units, precision_said

    monkeypatch.setenv("NMT_CPU_BF16", "0")
    cpu_bf16_units.cache_clear()
    assert precision_said(torch.device("cpu"), "auto") == "precision: fp32 (NMT_CPU_BF16=0)"


def test_a_bad_variable_is_one_line_from_the_command_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "nmt", "translate", "--run", str(tmp_path),
                           "Hello."], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), "NMT_CPU_BF16": "yes"})
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: NMT_CPU_BF16='yes': expected 0"), done.stderr
