"""The model card every export carries: the pair, each source with its licence (or that none
was stated), the model, the training, signed test scores, and never an absolute path."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("ctranslate2")

from test_export import sentencepiece_run  # noqa: E402

from nmt.api import export  # noqa: E402
from nmt.runs.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from nmt.runs.records import checkpoint_hardware, hardware_record  # noqa: E402

SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SentencePiece run trained on a user's source without a licence and a Tatoeba pair,
    scored once by nmt bleu (its files hold absolute paths, as real ones do)."""
    root = tmp_path_factory.mktemp("home")
    run = sentencepiece_run(root / "runs" / "mine")
    user = {"form": "aligned", "corpus": str(root / "data" / "train"), "sha256": "a" * 64,
            "source": "en", "target": "fr", "licence": "",
            "files": [str(root / "data" / "train.en"), str(root / "data" / "train.fr")],
            "name": str(root / "data" / "train"), "weight": 2.0, "read": 120, "kept": 100,
            "filtered": {"digits": 15, "ratio": 5}, "train_pairs": 90,
            "train_pairs_weighted": 180}
    tatoeba = {"form": "tatoeba", "corpus": "fra-eng", "sha256": "b" * 64, "source": "en",
               "target": "fr", "licence": "CC-BY 2.0 (France), tatoeba.org",
               "files": [str(root / "data" / "fra.txt")], "name": "tatoeba", "weight": 1.0}
    (run / "corpus.json").write_text(json.dumps({
        "corpus": {"form": "sources", "corpus": "x + tatoeba", "sha256": "c" * 64,
                   "source": "en", "target": "fr", "licence": "", "files": []},
        "sources": [user, tatoeba]}))
    multi = {"bleu": 12.345, "chrf": 40.5, "bleu_signature": SIGNATURE,
             "chrf_signature": "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0",
             "references": 1}
    (run / "scores.test.json").write_text(json.dumps({
        "run_dir": str(run), "checkpoint": "best.pt", "beam": 1, "sentences": 77,
        "multi": multi, "hypotheses": str(run / "hyp.test.txt")}))
    best = run / "checkpoints" / "best.pt"  # the hardware training records in a checkpoint
    save_checkpoint(best, {**load_checkpoint(best), "hardware": hardware_record(
        "cpu", "Some CPU, 2 threads", 1)})
    return run


def test_both_exports_carry_the_card_without_an_absolute_path(run: Path,
                                                              tmp_path: Path) -> None:
    ct2 = export(run, to="ctranslate2", output=tmp_path / "ct2", score_first=False)
    package = export(run, to="argos", output=tmp_path / "p.argosmodel", score_first=False)
    with zipfile.ZipFile(package) as z:
        readme = next(z.read(n).decode() for n in z.namelist()
                      if n.count("/") == 1 and n.endswith("/README.md"))
        metadata = json.loads(next(z.read(n) for n in z.namelist()
                                   if n.endswith("/metadata.json")))
        texts = {n: z.read(n).decode("utf-8", "replace") for n in z.namelist()
                 if n.endswith((".md", ".json"))}
    texts.update({p.name: p.read_text() for p in ct2.iterdir() if p.suffix in (".md", ".json")})
    home = str(run.parent.parent)
    assert not [n for n, t in texts.items() if home in t]  # no absolute path anywhere
    for text in (readme, (ct2 / "README.md").read_text()):
        assert "- **Pair**: English (en) → French (fr)." in text
        assert "**train** (aligned, SHA-256 aaaaaaaaaaaaaaaa…) weight 2: 120 pairs read, 100 " \
               "kept (removed: digits 15, ratio 5)." in text
        assert "Licence: not stated: state it before sharing this model" in text
        assert "**tatoeba** (tatoeba, SHA-256 bbbbbbbbbbbbbbbb…) weight 1." in text
        assert "Licence: CC-BY 2.0 (France), tatoeba.org" in text
        assert "| nmt | 1 | 12.35 | 40.50 | 77 |" in text
        assert SIGNATURE.replace("|", "\\|") in text  # signed, and the table stays a table
        assert "on cpu (Some CPU, 2 threads)" in text and "run mine, best.pt at step" in text
    card = metadata["nmt"]["card"]
    assert card["scores"]["nmt"]["bleu_signature"] == SIGNATURE
    assert [s["files"] for s in card["data"]] == [["train.en", "train.fr"], ["fra.txt"]]
    assert card["data"][0]["licence"].startswith("not stated")
    assert card["model"]["parameters"] > 0 and card["pair"]["target"] == "fr"
    assert metadata["nmt"]["run"] == "mine"


def test_an_unscored_checkpoint_is_scored_at_export_unless_told_not_to(
        tiny_data_dir: Path, tmp_path: Path) -> None:
    from test_train import tiny_config

    from nmt.training.loop import train

    run = tmp_path / "runs" / "t"
    train(tiny_config("transformer", "train.max_steps=3", "train.eval_sentences=-1"), run,
          data_dir=tiny_data_dir, log=lambda s: None)
    said: list[str] = []
    quiet = export(run, to="ctranslate2", output=tmp_path / "a", score_first=False,
                   log=said.append)
    assert "Not measured" in (quiet / "README.md").read_text() and not said
    # the hardware is data training records in its checkpoints (not a log line to parse)
    best = run / "checkpoints" / "best.pt"
    assert load_checkpoint(best)["hardware"]["device"] == "cpu"
    assert " min on cpu (" in (quiet / "README.md").read_text()
    old = {k: v for k, v in load_checkpoint(best).items() if k != "hardware"}
    assert checkpoint_hardware(old, best) == "not recorded"  # a run made before it did
    assert not list(run.glob("scores.test*.json"))
    scored = export(run, to="ctranslate2", output=tmp_path / "b", data_dir=tiny_data_dir,
                    log=said.append)
    report = json.loads((run / "scores.test.json").read_text())
    readme = (scored / "README.md").read_text()
    assert f"| nmt | 1 | {report['multi']['bleu']:.2f} |" in readme
    assert said[0].startswith(f"scoring {run} on its test split")
    said.clear()  # scored now: the next export reads it
    export(run, to="ctranslate2", output=tmp_path / "c", data_dir=tiny_data_dir,
           log=said.append)
    assert not said


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), True, "31.2", None, 1e308, -1])
def test_a_score_that_is_not_a_bleu_is_refused_naming_its_file(bad: object,
                                                                tmp_path: Path) -> None:
    """What a model card reports as a test score is a finite number from 0 to 100 (NaN,
    infinity, true, text, nothing, 1e308 are not): one line naming the file and the field."""
    from nmt.errors import NmtError
    from nmt.export.model_card import scores

    good = {"bleu": 30.5, "chrf": 50.0, "bleu_signature": SIGNATURE, "chrf_signature": "c"}
    path = tmp_path / "scores.test.b.json"
    path.write_text(json.dumps({"checkpoint": "best.pt", "beam": 1, "sentences": 5,
                                "multi": {**good, "bleu": bad}}))
    with pytest.raises(NmtError) as e:
        scores(tmp_path, "best.pt")
    assert str(e.value).startswith(f"{path}: multi.bleu: expected ") and "\n" not in str(e.value)
    path.write_text(json.dumps({"checkpoint": "best.pt", "beam": 1, "sentences": 5,
                                "multi": good}))
    assert scores(tmp_path, "best.pt")["b"]["bleu"] == 30.5
