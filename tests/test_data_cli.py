"""`nmt data download|prepare|stats` through the CLI: output, idempotence, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from nmt.cli import app

runner = CliRunner()
TINY = ["--set", "data.vocab_size=64", "--set", "data.valid_frac=0.1",
        "--set", "data.test_frac=0.1"]


pytestmark = pytest.mark.usefixtures("no_network")


def test_download_then_again(tiny_data_dir: Path, tiny_corpus_zip: Path, tmp_path: Path) -> None:
    data = tmp_path / "fresh"
    first = runner.invoke(app, ["data", "download", "--source", str(tiny_corpus_zip),
                                "--data-dir", str(data)])
    assert first.exit_code == 0, first.output
    assert "verified and extracted" in first.output and (data / "fra-eng" / "fra.txt").is_file()
    again = runner.invoke(app, ["data", "download", "--data-dir", str(data)])
    assert again.exit_code == 0 and "present and verified" in again.output


def test_prepare_and_stats(tiny_data_dir: Path) -> None:
    prep = runner.invoke(app, ["data", "prepare", *TINY])  # data dir from NMT_DATA_DIR
    assert prep.exit_code == 0, prep.output
    for text in ("kept 969 pairs (99.90%)", "dropped 1 duplicate (", "train:", "valid:", "test:",
                 "joint vocabulary 64", "prepared in"):
        assert text in prep.output
    stats = runner.invoke(app, ["data", "stats", *TINY, "--data-dir", str(tiny_data_dir)])
    assert stats.exit_code == 0, stats.output
    assert "loaded cache" in stats.output
    for text in ("pairs", "distinct sources", "references per source", "<unk> rate src",
                 "vocabulary size tgt", "train", "valid", "test"):
        assert text in stats.output


@pytest.mark.parametrize(("args", "expected"), [
    (["data", "download", "--source", "nope.zip", "--data-dir", "{tmp}"],
     "--source=nope.zip: file not found"),
    (["data", "prepare", "--set", "data.tokenizer=bytes"], "data.tokenizer: expected one of"),
    (["data", "prepare", "--set", "data.vocab_size=100000"],
     "data.vocab_size=100000: too large for this training text, expected at most"),
])
def test_errors_are_one_line(tiny_data_dir: Path, tmp_path: Path, args: list[str],
                             expected: str) -> None:
    result = runner.invoke(app, [a.replace("{tmp}", str(tmp_path / "d")) for a in args])
    assert result.exit_code != 0 and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0]
    assert result.output.rstrip().endswith(errors[0])  # the error is the last thing printed


def test_not_a_zip_and_no_network(tmp_path: Path) -> None:
    fake = tmp_path / "fra-eng.zip"
    fake.write_text("not a zip")
    result = runner.invoke(app, ["data", "download", "--source", str(fake),
                                 "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 1 and "not a zip archive" in result.output
    offline = runner.invoke(app, ["data", "download", "--data-dir", str(tmp_path / "d")])
    assert offline.exit_code == 1 and "NMT_DATA_MIRROR" in offline.output
    assert "Traceback" not in offline.output
