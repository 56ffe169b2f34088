"""The export-target seam: a target registered from outside the package (here, the test suite)
is listed by ``nmt export --help``, checked before the weights load, and writes through
``nmt export --to NAME``, without a line of ``nmt`` changed."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import invoke
from test_decode import make_run

from nmt import export as registry

TOY = '''
from pathlib import Path

checked = []


def check(config, quantization, where):
    checked.append(where)
    if quantization is not None:
        from nmt.errors import NmtError

        raise NmtError(f"--quantization {quantization}: the toy target keeps float32")


def export(run, output, quantization, overwrite):
    path = Path(output) if output is not None else Path("exports") / "toy.txt"
    if path.exists() and not overwrite:
        from nmt.errors import NmtError

        raise NmtError(f"{path}: exists")
    path.parent.mkdir(parents=True, exist_ok=True)
    params = sum(p.numel() for p in run.model.parameters())
    path.write_text(f"step {run.step}, {params} parameters, {run.config.model.arch}\\n")
    return path
'''


@pytest.fixture()
def toy_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module ``toy_target`` on the path, registered as ``--to toy`` after :mod:`nmt.cli` is
    imported (the registry is restored afterwards)."""
    import nmt.cli  # noqa: F401  (imported first: the help must read the registry when shown)

    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "toy_target.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path / "modules"))
    monkeypatch.setattr(registry, "TARGETS", dict(registry.TARGETS))
    registry.register_target("toy", "toy_target", "a summary line for the toy target")
    yield "toy_target"
    sys.modules.pop("toy_target", None)


def test_a_registered_target_is_listed_by_the_help(toy_target: str) -> None:
    """``--to``'s help is read when the help is shown (typer builds the command from the
    annotations, postponed in nmt/cli.py, each time the app runs), not when nmt.cli is imported."""
    code, out, _ = invoke("export", "--no-score", "--help")
    assert code == 0
    assert "toy: a summary line for the toy target" in " ".join(
        line.strip(" │") for line in out.splitlines())
    assert "ctranslate2" in out


def test_a_registered_target_exports_a_run(toy_target: str, tmp_path: Path) -> None:
    import importlib

    run = make_run(tmp_path / "run")
    output = tmp_path / "out" / "toy.txt"
    code, out, err = invoke("export", "--no-score",
                            "--to", "toy", "--run", str(run), "--output", str(output))
    assert code == 0, err
    assert out.strip() == str(output)
    assert output.read_text().startswith("step 200, ")
    assert importlib.import_module(toy_target).checked == [f"--run {run}"]

    code, _, err = invoke("export", "--no-score",
                          "--to", "toy", "--run", str(run), "--quantization", "int8",
                          "--output", str(tmp_path / "other.txt"))
    assert code == 1 and "--quantization int8: the toy target keeps float32" in err
    assert not (tmp_path / "other.txt").exists()


def test_an_unknown_target_lists_the_registered_ones(toy_target: str) -> None:
    code, _, err = invoke("export", "--no-score", "--to", "nope")
    assert code == 1 and "--to nope: expected one of ctranslate2, argos, toy" in err
