"""A model card people can publish: a grandchild's card names the data and licences of all
three generations and which test set its scores are of; no exported file of any kind holds a
local path; every value of someone else's making is escaped or refused in one line."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("ctranslate2")

from conftest import invoke  # noqa: E402

SECRET = "SECRET-home-dir"
LICENCES = {"parent": "GPL-2.0-or-later", "child": "CC0-1.0 (child data)",
            "grandchild": "MIT <grandchild> data"}


def _config(root: Path, name: str) -> Path:
    """A config of one user source under ``root`` with ``name``'s licence."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    words = ["zebra", "cat", "house", "river", "tree", "sun", "road", "bird"]
    pairs = [(f"The {w} number {i} runs.", f"Le {w} numéro {i} court.")
             for i in range(40) for w in words[:3]]
    (data / f"{name}.en").write_text("".join(s + "\n" for s, _ in pairs))
    (data / f"{name}.fr").write_text("".join(t + "\n" for _, t in pairs))
    path = root / f"{name}.toml"
    path.write_text(f'[[data.sources]]\ncorpus = "{data / name}"\nlicence = '
                    f'"{LICENCES[name]}"\n')
    return path


TINY = ["data.tokenizer=sentencepiece", "data.vocab_size=32", "data.joint_vocab=true",
        "data.langid=false", "data.valid_frac=0.1", "data.test_frac=0.1", "model.d_model=16",
        "model.n_layers=1", "model.d_ff=32", "model.n_heads=2", "train.batch_size=32",
        "train.max_steps=2", "train.eval_every=2", "train.eval_sentences=-1",
        "train.device=cpu", "decode.beam=3"]


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three generations made in a folder of a known name: a parent, its child (from the run
    directory), and a grandchild continued from the child's Argos package."""
    home = tmp_path_factory.mktemp("x") / SECRET
    runs = home / "runs"
    sets = ["--data-dir", str(home / "cache"), *(x for s in TINY for x in ("--set", s))]
    code, _, err = invoke("train", "--config", str(_config(home, "parent")), "--runs-dir",
                          str(runs), "--run-name", "parent", *sets)
    assert code == 0, err
    code, _, err = invoke("bleu", "--run", str(runs / "parent"), "--data-dir",
                          str(home / "cache"))
    assert code == 0, err
    code, _, err = invoke("train", "--from", str(runs / "parent"), "--config",
                          str(_config(home, "child")), "--runs-dir", str(runs),
                          "--run-name", "child", *sets)
    assert code == 0, err
    package = home / "child.argosmodel"
    code, _, err = invoke("export", "--run", str(runs / "child"), "--to", "argos",
                          "--with-checkpoint", "--no-score", "--output", str(package))
    assert code == 0, err
    code, _, err = invoke("train", "--from", str(package), "--config",
                          str(_config(home, "grandchild")), "--runs-dir", str(runs),
                          "--run-name", "grandchild", *sets)
    assert code == 0, err
    return {"home": home, "grandchild": runs / "grandchild", "package": package}


def _files(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (or the file), zip archives (a package, a checkpoint) opened
    too, by name."""
    files = {str(p): p.read_bytes() for p in ([path] if path.is_file() else path.rglob("*"))
             if p.is_file()}
    out = {}
    while files:
        name, data = files.popitem()
        out[name] = data
        if data[:2] == b"PK":
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                files.update({f"{name}!{n}": z.read(n) for n in z.namelist()})
    return out


@pytest.mark.parametrize("target", ["ctranslate2", "argos"])
@pytest.mark.parametrize("with_checkpoint", [False, True])
def test_no_exported_file_holds_a_local_path(family: dict[str, Path], tmp_path: Path,
                                             target: str, with_checkpoint: bool) -> None:
    output = tmp_path / ("out.argosmodel" if target == "argos" else "out")
    code, _, err = invoke("export", "--run", str(family["grandchild"]), "--to", target,
                          "--no-score", "--output", str(output),
                          *(["--with-checkpoint"] if with_checkpoint else []))
    assert code == 0, err
    files = _files(output)
    assert any(n.endswith("README.md") for n in files)
    assert any(n.endswith("best.pt") for n in files) == with_checkpoint
    leaks = [n for n, data in files.items() if SECRET.encode() in data]
    assert not leaks


def test_a_grandchilds_card_names_three_generations(family: dict[str, Path],
                                                   tmp_path: Path) -> None:
    package = tmp_path / "g.argosmodel"
    code, _, err = invoke("export", "--run", str(family["grandchild"]), "--to", "argos",
                          "--no-score", "--output", str(package))
    assert code == 0, err
    with zipfile.ZipFile(package) as z:
        readme = next(z.read(n).decode() for n in z.namelist() if n.endswith("/README.md")
                      and n.count("/") == 1)
        meta = json.loads(next(z.read(n) for n in z.namelist() if n.endswith("metadata.json")))
    card = meta["nmt"]["card"]
    assert [a["run"] for a in card["ancestors"]] == ["child", "parent"]
    assert [s["licence"] for s in card["data"]] == [LICENCES["grandchild"]]
    assert [[s["licence"] for s in a["data"]] for a in card["ancestors"]] == [
        [LICENCES["child"]], [LICENCES["parent"]]]
    assert "Licence: MIT &lt;grandchild&gt; data" in readme  # escaped, not a tag
    assert "Licence: CC0-1.0 (child data)" in readme and "Licence: GPL-2.0-or-later" in readme
    assert "### Parent: run child" in readme and "### Grandparent: run parent" in readme
    # the parent was scored: its scores travel with it, on its own test split
    assert card["ancestors"][1]["scores"]["beam3"]["bleu"] >= 0
    assert "Its scores on the run's own test split" in readme
    assert "### Scores (test set: the run's own test split" in readme
    # the claims are derived: the weights' type, and the run's own search
    assert "LibreTranslate runs them in float32" in readme
    assert "beam search of width 3 by default" in readme


def test_a_packages_run_name_is_checked_as_run_name_is(family: dict[str, Path],
                                                        tmp_path: Path) -> None:
    with zipfile.ZipFile(family["package"]) as z:
        z.extractall(tmp_path / "unpacked")
    meta_path = next((tmp_path / "unpacked").rglob("nmt-export.json"))
    meta = json.loads(meta_path.read_text())
    meta["run"] = "evil`\n\n# Injected heading\n<script>alert(1)</script>"
    meta_path.write_text(json.dumps(meta))
    code, _, err = invoke("train", "--from", str(meta_path.parent.parent), "--runs-dir",
                          str(tmp_path / "runs"), "--run-name", "evil-child", "--data-dir",
                          str(tmp_path / "cache"), *[x for s in TINY for x in ("--set", s)])
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert "nmt-export.json: run: expected a run's name" in err
